"""`incidents amend | review | close-window | verify | rates`: the review workflow and integrity."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from embodied_eval.canonical import file_sha256
from embodied_eval.cli.common import DbOption, JsonOption, console, err_console, print_json
from embodied_eval.errors import EvalError
from embodied_eval.records import SEVERITIES, Artifact
from incident_logging.cli_support import (
    KeyOption,
    PassOption,
    ProtocolOption,
    choice,
    fmt_num,
    load_key,
    load_protocol_option,
    open_log,
    parse_assignments,
)
from incident_logging.reclassification import reclassifications
from incident_logging.record import parse_field_text
from incident_logging.taxonomy import DECISIONS, ROLES

# --------------------------------------------------------------------------- amend / review


def amend(
    incident_id: str = typer.Argument(..., help="Incident id."),
    assignments: list[str] = typer.Option([], "--set", help="FIELD=VALUE (repeat)."),
    add_evidence: list[Path] = typer.Option([], "--add-evidence", help="Evidence file to add."),
    reason: str = typer.Option(..., "--reason", help="Why the record changes."),
    author: str = typer.Option("", "--author", help="Who amends (default: the key's holder)."),
    role: str | None = typer.Option(
        None,
        "--role",
        help=f"{', '.join(ROLES)} (default: the --key's registered role, else technician).",
    ),
    key: Path | None = KeyOption,
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Correct an incident by an amendment record (the original is never changed)."""
    changes = {name: parse_field_text(name, text) for name, text in parse_assignments(assignments)}
    with open_log(db, create=False) as log:
        if add_evidence:
            current = list(log.state(incident_id).current.evidence)
            for path in add_evidence:
                if not path.is_file():
                    raise EvalError(f"--add-evidence {str(path)!r} does not exist", key="evidence")
                current.append(Artifact(path=str(path), sha256=file_sha256(path), kind="evidence"))
            changes["evidence"] = [a.to_dict() for a in current]
        payload = log.amend(
            incident_id,
            changes,
            reason=reason,
            author=author,
            role=role,
            key=load_key(key, passphrase_env),
        )
    if as_json:
        print_json(payload)
        return
    console.print(f"amended {incident_id}: " + ", ".join(c["field"] for c in payload["changes"]))
    if payload.get("escalation"):
        esc = payload["escalation"]
        console.print(f"[bold]escalated automatically {esc['from']} → {esc['to']}[/]")


def review(
    incident_id: str = typer.Argument(..., help="Incident id."),
    severity: str = typer.Option(..., "--severity", help=", ".join(SEVERITIES)),
    decision: str = typer.Option(
        "classify", "--decision", help="classify (propose) or final (safety officer)."
    ),
    rationale: str = typer.Option("", "--rationale", help="Reasoning (required to downgrade)."),
    key: Path = typer.Option(..., "--key", help="Your private key (PEM)."),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Sign a review: propose a severity, or (safety officer) sign the final severity."""
    choice("severity", severity, SEVERITIES)
    choice("decision", decision, DECISIONS)
    private = load_key(key, passphrase_env)
    assert private is not None
    with open_log(db, create=False) as log:
        payload = log.review(
            incident_id, private, decision=decision, severity=severity, rationale=rationale
        )
    if as_json:
        print_json(payload)
        return
    console.print(
        f"{payload['reviewer']} ({payload['role']}) signed {decision} {severity} for "
        f"{incident_id} (was {payload['previous_severity']})"
    )


def close_window(
    window: str = typer.Argument(..., help="Window id."),
    key: Path = typer.Option(..., "--key", help="The protocol owner's private key (PEM)."),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """The protocol owner signs the window summary (chain head, record count, exposure hours)."""
    private = load_key(key, passphrase_env)
    assert private is not None
    with open_log(db, create=False) as log:
        log.require_verified()
        payload = log.close_window(window, private)
    if as_json:
        print_json(payload)
        return
    console.print(
        f"closed {window}: {payload['incidents']} incident(s), {payload['exposure_h']:g} h "
        f"(+{payload['blind_h']:g} h blind), head {payload['head_hash'][:16]}… over "
        f"{payload['record_count']} record(s), signed by {payload['owner']}"
    )


# --------------------------------------------------------------------------- integrity / rates


def verify(
    restore_triggers: bool = typer.Option(
        False, "--restore-triggers", help="Recreate dropped append-only triggers (recorded)."
    ),
    author: str = typer.Option("", "--author", help="Who restores the triggers."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Walk the hash chain and signatures; exit 1 naming the first bad record if it fails.

    When it verifies, also lists the incidents the current classifier rules would classify
    differently (they keep their severity; amend or review them)."""
    with open_log(db, create=False, read_only=not restore_triggers) as log:
        if restore_triggers:
            report0 = log.verify()
            if report0.problem is not None and report0.problem.kind != "triggers":
                raise EvalError(
                    f"not restoring triggers: the chain itself fails — {report0.summary()}",
                    key="integrity",
                )
            if log.restore_triggers(author):
                console.print("append-only triggers restored (recorded in the chain)")
        result = log.verify()
        changed = reclassifications(log) if result.ok else []
    if as_json:
        print_json({**result.to_json(), "reclassification": [c.to_json() for c in changed]})
    elif result.ok:
        console.print(f"[green]OK[/] {result.summary()}")
        if changed:
            console.print(
                f"{len(changed)} incident(s) the current classifier rules would classify "
                "differently (each keeps its severity until amended or reviewed):",
                markup=False,
                highlight=False,
            )
        for change in changed:
            console.print(f"  {change.note()}", markup=False, highlight=False)
    if not result.ok:
        err_console.print(f"FAILED: {result.summary()}", markup=False, highlight=False)
        raise typer.Exit(1)


def rates(
    window: str | None = typer.Option(None, "--window", help="Window id (default: protocol's)."),
    protocol: Path | None = ProtocolOption,
    level: float | None = typer.Option(None, "--level", help="Confidence (default protocol/0.95)."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Counts, rates per 100 h with exact intervals and zero-event bounds, SS, MTBSI, validity."""
    from incident_logging.summary import window_summary

    proto = load_protocol_option(protocol)
    win = window or (proto.window_id if proto is not None else None)
    if not win:
        raise EvalError("--window is required (or give --protocol)", key="window")
    conf = level if level is not None else (proto.confidence if proto is not None else 0.95)
    with open_log(db, create=False, read_only=True) as log:
        summary = window_summary(
            log,
            win,
            weights=dict(proto.severity_weights) if proto is not None else None,
            majors_allowed=proto.majors_allowed if proto is not None else False,
            level=conf,
        )
    if as_json:
        print_json(summary)
        return
    exp = summary["exposure"]
    console.print(
        f"window [bold]{win}[/]: H = {summary['exposure_hours']:g} h ({exp['blind_hours']:g} h blind, "
        f"excluded); {summary['counted']} counted of {summary['incidents']} incident(s)"
    )
    table = Table(title=f"rates per 100 h ({conf * 100:g} % exact)")
    for col in ("severity", "N", "rate", "two-sided", "one-sided upper"):
        table.add_column(col)
    for sev in SEVERITIES:
        r, u = summary["rates_per_100h"][sev], summary["upper_bounds_per_100h"][sev]
        rate = "0 observed" if r["n"] == 0 else fmt_num(r["value"])
        table.add_row(
            sev,
            str(r["n"]),
            rate,
            f"[{fmt_num(r['low'])}, {fmt_num(r['high'])}]",
            f"≤ {fmt_num(u['high'])}",
        )
    console.print(table)
    ss, mt = summary["SS"], summary["MTBSI_h"]
    console.print(
        f"SS = {fmt_num(ss['value'])} [{fmt_num(ss['low'])}, {fmt_num(ss['high'])}] "
        f"({ss['method']})"
    )
    console.print(
        f"MTBSI = {fmt_num(mt['value']) if mt['value'] is not None else '∞ (0 incidents)'} h, "
        f"lower bound {fmt_num(summary['mtbsi_lower_bound_h']['low'])} h"
    )
    val = summary["validity"]
    colour = "green" if summary["valid"] and not val["major_fail"] else "bold red"
    console.print(f"[{colour}]{val['reason']}[/]")
    if summary["unreviewed_serious"]:
        console.print(f"[bold red]NOT REVIEWED: {', '.join(summary['unreviewed_serious'])}[/]")
    integ = summary["integrity"]
    console.print(
        f"integrity: verified {integ['records']} record(s), head {integ['head_hash'][:16]}…"
    )
