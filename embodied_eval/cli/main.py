"""Entry point of the `embodied-eval` console script.

Each command group lives in its own module exposing `register(app)`; groups owned by the other
packages (incidents, keys, twin, trial) are reached through `embodied_eval.plugins.CLI_GROUPS`.
A user error (`EvalError`) prints one line and exits 2; anything else keeps its traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from embodied_eval import __version__
from embodied_eval.errors import EvalError
from embodied_eval.plugins import CLI_GROUPS, resolve

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


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line to stderr and exit 2."""
    cli = build_app()
    try:
        cli(args=argv, prog_name="embodied-eval")
    except EvalError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
