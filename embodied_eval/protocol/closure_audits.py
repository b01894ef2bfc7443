"""The closure audits a protocol declares (seed §3.4, §7): `[maintenance]` and `[expansion]`.

`[maintenance]` — the maintenance audit over the drift calendar:

- `days` Y, the span the index must hold (default 14, the robotics annex's Y),
- `alpha` α, the fraction of the day-0 baseline to keep (default 0.8, §3.5),
- `index` what is held: "E" (default; paired sim/real episodes), "AR" (real strict success) or
  "AR_sim" (sim success, for a sim-only rehearsal of the audit),
- `calendar` the drift settings (`[drift.<name>]`, each with its `day`) that are checkpoint days;
  default every drift used by `[sampling]`; one of them must be day 0 (the baseline),
- `patches_allowed` whether technicians may patch the robot during the audit (default false;
  an audit that allows patches can never give the closure).

`[expansion]` — the expansion audit of one new capability:

- `name`, `kind` (end_effector, tool or perception),
- `families` the task families that require it; `control_families` the frozen control (default:
  the battery's other families),
- `pre`, `post`, `ablated` the policy ("module:factory") of each condition, run on the same
  manifest (`embodied-eval run --condition pre|post|ablated`),
- `epsilon` ε of the ablation check (default 0.05), `side` the side whose success is compared
  ("real" default, or "sim"), `engine` the sim engine when side = "sim" (default the first).

Parsing takes the protocol loader's table reader, so every bad key raises one `EvalError` naming
it, like the rest of the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError

#: Indices a maintenance audit may hold.
MAINTENANCE_INDICES = ("E", "AR", "AR_sim")
#: Kinds of new capability the robotics annex counts for the expansion closure (§7).
EXPANSION_KINDS = ("end_effector", "tool", "perception")
#: Drift kind of a drift parameter, by the start of its name (payload, friction, lighting,
#: firmware: the §7 maintenance drifts). A parameter matching none is its own kind.
DRIFT_KIND_PREFIXES = (
    ("payload", "payload"),
    ("friction", "friction"),
    ("lighting", "lighting"),
    ("light", "lighting"),
    ("camera", "lighting"),
    ("firmware", "firmware"),
    ("controller", "firmware"),
    ("latency", "firmware"),
    ("control_rate", "firmware"),
)


def drift_kind(parameter: str) -> str:
    """The drift kind (payload, friction, lighting, firmware) a drift parameter changes."""
    for prefix, kind in DRIFT_KIND_PREFIXES:
        if parameter.startswith(prefix):
            return kind
    return parameter


def drift_kinds(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The sorted drift kinds a drift setting's parameters change."""
    return tuple(sorted({drift_kind(k) for k in params}))


@dataclass(frozen=True)
class CalendarDay:
    """One checkpoint of the drift calendar: the drift setting, its day and the kinds it drifts."""

    drift: str
    day: int
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class MaintenancePlan:
    """A declared maintenance audit (see the module docstring)."""

    days: int
    alpha: float
    index: str
    calendar: tuple[CalendarDay, ...]
    patches_allowed: bool = False

    @property
    def planned_span(self) -> int:
        return max(d.day for d in self.calendar)

    def day_of(self, drift_name: str) -> int | None:
        for d in self.calendar:
            if d.drift == drift_name:
                return d.day
        return None

    def canonical(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "alpha": self.alpha,
            "index": self.index,
            "calendar": [d.drift for d in self.calendar],
            "patches_allowed": self.patches_allowed,
        }


@dataclass(frozen=True)
class ExpansionPlan:
    """A declared expansion audit (see the module docstring)."""

    name: str
    kind: str
    families: tuple[str, ...]
    control_families: tuple[str, ...]
    pre: str
    post: str
    ablated: str
    epsilon: float = 0.05
    side: str = "real"
    engine: str = ""

    def policy(self, condition: str) -> str:
        """The policy of condition pre, post or ablated."""
        if condition not in ("pre", "post", "ablated"):
            raise EvalError(
                f"condition: {condition!r} is not pre, post or ablated", key="condition"
            )
        return str(getattr(self, condition))

    def canonical(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "families": list(self.families),
            "control_families": list(self.control_families),
            "pre": self.pre,
            "post": self.post,
            "ablated": self.ablated,
            "epsilon": self.epsilon,
            "side": self.side,
            "engine": self.engine,
        }


def _names(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        return "expected a list of names"
    if len(set(value)) != len(value):
        return "names a setting twice"
    return None


def read_maintenance(reader: Any, drifts: Sequence[Any]) -> MaintenancePlan | None:
    """The `[maintenance]` table (None when absent), checked against the sampled drifts.

    Args:
        reader: the protocol loader's reader of the `maintenance` table.
        drifts: the drift settings used by `[sampling]` (name, day, params).
    """
    if not reader.table:
        return None
    days = reader.get("days", int, 14, low=1, high=3650)
    alpha = reader.get("alpha", float, 0.8, low=0.0, high=1.0)
    if alpha <= 0.0:
        raise EvalError("maintenance.alpha: must be greater than 0", key="maintenance.alpha")
    index = reader.get(
        "index",
        str,
        "E",
        check=lambda v: (
            None
            if v in MAINTENANCE_INDICES
            else f"expected one of {', '.join(MAINTENANCE_INDICES)}"
        ),
    )
    by_name = {d.name: d for d in drifts}
    names = reader.get("calendar", list, [d.name for d in drifts], check=_names)
    patches_allowed = reader.get("patches_allowed", bool, False)
    reader.done()
    calendar = []
    for name in names:
        if name not in by_name:
            raise EvalError(
                f"maintenance.calendar: {name!r} is not a drift setting used by [sampling] drifts "
                f"(used: {', '.join(sorted(by_name))})",
                key="maintenance.calendar",
            )
        d = by_name[name]
        calendar.append(CalendarDay(d.name, d.day, drift_kinds(d.params)))
    calendar.sort(key=lambda c: c.day)
    seen = [c.day for c in calendar]
    if len(set(seen)) != len(seen):
        raise EvalError(
            "maintenance.calendar: two drift settings fall on the same day; keep one per day",
            key="maintenance.calendar",
        )
    if not calendar or calendar[0].day != 0:
        raise EvalError(
            "maintenance.calendar: needs a day-0 drift setting (the baseline)",
            key="maintenance.calendar",
        )
    if len(calendar) < 2:
        raise EvalError(
            "maintenance.calendar: needs at least one checkpoint day after day 0",
            key="maintenance.calendar",
        )
    return MaintenancePlan(days, alpha, index, tuple(calendar), patches_allowed)


def read_expansion(
    reader: Any, families: Sequence[str], engines: Sequence[str]
) -> ExpansionPlan | None:
    """The `[expansion]` table (None when absent), checked against the battery and engines."""
    if not reader.table:
        return None
    name = reader.get("name", str, check=lambda v: None if v.strip() else "must not be empty")
    kind = reader.get(
        "kind",
        str,
        check=lambda v: (
            None if v in EXPANSION_KINDS else f"expected one of {', '.join(EXPANSION_KINDS)}"
        ),
    )
    required = reader.get("families", list, check=_names)
    others = [f for f in families if f not in required]
    control = reader.get("control_families", list, others, check=_names)
    policies = {c: reader.get(c, str) for c in ("pre", "post", "ablated")}
    epsilon = reader.get("epsilon", float, 0.05, low=0.0, high=1.0)
    side = reader.get(
        "side",
        str,
        "real",
        check=lambda v: None if v in ("real", "sim") else "expected real or sim",
    )
    engine = reader.get("engine", str, engines[0] if engines else "")
    reader.done()
    for key, names in (("families", required), ("control_families", control)):
        for fam in names:
            if fam not in families:
                raise EvalError(
                    f"expansion.{key}: {fam!r} is not a battery family (have: "
                    f"{', '.join(sorted(families))})",
                    key=f"expansion.{key}",
                )
    if not required:
        raise EvalError("expansion.families: name at least one family", key="expansion.families")
    if set(required) & set(control):
        raise EvalError(
            "expansion.control_families: a family cannot both require the capability and be its "
            "control",
            key="expansion.control_families",
        )
    if len(set(policies.values())) != 3:
        raise EvalError(
            "expansion.ablated: pre, post and ablated must be three different policies (each "
            "condition is its own run)",
            key="expansion.ablated",
        )
    if epsilon <= 0.0:
        raise EvalError("expansion.epsilon: must be greater than 0", key="expansion.epsilon")
    if side == "sim" and engine not in engines:
        raise EvalError(
            f"expansion.engine: {engine!r} is not one of the protocol's sim engines",
            key="expansion.engine",
        )
    return ExpansionPlan(
        name,
        kind,
        tuple(required),
        tuple(control),
        policies["pre"],
        policies["post"],
        policies["ablated"],
        epsilon,
        side,
        engine if side == "sim" else "",
    )
