"""Entry point of the `embodied-eval` console script.

Each command group lives in its own module exposing `register(app)`; groups owned by the other
packages (incidents, keys, twin, trial) are reached through `embodied_eval.plugins.CLI_GROUPS`.
A user error (`EvalError`) and a usage error (unknown option, missing argument, bad choice) print
one line and exit 2. No traceback reaches the user: an unexpected exception is written with its
traceback to a log file and reported in one line naming that file (exit 1).
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import sys
import tempfile
import traceback
from pathlib import Path

import typer

from embodied_eval import __version__
from embodied_eval.cli.guard import discard_new_stores, new_store_paths
from embodied_eval.errors import EvalError
from embodied_eval.plugins import CLI_GROUPS, resolve

try:  # typer ≥ 0.22 carries its own copy of click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import ClickException, UsageError  # type: ignore[no-redef,assignment]

#: Command modules of this package, each with `register(app: typer.Typer)`.
COMMAND_MODULES = (
    "embodied_eval.cli.data",
    "embodied_eval.cli.plan",
    "embodied_eval.cli.metrics",
    "embodied_eval.cli.score",
    "embodied_eval.cli.run",
    "embodied_eval.cli.certify",
    "embodied_eval.cli.policy",
    "embodied_eval.cli.compare",
    "embodied_eval.cli.store_cmd",
)

app = typer.Typer(
    name="embodied-eval",
    help="Paired sim/real evaluation of robot policies: reliability, safety, sim-to-real "
    "agreement and AAI certification.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """embodied-eval: run paired trials, log incidents, compute metrics, certify."""


@app.command("version")
def version() -> None:
    """Print the embodied-eval version."""
    typer.echo(__version__)


def _module_exists(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


_built = False


def build_app() -> typer.Typer:
    """Register every command group that is installed (once per process: calling `main` many
    times, as tests do, must not register the groups again and again)."""
    global _built
    if _built:
        return app
    _built = True
    for module_name in COMMAND_MODULES:
        if _module_exists(module_name):
            importlib.import_module(module_name).register(app)
    for group, target in CLI_GROUPS.items():
        if _module_exists(target.partition(":")[0]):
            app.add_typer(resolve(target), name=group)
    return app


#: Where crash logs go (default: the system's temporary folder).
CRASH_DIR_ENV_VAR = "EMBODIED_EVAL_CRASH_DIR"
#: Exit status of an unexpected failure (a bug, not a user error).
CRASH_EXIT_CODE = 1


def one_line(text: str) -> str:
    """`text` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(str(text).split())


def _usage_error(exc: UsageError) -> str:
    command = exc.ctx.command_path if exc.ctx is not None else "embodied-eval"
    return f"{command}: {one_line(exc.format_message())} (see '{command} --help')"


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
    code = _run(build_app(), argv)
    if code != 0:
        discard_new_stores(new_stores)
    return code


def _run(cli: typer.Typer, argv: list[str] | None) -> int:
    try:
        result = cli(args=argv, prog_name="embodied-eval", standalone_mode=False)
    except EvalError as exc:
        typer.echo(f"error: {one_line(str(exc))}", err=True)
        return exc.exit_code
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help is the answer to no arguments
            help_text = exc.format_message()
            if help_text.strip():
                typer.echo(help_text, err=True)
            return 2
        typer.echo(f"error: {_usage_error(exc)}", err=True)
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


if __name__ == "__main__":
    sys.exit(main())
