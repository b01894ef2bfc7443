"""Options and helpers shared by the CLI command modules."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from embodied_eval.errors import EvalError
from embodied_eval.store.core import Store, default_db_path

#: Width of tables written to a pipe or file: wide enough that no column is cut or folded (Rich
#: would otherwise assume 80 columns). `COLUMNS` in the environment still wins.
PIPED_WIDTH = 1000


def make_console(*, stderr: bool = False) -> Console:
    """A Rich console: the terminal's width on a terminal; `PIPED_WIDTH` when piped."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty())
    width = PIPED_WIDTH if piped and "COLUMNS" not in os.environ else None
    return Console(stderr=stderr, width=width)


console = make_console()
err_console = make_console(stderr=True)

DbOption = typer.Option(
    None, "--db", help="SQLite store (default: $EMBODIED_EVAL_DB or ./embodied-eval.db)."
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")
#: Every command takes its protocol as `--protocol P`; `run`, `compare` and `protocol check` also
#: accept it as their first argument (`run P`), the form scripts written earlier use.
ProtocolOption = typer.Option(None, "--protocol", help="Protocol TOML file.")


def protocol_path(positional: Path | None, option: Path | None, *, required: bool) -> Path | None:
    """The protocol file given as `--protocol P` or as the first argument (not two different
    ones); None when neither and not `required`."""
    if positional is not None and option is not None and positional != option:
        raise EvalError(
            f"two protocols given ({str(positional)!r} and --protocol {str(option)!r}); "
            "pass one, as --protocol P",
            key="protocol",
        )
    chosen = option if option is not None else positional
    if chosen is None and required:
        raise EvalError("missing the protocol: pass --protocol PROTOCOL.toml", key="protocol")
    return chosen


def open_store(db: Path | None, *, create: bool = True) -> Store:
    """Open the store named by --db (or the default path)."""
    return Store(db if db is not None else default_db_path(), create=create)


def print_json(data: Any) -> None:
    """Print JSON to stdout (no rich markup, so it can be piped)."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=str))


def window_id(window: str | None) -> str | None:
    """The `--window` value, or None when not given; an empty id is refused (it names no
    window, and would otherwise read as "the protocol's")."""
    if window is not None and not window.strip():
        raise EvalError(
            "--window: the window id must not be empty (omit --window for the protocol's)",
            key="window",
        )
    return window
