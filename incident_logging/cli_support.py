"""Helpers shared by the incident-log commands: opening the log, keys, tables for the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich import box
from rich.table import Table

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol, load_protocol
from embodied_eval.records import ExposureEntry
from embodied_eval.store.core import default_db_path
from embodied_eval.store.signing_keys import load_key_option, passphrase_from_env
from incident_logging.record import IncidentRecord
from incident_logging.rule_base import decisive_rule
from incident_logging.store import IncidentStore
from incident_logging.thresholds import ThresholdTable, threshold_table
from incident_logging.workflow import IncidentState

KeyOption = typer.Option(None, "--key", help="Your private key (PEM) to sign with.")
PassOption = typer.Option(
    None, "--passphrase-env", help="Environment variable holding the key's passphrase."
)
ProtocolOption = typer.Option(
    None, "--protocol", help="Protocol TOML (thresholds, weights, window, majors_allowed)."
)
RobotIdOption = typer.Option(None, "--robot-id", help="Robot id (default: the protocol's robot).")
SoftwareVersionOption = typer.Option(
    "", "--software-version", help="Robot software version at the time."
)
SafetyConfigOption = typer.Option(
    "", "--safety-config-hash", help="Hash of the robot's safety configuration at the time."
)


def load_protocol_option(path: Path | None) -> Protocol | None:
    """The protocol named by --protocol, validated (None when not given)."""
    return None if path is None else load_protocol(path)


def threshold_table_for(proto: Protocol | None) -> ThresholdTable:
    """The protocol's threshold table (defaults without a protocol)."""
    return threshold_table(proto.safety_thresholds if proto is not None else None)


def window_of(window: str | None, proto: Protocol | None) -> str:
    """The window a command acts on: --window, else the protocol's; both must agree."""
    if window is not None and proto is not None and window != proto.window_id:
        raise EvalError(
            f"--window {window!r} is not the protocol's window {proto.window_id!r}", key="window"
        )
    win = window or (proto.window_id if proto is not None else None)
    if not win:
        raise EvalError("--window is required (or give --protocol)", key="window")
    return win


def check_exposure_in_window(entry: ExposureEntry, proto: Protocol) -> None:
    """Refuse an exposure period outside the protocol window's dates (both days included)."""
    from embodied_eval.embodiment.loading import check_exposure_dates

    check_exposure_dates(
        [entry], proto, fix="record only the hours inside the window (split the period)"
    )


def escrowed_window_dates(db: Path | None, window: str) -> tuple[str, str] | None:
    """(first day, last day) of `window` as a run manifest escrowed in the store gives them, or
    None when no manifest of the window is stored (or there is no store yet)."""
    from embodied_eval.store.core import Store

    path = db if db is not None else default_db_path()
    if not path.is_file():
        return None
    with Store(path, create=False) as store:
        for listed in store.manifests():
            if listed["window"] != window:
                continue
            manifest = store.manifest(listed["manifest_hash"]) or {}
            start, end = manifest.get("window_start"), manifest.get("window_end")
            if isinstance(start, str) and isinstance(end, str):
                return start, end
    return None


def check_exposure_dates_known(entry: ExposureEntry, db: Path | None) -> None:
    """Without --protocol: the period must lie within the window's dates as an escrowed run
    manifest gives them; a window whose dates nothing in the store names is refused (its hours
    could not be checked and would count wherever they fall)."""
    import datetime as dt

    from embodied_eval.records import parse_utc

    dates = escrowed_window_dates(db, entry.window)
    if dates is None:
        raise EvalError(
            f"exposure add: the dates of window {entry.window!r} are unknown (no run manifest of "
            "it in the store); give --protocol so the period is checked against the window's "
            "dates",
            key="protocol",
        )
    try:
        first_day, last_day = dt.date.fromisoformat(dates[0]), dt.date.fromisoformat(dates[1])
    except ValueError:
        raise EvalError(
            f"exposure add: the run manifest of window {entry.window!r} names unreadable dates "
            f"{dates[0]!r} to {dates[1]!r}; give --protocol",
            key="protocol",
        ) from None
    first = dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
    after = dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time(), dt.UTC)
    start, end = parse_utc(entry.start, key="start"), parse_utc(entry.end, key="end")
    if start < first or end > after:
        raise EvalError(
            f"exposure {entry.entry_id}: {entry.start} to {entry.end} lies outside window "
            f"{entry.window!r} ({dates[0]} to {dates[1]}, from its run manifest); record only "
            "the hours inside the window (split the period)",
            key="exposure",
        )


def check_occurred_in_window(occurred_at: str, proto: Protocol) -> None:
    """Refuse an incident of the protocol's window that occurred outside its dates (both days
    included)."""
    import datetime as dt

    from embodied_eval.records import parse_utc

    first = dt.datetime.combine(proto.window_start, dt.time(), tzinfo=dt.UTC)
    after = dt.datetime.combine(proto.window_end + dt.timedelta(days=1), dt.time(), dt.UTC)
    if not first <= parse_utc(occurred_at, key="occurred") < after:
        raise EvalError(
            f"--occurred {occurred_at}: outside window {proto.window_id!r} "
            f"({proto.window_start.isoformat()} to {proto.window_end.isoformat()}); give the "
            "time it occurred (--occurred) or the window it belongs to (--window)",
            key="occurred",
        )


def choice(name: str, value: str | None, allowed: tuple[str, ...]) -> None:
    """EvalError naming --name when `value` is not one of `allowed`."""
    if value is not None and value not in allowed:
        raise EvalError(f"--{name}: {value!r} is not one of {', '.join(allowed)}", key=name)


def open_log(db: Path | None, *, create: bool = True, read_only: bool = False) -> IncidentStore:
    """Open the incident log in the store named by --db (or the default path); `read_only` for
    commands that only read (they add no tables to the file)."""
    return IncidentStore(
        db if db is not None else default_db_path(), create=create, read_only=read_only
    )


def passphrase(env_var: str | None) -> bytes | None:
    """The key passphrase from the environment variable named by --passphrase-env."""
    return passphrase_from_env(env_var)


def load_key(path: Path | None, env_var: str | None) -> Ed25519PrivateKey | None:
    """The private key at --key (None when not given; asks for the passphrase of an encrypted
    key when no --passphrase-env names one)."""
    return load_key_option(path, env_var)


def parse_assignments(items: Sequence[str]) -> list[tuple[str, str]]:
    """`--set field=value` items as (field, text) pairs, in order."""
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise EvalError(f"--set {item!r}: expected FIELD=VALUE", key="field")
        out.append((name.strip(), value))
    return out


def fmt_num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def rules_table(rules: Sequence[Mapping[str, Any]]) -> Table:
    """Rules fired with measured value, limit and margin."""
    table = Table(title="rules fired", box=box.SIMPLE_HEAD)
    for col in ("rule", "severity", "measured", "limit", "margin", "basis"):
        table.add_column(col, overflow="fold")
    for r in rules:
        unit = f" {r['unit']}" if r.get("unit") else ""
        margin = r.get("margin")
        table.add_row(
            r["rule"],
            r["severity"],
            fmt_num(r.get("measured")) + (unit if r.get("measured") is not None else ""),
            fmt_num(r.get("limit")) + (unit if r.get("limit") is not None else ""),
            ("—" if margin is None else f"{margin:+.4g}{unit}"),
            r.get("basis", ""),
        )
    return table


def decided_by(rec: IncidentRecord) -> str:
    """One line naming what decided the provisional severity: the rule with its measured value,
    limit and margin, or the reporter's / reviewer's judgement when no rule gives it."""
    rule = decisive_rule(rec.rules_fired, rec.provisional_severity)
    if rule is None:
        return (
            f"{rec.provisional_severity} was judged (reported or reviewed); no classification "
            "rule gives it"
        )
    unit = f" {rule['unit']}" if rule.get("unit") else ""
    numbers = ""
    if rule.get("measured") is not None and rule.get("limit") is not None:
        numbers = (
            f": measured {fmt_num(rule['measured'])}{unit}, limit {fmt_num(rule['limit'])}{unit}, "
            f"margin {rule['margin']:+.4g}{unit}"
        )
    elif rule.get("measured") is not None:
        numbers = f": measured {fmt_num(rule['measured'])}{unit}"
    return f"{rec.provisional_severity} decided by {rule['rule']}{numbers} — {rule['basis']}"


def incidents_table(states: Sequence[IncidentState]) -> Table:
    """One row per incident: id, seq, time, side, type, severity with review status, counts."""
    table = Table(title=f"{len(states)} incident(s)", box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True)
    for col in ("seq", "occurred (UTC)", "side", "type", "severity", "counts"):
        table.add_column(col, overflow="fold")
    for s in states:
        rec = s.current
        if s.reviewed:
            severity = f"{s.severity} (final)"
        elif s.unreviewed_serious:
            severity = f"[bold red]{s.severity} NOT REVIEWED[/]"
        else:
            severity = f"{s.severity} (prov.)"
        table.add_row(
            s.incident_id,
            str(s.original.sequence),
            rec.occurred_at.replace("T", " ").rstrip("Z"),
            rec.side,
            rec.event_type,
            severity,
            "yes" if rec.counts_toward_window else "no",
        )
    return table


def state_json(state: IncidentState) -> dict[str, Any]:
    """An incident with its history, as JSON."""
    return {
        "incident": state.current.to_dict(),
        "original": state.original.to_dict(),
        "record_hash": state.record_hash,
        "severity": state.severity,
        "provisional_severity": state.provisional_severity,
        "final_severity": state.final_severity,
        "reviewed": state.reviewed,
        "decided_by": decisive_rule(state.current.rules_fired, state.provisional_severity),
        "amendments": [dict(a) for a in state.amendments],
        "reviews": [dict(r) for r in state.reviews],
    }
