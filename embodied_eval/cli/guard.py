"""Nothing left behind by a refused command: store files it created are removed again.

Before a command runs, the CLI notes which store paths it may open (`--db` values and the default
store) do not exist yet; when the command fails, each of those it created is removed if it holds
no rows (`store_guard.discard_new_store`). A failed run that already stored episodes keeps them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from embodied_eval.store.guard import default_db_path, discard_new_store


def store_paths(argv: list[str] | None) -> list[Path]:
    """The store paths a command line may open: every `--db` value, else the default store."""
    args = list(sys.argv[1:] if argv is None else argv)
    found: list[Path] = []
    for i, arg in enumerate(args):
        if arg == "--db" and i + 1 < len(args):
            found.append(Path(args[i + 1]))
        elif arg.startswith("--db="):
            found.append(Path(arg.partition("=")[2]))
    return found or [default_db_path()]


def new_store_paths(argv: list[str] | None) -> list[Path]:
    """The store paths of `argv` that do not exist yet."""
    out = []
    for path in store_paths(argv):
        try:
            if not path.exists() and not path.is_symlink():
                out.append(path)
        except OSError:
            continue
    return out


def discard_new_stores(paths: list[Path]) -> None:
    """Remove each of `paths` that now exists as a store without rows."""
    for path in paths:
        try:
            discard_new_store(path)
        except OSError:
            continue
