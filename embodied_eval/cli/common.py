"""Options and helpers shared by the CLI command modules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from embodied_eval.store import Store, default_db_path

console = Console()
err_console = Console(stderr=True)

DbOption = typer.Option(
    None, "--db", help="SQLite store (default: $EMBODIED_EVAL_DB or ./embodied-eval.db)."
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")


def open_store(db: Path | None, *, create: bool = True) -> Store:
    """Open the store named by --db (or the default path)."""
    return Store(db if db is not None else default_db_path(), create=create)


def print_json(data: Any) -> None:
    """Print JSON to stdout (no rich markup, so it can be piped)."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=str))
