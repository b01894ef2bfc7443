"""The CLI reference (docs/cli.md), generated from the Typer app so it cannot drift.

    python -m embodied_eval.cli.reference > docs/cli.md

`tests/test_docs.py` checks that docs/cli.md is exactly what this prints; `make docs` rewrites it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer

HEADER = """# CLI reference

Every `embodied-eval` command with its arguments and options, generated from the command-line
app itself (`python -m embodied_eval.cli.reference > docs/cli.md`; a test keeps this page equal to
its output). `embodied-eval COMMAND --help` prints the same in a terminal.
"""


def _context(command: Any, name: str) -> Any:
    # typer ≥ 0.22 carries its own copy of click: make the context the command's own kind.
    return command.context_class(command, info_name=name)


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    if hasattr(command, "list_commands"):
        ctx = _context(command, path[-1])
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _walk(sub, (*path, name))


def _param_line(param: Any, ctx: Any) -> str:
    """One option or argument as `--help` shows it: its names and value, then its help."""
    record = param.get_help_record(ctx)
    names, text = record if record else ((param.name or "").upper(), "")
    text = " ".join(str(text).split())
    return f"- `{names}`" + (f": {text}" if text else "")


def cli_reference() -> str:
    """The reference page: one section per command and subcommand, in the app's order."""
    from embodied_eval.cli.main import app

    root = typer.main.get_command(app)
    out = [HEADER]
    for path, command in _walk(root, ("embodied-eval",)):
        if len(path) == 1:
            continue
        title = " ".join(path)
        level = "#" * min(len(path), 4)
        out.append(f"{level} `{title}`\n")
        doc = (command.help or "").strip()
        if doc:
            out.append(doc.replace("\b\n", "") + "\n")
        ctx = _context(command, title)
        usage = " ".join(command.collect_usage_pieces(ctx))
        out.append(f"```\n{title} {usage}\n```\n")
        params = [p for p in command.get_params(ctx) if p.name != "help"]
        if params:
            out.append("\n".join(_param_line(p, ctx) for p in params) + "\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(cli_reference())
