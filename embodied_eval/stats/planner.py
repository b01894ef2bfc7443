"""Demonstration-test planner: how many more trials or hours would settle a gate, and
fixed-duration MTBF demonstration plans (MIL-HDBK-781A style).

Remaining trials assume every further trial succeeds; remaining hours assume no further events.
Both are therefore the *least* work that could settle the gate; each further failure or event
raises them. The fixed-duration plans reproduce MIL-HDBK-781A test plans XI-D, XV-D and XVII-D;
no claim of IEC 61124 compliance is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_nonnegative, check_positive
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.proportions import clopper_pearson_interval, trials_to_demonstrate_rate
from embodied_eval.stats.rates import (
    hours_to_demonstrate_mtbf,
    hours_to_demonstrate_rate,
    mtbf_lower_bound,
    poisson_rate_upper,
)


@dataclass(frozen=True)
class HoursPlan:
    """Hours still needed to demonstrate an incident-rate or MTBF/MTBSI gate.

    Attributes:
        gate: the gate in words, e.g. "rate <= 1 per 100 h".
        observed: events so far. hours: exposure so far.
        total_hours: hours needed in all if no further event occurs.
        remaining_hours: max(0, total_hours − hours).
        bound: the current one-sided bound (upper for rates, lower for MTBF).
        demonstrated: the bound already clears the gate.
    """

    gate: str
    observed: int
    hours: float
    total_hours: float
    remaining_hours: float
    bound: Estimate
    demonstrated: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "observed": self.observed,
            "hours": self.hours,
            "total_hours": self.total_hours,
            "remaining_hours": self.remaining_hours,
            "bound": self.bound.to_json(),
            "demonstrated": self.demonstrated,
        }


@dataclass(frozen=True)
class TrialsPlan:
    """Trials still needed to demonstrate a success-rate gate (all further trials succeeding).

    Attributes:
        gate: e.g. "success rate >= 0.75". successes, trials: results so far.
        remaining_trials: fewest further straight successes; None if not reachable within the
            planner's cap.
        bound: the current one-sided Clopper–Pearson lower bound.
        demonstrated: the bound already clears the gate.
    """

    gate: str
    successes: int
    trials: int
    remaining_trials: int | None
    bound: Estimate
    demonstrated: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "successes": self.successes,
            "trials": self.trials,
            "remaining_trials": self.remaining_trials,
            "bound": self.bound.to_json(),
            "demonstrated": self.demonstrated,
        }


def _fmt(x: float) -> str:
    return f"{x:g}"


def plan_rate_gate(
    max_rate: float, observed: int, hours: float, level: float = 0.95, per: float = 100.0
) -> HoursPlan:
    """Remaining hours for "rate ≤ max_rate per `per` h" on the one-sided Garwood upper bound.

    E.g. ≤ 1 per 100 h, 0 events in 120 h: 299.57 − 120 = 179.57 h more.

    Args:
        max_rate: ceiling in events per `per` hours. observed: events so far.
        hours: exposure so far (h). level: one-sided level. per: rate unit in hours.

    Returns:
        HoursPlan (bound = current one-sided upper rate bound).
    """
    hours = check_nonnegative(hours, "hours")
    total = hours_to_demonstrate_rate(max_rate, observed, level, per)
    bound = poisson_rate_upper(observed, hours, level, per)
    remaining = max(0.0, total - hours)
    return HoursPlan(
        f"rate <= {_fmt(max_rate)} per {_fmt(per)} h",
        int(observed),
        hours,
        total,
        remaining,
        bound,
        bool(hours > 0 and remaining == 0.0),
    )


def plan_mtbf_gate(
    min_mtbf_h: float, observed: int, hours: float, level: float = 0.95, name: str = "MTBSI"
) -> HoursPlan:
    """Remaining hours for "MTBF (or MTBSI) ≥ min_mtbf_h" on the time-terminated lower bound.

    E.g. MTBSI ≥ 50 h with 1 incident in 100 h: 237.2 − 100 = 137.2 h more.

    Args:
        min_mtbf_h: the gate's minimum in hours. observed: failures/incidents so far.
        hours: exposure so far. level: one-sided level. name: "MTBSI" or "MTBF" (for `gate`).

    Returns:
        HoursPlan (bound = current one-sided lower MTBF bound).
    """
    hours = check_nonnegative(hours, "hours")
    total = hours_to_demonstrate_mtbf(min_mtbf_h, observed, level)
    bound = mtbf_lower_bound(observed, hours, level)
    remaining = max(0.0, total - hours)
    return HoursPlan(
        f"{name} >= {_fmt(min_mtbf_h)} h",
        int(observed),
        hours,
        total,
        remaining,
        bound,
        bool(hours > 0 and remaining == 0.0),
    )


def plan_success_gate(
    threshold: float, successes: int, trials: int, level: float = 0.95, max_extra: int = 100_000
) -> TrialsPlan:
    """Remaining straight successes for "success rate ≥ threshold" on the one-sided
    Clopper–Pearson lower bound (45/60 at 0.75 → 29 more: 74/89 has lower bound ≥ 0.75).

    Args:
        threshold: the gate's minimum rate. successes, trials: results so far.
        level: one-sided level. max_extra: search cap.

    Returns:
        TrialsPlan (bound = current one-sided CP lower bound).
    """
    remaining = trials_to_demonstrate_rate(threshold, successes, trials, level, max_extra)
    bound = clopper_pearson_interval(successes, trials, level, sided="lower")
    return TrialsPlan(
        f"success rate >= {_fmt(threshold)}",
        int(successes),
        int(trials),
        remaining,
        bound,
        remaining == 0,
    )


class FixedDurationPlan(NamedTuple):
    """A fixed-duration demonstration plan: run `duration` × θ1 hours, pass if failures ≤ c."""

    max_failures: int
    duration: float


def fixed_duration_plan(
    alpha: float, beta: float, discrimination_ratio: float, max_c: int = 10_000
) -> FixedDurationPlan:
    """Smallest accept number c with duration T = χ²(1−β; 2c+2)/2 (in units of θ1, the
    unacceptable MTBF) such that the producer's risk 1 − Poisson.cdf(c, T/d) ≤ α.

    At θ1 the expected failure count is T, so P(pass | θ1) = P(Poisson(T) ≤ c) = β exactly;
    at θ0 = d·θ1 it is T/d. Reproduces MIL-HDBK-781A XI-D (0.2, 0.2, 1.5): c=17, T≈21.44;
    XV-D (0.1, 0.1, 3): c=5, T≈9.27; XVII-D (0.2, 0.2, 3): c=2, T≈4.28. Not IEC 61124.

    Args:
        alpha: producer's risk (rejecting an MTBF of θ0). beta: consumer's risk (passing θ1).
        discrimination_ratio: d = θ0/θ1 > 1.
        max_c: search cap.

    Returns:
        FixedDurationPlan(max_failures=c, duration=T), unpackable as (c, T).
    """
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not 0.0 < float(v) < 1.0:
            raise EvalError(f"{name}: {v} must be between 0 and 1 (e.g. 0.1)", key=name)
    d = check_positive(discrimination_ratio, "discrimination_ratio")
    if d <= 1.0:
        raise EvalError(
            f"discrimination_ratio: {d} must be > 1 (θ0/θ1)", key="discrimination_ratio"
        )
    for c in range(check_count(max_c, "max_c") + 1):
        duration = float(stats.chi2.ppf(1.0 - beta, 2 * c + 2)) / 2.0
        if float(stats.poisson.sf(c, duration / d)) <= alpha:
            return FixedDurationPlan(c, duration)
    raise EvalError(f"max_c: no plan with c <= {max_c}; relax alpha/beta or raise d", key="max_c")


def fixed_plan_risks(
    max_failures: int, duration: float, discrimination_ratio: float
) -> tuple[float, float]:
    """Actual (producer's, consumer's) risks of a fixed-duration plan: (P(fail | θ0), P(pass | θ1)).

    Args:
        max_failures: c. duration: T in units of θ1. discrimination_ratio: d.

    Returns:
        (1 − Poisson.cdf(c, T/d), Poisson.cdf(c, T)).
    """
    c = check_count(max_failures, "max_failures")
    t = check_nonnegative(duration, "duration")
    d = check_positive(discrimination_ratio, "discrimination_ratio")
    return float(stats.poisson.sf(c, t / d)), float(stats.poisson.cdf(c, t))


def remaining_trials(
    threshold: float, successes: int, trials: int, level: float = 0.95
) -> int | None:
    """Fewest further straight successes to clear "success rate ≥ threshold" (one-sided CP);
    0 when already demonstrated, None when unreachable. For a gate check's `remaining`."""
    return plan_success_gate(threshold, successes, trials, level).remaining_trials


def remaining_hours_for_rate(
    max_rate: float, observed: int, hours: float, level: float = 0.95, per: float = 100.0
) -> float:
    """Further event-free hours to clear "rate ≤ max_rate per `per` h" (0 when demonstrated)."""
    return plan_rate_gate(max_rate, observed, hours, level, per).remaining_hours


def remaining_hours_for_mtbf(
    min_mtbf_h: float, observed: int, hours: float, level: float = 0.95
) -> float:
    """Further failure-free hours to clear "MTBF/MTBSI ≥ min_mtbf_h" (0 when demonstrated)."""
    return plan_mtbf_gate(min_mtbf_h, observed, hours, level).remaining_hours


def pairs_to_settle(value: float, bound: float, threshold: float, n: int) -> int | None:
    """Approximate further real episodes for a lower bound to reach `threshold`.

    Assumes the point estimate stays put and the bound's distance to it shrinks as 1/√n:
    n_needed = n·((value − bound)/(value − threshold))².

    Args:
        value: point estimate (> threshold). bound: current lower bound. threshold: the gate.
        n: episodes the bound rests on.

    Returns:
        Extra episodes (≥ 1), or None when the point does not clear the threshold.
    """
    if n <= 0 or value <= threshold or bound >= threshold:
        return None
    needed = n * ((value - bound) / (value - threshold)) ** 2
    # The tolerance keeps float noise (4.000000000000001) from adding an episode.
    return max(1, math.ceil(needed - n - 1e-9))
