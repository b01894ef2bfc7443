"""Entry point of the `embodied-eval` console script.

Each command group lives in its own module exposing `register(app)`; groups owned by the other
packages (incidents, keys, twin, trial) are reached through `embodied_eval.plugins.CLI_GROUPS`.
A user error (`EvalError`) and a usage error (unknown option, missing argument, bad choice) print
one line and exit 2. No traceback reaches the user: an unexpected exception is written with its
traceback to a log file and reported in one line naming that file (exit 1).

Commands are loaded lazily: `--help` and `--version` list them from `COMMANDS` without importing
their modules (which pull in numpy, pandas, the simulators and ROS 2); a command's module is
imported only when that command runs or its own help is asked for.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import typer
from typer import _click as click  # typer vendors click; its groups are click groups
from typer.core import TyperGroup, TyperOption

from embodied_eval import __version__
from embodied_eval.cli.guard import discard_new_stores, new_store_paths
from embodied_eval.errors import EvalError
from embodied_eval.plugins import CLI_GROUPS, resolve

#: Command name → (module with `register(app)`, one-line summary shown by `--help`).
COMMANDS: dict[str, tuple[str, str]] = {
    "import": ("embodied_eval.cli.data", "Import a CSV/Parquet file into the store."),
    "export": (
        "embodied_eval.cli.data",
        "Export from the store to CSV or Parquet, or as a LeRobotDataset folder.",
    ),
    "protocol": ("embodied_eval.cli.data", "Check and inspect protocol files."),
    "plan": (
        "embodied_eval.cli.plan",
        "Plan demonstration tests: remaining trials or hours to settle a gate.",
    ),
    "metrics": (
        "embodied_eval.cli.metrics",
        "Embodiment metrics and the robotics gates AAI-2..4 of one window.",
    ),
    "score": ("embodied_eval.cli.score", "Score an evidence file: axes, AAI-Index, level."),
    "run": ("embodied_eval.cli.run", "Run (or resume) a protocol's paired sim/real trials."),
    "console": (
        "embodied_eval.cli.console_cmd",
        "A live web console of a window: progress, the real episode, incidents; stop, pause.",
    ),
    "certify": (
        "embodied_eval.cli.certify",
        "Certify a window: E, the AAI index and level, a signed bundle and report.",
    ),
    "verify": (
        "embodied_eval.cli.certify",
        "Check a certificate bundle's signature and hashes (and numbers, with --db).",
    ),
    "policy": (
        "embodied_eval.cli.policy",
        "Serve harness policies over the openpi websocket protocol.",
    ),
    "compare": (
        "embodied_eval.cli.compare",
        "Sequential A/B comparison of two policies, or adaptive of N (stops when it decides).",
    ),
    "rank": (
        "embodied_eval.cli.rank",
        "Leaderboard of many policies: Bradley–Terry strengths, intervals, P(best).",
    ),
    "calibrate": (
        "embodied_eval.cli.calibrate",
        "Fit the simulator's physical parameters to recorded real episodes.",
    ),
    "store": (
        "embodied_eval.cli.store_cmd",
        "The store's integrity: verify the ledgers; amend an episode.",
    ),
}

#: One-line summaries of the plugin groups (`CLI_GROUPS`); a group not named here is imported
#: to read its help.
GROUP_SUMMARIES: dict[str, str] = {
    "incidents": "Incident log: report, review, amend, verify, rates per 100 h.",
    "keys": "Ed25519 signing keys for reviews and window closes.",
    "twin": "The twin robot: a ROS 2 process standing in for the physical robot.",
    "trial": "Real-robot trials entered by a technician.",
    "robot": "Robot-side helpers: the reference deadman relay for a real robot.",
}

#: Click commands already loaded, by name (loading happens once per process).
_loaded: dict[str, click.Command] = {}


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent package itself is absent
        return False


def _available() -> dict[str, str]:
    """Command name → summary, for every command whose module is installed (not imported)."""
    names = {n: summary for n, (module, summary) in COMMANDS.items() if _module_exists(module)}
    for group, target in CLI_GROUPS.items():
        if _module_exists(target.partition(":")[0]):
            names[group] = GROUP_SUMMARIES.get(group, "")
    return names


def _load(name: str) -> click.Command | None:
    """Import the module behind `name` and return its click command (cached)."""
    if name in _loaded:
        return _loaded[name]
    if name in COMMANDS:
        scratch = typer.Typer()
        importlib.import_module(COMMANDS[name][0]).register(scratch)
        group = typer.main.get_group(scratch)
        for cmd_name, cmd in group.commands.items():
            _loaded[cmd_name] = cmd
    elif name in CLI_GROUPS:
        group = typer.main.get_group(resolve(CLI_GROUPS[name]))
        group.name = name
        _loaded[name] = group
    return _loaded.get(name)


_typer_display_type = TyperOption.display_type_rich


def _flag_display_type(self: TyperOption, ctx: click.Context) -> str | None:
    """No value placeholder beside a flag (typer prints `<bool>` for `--json`, `--help` …, though
    a flag takes no value); a repeatable option shows its value type once and `…` (not typer's
    `<list[str]>`); every other option keeps typer's."""
    if self.is_bool_flag and self.metavar is None:
        return None
    shown = _typer_display_type(self, ctx)
    if self.multiple and shown and shown.startswith("<list[") and shown.endswith("]>"):
        return f"<{shown[6:-2]}>…"
    return shown


TyperOption.display_type_rich = _flag_display_type  # type: ignore[method-assign]


class LazyGroup(TyperGroup):
    """The root group: lists commands from `COMMANDS`, imports one only when it is used."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        own = super().list_commands(ctx)
        return [*own, *(n for n in _available() if n not in own)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        available = _available()
        if cmd_name not in available:
            return None
        if self._listing and cmd_name not in _loaded and available[cmd_name]:
            summary = available[cmd_name]
            return typer.core.TyperCommand(cmd_name, help=summary, short_help=summary)
        return _load(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


try:  # typer ≥ 0.22 carries its own copy of click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import ClickException, UsageError  # type: ignore[no-redef,assignment]


app = typer.Typer(
    name="embodied-eval",
    cls=LazyGroup,
    help="Paired sim/real evaluation of robot policies: reliability, safety, sim-to-real "
    "agreement and AAI certification.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"embodied-eval {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        is_eager=True,
        callback=_print_version,
    ),
) -> None:
    """embodied-eval: run paired trials, log incidents, compute metrics, certify."""


@app.command("version")
def version() -> None:
    """Print the embodied-eval version."""
    typer.echo(__version__)


def all_commands() -> dict[str, click.Command]:
    """Every installed command, loaded (for tests and documentation tools)."""
    out: dict[str, Any] = {}
    for name in _available():
        out[name] = _load(name)
    return out


#: Where crash logs go (default: the system's temporary folder).
CRASH_DIR_ENV_VAR = "EMBODIED_EVAL_CRASH_DIR"
#: Exit status of an unexpected failure (a bug, not a user error).
CRASH_EXIT_CODE = 1


def one_line(text: str) -> str:
    """`text` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(str(text).split())


def _usage_error(exc: UsageError, argv: list[str] | None = None) -> str:
    command = exc.ctx.command_path if exc.ctx is not None else _command_path(argv)
    return f"{command}: {one_line(exc.format_message())} (see '{command} --help')"


def _command_path(argv: list[str] | None) -> str:
    """The command the leading words of `argv` name (click gives no context for an option left
    without its value at the end of the line)."""
    words = ["embodied-eval"]
    cmd: Any = typer.main.get_command(app)
    for token in argv if argv is not None else sys.argv[1:]:
        if token.startswith("-") or not hasattr(cmd, "get_command"):
            break
        try:
            cmd = cmd.get_command(click.Context(cmd), token)
        except Exception:  # naming the command is a courtesy; never fail the error message
            break
        if cmd is None:
            break
        words.append(token)
    return " ".join(words)


def write_crash_log(exc: BaseException, argv: list[str] | None) -> Path:
    """Write the traceback of an unexpected exception to a new log file; returns its path."""
    folder = Path(os.environ.get(CRASH_DIR_ENV_VAR) or tempfile.gettempdir())
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    fd, name = tempfile.mkstemp(prefix=f"embodied-eval-crash-{stamp}-", suffix=".log", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(
            f"embodied-eval {__version__}\nargv: {argv if argv is not None else sys.argv}\n"
        )
        handle.write("".join(traceback.format_exception(exc)))
    return Path(name)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit status; every failure prints exactly one line.

    User errors (`EvalError`) and usage errors exit 2; an unexpected exception is logged with its
    traceback to a file (see `write_crash_log`) and reported in one line naming it. A failed
    command leaves no new, empty store behind.
    """
    new_stores = new_store_paths(argv)
    code = _run(app, argv)
    if code != 0:
        discard_new_stores(new_stores)
    return code


def _run(cli: typer.Typer, argv: list[str] | None, prog_name: str = "embodied-eval") -> int:
    """Run a typer app the way `main` does: one-line errors, exit statuses, crash logs."""
    try:
        result = cli(args=argv, prog_name=prog_name, standalone_mode=False)
    except EvalError as exc:
        typer.echo(f"error: {one_line(str(exc))}", err=True)
        return exc.exit_code
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help is the answer to no arguments
            help_text = exc.format_message()
            if help_text.strip():
                typer.echo(help_text, err=True)
            return 2
        if exc.ctx is None and cli is not app:
            message = f"{prog_name}: {one_line(exc.format_message())} (see '{prog_name} --help')"
        else:
            message = _usage_error(exc, argv)
        typer.echo(f"error: {message}", err=True)
        return 2
    except ClickException as exc:
        typer.echo(f"error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("error: interrupted", err=True)
        return 130
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    except OSError as exc:
        if exc.filename is None:
            return _crash(exc, argv)
        # the system refused a path the user named: name too long, no permission, disk full, ...
        typer.echo(f"error: {str(exc.filename)[:200]}: {exc.strerror or exc}", err=True)
        return 2
    except Exception as exc:
        return _crash(exc, argv)
    return result if isinstance(result, int) else 0


def _crash(exc: BaseException, argv: list[str] | None) -> int:
    """Log an unexpected exception with its traceback; one line naming the log file."""
    try:
        log = write_crash_log(exc, argv)
    except OSError:
        typer.echo(f"error: internal error {type(exc).__name__} (no log written)", err=True)
        return CRASH_EXIT_CODE
    typer.echo(
        f"error: internal error {type(exc).__name__}; the traceback is in {log} (please report it)",
        err=True,
    )
    return CRASH_EXIT_CODE


#: `_run` for the other entry points (e.g. `python -m real_bridge.twin`): one error style.
run_app = _run


if __name__ == "__main__":
    sys.exit(main())
