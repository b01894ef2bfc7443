"""The maintenance audit computed from the harness's own episodes (seed §3.4, §7 AAI-2).

The protocol's `[maintenance]` table names the drift-calendar days (one `[drift.<name>]` setting
each, day 0 the baseline), the index, α and Y. The runner runs every day's episodes like any
others (paired sim/real, the day's drift applied on both sides). Here each stored episode is put
on its day (by the drift name it records, else the one in its pair id), and per day:

* `E`: Ê and E from that day's episodes exactly as the window's E (AR, SS from the day's
  incidents over the day's real episode hours, S2R on the day's pairs, joint bootstrap); the
  checkpoint's bound is E's one-sided lower bound at the protocol's confidence.
* `AR`: real strict success of the evaluated policy; bound one-sided exact Clopper–Pearson.
* `AR_sim`: sim success of the protocol's sim policy on its first engine; same bound.

The day-0 point is the baseline C₀; the closure is `scoring.closures.maintenance_closure` on the
checkpoints after day 0 (bound ≥ α·C₀ at every checkpoint, the span reaching Y, zero human
patches, the drift kinds covered), with the declared calendar's last day as the planned span.
A day-0 index of 0 makes the index check inconclusive with the reason ("index ≥ α·0" would pass
on nothing); without a day-0 index there is no audit yet (evidence missing, with a note).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.embodiment.composite import embodiment_estimates
from embodied_eval.embodiment.reliability import actuation_reliability
from embodied_eval.embodiment.safety_report import summarize_safety
from embodied_eval.embodiment.selection import choose_policy, select_episodes
from embodied_eval.embodiment.transfer import transfer_overall
from embodied_eval.manifest import drift_name_of_pair
from embodied_eval.protocol.closure_audits import MaintenancePlan
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, Incident, first_attempts
from embodied_eval.scoring.closures import MaintenanceAudit, maintenance_closure
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict
from embodied_eval.stats import Estimate, clopper_pearson_interval
from embodied_eval.store.patches import HumanPatch

#: The §7 drift kinds of the robotics maintenance closure.
ROBOTICS_DRIFTS = ("payload", "friction", "lighting", "firmware")


@dataclass(frozen=True)
class DayIndex:
    """The index on one calendar day: point, two-sided interval and the gate's one-sided bound."""

    day: int
    drift: str
    kinds: tuple[str, ...]
    estimate: Estimate
    bound: Estimate
    episodes: int
    patches: int

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "drift": self.drift,
            "kinds": list(self.kinds),
            "index": self.estimate.to_json(),
            "bound": self.bound.to_json(),
            "episodes": self.episodes,
            "patches": self.patches,
        }


@dataclass(frozen=True)
class MaintenanceResult:
    """A maintenance audit computed from the store, with the closure it gives."""

    plan: MaintenancePlan
    policy: str | None
    days: tuple[DayIndex, ...]
    patches: tuple[HumanPatch, ...]
    audit: MaintenanceAudit | None
    closure: GateResult
    notes: list[str] = field(default_factory=list)

    @property
    def threshold(self) -> float | None:
        base = self.audit.baseline.value if self.audit is not None else None
        return None if base is None else self.plan.alpha * base

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.plan.index,
            "alpha": self.plan.alpha,
            "Y_days": self.plan.days,
            "planned_span_days": self.plan.planned_span,
            "patches_allowed": self.plan.patches_allowed,
            "calendar": [
                {"drift": c.drift, "day": c.day, "kinds": list(c.kinds)} for c in self.plan.calendar
            ],
            "policy": self.policy,
            "baseline": None if self.audit is None else self.audit.baseline.to_json(),
            "threshold": self.threshold,
            "days": [d.to_json() for d in self.days],
            "human_patches": [p.to_dict() for p in self.patches],
            "drift_kinds": [] if self.audit is None else list(self.audit.drifts),
            "closure": self.closure.to_json(),
            "notes": list(self.notes),
        }


def episode_day(episode: Episode, plan: MaintenancePlan) -> int | None:
    """The calendar day of an episode: from the drift name it records, else its pair id."""
    name = episode.drift.get("name")
    if not isinstance(name, str) or plan.day_of(name) is None:
        name = drift_name_of_pair(episode.pair_id)
    return None if name is None else plan.day_of(name)


def _success_index(
    episodes: Sequence[Episode], level: float, what: str
) -> tuple[Estimate, Estimate]:
    first = first_attempts([e for e in episodes if e.scored])
    k, n = sum(e.success for e in first), len(first)
    bound = clopper_pearson_interval(k, n, level, sided="lower")
    return clopper_pearson_interval(k, n, level), dataclasses.replace(bound, method=what)


def _e_index(
    episodes: Sequence[Episode],
    incidents: Sequence[Incident],
    protocol: Protocol,
    policy: str,
    rng: np.random.Generator,
) -> tuple[Estimate, Estimate, int]:
    level, r = protocol.confidence, protocol.bootstrap_resamples
    sets = select_episodes(episodes, protocol, policy)
    ids = {e.episode_id for e in sets.window_real}
    mine = [i for i in incidents if i.episode_id in ids]
    g_ar, g_e = rng.spawn(2)
    ar = actuation_reliability(sets, g_ar, r, level)
    safety = summarize_safety(sets, mine, None, protocol)
    transfer = transfer_overall(sets, level)
    emb = embodiment_estimates(
        sets,
        ar,
        safety,
        transfer,
        weights=protocol.severity_weights,
        anchors=(protocol.e_anchor_low, protocol.e_anchor_high),
        rng=g_e,
        resamples=r,
        level=level,
    )
    return emb.score, emb.bound, len(sets.real)


def _ordered(e: Estimate) -> Estimate:
    """`e` with low ≤ value ≤ high (a percentile interval of a degenerate bootstrap can sit on
    one side of its point; the bound then falls back to the point, the conservative side)."""
    assert e.value is not None
    low = None if e.low is None else min(e.low, e.value)
    high = None if e.high is None else max(e.high, e.value)
    return dataclasses.replace(e, low=low, high=high)


def _checkpoint(d: DayIndex, level: float) -> Estimate:
    """A checkpoint's index for the closure: the point with its one-sided lower bound."""
    est = Estimate(d.estimate.value, d.bound.low, None, level, d.bound.method, d.episodes, "lower")
    return _ordered(est)


def maintenance_audit(
    episodes: Sequence[Episode],
    incidents: Sequence[Incident],
    patches: Sequence[HumanPatch],
    protocol: Protocol,
    *,
    rng: np.random.Generator,
    policy: str | None = None,
    required_drifts: Sequence[str] = ROBOTICS_DRIFTS,
) -> MaintenanceResult | None:
    """The protocol's maintenance audit computed from the window's episodes (module docstring).

    Args:
        episodes: the window's episodes (both sides, every policy and attempt).
        incidents: the window's incidents (a day's E counts those of its own episodes).
        patches: the window's human patches (any one fails the closure).
        protocol: declares `[maintenance]`; None is returned when it does not.
        rng: generator for the per-day bootstraps (one child per calendar day).
        policy: the evaluated policy for E and AR (default: as the embodiment report chooses).
        required_drifts: drift kinds the calendar must cover (§7: payload, friction, lighting,
            firmware).

    Returns:
        MaintenanceResult, or None when the protocol declares no maintenance audit.
    """
    plan = protocol.maintenance
    if plan is None:
        return None
    level = protocol.confidence
    notes: list[str] = []
    if plan.index == "AR_sim":
        chosen: str | None = protocol.sim_policy
        engine = protocol.engines[0]
        pool = [
            e
            for e in episodes
            if e.side == "sim" and e.engine == engine and e.policy == protocol.sim_policy
        ]
    else:
        chosen = policy or choose_policy(episodes, protocol)
        pool = list(episodes)
    by_day: dict[int, list[Episode]] = {c.day: [] for c in plan.calendar}
    for e in pool:
        day = episode_day(e, plan)
        if day is not None:
            by_day[day].append(e)
    patch_day: dict[int, int] = {}
    episode_days = {e.episode_id: episode_day(e, plan) for e in episodes}
    for p in patches:
        day = episode_days.get(p.episode_id or "") if p.episode_id else plan.day_of(p.drift or "")
        if day is not None:
            patch_day[day] = patch_day.get(day, 0) + 1
    rngs = rng.spawn(len(plan.calendar))
    days: list[DayIndex] = []
    for cal, g in zip(plan.calendar, rngs, strict=True):
        eps = by_day[cal.day]
        if chosen is None:
            continue
        if plan.index == "E":
            if not any(e.side == "real" and e.policy == chosen for e in eps):
                continue
            est, bound, n = _e_index(eps, incidents, protocol, chosen, g)
        else:
            side = "sim" if plan.index == "AR_sim" else "real"
            mine = [e for e in eps if e.side == side and e.policy == chosen]
            if not mine:
                continue
            label = f"{plan.index} one-sided Clopper-Pearson"
            est, bound = _success_index(mine, level, label)
            n = est.n
        if est.value is None:
            continue
        days.append(
            DayIndex(cal.day, cal.drift, cal.kinds, est, bound, n, patch_day.get(cal.day, 0))
        )
    missing = [c.day for c in plan.calendar if c.day not in {d.day for d in days}]
    if missing:
        notes.append(
            "no index yet for day(s) " + ", ".join(str(d) for d in missing) + " (no episodes)"
        )
    kinds = tuple(sorted({k for c in plan.calendar for k in c.kinds}))
    baseline = next((d for d in days if d.day == 0), None)
    checkpoints = [d for d in days if d.day > 0]
    audit = None
    if baseline is not None and checkpoints:
        audit = MaintenanceAudit(
            baseline=_ordered(baseline.estimate),
            days=[float(d.day) for d in checkpoints],
            indices=[_checkpoint(d, level) for d in checkpoints],
            human_patches=len(patches),
            drifts=kinds,
            planned_span=float(plan.planned_span),
        )
    closure = maintenance_closure(
        audit, alpha=plan.alpha, days=float(plan.days), required_drifts=required_drifts
    )
    if plan.patches_allowed:
        check = GateCheck(
            "protocol forbids human patches",
            Verdict.FAIL,
            detail="[maintenance] patches_allowed = true: this audit cannot give the closure",
        )
        closure = GateResult(closure.name, (*closure.checks, check))
    return MaintenanceResult(plan, chosen, tuple(days), tuple(patches), audit, closure, notes)
