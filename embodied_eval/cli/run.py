"""`embodied-eval run PROTOCOL.toml`: run (or resume) a protocol's paired trials.

Re-running the same command continues where the last run stopped: finished episodes are kept,
episodes in flight when it stopped are run again from their seeds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from embodied_eval.cli.common import (
    DbOption,
    JsonOption,
    ProtocolOption,
    console,
    err_console,
    print_json,
    protocol_path,
)
from embodied_eval.cli.console_cmd import (
    InsecureRemoteOption,
    OperatorsOption,
    TlsCertOption,
    TlsKeyOption,
    TokenFileOption,
    UserOption,
    announce,
    operators_from,
    token_file_kept,
)
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from embodied_eval.protocol.reader import Protocol, load_protocol
from embodied_eval.runner.gym_side import GymSource
from embodied_eval.runner.progress import summary_table
from embodied_eval.runner.summary import RunSummary, retries_spent_message
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import default_db_path


class SideChoice(StrEnum):
    sim = "sim"
    real = "real"
    both = "both"


class ExecutorChoice(StrEnum):
    sequential = "sequential"
    local = "local"
    ray = "ray"


def parse_options(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs to a dict; VALUE is read as JSON when it parses (numbers, true, lists)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise EvalError(f"--robot-option {item!r}: expected KEY=VALUE", key="robot_option")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def default_out_dir(window_id: str) -> Path:
    """`runs/<window id>` (made filesystem-safe)."""
    return Path("runs") / (re.sub(r"[^A-Za-z0-9._-]+", "_", window_id) or "window")


def print_summary(summary: RunSummary) -> None:
    """The end-of-run table and the lines that say what happened."""
    console.print(summary_table(summary.rows))
    console.print(f"manifest {summary.manifest_hash[:12]}… escrowed at {summary.manifest_path}")
    if summary.stopping is not None:
        decision, reason = summary.stopping["decision"], summary.stopping["reason"]
        if decision == "continue":
            console.print(f"anytime stopping: not decided yet ({reason})")
        else:
            console.print(f"anytime stopping: {decision}: {reason}")
    if summary.real_stopped:
        console.print(f"real side stopped: {summary.real_stopped}")
    if summary.actions_clipped:
        console.print(
            f"actions clipped to the action space: {summary.actions_clipped} step(s) "
            '([sim] out_of_range_actions = "clip")'
        )
    if summary.incident_log:
        console.print(f"safety events: {summary.incident_log}")
    if summary.dry_run:
        console.print("dry run: nothing was run")
    elif summary.interrupted:
        console.print("[yellow]interrupted[/]: re-run the same command to continue")
    elif summary.complete:
        failed = f", {summary.failed} ended `error`" if summary.failed else ""
        console.print(f"done: {summary.written} episode(s) recorded in this run{failed}")
    if summary.spent and summary.written and not summary.failed:
        console.print(f"[yellow]note[/]: {retries_spent_message(summary.spent)}")


def run_command(
    protocol_arg: Path | None = typer.Argument(
        None, metavar="[PROTOCOL]", help="Protocol TOML file (or --protocol)."
    ),
    protocol_opt: Path | None = ProtocolOption,
    side: SideChoice = typer.Option(SideChoice.both, "--side", help="Which side to run now."),
    engine: list[str] | None = typer.Option(
        None, "--engine", help="Sim engine, repeatable: mujoco, pybullet (default: the protocol's)."
    ),
    policy: str | None = typer.Option(
        None,
        "--policy",
        help="Policy 'module:factory', or ws://HOST:PORT for a policy server, for both sides "
        "(default: the protocol's).",
    ),
    condition: str | None = typer.Option(
        None,
        "--condition",
        help="Run an [expansion] audit condition: pre, post or ablated (its policy, both sides).",
    ),
    executor: ExecutorChoice = typer.Option(
        ExecutorChoice.local, "--executor", help="How sim episodes fan out."
    ),
    workers: int | None = typer.Option(
        None, "--workers", help="Worker processes / Ray CPUs (default: all cores)."
    ),
    db: Path | None = DbOption,
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Output folder for manifest, summary, artifacts (default: runs/<window>).",
    ),
    robot_backend: str | None = typer.Option(
        None,
        "--robot-backend",
        help="Robot backend name or 'module:factory' (default: [real] backend).",
    ),
    robot_option: list[str] = typer.Option(
        [], "--robot-option", help="KEY=VALUE passed to the robot backend (repeatable)."
    ),
    gym_id: str | None = typer.Option(
        None, "--gym-id", help="Run the sim side on this registered Gymnasium environment."
    ),
    quality: str | None = typer.Option(
        None,
        "--quality",
        help="'module:function' scoring a Gymnasium rollout (else info['is_success']).",
    ),
    max_retries: int = typer.Option(
        1, "--max-retries", help="Retries after an error/aborted attempt."
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Wall-clock limit per sim episode, seconds (local/ray executors).",
    ),
    record: bool = typer.Option(False, "--record", help="Let sim engines write recordings."),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="Ray cluster to join with --executor ray ('auto', 'HOST:6379' or "
        "'ray://HOST:10001'); default: start a local one.",
    ),
    ray_working_dir: str | None = typer.Option(
        None, "--ray-working-dir", help="Code folder shipped to a remote Ray cluster."
    ),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        help="Run the sim side with this calibration file (`embodied-eval calibrate`) instead "
        "of the protocol's [sim] calibration.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan and escrow the manifest only."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bars."),
    console_port: int | None = typer.Option(
        None,
        "--console-port",
        help="Serve the live console of this run on this port (0: a free one); its URL, with "
        "the session token, is printed at the start.",
    ),
    console_host: str = typer.Option(
        "127.0.0.1", "--console-host", help="Address the console listens on."
    ),
    foxglove_port: int | None = typer.Option(
        None,
        "--foxglove-port",
        help="Publish the live channels to Foxglove on this port (foxglove-sdk WebSocket; "
        "clients need an operator's token).",
    ),
    foxglove_host: str = typer.Option(
        "127.0.0.1", "--foxglove-host", help="Address the Foxglove server listens on."
    ),
    user: list[str] | None = UserOption,
    operators_file: Path | None = OperatorsOption,
    token_file: Path | None = TokenFileOption,
    tls_cert: Path | None = TlsCertOption,
    tls_key: Path | None = TlsKeyOption,
    insecure_remote: bool = InsecureRemoteOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a protocol's paired sim/real trials; re-run the same command to resume."""
    protocol_file = protocol_path(protocol_arg, protocol_opt, required=True)
    assert protocol_file is not None
    protocol = load_protocol(protocol_file)
    if calibration is not None:
        protocol = dataclasses.replace(protocol, sim_calibration=str(calibration))
    gym_engine = tuple(engine or ()) == ("gymnasium",)
    if quality and not (gym_id or gym_engine):
        raise EvalError("--quality needs --gym-id or --engine gymnasium", key="quality")
    if condition is not None:
        if protocol.expansion is None:
            raise EvalError(
                "--condition: the protocol declares no [expansion] audit", key="condition"
            )
        if policy is not None:
            raise EvalError("--condition sets the policy; drop --policy", key="condition")
        policy = protocol.expansion.policy(condition)
    options = RunOptions(
        sides=("sim", "real") if side is SideChoice.both else (side.value,),
        engines=tuple(engine) if engine else None,
        policy=policy,
        executor=executor.value,
        workers=workers,
        max_retries=max_retries,
        timeout_s=timeout,
        robot_backend=robot_backend,
        robot_options=parse_options(robot_option),
        gym=GymSource(gym_id=gym_id or "", quality=quality or "") if gym_id or quality else None,
        record=record,
        ray_address=ray_address,
        ray_working_dir=ray_working_dir,
        dry_run=dry_run,
    )
    db_path = db if db is not None else default_db_path()
    views = LiveViews(
        console_port=console_port,
        console_host=console_host,
        foxglove_port=foxglove_port,
        foxglove_host=foxglove_host,
        users=user,
        operators_file=operators_file,
        token_file=token_file,
        tls_cert=tls_cert,
        tls_key=tls_key,
        insecure_remote=insecure_remote,
    )
    with live_views(protocol, db_path, views, max_retries) as live:
        summary = run_trials(
            protocol,
            options,
            db_path=db_path,
            out_dir=out if out is not None else default_out_dir(protocol.window_id),
            console=console,
            show_progress=not (no_progress or as_json),
            live=live,
        )
    if as_json:
        print_json(summary.to_json())
    else:
        print_summary(summary)
    if summary.real_error:
        raise EvalError(f"the real side could not run: {summary.real_error}", key="robot_backend")
    if summary.interrupted:
        stops = [r for r in summary.operator if r["action"] == "stop"]
        if stops:
            err_console.print(
                f"stopped from the console by {stops[0]['by']} at {stops[0]['at']} (ledger "
                f"{stops[0]['record_id']}): re-run the same command to continue",
                highlight=False,
            )
        raise typer.Exit(130)
    if summary.real_halted:
        console.print(f"[red]halted[/]: {summary.real_stopped}")
        raise typer.Exit(3)
    failure = "" if summary.dry_run else summary.failure()
    if failure:
        raise EvalError(failure, key="run")


@dataclasses.dataclass(frozen=True)
class LiveViews:
    """`run`'s console and Foxglove options (see `embodied_eval.cli.console_cmd`)."""

    console_port: int | None = None
    console_host: str = "127.0.0.1"
    foxglove_port: int | None = None
    foxglove_host: str = "127.0.0.1"
    users: list[str] | None = None
    operators_file: Path | None = None
    token_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure_remote: bool = False


@contextlib.contextmanager
def live_views(
    protocol: Protocol, db_path: Path, views: LiveViews, max_retries: int
) -> Iterator[LiveState | None]:
    """The run's live state with its console and Foxglove server (None when neither is asked
    for); both stop, and the token file goes, when the run ends."""
    if views.console_port is None and views.foxglove_port is None:
        yield None
        return
    from embodied_eval.console.access import TLSFiles, check_bind, default_token_file, redacted_logs

    tls = TLSFiles.of(views.tls_cert, views.tls_key)
    for host, option, port in ((views.console_host, "--console-host", views.console_port),
                               (views.foxglove_host, "--foxglove-host", views.foxglove_port)):  # fmt: skip
        if port is not None:
            check_bind(host, tls=tls is not None, insecure_remote=views.insecure_remote,
                       what="console" if option == "--console-host" else "Foxglove",
                       option=option)  # fmt: skip
    operators = operators_from(views.users, views.operators_file)
    live = LiveState(operators.first)
    tokens = views.token_file if views.token_file is not None else default_token_file(db_path)
    with contextlib.ExitStack() as stack:
        stack.enter_context(redacted_logs(operators))
        stack.enter_context(token_file_kept(tokens))
        server = fox = None
        if views.console_port is not None:
            from embodied_eval.console.app import ConsoleServer

            server = ConsoleServer(
                db_path, protocol, live=live, host=views.console_host, port=views.console_port,
                max_retries=max_retries, operators=operators, tls=tls,
                insecure_remote=views.insecure_remote, host_option="--console-host",
                port_option="--console-port",
            )  # fmt: skip
            server.start()
            stack.callback(server.stop)
        if views.foxglove_port is not None:
            from embodied_eval.console.foxglove_live import FoxgloveLive

            fox = FoxgloveLive(
                live, operators=operators, host=views.foxglove_host, port=views.foxglove_port,
                tls=tls, insecure_remote=views.insecure_remote,
            )  # fmt: skip
            fox.start()
            stack.callback(fox.stop)
        announce(operators, tokens, console=server, foxglove=fox)
        yield live


def register(app: typer.Typer) -> None:
    """Add `run` to the CLI."""
    app.command("run")(run_command)
