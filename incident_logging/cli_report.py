"""`incidents report | list | show`: manual entry and browsing of the incident log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from embodied_eval.canonical import file_sha256
from embodied_eval.cli.common import DbOption, JsonOption, console, print_json
from embodied_eval.errors import EvalError
from embodied_eval.records import SEVERITIES, Artifact, utc_now_iso
from embodied_eval.store.core import Store, default_db_path
from incident_logging.cli_support import (
    ProtocolOption,
    RobotIdOption,
    SafetyConfigOption,
    SoftwareVersionOption,
    check_occurred_in_window,
    choice,
    decided_by,
    fmt_num,
    incidents_table,
    load_protocol_option,
    open_log,
    rules_table,
    state_json,
    threshold_table_for,
)
from incident_logging.ids import new_id
from incident_logging.record import IncidentRecord
from incident_logging.taxonomy import EVENT_TYPES, INJURY_LEVELS, ROLES

# --------------------------------------------------------------------------- report


def _check_named_episode(record: IncidentRecord, db: Path | None) -> None:
    """A report naming an episode must name a stored one, on its side, not before it started."""
    from incident_logging.interchange import check_incident_episodes

    path = db if db is not None else default_db_path()
    if not path.exists():
        return  # no episodes stored yet: the incident counts once its episode is imported
    with Store(path, create=False) as store:
        check_incident_episodes(
            [record], store.get_episode, "report", episodes_stored=bool(store.episode_count())
        )


def _prompt_missing(values: dict, interactive: bool) -> None:
    """Ask for what a report still lacks (interactive entry)."""
    if not interactive:
        return
    ask = typer.prompt
    if not values["event_type"]:
        values["event_type"] = ask(f"event type ({', '.join(EVENT_TYPES)})")
    if not values["reporter"]:
        values["reporter"] = ask("reporter (name or pseudonym)")
    values["what_happened"] = values["what_happened"] or ask("what happened", default="")
    values["task_before"] = values["task_before"] or ask("task just before", default="")
    values["harm_cause"] = values["harm_cause"] or ask("what caused harm", default="")
    values["immediate_action"] = values["immediate_action"] or ask(
        "immediate action taken", default=""
    )
    m = values["measurements"]
    kind = values["event_type"]
    if kind == "contact" and "contact_force_n" not in m:
        region = ask("body region (empty: not a person)", default="")
        if region:
            m["body_region"] = region
            m["contact_force_n"] = float(ask("peak force, N"))
            m["contact_type"] = ask("contact type (transient/quasi_static)", default="quasi_static")
            m["permitted"] = typer.confirm("was the contact permitted?", default=False)
        else:
            m["contact_with"] = ask("what was touched")
    if kind == "separation" and "separation_m" not in m:
        m["separation_m"] = float(ask("minimum separation, m"))
        m["protective_separation_m"] = float(ask("protective separation distance S_p, m"))
    if kind == "tcp_speed" and "tcp_speed_mps" not in m:
        m["tcp_speed_mps"] = float(ask("TCP speed, m/s"))
        m["reduced_speed_required"] = typer.confirm("was reduced speed required?", default=True)
    if values["injury_level"] == "none":
        values["injury_level"] = ask(f"injury level ({', '.join(INJURY_LEVELS)})", default="none")


def report(
    event_type: str = typer.Option("", "--event-type", help=f"One of {', '.join(EVENT_TYPES)}."),
    reporter: str = typer.Option("", "--reporter", help="Who reports (name or pseudonym)."),
    window: str | None = typer.Option(None, "--window", help="Window id (default: protocol's)."),
    protocol: Path | None = ProtocolOption,
    occurred: str | None = typer.Option(None, "--occurred", help="When (UTC ISO; default now)."),
    detected: str | None = typer.Option(None, "--detected", help="When detected (UTC ISO)."),
    severity: str | None = typer.Option(None, "--severity", help="Severity you judge (escalates)."),
    reporter_role: str = typer.Option(
        "technician",
        "--reporter-role",
        help="Reporter's role (technician, safety_officer, protocol_owner …).",
    ),
    side: str = typer.Option("real", "--side", help="real or sim."),
    incident_id: str | None = typer.Option(None, "--id", help="Incident id (default: new)."),
    episode_id: str | None = typer.Option(
        None, "--episode-id", help="Episode the incident happened in (links it to the trial)."
    ),
    run_id: str = typer.Option("", "--run-id", help="Run id of the trial run, if any."),
    robot_id: str | None = RobotIdOption,
    software_version: str = SoftwareVersionOption,
    safety_config_hash: str = SafetyConfigOption,
    stop_category: int | None = typer.Option(None, "--stop-category", help="0, 1 or 2."),
    safety_mode: str = typer.Option("", "--safety-mode", help="Raw safety mode of the robot."),
    operating_mode: str = typer.Option(
        "",
        "--operating-mode",
        help="Operating mode (e.g. automatic, collaborative, manual reduced speed).",
    ),
    separation: float | None = typer.Option(None, "--separation", help="Minimum separation, m."),
    protective_separation: float | None = typer.Option(
        None, "--protective-separation", help="Required S_p, m."
    ),
    tcp_speed: float | None = typer.Option(None, "--tcp-speed", help="TCP speed, m/s."),
    speed_limit: float | None = typer.Option(None, "--speed-limit", help="Configured limit, m/s."),
    reduced_speed: bool = typer.Option(False, "--reduced-speed", help="Reduced speed required."),
    force: float | None = typer.Option(None, "--force", help="Peak contact force, N."),
    pressure: float | None = typer.Option(None, "--pressure", help="Peak pressure, N/cm²."),
    force_limit: float | None = typer.Option(
        None,
        "--force-limit",
        help="The robot's configured contact-force limit, N (environment contacts; the "
        "threshold table's applies when it is stricter).",
    ),
    body_region: str | None = typer.Option(None, "--body-region", help="ISO/TS 15066 region."),
    contact_type: str | None = typer.Option(None, "--contact-type", help="transient/quasi_static"),
    contact_with: str | None = typer.Option(
        None,
        "--contact-with",
        help="Who or what was touched: a person by role (technician, operator, visitor, person, "
        "…) or a declared environment partner (environment, table, … and the protocol's "
        "environment_partners). Not given: a person (held to the lowest body-region limit).",
    ),
    permitted: bool = typer.Option(False, "--permitted", help="The contact was permitted."),
    uncontrolled_hazard: bool = typer.Option(
        False,
        "--uncontrolled-hazard",
        help="A hazard was left uncontrolled (escalates the severity).",
    ),
    standards_breach: bool = typer.Option(
        False,
        "--standards-breach",
        help="A safety standard's limit was breached (escalates the severity; a force or "
        "pressure above a body-region limit is one without this flag).",
    ),
    persons: list[str] = typer.Option([], "--person", help="Pseudonymous person id (repeat)."),
    injury_level: str = typer.Option("none", "--injury-level", help=", ".join(INJURY_LEVELS)),
    treatment: str = typer.Option("", "--treatment", help="Medical treatment given, if any."),
    damage_description: str = typer.Option("", "--damage-description", help="What was damaged."),
    damage_cost: float | None = typer.Option(
        None, "--damage-cost", help="Cost of the damage (protocol currency)."
    ),
    task_before: str = typer.Option(
        "", "--task-before", help="Task the robot was doing just before (asked when absent)."
    ),
    what_happened: str = typer.Option(
        "", "--what-happened", help="What happened, in a sentence or two (asked when absent)."
    ),
    harm_cause: str = typer.Option(
        "", "--harm-cause", help="What caused the harm (asked when absent)."
    ),
    immediate_action: str = typer.Option(
        "", "--immediate-action", help="Action taken at once (asked when absent)."
    ),
    evidence: list[Path] = typer.Option([], "--evidence", help="Evidence file (hashed; repeat)."),
    not_counting: str = typer.Option(
        "", "--not-counting", help="Justification for not counting it toward the window."
    ),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Prompt for details."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Report an incident by hand; it is classified at once (provisional severity)."""
    proto = load_protocol_option(protocol)
    m: dict = {}
    for key, value in (
        ("separation_m", separation),
        ("protective_separation_m", protective_separation),
        ("tcp_speed_mps", tcp_speed),
        ("speed_limit_mps", speed_limit),
        ("contact_force_n", force),
        ("contact_pressure_ncm2", pressure),
        ("force_limit_n", force_limit),
        ("body_region", body_region),
        ("contact_type", contact_type),
        ("contact_with", contact_with),
    ):
        if value is not None:
            m[key] = value
    for key, flag in (
        ("reduced_speed_required", reduced_speed),
        ("permitted", permitted),
        ("uncontrolled_hazard", uncontrolled_hazard),
        ("standards_breach", standards_breach),
    ):
        if flag:
            m[key] = True
    values: dict[str, Any] = {
        "event_type": event_type,
        "reporter": reporter,
        "what_happened": what_happened,
        "task_before": task_before,
        "harm_cause": harm_cause,
        "immediate_action": immediate_action,
        "injury_level": injury_level,
        "measurements": m,
    }
    _prompt_missing(values, interactive)
    if not values["event_type"] and severity is not None:
        # A judged severity with no event type to classify: record it as "other".
        values["event_type"] = "other"
    if not values["event_type"]:
        raise EvalError(
            "--event-type is required (or give the --severity you judge, or use --interactive)",
            key="event_type",
        )
    if not values["reporter"]:
        raise EvalError("--reporter is required (or use --interactive)", key="reporter")
    choice("severity", severity, SEVERITIES)
    choice("reporter-role", reporter_role, ROLES)
    win = window or (proto.window_id if proto is not None else None)
    if not win:
        raise EvalError("--window is required (or give --protocol)", key="window")
    now = utc_now_iso()
    if proto is not None and win == proto.window_id:
        check_occurred_in_window(occurred or now, proto)
    artifacts = []
    for path in evidence:
        if not path.is_file():
            raise EvalError(f"--evidence {str(path)!r} does not exist", key="evidence")
        artifacts.append(Artifact(path=str(path), sha256=file_sha256(path), kind="evidence"))
    record = IncidentRecord(
        incident_id=incident_id or new_id("INC"),
        window=win,
        occurred_at=occurred or now,
        detected_at=detected or "",
        event_type=values["event_type"],
        source="manual",
        provisional_severity=severity or "near_miss",
        protocol_hash=proto.protocol_hash if proto is not None else "",
        run_id=run_id,
        episode_id=episode_id,
        robot_id=robot_id or (proto.robot_id if proto is not None else ""),
        software_version=software_version,
        safety_config_hash=safety_config_hash,
        side=side,
        reporter=values["reporter"],
        reporter_role=reporter_role,
        stop_category=stop_category,
        safety_mode=safety_mode,
        operating_mode=operating_mode,
        measurements=values["measurements"],
        persons=tuple(persons),
        injury_level=values["injury_level"],
        treatment=treatment,
        damage_description=damage_description,
        damage_cost=damage_cost,
        task_before=values["task_before"],
        what_happened=values["what_happened"],
        harm_cause=values["harm_cause"],
        immediate_action=values["immediate_action"],
        evidence=tuple(artifacts),
        reported_severity=severity,
        counts_toward_window=side == "real" and not not_counting,
        counts_justification=not_counting
        or ("sim-side incident: never counts toward the safety score" if side == "sim" else ""),
    )
    if record.episode_id is not None:
        _check_named_episode(record, db)
    table = threshold_table_for(proto)
    record.classify(table)  # a value the classifier refuses is refused before the log is opened
    with open_log(db) as log:
        stored = log.report(record, table)
    if as_json:
        print_json(stored.to_dict())
        return
    console.print(
        f"recorded [bold]{stored.incident_id}[/] (seq {stored.sequence}): provisional "
        f"[bold]{stored.provisional_severity}[/]"
        + (" — injury check required" if stored.injury_check_required else "")
    )
    console.print(decided_by(stored), markup=False, highlight=False)
    if stored.rules_fired:
        console.print(rules_table(stored.rules_fired))


# --------------------------------------------------------------------------- list / show


def list_incidents(
    window: str | None = typer.Option(
        None, "--window", help="Only this window (default: every window)."
    ),
    severity: str | None = typer.Option(None, "--severity", help="Only this severity."),
    source: str | None = typer.Option(None, "--source", help="auto or manual."),
    side: str | None = typer.Option(None, "--side", help="real or sim."),
    unreviewed: bool = typer.Option(False, "--unreviewed", help="Only unreviewed incidents."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """List incidents as they stand now (filters combine)."""
    choice("severity", severity, SEVERITIES)
    choice("source", source, ("auto", "manual"))
    choice("side", side, ("real", "sim"))
    with open_log(db, create=False, read_only=True) as log:
        states = [
            s
            for s in log.states(window)
            if (severity is None or s.severity == severity)
            and (source is None or s.current.source == source)
            and (side is None or s.current.side == side)
            and (not unreviewed or not s.reviewed)
        ]
    if as_json:
        print_json([{"incident_id": s.incident_id, **state_json(s)} for s in states])
        return
    console.print(incidents_table(states))


def show(
    incident_id: str = typer.Argument(..., help="Incident id."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Show one incident: facts, rules fired with margins, amendments and reviews."""
    with open_log(db, create=False, read_only=True) as log:
        state = log.state(incident_id)
    if as_json:
        print_json(state_json(state))
        return
    rec = state.current
    console.print(
        f"[bold]{rec.incident_id}[/] seq {state.original.sequence}  window {rec.window}  "
        f"side {rec.side}  {rec.event_type}"
    )
    console.print(
        f"severity [bold]{state.severity}[/] (provisional {rec.provisional_severity}, final "
        f"{state.final_severity or '—'}, {'reviewed' if state.reviewed else 'NOT reviewed'})"
    )
    console.print(decided_by(rec), markup=False, highlight=False)
    console.print(
        f"occurred {rec.occurred_at}  detected {rec.detected_at or '—'}  recorded {rec.recorded_at}"
    )
    who = (
        f"reporter {rec.reporter}"
        if rec.source == "manual"
        else (f"detector {rec.detector_rule_id} ({rec.detector_version})")
    )
    console.print(f"source {rec.source}: {who}; robot {rec.robot_id or '—'}")
    console.print(f"thresholds {rec.threshold_version} ({rec.threshold_hash[:12]}…)")
    console.print(
        f"injury {rec.injury_level}; damage {fmt_num(rec.damage_cost)} "
        f"{rec.damage_description}".rstrip()
    )
    if not rec.counts_toward_window:
        console.print(f"does not count toward the window: {rec.counts_justification}")
    for label, text in (
        ("task before", rec.task_before),
        ("what happened", rec.what_happened),
        ("harm cause", rec.harm_cause),
        ("immediate action", rec.immediate_action),
    ):
        if text:
            console.print(f"{label}: {text}")
    for art in rec.evidence:
        console.print(f"evidence {art.path} sha256 {art.sha256}")
    if rec.rules_fired:
        console.print(rules_table(rec.rules_fired))
    if state.amendments or state.reviews:
        log_table = Table(title="amendments and reviews")
        for col in ("seq", "at", "who", "what"):
            log_table.add_column(col)
        for event in sorted((*state.amendments, *state.reviews), key=lambda e: e["seq"]):
            if event["kind"] == "amendment":
                what = (
                    "; ".join(
                        f"{c['field']}: {c['old']!r} → {c['new']!r}" for c in event["changes"]
                    )
                    + f" ({event['reason']})"
                )
                if event.get("escalation"):
                    esc = event["escalation"]
                    what += f" — escalated {esc['from']} → {esc['to']}"
                who = f"{event['author']} ({event['role']})"
            else:
                what = f"{event['decision']} {event['severity']}" + (
                    f": {event['rationale']}" if event["rationale"] else ""
                )
                who = f"{event['reviewer']} ({event['role']}, signed)"
            log_table.add_row(str(event["seq"]), event["at"], who, what)
        console.print(log_table)
