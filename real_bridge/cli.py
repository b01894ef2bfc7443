"""CLI groups of the real side: `embodied-eval twin ...` and `embodied-eval trial ...`.

Registered through `embodied_eval.plugins.CLI_GROUPS`. This module must stay importable without
ROS: rclpy is imported only inside the commands that talk ROS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from embodied_eval.cli.audit_cmd import trial_window_audit
from embodied_eval.errors import EvalError

twin_app = typer.Typer(
    help="The twin robot: a ROS 2 process with its own physics and a reality gap, standing in "
    "for the physical robot.",
    no_args_is_help=True,
)
trial_app = typer.Typer(
    help="Real-robot trials entered by a technician.",
    no_args_is_help=True,
)
robot_app = typer.Typer(
    help="Robot-side helpers to run next to a real robot's ros2_control driver.",
    no_args_is_help=True,
)


@robot_app.command("deadman")
def robot_deadman(
    config: Path = typer.Option(..., "--config", help="The robot profile TOML."),
    domain_id: int = typer.Option(None, "--domain-id", help="ROS_DOMAIN_ID (default: profile)."),
) -> None:
    """Hold the robot (a trajectory its joint_trajectory_controller accepts) when the harness's
    heartbeat stops; runs until Ctrl-C."""
    import time

    from real_bridge.bridge_config import load_bridge_config
    from real_bridge.discovery import configure_process

    bridge = load_bridge_config(config)
    if domain_id is not None:
        bridge = bridge.replace(domain_id=domain_id)
    configure_process(bridge.domain_id, bridge.discovery)
    from real_bridge.deadman_relay import DeadmanRelay

    relay = DeadmanRelay(bridge)
    typer.echo(
        f"deadman: holding {', '.join(bridge.robot.arm_joints)} on {bridge.topics.command} when "
        f"no heartbeat on {bridge.topics.heartbeat} for {bridge.deadlines.deadman_s:g} s"
    )
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        relay.close()


def _twin_settings(**opts: Any) -> Any:
    from real_bridge.bridge_config import load_bridge_config, profile_path
    from real_bridge.twin.settings import Monitors, TwinGap, TwinSettings

    bridge = load_bridge_config(opts["config"] or profile_path("twin"))
    changes: dict[str, Any] = {"discovery": opts["discovery"]}
    if opts["domain_id"] is not None:
        changes["domain_id"] = opts["domain_id"]
    if opts["robot_id"]:
        changes["robot_id"] = opts["robot_id"]
    bridge = bridge.replace(**changes)
    if opts["no_gap"]:
        gap = TwinGap.none()
    else:
        gap = TwinGap(
            friction_scale=opts["friction_scale"],
            link_mass_scale=opts["link_mass_scale"],
            object_mass_scale=opts["object_mass_scale"],
            payload_kg=opts["payload_kg"],
            actuator_delay_s=opts["actuator_delay_s"],
            actuator_bandwidth_hz=opts["actuator_bandwidth_hz"],
            sensor_noise_std=opts["sensor_noise_std"],
            contact_timeconst_s=opts["contact_timeconst_s"],
            actuator_gain_scale=opts["actuator_gain_scale"],
            tracker_latency_s=opts["tracker_latency_s"],
            tracker_occlusion_radius_m=opts["tracker_occlusion_radius_m"],
        )
    monitors = Monitors(
        force_limit_n=opts["force_limit_n"],
        speed_limit_mps=opts["speed_limit_mps"],
        stop_at_s=opts["stop_at_s"],
    )
    return TwinSettings(
        bridge=bridge,
        gap=gap,
        monitors=monitors,
        state_rate_hz=opts["rate_hz"],
        time_scale=opts["time_scale"],
        seed=opts["seed"],
        engine=opts["engine"],
        camera_hz=opts["camera_hz"],
        sim_time=bool(opts["sim_time"]) or bridge.loop.use_sim_time,
        faults=tuple(f.strip() for f in (opts["faults"] or "").split(",") if f.strip()),
    )


def twin_run(
    domain_id: int = typer.Option(
        None, "--domain-id", help="ROS_DOMAIN_ID 0–101 (default: config)."
    ),
    discovery: str = typer.Option(
        "loopback", "--discovery", help="'loopback', 'system' or a Fast DDS XML profile path."
    ),
    config: Path = typer.Option(
        None, "--config", help="Robot profile TOML (names, QoS); default: the twin profile."
    ),
    robot_id: str = typer.Option("", "--robot-id", help="Robot id in diagnostics."),
    rate_hz: float = typer.Option(500.0, "--rate-hz", help="Joint-state publishing rate, Hz."),
    time_scale: float = typer.Option(1.0, "--time-scale", help="Sim seconds per wall second."),
    sim_time: bool = typer.Option(
        False,
        "--sim-time",
        help="Publish /clock and advance in lockstep with the harness (machine load cannot "
        "change outcomes); also on when the profile says loop.use_sim_time.",
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the twin's own noise."),
    engine: str = typer.Option("mujoco", "--engine", help="mujoco or pybullet."),
    friction_scale: float = typer.Option(0.85, "--friction-scale", help="Friction × this."),
    link_mass_scale: float = typer.Option(1.05, "--link-mass-scale", help="Link masses × this."),
    object_mass_scale: float = typer.Option(
        1.10, "--object-mass-scale", help="Object masses × this."
    ),
    payload_kg: float = typer.Option(0.05, "--payload-kg", help="Unmodelled payload, kg."),
    actuator_delay_s: float = typer.Option(0.02, "--actuator-delay-s", help="Actuator delay, s."),
    actuator_gain_scale: float = typer.Option(
        0.9, "--actuator-gain-scale", help="Servo stiffness × this."
    ),
    contact_timeconst_s: float = typer.Option(
        0.04,
        "--contact-timeconst-s",
        help="Object contact softness as a solref time constant, s (larger: softer; 0: the "
        "engine's own).",
    ),
    sensor_noise_std: float = typer.Option(
        0.0005, "--sensor-noise-std", help="Joint-position noise, rad."
    ),
    no_gap: bool = typer.Option(False, "--no-gap", help="No reality gap at all."),
    force_limit_n: float = typer.Option(
        150.0, "--force-limit-n", help="Protective stop above this contact force, N."
    ),
    speed_limit_mps: float = typer.Option(
        0.0, "--speed-limit-mps", help="Protective stop above this TCP speed, m/s (0: off)."
    ),
    stop_at_s: float = typer.Option(
        0.0, "--stop-at-s", help="Protective-stop drill this long into each episode, s (0: off)."
    ),
    actuator_bandwidth_hz: float = typer.Option(
        8.0, "--actuator-bandwidth-hz", help="Actuator bandwidth (first-order), Hz (0: none)."
    ),
    camera_hz: float = typer.Option(30.0, "--camera-hz", help="Camera frame rate, Hz (0: off)."),
    tracker_latency_s: float = typer.Option(
        0.05, "--tracker-latency-s", help="The tracker reports the pose of this long ago, s."
    ),
    tracker_occlusion_radius_m: float = typer.Option(
        0.04,
        "--tracker-occlusion-radius-m",
        help="The tracker loses the object while the hand is this close above it, m (0: never).",
    ),
    faults: str = typer.Option(
        "", "--faults", help="Faults to inject, comma-separated (e.g. grasp_slip,actuator_stall)."
    ),
) -> None:
    """Run the twin robot in the foreground until Ctrl-C / SIGTERM."""
    settings = _twin_settings(**locals())
    from real_bridge.twin.main import run_twin

    raise typer.Exit(run_twin(settings))


twin_app.command("run")(twin_run)


@twin_app.command("profile")
def twin_profile() -> None:
    """Print the path of the loopback-only Fast DDS profile (for FASTDDS_DEFAULT_PROFILES_FILE)."""
    from real_bridge.discovery import LOOPBACK_PROFILE

    typer.echo(str(LOOPBACK_PROFILE))


def twin_main(argv: list[str]) -> int:
    """Entry of `python -m real_bridge.twin`: the `twin run` command on its own (errors in one
    line, exit 2, as in `embodied-eval`)."""
    from embodied_eval.cli.main import run_app

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(twin_run)
    return run_app(app, argv, prog_name="python -m real_bridge.twin")


# --------------------------------------------------------------------------- trial record

trial_app.command("audit")(trial_window_audit)


#: Answers that have no default: without a terminal they must come from flags.
REQUIRED_ANSWERS = ("technician", "quality", "duration_s", "faults", "incidents")


def _quiet(line: str) -> None:
    """Drop a line (the episode description, with --json and nothing to ask)."""


def _flag(parse: Any, value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return parse(value)
    except EvalError as exc:
        raise EvalError(f"{name}: {exc}", key=name) from None


@trial_app.command("record")
def trial_record(
    db: Path = typer.Option(
        None, "--db", help="SQLite store (default: $EMBODIED_EVAL_DB or ./embodied-eval.db)."
    ),
    manifest: Path = typer.Option(None, "--manifest", help="Manifest file (default: escrowed)."),
    manifest_hash: str = typer.Option(None, "--manifest-hash", help="Escrowed manifest hash."),
    episode_id: str = typer.Option(
        None, "--episode-id", help="Real episode to enter (default: the next one not recorded)."
    ),
    protocol_path: Path = typer.Option(
        None, "--protocol", help="Protocol TOML (lets the incident log classify incidents now)."
    ),
    technician: str = typer.Option(None, "--technician", help="Who enters the episode."),
    status: str = typer.Option(None, "--status", help="ok, safety_stop, out_of_bounds or aborted."),
    quality: str = typer.Option(None, "--quality", help="Task quality q in [0, 1] (or 0–100%)."),
    audited: str = typer.Option(
        None, "--succeeded", help="Did the task succeed in the technician's judgment (yes/no)."
    ),
    duration: str = typer.Option(None, "--duration", help="Duration: 95s, 1.5min, 2m30s."),
    started_at: str = typer.Option(
        None,
        "--started-at",
        help="When the episode started: ISO 8601 with a timezone, e.g. 2026-11-03T09:00:00Z or "
        "2026-11-03T10:00:00+01:00 (default: now). Not in the future, not before 2000.",
    ),
    interventions: str = typer.Option(None, "--interventions", help="Human interventions."),
    actions: str = typer.Option(None, "--actions", help="Uninterrupted actions, if counted."),
    fault: list[str] = typer.Option(
        None, "--fault", help="KIND:RECOVERED[:REPAIR_MIN][:DETAIL]; repeat for several."
    ),
    no_faults: bool = typer.Option(False, "--no-faults", help="There were no faults."),
    incident: list[str] = typer.Option(
        None, "--incident", help="KIND[,field=value...] as a SafetyEvent; repeat for several."
    ),
    no_incidents: bool = typer.Option(False, "--no-incidents", help="There were no incidents."),
    notes: str = typer.Option(None, "--notes", help="Free-text notes."),
    record_dir: Path = typer.Option(
        None, "--record-dir", help="Folder for the entry's JSON artifact (default: none)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the stored episode as JSON."),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Store without showing the summary and asking to confirm."
    ),
    no_input: bool = typer.Option(
        False,
        "--no-input",
        help="Never read input: every required answer must come from flags (a missing one is an "
        "error); the others take their defaults. Implied when stdin is not a terminal and the "
        "required flags are all given.",
    ),
) -> None:
    """Enter a real episode of the manifest by hand.

    Asks for whatever the flags do not give (the start time defaults to now), shows a summary of
    everything entered and asks to confirm before storing. Required answers: --technician,
    --quality, --duration, --fault/--no-faults and --incident/--no-incidents; with all of them
    given and stdin not a terminal (or with --no-input) nothing is asked and the other answers
    take their defaults (outcome ok, succeeded = q ≥ q*, started now, 0 interventions, no
    notes). A success below q* (or a failure at or above q* with outcome ok) is refused.
    """
    import json
    import sys

    from embodied_eval.protocol.reader import load_protocol
    from embodied_eval.records import utc_now_iso
    from embodied_eval.store.core import Store, default_db_path
    from real_bridge import entry
    from real_bridge.manual import (
        check_in_window,
        choose_spec,
        describe_spec,
        episode_from_answers,
        load_manifest_specs,
        record_window,
        store_entry,
        summary_lines,
        write_entry_artifact,
    )

    if fault and no_faults:
        raise EvalError("--fault and --no-faults contradict each other", key="fault")
    if incident and no_incidents:
        raise EvalError("--incident and --no-incidents contradict each other", key="incident")
    given: dict[str, Any] = {
        "technician": technician.strip() if technician and technician.strip() else None,
        "status": _flag(entry.parse_status, status, "--status"),
        "quality": _flag(entry.parse_quality, quality, "--quality"),
        "audited_success": _flag(entry.parse_yes_no, audited, "--succeeded"),
        "duration_s": _flag(entry.parse_duration, duration, "--duration"),
        "started_at": _flag(entry.parse_start_time, started_at, "--started-at"),
        "interventions": _flag(entry.parse_count, interventions, "--interventions"),
        "actions": _flag(entry.parse_count, actions, "--actions"),
        "notes": notes,
        "faults": (
            tuple(_flag(entry.parse_fault, f, "--fault") for f in fault)
            if fault
            else (() if no_faults else None)
        ),
        "incidents": (
            tuple(_flag(entry.parse_incident, i, "--incident") for i in incident)
            if incident
            else (() if no_incidents else None)
        ),
    }
    missing = [entry.ANSWER_FLAGS[name] for name in REQUIRED_ANSWERS if given[name] is None]
    if no_input and missing:
        raise EvalError(
            f"missing {', '.join(missing)} (with --no-input every required answer comes from "
            "flags; nothing was stored)",
            key=missing[0].split()[0].lstrip("-"),
        )
    protocol = load_protocol(protocol_path) if protocol_path is not None else None
    db_path = db if db is not None else default_db_path()
    with Store(db_path) as store:
        header, specs = load_manifest_specs(store, manifest, manifest_hash)
        spec = choose_spec(store, header, specs, episode_id)
    interactive = not no_input and (bool(missing) or sys.stdin.isatty())
    say = typer.echo if interactive or not as_json else _quiet
    prompter = entry.Prompter(read=input, write=say) if interactive else entry.NoQuestions(say)
    for line in describe_spec(spec):
        prompter.say(line)
    try:
        answers = entry.collect_answers(prompter, given, target_quality=spec.target_quality)
    except entry.AnswersEnded as exc:
        if not missing:
            raise
        raise EvalError(
            f"input ended before every question was answered; nothing was stored (give "
            f"{', '.join(missing)} as flags, or answer at a terminal)",
            key=missing[0].split()[0].lstrip("-"),
        ) from exc
    window = record_window(header, protocol)
    check_in_window(answers.started_at or utc_now_iso(), window)
    if interactive and not yes:
        for line in summary_lines(spec, answers):
            prompter.say(line)
        if not prompter.ask("Store this episode? (y/n)", entry.parse_yes_no, "y"):
            typer.echo("not stored: nothing was written (run the command again to re-enter)")
            raise typer.Exit(1)
    artifacts = () if record_dir is None else (write_entry_artifact(record_dir, spec, answers),)
    outcome = episode_from_answers(
        spec,
        answers,
        protocol=protocol,
        artifacts=artifacts,
        window=window,
    )
    result = store_entry(db_path, outcome, protocol)
    ep = result.outcome.episode
    if as_json:
        typer.echo(json.dumps({"stored": result.stored, "episode": ep.to_dict()}, sort_keys=True))
    else:
        state = "stored" if result.stored else "already stored (identical), nothing changed"
        typer.echo(
            f"{ep.episode_id}: {ep.status}, q = {ep.quality:g}, success z = {int(ep.success)}, "
            f"{len(ep.faults)} fault(s), {len(outcome.safety_events)} incident(s) — {state}"
        )
    if result.incident_note:
        typer.echo(result.incident_note)


@trial_app.command("patch")
def trial_patch(
    kind: str = typer.Option(
        ..., "--kind", help="reteach, recalibration, parameter_change or other."
    ),
    technician: str = typer.Option(..., "--technician", help="Who patched the robot."),
    text: str = typer.Option(..., "--text", help="What was done and why."),
    episode_id: str = typer.Option(
        None, "--episode-id", help="The real episode the patch was made before or during."
    ),
    drift: str = typer.Option(
        None, "--drift", help="The drift-calendar setting (day) it was made on, without an episode."
    ),
    protocol_path: Path = typer.Option(
        None, "--protocol", help="Protocol TOML (its window; default: the episode's window)."
    ),
    db: Path = typer.Option(
        None, "--db", help="SQLite store (default: $EMBODIED_EVAL_DB or ./embodied-eval.db)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the recorded patch as JSON."),
) -> None:
    """Record a human patch (re-teaching, recalibration, parameter change): any one during a
    maintenance audit fails the maintenance closure."""
    import json

    from embodied_eval.protocol.reader import load_protocol
    from embodied_eval.store.core import Store, default_db_path
    from embodied_eval.store.patches import record_patch

    db_path = db if db is not None else default_db_path()
    window = load_protocol(protocol_path).window_id if protocol_path is not None else None
    if window is None:
        if not episode_id:
            raise EvalError(
                "--protocol: needed to know the window without --episode-id", key="protocol"
            )
        with Store(db_path, create=False) as store:
            ep = store.get_episode(episode_id)
        if ep is None:
            raise EvalError(f"--episode-id: {episode_id!r} is not in the store", key="episode_id")
        window = ep.window
    patch = record_patch(
        db_path,
        window=window,
        kind=kind,
        technician=technician,
        text=text,
        episode_id=episode_id,
        drift=drift,
    )
    if as_json:
        typer.echo(json.dumps(patch.to_dict(), sort_keys=True))
    else:
        where = patch.episode_id or f"drift {patch.drift}"
        typer.echo(f"{patch.patch_id}: {patch.kind} by {patch.technician} ({where}) recorded")


@trial_app.command("rejudge")
def trial_rejudge(
    episode_id: str = typer.Argument(..., help="The real episode to judge again."),
    db: Path = typer.Option(
        None, "--db", help="SQLite store (default: $EMBODIED_EVAL_DB or ./embodied-eval.db)."
    ),
    recording: Path = typer.Option(
        None, "--recording", help="The MCAP to judge (default: the episode's own recording)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the verdicts as JSON."),
) -> None:
    """Replay the harness's success detector on an episode's recording and compare its verdict
    with the stored one.

    Exit codes: 0 the stored verdict is reproduced exactly (or none is stored to compare with);
    1 the replayed verdict differs from the stored one; 3 cannot judge (the recording lacks the
    camera and tracker streams or the judge context: the verdict is null, with the reason);
    2 a usage error (unknown episode, missing recording).
    """
    import json

    from embodied_eval.store.core import default_db_path
    from real_bridge.rejudge import rejudge_episode

    result = rejudge_episode(db if db is not None else default_db_path(), episode_id, recording)
    v = result.verdict
    if as_json:
        typer.echo(json.dumps(result.to_json(), sort_keys=True))
    else:
        said = (
            "cannot judge"
            if v.success is None
            else f"{'success' if v.success else 'failure'}, q = {v.quality:.4f}"
        )
        typer.echo(f"{episode_id}: {v.name} {v.version}: {said} — {v.detail}")
        if result.reproduced is None:
            typer.echo("stored: no detector verdict to compare with")
        else:
            stored = result.stored
            typer.echo(
                f"stored: success {stored['success']}, q = {stored['quality']} — "
                + ("reproduced" if result.reproduced else "DIFFERS")
            )
    raise typer.Exit(result.exit_code)
