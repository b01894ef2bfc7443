"""The record base: JSON round trip, field checks and UTC helpers shared by every record.

`embodied_eval.records` builds the data contract (episodes, faults, incidents, …) on these.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from embodied_eval.errors import EvalError
from embodied_eval.validation import MAX_INT64, first_nonfinite, text_problem

#: Deepest nesting of a dict field of a record (drift, control, measurements, ...).
MAX_RECORD_DEPTH = 32

SEVERITIES = ("near_miss", "minor", "major", "critical")

T = TypeVar("T", bound="Record")


#: Times a record may carry: earlier or later ones are typing or clock mistakes.
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(2200, 1, 1, tzinfo=UTC)


def iso_utc(moment: datetime) -> str:
    """A timezone-aware time as ISO-8601 UTC with a `Z` suffix, seconds resolution (how records
    store times)."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def utc_now_iso() -> str:
    """Current UTC time as an ISO-8601 string with a `Z` suffix (seconds resolution)."""
    return iso_utc(datetime.now(UTC))


def parse_utc(value: str, *, key: str) -> datetime:
    """Parse an ISO-8601 timestamp; naive times are taken as UTC. Raises EvalError naming `key`."""
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise EvalError(
            f"{key}: {value!r} is not an ISO-8601 time (e.g. 2026-11-22T14:05:00Z)", key=key
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if not EARLIEST_TIME <= parsed < LATEST_TIME:
        raise EvalError(
            f"{key}: {value!r} is not a plausible time (between {EARLIEST_TIME.year} and "
            f"{LATEST_TIME.year})",
            key=key,
        )
    return parsed


def severity_rank(severity: str) -> int:
    """Order of severities: near_miss 0 < minor 1 < major 2 < critical 3."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise EvalError(
            f"severity: {severity!r} is not one of {', '.join(SEVERITIES)}", key="severity"
        ) from None


# --------------------------------------------------------------------------- field checks


def _check_str(name: str, value: Any, *, allow_empty: bool = False) -> None:
    if not isinstance(value, str):
        raise EvalError(f"{name}: expected text, got {type(value).__name__}", key=name)
    if not allow_empty and not value.strip():
        raise EvalError(f"{name}: must not be empty", key=name)
    problem = text_problem(value)
    if problem:
        raise EvalError(f"{name}: {problem}", key=name)


def _check_enum(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise EvalError(f"{name}: {value!r} is not one of {', '.join(allowed)}", key=name)


def _check_number(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    integer: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvalError(f"{name}: expected a number, got {value!r}", key=name)
    if (
        integer
        and not isinstance(value, int)
        and not (math.isfinite(value) and value.is_integer() and abs(value) <= 2**53)
    ):
        raise EvalError(f"{name}: expected a whole number, got {value!r}", key=name)
    if isinstance(value, int) and abs(value) > MAX_INT64:
        raise EvalError(f"{name}: {value} does not fit in 64 bits (max {MAX_INT64})", key=name)
    if isinstance(value, float) and not math.isfinite(value):
        raise EvalError(f"{name}: must be finite, got {value!r}", key=name)
    if low is not None and value < low:
        raise EvalError(f"{name}: {value!r} is below the minimum {low}", key=name)
    if high is not None and value > high:
        raise EvalError(f"{name}: {value!r} is above the maximum {high}", key=name)


def _check_mapping(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise EvalError(f"{name}: expected a JSON object, got {type(value).__name__}", key=name)
    problem = first_nonfinite(value, name, max_depth=MAX_RECORD_DEPTH)
    if problem:
        raise EvalError(problem, key=name)
    try:
        json.dumps(dict(value), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EvalError(
            f"{name}: values must be plain JSON (finite numbers): {exc}", key=name
        ) from None


def _check_sha256(name: str, value: Any) -> None:
    _check_str(name, value)
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise EvalError(f"{name}: expected a 64-character lowercase hex SHA-256", key=name)


# --------------------------------------------------------------------------- base


class Record:
    """JSON round trip shared by all records: `to_dict()` / `from_dict()` / `to_json()`."""

    #: Fields holding nested records, and their record class, for `from_dict`.
    _nested: ClassVar[dict[str, type[Record]]] = {}

    def to_dict(self) -> dict[str, Any]:
        names = _FIELD_NAMES.get(type(self))
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(self))  # type: ignore[arg-type]
            _FIELD_NAMES[type(self)] = names
        values, nested = self.__dict__, self._nested
        out: dict[str, Any] = {}
        for name in names:
            value = values[name]
            if name in nested:
                value = [item.to_dict() for item in value]
            elif type(value) is dict or (
                value is not None and type(value) not in _PLAIN_TYPES and isinstance(value, Mapping)
            ):
                value = dict(value)
            out[name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        if not isinstance(data, Mapping):
            raise EvalError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - names)
        if unknown:
            raise EvalError(
                f"{cls.__name__}: unknown field(s) {', '.join(unknown)}", key=unknown[0]
            )
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            nested = cls._nested.get(name)
            if nested is not None:
                if not isinstance(value, (list, tuple)):
                    raise EvalError(f"{name}: expected a list", key=name)
                value = tuple(nested.from_dict(item) for item in value)
            kwargs[name] = value
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise EvalError(f"{cls.__name__}: {exc}") from None

    @classmethod
    def from_json(cls: type[T], text: str) -> T:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalError(f"{cls.__name__}: not valid JSON ({exc})") from None
        return cls.from_dict(data)

    def replace(self: T, **changes: Any) -> T:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def _plain(self) -> None:
        """Accept what callers naturally pass: numpy scalars become Python numbers and bools
        (also inside dict fields), and a list given for a tuple field becomes a tuple. Called
        first in `__post_init__`, before validation."""
        spec = _PLAIN_SPECS.get(type(self))
        if spec is None:
            spec = tuple(
                (f.name, str(f.type).startswith("tuple"))
                for f in dataclasses.fields(self)  # type: ignore[arg-type]
            )
            _PLAIN_SPECS[type(self)] = spec
        values = self.__dict__
        for name, is_tuple in spec:
            value = values[name]
            kind = type(value)
            if value is None or kind in _PLAIN_TYPES:
                continue
            if kind is list and is_tuple:
                object.__setattr__(self, name, tuple(_plain_value(v) for v in value))
            elif isinstance(value, Mapping):
                if _holds_numpy(value):
                    object.__setattr__(self, name, _plain_value(value))
            elif kind.__module__ == "numpy":
                object.__setattr__(self, name, _plain_value(value))


#: Field names per record class for `Record.to_dict` (computed once per class).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
#: Field layout per record class for `Record._plain` (computed once per class).
_PLAIN_SPECS: dict[type, tuple[tuple[str, bool], ...]] = {}
_PLAIN_TYPES = (str, int, float, bool, tuple)


def _holds_numpy(value: Any) -> bool:
    """True when a (nested) dict/list holds a numpy scalar."""
    if isinstance(value, Mapping):
        return any(_holds_numpy(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_numpy(v) for v in value)
    return type(value).__module__ == "numpy"


def _plain_value(value: Any) -> Any:
    """A numpy scalar as the Python scalar it holds; dicts and lists converted element-wise."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    if isinstance(value, Mapping):
        return {k: _plain_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_value(v) for v in value]
    return value
