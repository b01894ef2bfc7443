"""Reading a file a user hands us: what it is, how big, how it is encoded, how deep its JSON goes.

Every reader of a user-supplied file (protocols, episode/fault/incident tables, evidence, bundles,
robot profiles) starts here, so each of these refusals is one `EvalError` line naming the file:

- the path does not exist, is a folder, or is not a regular file (a FIFO would block for ever,
  a device never ends);
- the file is larger than the limit for its kind;
- the text is not UTF-8 (a UTF-8 byte-order mark is accepted and dropped; UTF-16 is named);
- JSON holds NaN/Infinity, is nested deeper than `MAX_JSON_DEPTH`, or is not JSON at all.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.validation import first_nonfinite

#: Default size limit of a user file (tables, evidence): far above any real window's data.
MAX_FILE_BYTES = 256 * 1024 * 1024
#: Size limit of small configuration files (protocols, robot profiles, signatures).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Deepest JSON nesting accepted from a user file (the evidence schema needs 6).
MAX_JSON_DEPTH = 64

_BOM_UTF8 = b"\xef\xbb\xbf"
_BOMS_OTHER = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def check_regular_file(path: str | os.PathLike[str], what: str) -> os.stat_result:
    """`os.stat` of a path that must be an existing regular file; EvalError otherwise."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise EvalError(f"{what} {str(p)!r} does not exist", key=what) from None
    except OSError as exc:  # symlink loop, name too long, permission on a parent, ...
        raise EvalError(
            f"{what} {str(p)!r} cannot be opened: {exc.strerror or exc}", key=what
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise EvalError(f"{what} {str(p)!r} is a folder; give a file", key=what)
    if not stat.S_ISREG(st.st_mode):
        raise EvalError(
            f"{what} {str(p)!r} is not a regular file (a device, pipe or socket); give a file",
            key=what,
        )
    return st


def read_user_bytes(
    path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_FILE_BYTES
) -> bytes:
    """The bytes of a user file after `check_regular_file` and the size limit."""
    st = check_regular_file(path, what)
    if st.st_size > max_bytes:
        raise EvalError(
            f"{what} {str(path)!r} is {st.st_size} bytes; the limit is {max_bytes} bytes",
            key=what,
        )
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise EvalError(
            f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}", key=what
        ) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the stat
            raise EvalError(f"{what} {str(path)!r} is not a regular file", key=what)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise EvalError(f"{what} {str(path)!r} is larger than {max_bytes} bytes", key=what)
    return data


def decode_text(data: bytes, where: str, what: str = "file") -> str:
    """UTF-8 text of `data`, a leading byte-order mark dropped; EvalError naming `where`."""
    if data.startswith(_BOM_UTF8):
        data = data[len(_BOM_UTF8) :]
    else:
        for bom, name in _BOMS_OTHER.items():
            if data.startswith(bom):
                raise EvalError(
                    f"{what} {where!r} is {name} text; save it as UTF-8", key=what
                ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise EvalError(
            f"{what} {where!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
            "save it as UTF-8",
            key=what,
        ) from None


def read_user_text(
    path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_FILE_BYTES
) -> str:
    """A user file's text: regular file, within the size limit, UTF-8 (BOM accepted)."""
    return decode_text(read_user_bytes(path, what, max_bytes=max_bytes), str(path), what)


def parse_json(text: str, where: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text strictly: no NaN/Infinity, nesting at most `max_depth`, integers exact.

    Args:
        text: the JSON text.
        where: the file, row or key to name in an error.
        max_depth: deepest nesting of objects/arrays accepted.

    Returns:
        The parsed value (dicts, lists, str, int, float, bool, None).

    Raises:
        EvalError: one line naming `where`.
    """
    try:
        value = json.loads(text)  # NaN/Infinity parse to floats; `first_nonfinite` names the key
    except RecursionError:
        raise EvalError(f"{where}: JSON nested deeper than {max_depth} levels", key=where) from None
    except json.JSONDecodeError as exc:
        raise EvalError(
            f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            key=where,
        ) from None
    except ValueError:
        # Python refuses to convert an integer of more than sys.get_int_max_str_digits() digits.
        raise EvalError(
            f"{where}: holds an integer with more than {sys.get_int_max_str_digits()} digits; no "
            "measurement has that many — check the file",
            key=where,
        ) from None
    problem = first_nonfinite(value, "", max_depth=max_depth)
    if problem:
        raise EvalError(f"{where}: {problem}", key=where)
    return value


def read_user_json(
    path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_FILE_BYTES
) -> Any:
    """A user JSON file, read with `read_user_text` and parsed with `parse_json`."""
    return parse_json(read_user_text(path, what, max_bytes=max_bytes), f"{what} {str(path)!r}")
