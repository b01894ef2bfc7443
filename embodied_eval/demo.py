"""`make demo`: the main job end to end on the embedded defaults.

1. writes a small demo protocol from the example protocol (all its families, MuJoCo and PyBullet
   on the sim side, one real pair in five by default),
2. runs the sim side of the paired trials: both engines in a local worker pool,
3. starts the twin robot (a separate ROS 2 process playing a ros2_control robot, with its own
   physics, a physical reality gap and a tracker that behaves like a sensor) on its simulated
   clock (`--sim-time`, the `twin_sim` profile: it publishes /clock and advances in lockstep with
   the harness, so machine load cannot change an outcome) and runs the real side: the policy in this process's control loop commands the twin over its
   joint_trajectory_controller topic and the harness's success detector judges each episode from
   the recorded camera and tracker streams (never the twin's oracle, which is only recorded
   beside it), so the sim-to-real agreement comes out of the data; safety events are ingested
   into the incident log as they are stored,
4. audits the judge on the window's own episodes: draws the audit sample (seeded, stratified by
   family × verdict, every cannot-judge one) and, with no technician at hand, labels each drawn
   episode with the twin's oracle recorded beside it — under a name that says so — then measures
   Se and Sp from those labels (`trial audit`); certifies the window (embodiment metrics,
   robotics weights and gates, level, the audit sample named) with a demo key it creates, and
   signs the bundle,
5. verifies the bundle (signature, file hashes, and every number recomputed from the store),
6. prints where the report is.

Everything goes under `--out` (default `demo-output/`), which the demo marks as its own and
replaces on the next run; it refuses to touch a non-empty folder it did not create.

The example protocol declares a 14-day drift calendar (days 0, 7, 14) with a maintenance audit,
and an expansion audit (live object tracking for pushing): step 3 also runs the expansion's pre
and ablated conditions on the sim side, and the certificate shows both closures computed from
the store.

Scaling down (tests, slow machines): `--families N` keeps the first N families of the battery
(dropping the expansion audit when its families are not all kept),
`--real-fraction F` runs real episodes on that fraction of each family's pairs; the environment
variables EMBODIED_EVAL_DEMO_FAMILIES and EMBODIED_EVAL_DEMO_REAL_FRACTION set the defaults.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol, example_protocol_path, load_protocol

MARKER = ".embodied-eval-demo"
FAMILIES_ENV = "EMBODIED_EVAL_DEMO_FAMILIES"
REAL_FRACTION_ENV = "EMBODIED_EVAL_DEMO_REAL_FRACTION"
#: Bootstrap resamples in the demo protocol (the example's 2000 would only cost time here).
DEMO_RESAMPLES = 500


def demo_protocol_text(families: int | None, real_fraction: float) -> str:
    """The example protocol with a real fraction, fewer resamples and optionally fewer families.

    Args:
        families: keep the first N `[battery.<family>]` tables (None: all).
        real_fraction: `[sampling] real_fraction`.

    Returns:
        TOML text; `load_protocol` validates it when the demo writes it.
    """
    text = example_protocol_path().read_text(encoding="utf-8")
    sections: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line.startswith("["):
            sections.append([])
        sections[-1].append(line)
    battery = [s for s in sections if s and s[0].startswith("[battery.")]
    keep = battery if families is None else battery[:families]
    if not keep:
        raise EvalError("--families: keep at least one family", key="families")
    out = []
    for section in sections:
        if section and section[0].startswith("[battery.") and section not in keep:
            continue
        if section and section[0].strip() == "[sampling]":
            section = [*section[:1], f"real_fraction = {real_fraction!r}\n", *section[1:]]
        out.append("".join(section))
    kept = {s[0].strip()[len("[battery.") : -1] for s in keep}
    out = [section for section in out if not _expansion_without(section, kept)]
    joined = "".join(out)
    return joined.replace("bootstrap_resamples = 2000", f"bootstrap_resamples = {DEMO_RESAMPLES}")


def _expansion_without(section: str, families: set[str]) -> bool:
    """True for an `[expansion]` table naming a family the scaled-down battery dropped."""
    if not section.startswith("[expansion]"):
        return False
    table = tomllib.loads(section).get("expansion", {})
    named = set(table.get("families", [])) | set(table.get("control_families", []))
    return not named <= families


def run_conditions(
    protocol: Protocol, db: Path, out: Path, workers: int, console: Console
) -> list[str]:
    """Run the expansion audit's conditions whose policy is not the protocol's own (that one is
    the main run) on the audit's side, sim only here; returns the conditions run."""
    from embodied_eval.runner.trials import RunOptions, run_trials

    plan = protocol.expansion
    if plan is None or plan.side != "sim":
        return []
    ran = []
    for condition in ("pre", "post", "ablated"):
        policy = plan.policy(condition)
        if policy == protocol.sim_policy:
            continue
        summary = run_trials(
            protocol,
            RunOptions(
                sides=("sim",),
                engines=(plan.engine,),
                policy=policy,
                executor="local",
                workers=workers,
            ),
            db_path=db,
            out_dir=out / f"run-{condition}",
            console=console,
            show_progress=False,
        )
        if not summary.complete:
            raise EvalError(f"the expansion condition {condition!r} did not finish")
        ran.append(condition)
    return ran


def prepare_out(out: Path) -> None:
    """Make `out` an empty demo folder (replacing a previous demo's; refusing anything else)."""
    if out.exists():
        if not out.is_dir():
            raise EvalError(f"--out {str(out)!r} exists and is not a folder", key="out")
        if any(out.iterdir()) and not (out / MARKER).is_file():
            raise EvalError(
                f"--out {str(out)!r} is not empty and was not made by the demo; choose another "
                "folder",
                key="out",
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by `python -m embodied_eval.demo`; replaced on each run\n")


def _step(console: Console, number: int, text: str, started: float) -> None:
    console.print(f"[bold][{number}/6][/bold] {text}  [dim]({time.monotonic() - started:.0f} s)[/]")


def run_demo(
    out: Path,
    *,
    families: int | None = None,
    real_fraction: float = 0.2,
    workers: int = 2,
    console: Console | None = None,
) -> Path:
    """Run the demo (see the module docstring); returns the certificate bundle's folder."""
    from embodied_eval.certificate import issue_certificate, recompute_check, verify_bundle
    from embodied_eval.cli.summaries import (
        print_level_explanation,
        print_next_steps,
        print_verdict,
    )
    from embodied_eval.plugins import resolve
    from embodied_eval.runner.progress import summary_table
    from embodied_eval.runner.trials import RunOptions, run_trials
    from embodied_eval.scoring.verdict import window_verdict
    from embodied_eval.store.signing_keys import create_private_key

    # The twin lives in real_bridge (the ROS extra); resolving it here turns a missing extra
    # into a one-line error instead of a traceback.
    domain_id_for_test = resolve("real_bridge.discovery:domain_id_for_test")
    twin_process = resolve("real_bridge.twin.process:TwinProcess")

    if console is None:  # tables at full width when piped, like the CLI's
        from embodied_eval.cli.common import make_console

        console = make_console()
        console.soft_wrap = True
    started = time.monotonic()
    prepare_out(out)
    protocol_path = out / "protocol.toml"
    protocol_path.write_text(demo_protocol_text(families, real_fraction), encoding="utf-8")
    protocol: Protocol = load_protocol(protocol_path)
    db = out / "store.db"
    n_pairs = len(protocol.instances) * len(protocol.drifts) * protocol.seeds_per_instance
    _step(
        console,
        1,
        f"protocol {protocol.name} v{protocol.version}: {len(protocol.families)} families, "
        f"{n_pairs} pairs on {' and '.join(protocol.engines)}, real fraction {real_fraction:g}; "
        f"protocol hash {protocol.protocol_hash[:12]}…",
        started,
    )

    domain = domain_id_for_test(0)
    _step(console, 2, "running the sim side (both engines, local worker pool)", started)
    run_trials(
        protocol,
        RunOptions(executor="local", workers=workers, sides=("sim",)),
        db_path=db,
        out_dir=out / "run",
        console=console,
    )
    # The real side runs on its own afterwards: the robot's control loop and deadman must not
    # compete with a pool of simulators for the CPU.
    _step(console, 3, f"starting the twin robot (ROS 2 domain {domain}, loopback)", started)
    with twin_process(domain, sim_time=True) as twin:
        console.print(
            f"      twin ready (pid {twin.pid}); the real side: the policy in this process "
            "commands the twin over its joint_trajectory_controller topic; the harness's "
            "detector judges from the recorded camera and tracker"
        )
        summary = run_trials(
            protocol,
            RunOptions(
                sides=("real",),
                robot_options={
                    "domain_id": domain,
                    "discovery": "loopback",
                    "profile": "twin_sim",
                    "judge": "detector",
                },
            ),
            db_path=db,
            out_dir=out / "run",
            console=console,
        )
    console.print(summary_table(summary.rows))
    if summary.real_error:
        raise EvalError(f"the real side could not run: {summary.real_error}")
    if not summary.complete:
        raise EvalError("the trials did not finish; re-run `make demo`")
    console.print(f"      safety events: {summary.incident_log or 'none'}")
    conditions = run_conditions(protocol, db, out, workers, console)
    if conditions:
        console.print(f"      expansion audit: ran condition(s) {', '.join(conditions)} (sim)")

    _step(console, 4, "auditing the judge, computing metrics, certifying with a new demo key", started)
    audit_judge_with_oracle(db, protocol, console)
    key = out / "keys" / "demo-signer.pem"
    create_private_key(key)
    issued = issue_certificate(
        protocol_path=protocol_path, db=db, key_path=key, out=out / "certificate"
    )
    cert = issued.certificate
    emb = cert["embodiment"]
    for name in ("AR", "AR_sim", "S2R", "SS", "E"):
        est = emb[name]
        value = "—" if est["value"] is None else f"{est['value']:.3f}"
        low = "—" if est["low"] is None else f"{est['low']:.3f}"
        high = "—" if est["high"] is None else f"{est['high']:.3f}"
        console.print(f"      {name:<7} {value} [{low}, {high}] ({est['method']}, n={est['n']})")
    window = cert["window"]
    for kind, closure in cert["closures"].items():
        if closure.get("source") == "computed":
            console.print(f"      {kind} closure (computed from the store): {closure['verdict']}")
    validity = "valid" if window["valid"] else f"INVALID: {window['invalid_reason']}"
    console.print(
        f"      exposure {window['exposure_hours']:.4f} h ({window['exposure_source']}); window "
        f"{validity}; level {cert['level']['assigned']} ({cert['level']['reason']})",
        markup=False,
    )
    verdict = window_verdict(
        emb["gates"], valid=window["valid"], invalid_reason=window["invalid_reason"]
    )
    print_verdict(verdict, out=console)
    print_level_explanation(cert, out=console)
    print_next_steps(verdict, has_evidence=False, out=console)

    _step(console, 5, "verifying the signed bundle and recomputing it from the store", started)
    verified = verify_bundle(issued.path, expected_fingerprint=issued.key_fingerprint)
    recompute_check(verified, db)
    console.print(
        f"      verified: {len(verified.files)} file hashes, signature by key "
        f"{verified.key_fingerprint[:16]}…, numbers recompute",
        markup=False,
    )
    report = (issued.path / "report.html").resolve()
    _step(console, 6, "done", started)
    console.print(f"report: {report}", markup=False, soft_wrap=True)
    console.print(
        "      (its first screen: the verdict, the level and why not higher, the headline "
        "numbers, what remains and what to do next; open it in any browser)",
        markup=False,
    )
    command, reach = cli_command()
    console.print(
        f"check it again with: {command} verify {issued.path} --db {db}",
        markup=False,
        soft_wrap=True,
    )
    if reach:
        console.print(reach, markup=False, soft_wrap=True)
    return issued.path


#: Who labels the demo's audit sample: a lab's technician watches each recording; the demo has none,
#: so the twin's own ground truth (recorded beside the episode, never used to judge it) does, and
#: every label says so.
DEMO_AUDITOR = "twin oracle (the demo's stand-in for a technician watching the recording)"
#: Judged episodes drawn per family × verdict in the demo's audit.
DEMO_AUDIT_PER_STRATUM = 3


def audit_judge_with_oracle(db: Path, protocol: Protocol, console: Console) -> dict[str, object]:
    """Draw the window's judge audit and label the sample with the twin's oracle (module
    docstring, step 4); returns the chained `judge_accuracy` payload."""
    from embodied_eval.embodiment.audit_sample import (
        draw_window_audit,
        label_episode,
        measure_window_audit,
    )
    from embodied_eval.embodiment.window_audit import verdict_of
    from embodied_eval.store.core import Store

    window = protocol.window_id
    with Store(db, create=False) as store:
        real = store.scored_episodes(window=window, side="real").episodes
    if not any(verdict_of(e) is not None for e in real):
        console.print("      judge audit: no judged real episode to audit", markup=False)
        return {}
    _, record, sampled = draw_window_audit(
        db, window, seed=protocol.base_seed, per_stratum=DEMO_AUDIT_PER_STRATUM
    )
    for episode in sampled:
        truth = episode.control.get("oracle")
        label = "cannot_tell"
        if isinstance(truth, dict) and isinstance(truth.get("success"), bool):
            label = "success" if truth["success"] else "failure"
        label_episode(db, window, episode.episode_id, label, by=DEMO_AUDITOR)
    measured = measure_window_audit(db, window)
    whole = measured["accuracy"]["all"]
    se, sp = whole["sensitivity"], whole["specificity"]

    def rate(est: dict[str, object]) -> str:
        if est.get("value") is None:
            return "— (none audited)"
        return f"{est['value']:.2f} [{est['low']:.2f}, {est['high']:.2f}]"

    console.print(
        f"      judge audit {record['record_id']}: {len(sampled)} episode(s) drawn (seed "
        f"{protocol.base_seed}), labelled by the {DEMO_AUDITOR}; detector Se {rate(se)}, "
        f"Sp {rate(sp)} ({measured['record_id']})",
        markup=False,
    )
    return measured


def cli_command() -> tuple[str, str]:
    """How to call the `embodied-eval` command from this shell, and a line saying how to put it
    on PATH ("" when it already is)."""
    script = Path(sys.executable).with_name("embodied-eval")
    found = shutil.which("embodied-eval")
    if not script.exists() or (found is not None and Path(found) == script):
        return "embodied-eval", ""
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    folder = str(Path(shown).parent)
    return shown, (
        f"the embodied-eval command is in {folder}: run `. {folder}/activate` once per shell to "
        "call it as `embodied-eval`"
    )


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise EvalError(f"${name}: {value!r} is not a whole number", key=name) from None


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise EvalError(f"${name}: {value!r} is not a number", key=name) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of `python -m embodied_eval.demo`; user errors print one line, exit 2."""
    try:
        parser = argparse.ArgumentParser(
            prog="python -m embodied_eval.demo",
            description="Run a small paired sim/real trial on the twin robot and certify it.",
        )
        parser.add_argument("--out", type=Path, default=Path("demo-output"))
        parser.add_argument("--families", type=int, default=_env_int(FAMILIES_ENV))
        parser.add_argument(
            "--real-fraction", type=float, default=_env_float(REAL_FRACTION_ENV, 0.2)
        )
        parser.add_argument("--workers", type=int, default=2)
        args = parser.parse_args(argv)
        run_demo(
            args.out,
            families=args.families,
            real_fraction=args.real_fraction,
            workers=args.workers,
        )
    except EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
