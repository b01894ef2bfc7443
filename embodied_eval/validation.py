"""Typed key declarations and the table reader every user-written table goes through.

A section of a user file (a protocol table, a robot profile, an evidence object) is declared once
as a mapping of key name → `Key` (type, default, range, allowed values, extra check). `read_section`
checks a table against its declaration and returns the validated values; `TableReader` is the
lower-level reader for tables whose keys are not known in advance (families, drifts, knobs).

Rules every reader applies, so no section can forget one:

- unknown keys are errors (naming the key and the known ones);
- numbers are finite (NaN and ±inf are refused), booleans are not numbers, integers stay exact
  (a float is never accepted for an integer key);
- text is non-empty when declared so and never holds control characters such as NUL;
- every error is one `EvalError` line naming the full key and what would be valid.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError

#: Largest integer SQLite (and most tools) store exactly: seeds and counts stay below it.
MAX_INT64 = 2**63 - 1


class _Required:
    """The default of a key that must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


MISSING: Any = _Required()

#: Control characters no identifier or text field may hold (tab and newlines are fine).
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Key:
    """The declaration of one key: its type, default and the values it may take.

    Attributes:
        kind: accepted Python type(s) after TOML/JSON parsing (`float` also accepts an integer).
        default: value when the key is absent; `MISSING` makes the key required.
        low / high: inclusive numeric bounds (for a list of numbers: bounds of each element).
        choices: the allowed values (an enum).
        nonempty: text (or a list) must not be empty.
        check: extra rule returning a problem text, or None when the value is fine.
        doc: what the key means (used in messages).
    """

    kind: type | tuple[type, ...]
    default: Any = MISSING
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    nonempty: bool = False
    check: Callable[[Any], str | None] | None = None
    doc: str = ""


def _type_names(kinds: tuple[type, ...]) -> str:
    names = {
        str: "text",
        int: "an integer",
        float: "a number",
        bool: "true/false",
        list: "a list",
        dict: "a table",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def text_problem(value: str) -> str | None:
    """Why `value` is not acceptable text (control characters such as NUL), or None."""
    found = _CONTROL_CHARS.search(value)
    if found:
        return f"holds the control character {found.group()!r}; remove it"
    return None


def check_value(full: str, value: Any, spec: Key) -> Any:
    """Validate one value against its declaration; returns it (ints as float for float keys).

    Raises:
        EvalError: naming `full` and what would be valid.
    """
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        ok = True
        if int not in kinds:
            if abs(value) > 2**53:
                raise EvalError(f"{full}: {value} is too large to be a number here", key=full)
            value = float(value)
    if not ok:
        raise EvalError(
            f"{full}: expected {_type_names(kinds)}, got {type(value).__name__} {value!r:.60}",
            key=full,
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise EvalError(f"{full}: {value!r} is not a finite number", key=full)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT64:
        raise EvalError(f"{full}: {value} does not fit in 64 bits (max {MAX_INT64})", key=full)
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise EvalError(f"{full}: {problem}", key=full)
        if spec.nonempty and not value.strip():
            raise EvalError(f"{full}: must not be empty", key=full)
    if isinstance(value, list) and spec.nonempty and not value:
        raise EvalError(f"{full}: must not be an empty list", key=full)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if spec.low is not None and value < spec.low:
            raise EvalError(f"{full}: {value!r} is below the minimum {spec.low}", key=full)
        if spec.high is not None and value > spec.high:
            raise EvalError(f"{full}: {value!r} is above the maximum {spec.high}", key=full)
    if spec.choices is not None and value not in spec.choices:
        raise EvalError(
            f"{full}: {value!r:.60} is not one of {', '.join(map(str, spec.choices))}", key=full
        )
    if spec.check is not None:
        problem = spec.check(value)
        if problem:
            raise EvalError(f"{full}: {problem}", key=full)
    return value


class TableReader:
    """Reads one table, checking types and ranges and remembering which keys were used."""

    def __init__(self, table: Any, path: str) -> None:
        if not isinstance(table, Mapping):
            raise EvalError(
                f"{path or 'file'}: expected a table, got {type(table).__name__}", key=path
            )
        self.table = dict(table)
        self.path = path
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(
        self,
        name: str,
        kind: type | tuple[type, ...],
        default: Any = MISSING,
        *,
        low: float | None = None,
        high: float | None = None,
        check: Callable[[Any], str | None] | None = None,
        choices: tuple[Any, ...] | None = None,
        nonempty: bool = False,
    ) -> Any:
        """The value of `name` checked against an inline declaration (see `Key`)."""
        return self.read(name, Key(kind, default, low, high, choices, nonempty, check))

    def read(self, name: str, spec: Key) -> Any:
        """The value of `name` checked against `spec`; the default when absent."""
        self.used.add(name)
        full = self.key(name)
        if name not in self.table:
            if spec.default is MISSING:
                raise EvalError(f"{full}: required key is missing", key=full)
            return spec.default
        return check_value(full, self.table[name], spec)

    def section(self, spec: Mapping[str, Key]) -> dict[str, Any]:
        """Every declared key of this table, validated, defaults filled; then `done()`."""
        out = {name: self.read(name, key) for name, key in spec.items()}
        self.done()
        return out

    def sub(self, name: str, *, required: bool = False) -> TableReader:
        self.used.add(name)
        if name not in self.table:
            if required:
                raise EvalError(f"{self.key(name)}: required table is missing", key=self.key(name))
            return TableReader({}, self.key(name))
        return TableReader(self.table[name], self.key(name))

    def done(self) -> None:
        unknown = sorted(set(self.table) - self.used, key=str)
        if unknown:
            full = self.key(str(unknown[0]))
            raise EvalError(
                f"{full}: unknown key (check the spelling; known keys: "
                f"{', '.join(sorted(self.used)) or 'none'})",
                key=full,
            )


def read_section(table: Any, path: str, spec: Mapping[str, Key]) -> dict[str, Any]:
    """Validate `table` (at key path `path`) against its declaration `spec`."""
    return TableReader(table, path).section(spec)


def range_pair(value: Any, *, low: float | None = None) -> str | None:
    """Why `value` is not a [low, high] pair of finite numbers (each ≥ `low`), or None."""
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return "expected a [low, high] pair of numbers"
    if not all(math.isfinite(v) for v in value):
        return f"{value!r} holds a number that is not finite"
    if value[0] > value[1]:
        return f"low {value[0]} is greater than high {value[1]}"
    if low is not None and value[0] < low:
        return f"low {value[0]} is below the minimum {low}"
    return None


def as_date(value: Any, key: str) -> dt.date:
    """A date from TOML (date/datetime) or text like 2026-11-01; EvalError naming `key`."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise EvalError(f"{key}: expected a date like 2026-11-01, got {value!r:.60}", key=key)


def first_nonfinite(value: Any, path: str, *, max_depth: int = 64) -> str | None:
    """The key path of the first NaN/±inf (or nesting deeper than `max_depth`) in a parsed
    document, or None. Iterative, so a deep document cannot exhaust the stack."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > max_depth:
            return f"{where or 'file'}: nested deeper than {max_depth} levels"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{where or 'file'}: {item!r} is not a finite number"
        if isinstance(item, Mapping):
            for k, v in reversed(list(item.items())):
                stack.append((v, f"{where}.{k}" if where else str(k), depth + 1))
        elif isinstance(item, (list, tuple)):
            for i in reversed(range(len(item))):
                stack.append((item[i], f"{where}[{i}]", depth + 1))
    return None
