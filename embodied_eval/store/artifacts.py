"""Where an episode's artifact files live: paths kept relative to the store, so a store travels.

An artifact's path is stored relative to the folder that holds the store file whenever the file
lies inside that folder (the run's `--out` beside the store, as the demo writes it), so a lab can
copy, rename or mount the store's folder anywhere and every reader still finds the recordings. A
file outside the store's folder is kept as an absolute path (it does not travel; docs/technician.md says
what to hand over). Stores written before paths were kept this way hold paths relative to the
folder the run was started in; `artifact_file` still finds those, from that folder or, once the
store was moved, by the path's tail under the store's folder (the content is checked against the
chained SHA-256 wherever it matters).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath


def stored_artifact_path(path: str, store_path: str | os.PathLike[str]) -> str:
    """The path to record for an artifact written at `path` (relative to the working folder or
    absolute): relative to the store's folder (POSIX separators) when the file lies inside it,
    else absolute. A path to a file that is not on disk (an imported record) is kept as given."""
    given = Path(path)
    if not given.is_file():
        return path
    where = given.resolve()
    base = Path(store_path).resolve().parent
    try:
        return PurePosixPath(*where.relative_to(base).parts).as_posix()
    except ValueError:
        return str(where)


def artifact_file(path: str, store_path: str | os.PathLike[str] | None) -> Path | None:
    """The artifact recorded as `path` on this disk, or None when it is not here.

    Tried in order: an absolute path as is; the path under the store's folder (how paths are
    recorded now); the path from the working folder (a store written before, not moved); the
    path's tails under the store's folder (a store written before, then moved with its folder).
    """
    given = Path(path)
    if given.is_absolute():
        return given if given.is_file() else None
    candidates = []
    base = None if store_path is None else Path(store_path).parent
    if base is not None:
        candidates.append(base / given)
    candidates.append(given)
    if base is not None:
        candidates += [base / Path(*given.parts[k:]) for k in range(1, len(given.parts))]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None
