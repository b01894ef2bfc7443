"""Typed Parquet files of episodes: what `export episodes --out FILE.parquet` writes and
`import episodes FILE.parquet` reads back.

Column types (Arrow / Parquet):

- text fields (`episode_id`, `side`, `status`, `window`, …) are `string`; counts (`seed`,
  `interventions`, `attempt`, `actions`, `plan_depth`) `int64`; measured values (`quality`,
  `target_quality`, `duration_s`, `energy_wh`, `qc`) `double`;
- `started_at` is `timestamp[us, tz=UTC]`; `success` (z = 1{q ≥ q*} with status ok) and
  `audited_success` (null when nobody audited) are `bool`;
- `drift`, `randomization` and `control` are structs with one typed field per key found in any
  row (nested dicts become nested structs, lists become lists); a key a row does not have is
  null there. `cost` is `map<string, double>`; `artifacts` is `list<struct<path, sha256, kind,
  size_bytes>>`. pandas reads the structs as dicts, as `ee.open_store(...).episodes()` gives them.

So that a re-import rebuilds each record exactly, the file's schema metadata
(`embodied-eval.episodes`) lists the few places where a record held an explicit null (otherwise
a null struct field means "this row has no such key"), any key whose values have different
types in different rows (rare; then that one struct field holds each value as JSON text), and
the original text of a start time written with an offset (e.g. `+01:00`) rather than `Z`.
A dict column that is empty in every row is left out (it reads back as empty).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from embodied_eval.canonical import atomic_write_bytes
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode

#: Schema metadata key holding the explicit nulls and the mixed-type keys.
METADATA_KEY = b"embodied-eval.episodes"
#: Dict fields written as structs (free-form keys and values).
STRUCT_COLUMNS = ("drift", "randomization", "control")

_STRING = (
    "episode_id", "pair_id", "side", "family", "task_id", "policy", "engine", "status",
    "status_reason", "window", "protocol_hash",
)  # fmt: skip
_INT = ("seed", "interventions", "attempt", "actions", "plan_depth")
_FLOAT = ("quality", "target_quality", "duration_s", "energy_wh", "qc")
#: Column order of the file (the CSV's, then `success`).
COLUMNS = (
    "episode_id", "pair_id", "side", "family", "task_id", "seed", "policy", "engine", "quality",
    "target_quality", "status", "duration_s", "interventions", "energy_wh", "attempt",
    "started_at", "drift", "randomization", "control", "cost", "artifacts", "qc", "actions",
    "plan_depth", "status_reason", "audited_success", "window", "protocol_hash", "success",
)  # fmt: skip
TIMESTAMP = pa.timestamp("us", tz="UTC")
ARTIFACT = pa.struct(
    [("path", pa.string()), ("sha256", pa.string()), ("kind", pa.string()),
     ("size_bytes", pa.int64())]
)  # fmt: skip

KeyPath = list[str | int]


def _null_paths(value: Any, path: KeyPath, out: list[KeyPath]) -> None:
    """Collect the paths (keys and list indices) at which `value` holds an explicit None."""
    if value is None:
        out.append(list(path))
    elif isinstance(value, dict):
        for key, item in value.items():
            _null_paths(item, [*path, str(key)], out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _null_paths(item, [*path, i], out)


def _has_empty_struct(kind: pa.DataType) -> bool:
    if pa.types.is_struct(kind):
        return kind.num_fields == 0 or any(_has_empty_struct(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_empty_struct(kind.value_type)
    return False


def _struct_column(rows: Sequence[dict[str, Any]]) -> tuple[pa.Array | None, list[str]]:
    """A struct array for a dict field (one child per key), and the keys written as JSON text
    because their values differ in type between rows. None when no row has a key."""
    keys = sorted({str(k) for row in rows for k in row})
    if not keys:
        return None, []
    children: list[pa.Array] = []
    mixed: list[str] = []
    for key in keys:
        values = [row.get(key) for row in rows]
        try:
            child = pa.array(values)
            if _has_empty_struct(child.type):
                raise pa.ArrowInvalid("empty struct")
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            child = pa.array(
                [None if v is None else json.dumps(v, sort_keys=True) for v in values],
                type=pa.string(),
            )
            mixed.append(key)
        children.append(child)
    return pa.StructArray.from_arrays(children, names=keys), mixed


def _utc(moment: Any) -> pd.Timestamp:
    """A time (ISO text or datetime) as a UTC timestamp (a time without an offset is UTC)."""
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize(UTC) if stamp.tzinfo is None else stamp.tz_convert(UTC)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def episodes_table(episodes: Iterable[Episode]) -> pa.Table:
    """The typed Arrow table of episodes written by `write_episodes_parquet`."""
    eps = list(episodes)
    arrays: dict[str, pa.Array] = {}
    for c in _STRING:
        arrays[c] = pa.array([getattr(e, c) for e in eps], type=pa.string())
    for c in _INT:
        arrays[c] = pa.array([getattr(e, c) for e in eps], type=pa.int64())
    for c in _FLOAT:
        arrays[c] = pa.array([_number(getattr(e, c)) for e in eps], type=pa.float64())
    moments = [_utc(e.started_at) for e in eps]
    arrays["started_at"] = pa.array([m.to_pydatetime() for m in moments], type=TIMESTAMP)
    # A time stored with an offset or another spelling keeps its text for an exact re-import.
    spelled = {
        str(i): e.started_at
        for i, (e, m) in enumerate(zip(eps, moments, strict=True))
        if _iso(m) != e.started_at
    }
    arrays["success"] = pa.array([bool(e.success) for e in eps], type=pa.bool_())
    arrays["audited_success"] = pa.array([e.audited_success for e in eps], type=pa.bool_())
    nulls: dict[str, dict[str, list[KeyPath]]] = {}
    mixed: dict[str, list[str]] = {}
    for c in STRUCT_COLUMNS:
        rows = [dict(getattr(e, c)) for e in eps]
        column, mixed_keys = _struct_column(rows)
        if column is None:
            continue
        arrays[c] = column
        if mixed_keys:
            mixed[c] = mixed_keys
    for c in STRUCT_COLUMNS:
        for i, e in enumerate(eps):
            found: list[KeyPath] = []
            _null_paths(dict(getattr(e, c)), [], found)
            if found:
                nulls.setdefault(c, {})[str(i)] = found
    arrays["cost"] = pa.array(
        [sorted((k, float(v)) for k, v in e.cost.items()) for e in eps],
        type=pa.map_(pa.string(), pa.float64()),
    )
    arrays["artifacts"] = pa.array(
        [[a.to_dict() for a in e.artifacts] for e in eps], type=pa.list_(ARTIFACT)
    )
    names = [c for c in COLUMNS if c in arrays]
    table = pa.Table.from_arrays([arrays[c] for c in names], names=names)
    meta = {"format": 1, "explicit_nulls": nulls, "json_keys": mixed, "started_at_text": spelled}
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True)})


def write_episodes_parquet(episodes: Iterable[Episode], path: Any) -> tuple[int, str]:
    """Write episodes as a typed Parquet file atomically; returns (rows, sha256 of the file)."""
    table = episodes_table(episodes)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return table.num_rows, atomic_write_bytes(path, buffer.getvalue())


# --------------------------------------------------------------------------- reading back


def _drop_nulls(value: Any) -> Any:
    """A struct row as a dict: null fields dropped (the row has no such key), recursively."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _put_null(target: Any, path: KeyPath) -> None:
    for step in path[:-1]:
        target = target[step]
    last = path[-1]
    in_list = isinstance(target, list) and isinstance(last, int) and last < len(target)
    if isinstance(target, dict) or in_list:
        target[last] = None


def _iso(value: Any) -> Any:
    if value is None or value is pd.NaT:
        return None
    return _utc(value).isoformat().replace("+00:00", "Z")


def parquet_frame(data: bytes, where: str) -> pd.DataFrame:
    """A Parquet file's rows as a DataFrame of plain values for the interchange readers.

    Timestamps become ISO-8601 UTC text, structs dicts, lists lists and maps dicts. When the
    file carries `METADATA_KEY` (our own export), a null struct field means the row lacked the
    key, except where the metadata lists an explicit null, and JSON-text keys are decoded.
    """
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises many types for malformed files
        raise EvalError(
            f"{where!r} could not be read as parquet: {' '.join(str(exc).split())[:200]}",
            key="file",
        ) from None
    raw_meta = (table.schema.metadata or {}).get(METADATA_KEY)
    meta: dict[str, Any] = {}
    if raw_meta is not None:
        try:
            meta = json.loads(raw_meta)
        except ValueError:
            raise EvalError(f"{where!r}: unreadable {METADATA_KEY.decode()} metadata") from None
    nested = [
        f.name for f in table.schema if pa.types.is_nested(f.type) or pa.types.is_timestamp(f.type)
    ]
    frame = table.drop_columns(nested).to_pandas() if nested else table.to_pandas()
    for name in nested:
        kind = table.schema.field(name).type
        values = table.column(name).to_pylist()
        if pa.types.is_timestamp(kind):
            values = [_iso(v) for v in values]
            if name == "started_at":
                for row, text in meta.get("started_at_text", {}).items():
                    if int(row) < len(values):
                        values[int(row)] = text
        elif pa.types.is_map(kind):
            values = [None if v is None else dict(v) for v in values]
        elif meta:
            values = _restore(name, values, meta)
        frame[name] = pd.Series(values, dtype=object, index=frame.index)
    return frame[[f.name for f in table.schema]]


def _restore(name: str, values: list[Any], meta: dict[str, Any]) -> list[Any]:
    """Rows of one of our struct/list columns as the records held them."""
    json_keys = set(meta.get("json_keys", {}).get(name, []))
    nulls = meta.get("explicit_nulls", {}).get(name, {})
    out: list[Any] = []
    for i, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        row = _drop_nulls(value)
        if isinstance(row, dict):
            for key in json_keys & set(row):
                row[key] = json.loads(row[key])
        for path in nulls.get(str(i), []):
            _put_null(row, path)
        out.append(row)
    return out
