"""`incidents import | export | ingest`, `incidents exposure ...` and `keys ...`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from embodied_eval.cli.common import DbOption, JsonOption, console, print_json
from embodied_eval.errors import EvalError
from embodied_eval.records import ExposureEntry
from incident_logging.cli_support import (
    KeyOption,
    PassOption,
    ProtocolOption,
    RobotIdOption,
    SafetyConfigOption,
    SoftwareVersionOption,
    check_exposure_dates_known,
    check_exposure_in_window,
    load_key,
    load_protocol_option,
    open_log,
    parse_assignments,
    window_of,
)
from incident_logging.ids import new_id
from incident_logging.record import parse_field_text
from incident_logging.taxonomy import ROLES

# --------------------------------------------------------------------------- import / export / ingest


def import_cmd(
    file: Path = typer.Argument(..., help="A .csv, .parquet or .jsonl incidents file."),
    db: Path | None = DbOption,
) -> None:
    """Import incidents (all rows or none; importing the same file twice adds nothing)."""
    from incident_logging.interchange import import_incidents_file

    count = import_incidents_file(db, file)
    console.print(f"imported {count} new incident(s) from {file}")


def export_cmd(
    out: Path = typer.Option(..., "--out", help="Output .csv, .parquet or .jsonl."),
    window: str | None = typer.Option(
        None, "--window", help="Only this window (default: every window)."
    ),
    db: Path | None = DbOption,
) -> None:
    """Export incidents as they stand now (refused when the log does not verify)."""
    from incident_logging.interchange import export_incidents_file

    count = export_incidents_file(db, out, window)
    console.print(f"exported {count} incident(s) to {out}")


def ingest(
    protocol: Path = typer.Option(..., "--protocol", help="Protocol TOML (thresholds)."),
    robot_id: str | None = RobotIdOption,
    software_version: str = SoftwareVersionOption,
    safety_config_hash: str = SafetyConfigOption,
    db: Path | None = DbOption,
) -> None:
    """Classify the safety events stored with episodes into automatic incidents (idempotent)."""
    from embodied_eval.protocol.reader import load_protocol
    from incident_logging.ingest import ingest_safety_events

    count = ingest_safety_events(
        db,
        load_protocol(protocol),
        robot_id,
        software_version=software_version,
        safety_config_hash=safety_config_hash,
    )
    console.print(f"{count} new automatic incident(s)")


# --------------------------------------------------------------------------- exposure


def exposure_add(
    window: str | None = typer.Option(
        None, "--window", help="Window id the hours count toward (default: the protocol's)."
    ),
    protocol: Path | None = ProtocolOption,
    start: str = typer.Option(..., "--start", help="Period start (UTC ISO)."),
    end: str = typer.Option(..., "--end", help="Period end (UTC ISO)."),
    hours: float = typer.Option(..., "--hours", help="Active robot hours in the period."),
    how_measured: str = typer.Option(
        ..., "--how-measured", help="e.g. robot_clock, episode_durations, operator_log."
    ),
    blind: bool = typer.Option(False, "--blind", help="A safety detector was blind."),
    robot_id: str = typer.Option(
        "", "--robot-id", help="Robot id (default: the protocol's robot)."
    ),
    note: str = typer.Option("", "--note", help="Free-text note."),
    entry_id: str | None = typer.Option(None, "--id", help="Entry id (default: new)."),
    db: Path | None = DbOption,
) -> None:
    """Record a period of real-robot exposure in the ledger. A period outside the window's dates
    is refused: the dates come from --protocol, else from a run manifest of the window escrowed
    in the store; a window with no known dates is refused (give --protocol)."""
    proto = load_protocol_option(protocol)
    win = window_of(window, proto)
    entry = ExposureEntry(
        entry_id=entry_id or new_id("EXP"),
        window=win,
        start=start,
        end=end,
        active_hours=hours,
        how_measured=how_measured,
        blind=blind,
        robot_id=robot_id,
        note=note,
    )
    if proto is not None:
        check_exposure_in_window(entry, proto)
    else:
        check_exposure_dates_known(entry, db)
    with open_log(db) as log:
        added = log.add_exposure(entry)
    state = "recorded" if added else "already recorded"
    console.print(f"{state} {entry.entry_id}: {hours:g} h in {win}" + (" (BLIND)" if blind else ""))


def exposure_list(
    window: str | None = typer.Option(
        None, "--window", help="Only this window (default: every window)."
    ),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """List exposure-ledger entries (amendments applied); blind periods are flagged."""
    with open_log(db, create=False, read_only=True) as log:
        entries = log.exposure(window)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    table = Table(title=f"{len(entries)} exposure entr{'y' if len(entries) == 1 else 'ies'}")
    for col in ("id", "window", "start", "end", "hours", "how measured", "robot", "blind"):
        table.add_column(col)
    for e in entries:
        table.add_row(
            e.entry_id,
            e.window,
            e.start,
            e.end,
            f"{e.active_hours:g}",
            e.how_measured,
            e.robot_id,
            "[bold red]BLIND[/]" if e.blind else "",
        )
    console.print(table)


def exposure_amend(
    entry_id: str = typer.Argument(..., help="Exposure entry id."),
    assignments: list[str] = typer.Option([], "--set", help="FIELD=VALUE (repeat)."),
    reason: str = typer.Option(..., "--reason", help="Why the entry is amended."),
    author: str = typer.Option("", "--author", help="Who amends it."),
    role: str | None = typer.Option(
        None,
        "--role",
        help=f"{', '.join(ROLES)} (default: the --key's registered role, else technician).",
    ),
    key: Path | None = KeyOption,
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
) -> None:
    """Correct an exposure entry by an amendment record."""
    changes: dict = {}
    for name, text in parse_assignments(assignments):
        if name == "active_hours":
            try:
                changes[name] = float(text)
            except ValueError:
                raise EvalError(f"active_hours: expected a number, got {text!r}") from None
        elif name == "blind":
            changes[name] = parse_field_text("counts_toward_window", text)
        else:
            changes[name] = text
    with open_log(db, create=False) as log:
        log.amend_exposure(
            entry_id,
            changes,
            reason=reason,
            author=author,
            role=role,
            key=load_key(key, passphrase_env),
        )
    console.print(f"amended exposure {entry_id}: {', '.join(changes)}")


# --------------------------------------------------------------------------- keys


def keys_create(
    role: str = typer.Option(..., "--role", help=", ".join(ROLES)),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Where to write the private key (PEM, 0600; default: ./HOLDER-ROLE.pem, never "
        "overwritten).",
    ),
    holder: str | None = typer.Option(
        None, "--holder", help="Who holds the key (name or pseudonym; default: login name)."
    ),
    passphrase_env: str | None = PassOption,
    encrypt: bool = typer.Option(
        False, "--encrypt", help="Encrypt the key with a passphrase typed at the prompt."
    ),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Create an Ed25519 key: the private key goes to --out (mode 0600, encrypted with
    --passphrase-env or --encrypt), the public key is registered with holder and role."""
    from embodied_eval.store.signing_keys import generate_key, write_private_key
    from incident_logging.cli_support import passphrase
    from incident_logging.taxonomy import check_role

    check_role(role)
    if holder is None:
        import getpass

        holder = getpass.getuser()
    secret = passphrase(passphrase_env)
    if secret is None and encrypt:
        from embodied_eval.store.signing_keys import prompt_passphrase

        secret = prompt_passphrase("the new key", confirm=True)
    if out is None:
        out = default_key_path(holder, role)
    if out.exists():
        raise EvalError(f"{str(out)!r} already exists; choose a new path", key="out")
    key = generate_key()
    with open_log(db) as log:
        write_private_key(key, out, secret)
        try:
            info = log.register_key(key, holder, role)
        except BaseException:
            out.unlink(missing_ok=True)  # an unregistered key file would only confuse
            raise
    if as_json:
        print_json({**info, "key_file": str(out)})
        return
    console.print(
        f"created {role} key for {info['holder']}: {out} (keep it private); fingerprint "
        f"{info['fingerprint'][:16]}…"
    )


def default_key_path(holder: str, role: str) -> Path:
    """./HOLDER-ROLE.pem in the working directory, or ./HOLDER-ROLE-N.pem when that exists."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in holder.strip()) or "key"
    path = Path(f"{stem}-{role}.pem")
    n = 2
    while path.exists():
        path = Path(f"{stem}-{role}-{n}.pem")
        n += 1
    return path


def keys_list(db: Path | None = DbOption, as_json: bool = JsonOption) -> None:
    """List registered public keys with holder, role and fingerprint."""
    with open_log(db, create=False, read_only=True) as log:
        registered = log.keys()
    if as_json:
        print_json(registered)
        return
    table = Table(title=f"{len(registered)} key(s)")
    for col in ("fingerprint", "holder", "role", "registered", "revoked"):
        table.add_column(col)
    for k in registered:
        table.add_row(
            k["fingerprint"][:16] + "…",
            k["holder"],
            k["role"],
            k["registered_at"],
            k.get("revoked_at") or "",
        )
    console.print(table)


def keys_revoke(
    fingerprint: str = typer.Argument(..., help="Fingerprint (or a unique prefix) to revoke."),
    key: Path = typer.Option(
        ...,
        "--key",
        help="Signing key: the revoked key itself, a protocol_owner's or a safety_officer's.",
    ),
    reason: str = typer.Option(..., "--reason", help="Why (lost, left the team, compromised)."),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
) -> None:
    """Revoke a key: its signatures on records chained after the revocation fail verification."""
    private = load_key(key, passphrase_env)
    assert private is not None
    with open_log(db, create=False) as log:
        payload = log.revoke_key(fingerprint, private, reason=reason)
    console.print(
        f"revoked key {payload['fingerprint'][:16]}… of {payload['holder']} "
        f"(by {payload['revoked_by']}, {payload['role']})"
    )
