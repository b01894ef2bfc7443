"""CSV / Parquet interchange of episodes and faults (flat columns, documented in docs/certification.md, "Data interchange").

Reading validates every row into a record first and raises one `EvalError` naming the row and the
column, so an import is all-or-nothing. The format follows the file extension (`.csv`, `.parquet`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from embodied_eval.canonical import atomic_write_bytes
from embodied_eval.errors import EvalError
from embodied_eval.input_files import decode_text, parse_json, read_user_bytes
from embodied_eval.records import Artifact, Episode, Fault
from embodied_eval.validation import MAX_INT64

#: Required flat columns of an episodes file, in order.
EPISODE_COLUMNS = (
    "episode_id",
    "pair_id",
    "side",
    "family",
    "task_id",
    "seed",
    "policy",
    "engine",
    "quality",
    "target_quality",
    "status",
    "duration_s",
    "interventions",
    "energy_wh",
    "attempt",
    "started_at",
)
#: Optional columns: JSON text for dict/list fields, plain values for the rest.
EPISODE_JSON_COLUMNS = ("drift", "randomization", "control", "cost", "artifacts")
EPISODE_OPTIONAL_COLUMNS = (
    *EPISODE_JSON_COLUMNS,
    "qc",
    "actions",
    "plan_depth",
    "status_reason",
    "audited_success",
    "window",
    "protocol_hash",
)
FAULT_COLUMNS = ("episode_id", "kind", "recovered", "repair_s")

_INT_COLUMNS = {"seed", "interventions", "attempt", "actions", "plan_depth"}
_FLOAT_COLUMNS = {"quality", "target_quality", "duration_s", "energy_wh", "qc", "repair_s"}

R = TypeVar("R")


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise EvalError(
        f"{str(path)!r}: unknown file type {suffix or '(none)'}; use .csv or .parquet", key="file"
    )


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame of raw values (CSV cells as text; Parquet
    timestamps as ISO-8601 UTC text, structs and maps as dicts, lists as lists).

    A CSV file is UTF-8 (a byte-order mark is accepted); every row must have as many cells as the
    header (a row cut short is refused, not padded), and column names must be present and unique.
    """
    p = Path(path)
    fmt = _format_of(p)
    data = read_user_bytes(p, "file")
    if fmt == "csv":
        return csv_frame(decode_text(data, str(p)), str(p))
    from embodied_eval.interchange.parquet import parquet_frame

    frame = parquet_frame(data, str(p))
    _check_header([str(c) for c in frame.columns], str(p))
    return frame


def _check_header(header: list[str], where: str) -> None:
    for i, name in enumerate(header, start=1):
        if not name.strip():
            raise EvalError(f"{where}: column {i} has no name in the header", key="file")
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise EvalError(f"{where}: column {name!r} appears twice in the header", key=name)
        seen.add(name)


def csv_frame(text: str, where: str) -> pd.DataFrame:
    """The cells of CSV text as a DataFrame of strings (header = row 1)."""
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise EvalError(f"{where}: not valid CSV ({exc})", key="file") from None
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()  # trailing blank lines
    if not rows:
        raise EvalError(f"{where}: the file is empty (expected a header row)", key="file")
    header = rows[0]
    _check_header(header, where)
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise EvalError(
                f"{where}: row {number} has {len(row)} cells but the header has {len(header)} "
                "(a row cut short, or an unquoted comma)",
                key="file",
            )
    return pd.DataFrame(rows[1:], columns=header, dtype=object)


def write_table(frame: pd.DataFrame, path: str | Path) -> str:
    """Write a DataFrame as CSV or Parquet atomically; returns the file's sha256."""
    p = Path(path)
    fmt = _format_of(p)
    if fmt == "csv":
        data = frame.to_csv(index=False).encode("utf-8")
    else:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        data = buffer.getvalue()
    return atomic_write_bytes(p, data)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


_INT_TEXT = re.compile(r"[+-]?[0-9]{1,40}")


def whole_number(value: Any, where: str, key: str) -> int:
    """An exact integer from a cell: integer text or an integer value is kept exact (never
    through a float); a float is accepted only when it is whole and at most 2**53."""
    if isinstance(value, bool):
        raise EvalError(f"{where}: expected a whole number, got {value!r}", key=key)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        number = int(value.strip())
    elif isinstance(value, (float, str)):
        try:
            as_float = float(value)
        except ValueError:
            as_float = math.nan
        if not (math.isfinite(as_float) and as_float.is_integer() and abs(as_float) <= 2**53):
            raise EvalError(f"{where}: expected a whole number, got {value!r:.40}", key=key)
        number = int(as_float)
    else:
        raise EvalError(f"{where}: expected a whole number, got {value!r:.40}", key=key)
    if abs(number) > MAX_INT64:
        raise EvalError(f"{where}: {number} does not fit in 64 bits", key=key)
    return number


def finite_number(value: Any, where: str, key: str) -> float:
    """A finite float from a cell; EvalError naming `where` (row and column) otherwise."""
    if isinstance(value, bool):
        raise EvalError(f"{where}: expected a number, got {value!r}", key=key)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise EvalError(f"{where}: expected a number, got {value!r:.40}", key=key) from None
    if not math.isfinite(number):
        raise EvalError(f"{where}: expected a finite number, got {value!r:.40}", key=key)
    return number


def _cell(value: Any, column: str, row: int) -> Any:
    """Convert one raw cell to the record's type; raise EvalError naming row and column."""
    where = f"row {row}, column {column!r}"
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar → Python
    if column in _INT_COLUMNS:
        return whole_number(value, where, column)
    if column in _FLOAT_COLUMNS:
        return finite_number(value, where, column)
    if column in ("recovered", "audited_success", "success"):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "y", "t"):
            return True
        if text in ("0", "false", "no", "n", "f"):
            return False
        raise EvalError(f"{where}: expected true/false, got {value!r}", key=column)
    if column in EPISODE_JSON_COLUMNS:
        parsed = value if isinstance(value, (dict, list)) else parse_json(str(value), where)
        wanted = list if column == "artifacts" else dict
        if not isinstance(parsed, wanted):
            raise EvalError(
                f"{where}: expected a JSON {'list' if wanted is list else 'object'}, got "
                f"{json.dumps(parsed)[:40]}",
                key=column,
            )
        return parsed
    if not isinstance(value, str):
        raise EvalError(f"{where}: expected text, got {value!r:.40}", key=column)
    return value


def _rows(
    frame: pd.DataFrame,
    required: Sequence[str],
    optional: Sequence[str],
    build: Callable[[dict[str, Any]], R],
    what: str,
) -> list[R]:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise EvalError(
            f"{what} file is missing column(s) {', '.join(missing)} (required: "
            f"{', '.join(required)})",
            key=missing[0],
        )
    known = set(required) | set(optional)
    extra = [c for c in frame.columns if c not in known]
    if extra:
        raise EvalError(
            f"{what} file has unknown column(s) {', '.join(map(str, extra))}", key=str(extra[0])
        )
    out: list[R] = []
    for i, raw in enumerate(frame.to_dict(orient="records"), start=2):
        values: dict[str, Any] = {}
        for column, value in raw.items():
            column = str(column)
            if _missing(value):
                if column in required:
                    raise EvalError(f"row {i}, column {column!r}: value is missing", key=column)
                continue
            values[column] = _cell(value, column, i)
        try:
            out.append(build(values))
        except EvalError as exc:
            raise EvalError(f"row {i}: {exc}", key=exc.key) from None
    return out


def in_file(
    path: str | Path, read: Callable[[pd.DataFrame], list[R]], frame: pd.DataFrame
) -> list[R]:
    """`read(frame)` with the file's name put in front of any refusal."""
    try:
        return read(frame)
    except EvalError as exc:
        raise EvalError(f"{path}: {exc}", key=exc.key) from None


def _not_an_artifact(item: Any) -> Artifact:
    raise EvalError(
        f"artifacts: each artifact is an object with path and sha256, got {item!r:.40}",
        key="artifacts",
    )


#: A protocol hash: the SHA-256 of the canonical protocol, in lowercase hex.
_HASH_RE = re.compile(r"[0-9a-f]{64}")


def _episode_from_flat(values: dict[str, Any]) -> Episode:
    if "artifacts" in values:
        values["artifacts"] = tuple(
            Artifact.from_dict(a) if isinstance(a, dict) else _not_an_artifact(a)
            for a in values["artifacts"]
        )
    protocol_hash = values.get("protocol_hash", "")
    if protocol_hash and not _HASH_RE.fullmatch(str(protocol_hash)):
        raise EvalError(
            f"column 'protocol_hash': {str(protocol_hash)!r:.70} is not a protocol hash (64 "
            "lowercase hex digits, as `embodied-eval protocol check` prints); leave it empty "
            "when the protocol is not known",
            key="protocol_hash",
        )
    stated = values.pop("success", None)
    episode = Episode(**values)
    if stated is not None and stated != episode.success:
        raise EvalError(
            f"column 'success' says {stated} but z = 1{{q ≥ q*}} with status "
            f"{episode.status!r} gives {episode.success} (success is derived; drop the column)",
            key="success",
        )
    return episode


def episodes_from_frame(frame: pd.DataFrame) -> list[Episode]:
    """Validate every row of a flat episodes table (row numbers as in a CSV file, header = 1)."""
    return _rows(
        frame,
        EPISODE_COLUMNS,
        (*EPISODE_OPTIONAL_COLUMNS, "success"),
        _episode_from_flat,
        "episodes",
    )


def faults_from_frame(frame: pd.DataFrame) -> list[Fault]:
    """Validate every row of a faults table (`episode_id, kind, recovered, repair_s`)."""

    def build(values: dict[str, Any]) -> Fault:
        return Fault(
            kind=values["kind"],
            recovered_autonomously=values["recovered"],
            repair_s=values["repair_s"],
            episode_id=values["episode_id"],
        )

    return _rows(frame, FAULT_COLUMNS, (), build, "faults")


def episodes_to_frame(episodes: Iterable[Episode]) -> pd.DataFrame:
    """Flat table of episodes: required columns, JSON text for dicts, plus qc and the rest."""
    rows = []
    for ep in episodes:
        row: dict[str, Any] = {c: getattr(ep, c) for c in EPISODE_COLUMNS}
        for c in EPISODE_JSON_COLUMNS:
            value = getattr(ep, c)
            if c == "artifacts":
                value = [a.to_dict() for a in value]
            else:
                value = dict(value)
            row[c] = json.dumps(value, sort_keys=True)
        row["qc"] = ep.qc
        row["actions"] = ep.actions
        row["plan_depth"] = ep.plan_depth
        row["status_reason"] = ep.status_reason
        row["audited_success"] = ep.audited_success
        row["window"] = ep.window
        row["protocol_hash"] = ep.protocol_hash
        row["success"] = ep.success
        rows.append(row)
    columns = [*EPISODE_COLUMNS, *EPISODE_OPTIONAL_COLUMNS, "success"]
    return pd.DataFrame(rows, columns=columns)


def faults_to_frame(faults: Iterable[Fault]) -> pd.DataFrame:
    rows = [
        {
            "episode_id": f.episode_id,
            "kind": f.kind,
            "recovered": f.recovered_autonomously,
            "repair_s": f.repair_s,
        }
        for f in faults
    ]
    return pd.DataFrame(rows, columns=list(FAULT_COLUMNS))
