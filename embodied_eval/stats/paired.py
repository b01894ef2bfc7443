"""Paired sim-vs-real success gap: Newcombe's method 10, S2R, equivalence (TOST), McNemar, and
post-stratified reweighting of sim episodes to the real context distribution.

Each real episode is paired with a sim episode of the same context. The 2×2 table of pairs:
a = both succeed, b = sim only, c = real only, d = both fail; n = a + b + c + d;
p_sim = (a + b)/n, p_real = (a + c)/n, D = p_sim − p_real.

No well-kept library has an interval for the difference of *paired* proportions, so method 10 of
Newcombe (1998, "Improved confidence intervals for the difference between binomial proportions
based on paired data") is written out here. Treating the two sides as independent is wrong for
paired episodes (a=70, b=12, c=4, d=14: independent [−0.0352, 0.1929] vs paired [0.0001, 0.1611]).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_level, check_nonnegative
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.proportions import wilson_bounds

NEWCOMBE = "Newcombe method 10 (paired)"


def _table(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int, int]:
    a, b, c, d = (check_count(v, k) for v, k in ((a, "a"), (b, "b"), (c, "c"), (d, "d")))
    return a, b, c, d, a + b + c + d


def _phi(a: int, b: int, c: int, d: int, n: int) -> float:
    """Newcombe's continuity-corrected phi: 0 when 0 <= ad − bc <= n/2 or a margin is empty."""
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    if denom == 0:
        return 0.0
    cross = a * d - b * c
    if cross > n / 2.0:
        return (cross - n / 2.0) / math.sqrt(denom)
    if cross >= 0:
        return 0.0
    return cross / math.sqrt(denom)


def paired_gap_interval(a: int, b: int, c: int, d: int, level: float = 0.95) -> Estimate:
    """Two-sided interval of the paired sim−real success gap D = p_sim − p_real (Newcombe 10).

    L = D − √((p₁−l₁)² + (u₂−p₂)² − 2φ(p₁−l₁)(u₂−p₂)),
    U = D + √((p₂−l₂)² + (u₁−p₁)² − 2φ(p₂−l₂)(u₁−p₁)),
    with (l₁,u₁), (l₂,u₂) the Wilson bounds of p_sim, p_real at `level`.

    Args:
        a: pairs where both succeed. b: sim only. c: real only. d: both fail.
        level: two-sided confidence level.

    Returns:
        Estimate(value=D, low=L, high=U, n=number of pairs); no pairs gives value None.
    """
    a, b, c, d, n = _table(a, b, c, d)
    level = check_level(level)
    if n == 0:
        return Estimate(None, None, None, level, NEWCOMBE, 0, "two", "no paired episodes")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_bounds(a + b, n, level)
    l2, u2 = wilson_bounds(a + c, n, level)
    phi = _phi(a, b, c, d, n)
    gap = p1 - p2
    dl = (p1 - l1) ** 2 + (u2 - p2) ** 2 - 2.0 * phi * (p1 - l1) * (u2 - p2)
    du = (p2 - l2) ** 2 + (u1 - p1) ** 2 - 2.0 * phi * (p2 - l2) * (u1 - p1)
    low = max(-1.0, gap - math.sqrt(max(dl, 0.0)))
    high = min(1.0, gap + math.sqrt(max(du, 0.0)))
    return Estimate(gap, low, high, level, NEWCOMBE, n, "two")


def difference_of_independent(first: Estimate, second: Estimate) -> Estimate:
    """Interval of θ₁ − θ₂ from independent estimates' intervals (MOVER, Zou & Donner 2008):

    L = θ₁ − θ₂ − √((θ₁ − l₁)² + (u₂ − θ₂)²), U = θ₁ − θ₂ + √((u₁ − θ₁)² + (θ₂ − l₂)²).

    Newcombe's method 10 is itself this recovery applied to Wilson bounds; here it combines two
    paired gaps on disjoint rows (a difference in differences).

    Args:
        first, second: two-sided estimates at one level, with values and bounds.

    Returns:
        Estimate at the same level, n = n₁ + n₂ (value None when either part is undefined).
    """
    method = f"MOVER difference of independent intervals ({first.method})"
    parts = (first.value, first.low, first.high, second.value, second.low, second.high)
    if any(x is None for x in parts) or first.level != second.level:
        return Estimate(None, None, None, first.level, method, 0, "two", "a part is undefined")
    v1, l1, u1, v2, l2, u2 = (float(x) for x in parts)  # type: ignore[arg-type]
    value = v1 - v2
    low = value - math.sqrt((v1 - l1) ** 2 + (u2 - v2) ** 2)
    high = value + math.sqrt((u1 - v1) ** 2 + (v2 - l2) ** 2)
    return Estimate(value, low, high, first.level, method, first.n + second.n, "two")


def sim_to_real_agreement(a: int, b: int, c: int, d: int, level: float = 0.95) -> Estimate:
    """S2R = 1 − |D|, with its interval derived from the paired gap's interval [L, U].

    If [L, U] contains 0, |D| can be 0: S2R high = 1 and low = 1 − max(|L|, |U|). Otherwise
    |D| lies in [min(|L|,|U|), max(|L|,|U|)] and S2R in [1 − max(|L|,|U|), 1 − min(|L|,|U|)].
    The coverage of the S2R interval is at least that of the gap interval (it is the image of the
    gap interval under D ↦ 1 − |D|).

    Args:
        a, b, c, d: the paired 2×2 table (see module docstring). level: confidence level.

    Returns:
        Estimate(value=1 − |D|, low, high, n=pairs, method "1 − |gap|, Newcombe method 10").
    """
    gap = paired_gap_interval(a, b, c, d, level)
    method = "1 − |gap|, " + NEWCOMBE
    if gap.value is None or gap.low is None or gap.high is None:
        return Estimate(None, None, None, gap.level, method, 0, "two", gap.note)
    lo_abs, hi_abs = abs(gap.low), abs(gap.high)
    if gap.low <= 0.0 <= gap.high:
        low, high = 1.0 - max(lo_abs, hi_abs), 1.0
    else:
        low, high = 1.0 - max(lo_abs, hi_abs), 1.0 - min(lo_abs, hi_abs)
    return Estimate(1.0 - abs(gap.value), low, high, gap.level, method, gap.n, "two")


@dataclass(frozen=True)
class GapEquivalence:
    """Result of a TOST for "|gap| < margin".

    Attributes:
        equivalent: True when the (1 − 2α) gap interval lies inside (−margin, margin).
        interval: that interval (90 % when level = 0.95).
        margin: δ. level: the test's confidence 1 − α.
    """

    equivalent: bool
    interval: Estimate
    margin: float
    level: float

    def to_json(self) -> dict[str, Any]:
        return {
            "equivalent": self.equivalent,
            "interval": self.interval.to_json(),
            "margin": self.margin,
            "level": self.level,
        }


def gap_equivalence_test(
    a: int, b: int, c: int, d: int, margin: float, level: float = 0.95
) -> GapEquivalence:
    """Two one-sided tests (TOST) that the paired gap lies within ±margin, each at α = 1 − level.

    Equivalent to checking that the two-sided (1 − 2α) Newcombe interval (90 % for level 0.95)
    lies strictly inside (−margin, margin).

    Args:
        a, b, c, d: the paired 2×2 table. margin: δ > 0 (absolute success-rate difference).
        level: 1 − α of each one-sided test.

    Returns:
        GapEquivalence(equivalent, interval, margin, level); no pairs → not equivalent.
    """
    margin = check_nonnegative(margin, "margin")
    level = check_level(level)
    if level <= 0.5:
        raise EvalError(f"level: {level} must be above 0.5 for a TOST", key="level")
    # round() keeps 2·0.95 − 1 printing as 0.9, not 0.8999999999999999.
    interval = paired_gap_interval(a, b, c, d, round(2.0 * level - 1.0, 12))
    ok = (
        interval.low is not None
        and interval.high is not None
        and -margin < interval.low
        and interval.high < margin
    )
    return GapEquivalence(bool(ok), interval, margin, level)


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test of p_sim = p_real on paired episodes (statistic, p-value, exact or not)."""

    statistic: float
    pvalue: float
    exact: bool


def mcnemar_test(a: int, b: int, c: int, d: int, exact: bool | None = None) -> McNemarResult:
    """McNemar's test on the discordant pairs b (sim only) and c (real only), via statsmodels.

    Args:
        a, b, c, d: the paired 2×2 table.
        exact: binomial test on b vs c; None chooses exact when b + c < 25, else the chi-square
            statistic with continuity correction.

    Returns:
        McNemarResult(statistic, pvalue, exact). With b + c = 0 the p-value is 1.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    a, b, c, d, _ = _table(a, b, c, d)
    if exact is None:
        exact = b + c < 25
    if b + c == 0:
        return McNemarResult(0.0, 1.0, exact)
    res = mcnemar(np.array([[a, b], [c, d]]), exact=exact, correction=True)
    return McNemarResult(float(res.statistic), float(res.pvalue), exact)


def reweight_to_real(
    sim_strata: Sequence[Hashable],
    sim_success: Sequence[bool] | np.ndarray,
    real_strata: Sequence[Hashable],
    level: float = 0.95,
) -> Estimate:
    """Sim success rate post-stratified to the real context distribution.

    Each sim episode in stratum h (e.g. task × drift level) gets weight π_h^real / π_h^sim, so the
    estimate is Σ_h π_h^real · p̂_h^sim. The interval is a normal approximation treating the
    real stratum shares as fixed: Var = Σ_h π_h² p̃_h(1 − p̃_h)/n_h, with p̃_h = (s_h + ½)/(n_h + 1)
    so a stratum at 0 % or 100 % still contributes variance; clipped to [0, 1]. It is
    approximate: trust it with ≥ ~20 sim episodes per stratum.

    Args:
        sim_strata: stratum label of each sim episode, length n_sim.
        sim_success: z of each sim episode (0/1), length n_sim.
        real_strata: stratum label of each real episode (only the shares are used).
        level: two-sided confidence level.

    Returns:
        Estimate(value, low, high, n=n_sim, extra={"weights": {stratum: weight}}).

    Raises:
        EvalError: a real stratum has no sim episodes (it cannot be reweighted).
    """
    level = check_level(level)
    z = np.asarray(sim_success, dtype=float)
    if len(sim_strata) != z.shape[0]:
        raise EvalError(
            f"sim_strata: {len(sim_strata)} labels for {z.shape[0]} sim episodes", key="sim_strata"
        )
    method = "post-stratified to real context distribution (task/drift strata), normal approx."
    if z.shape[0] == 0 or len(real_strata) == 0:
        return Estimate(None, None, None, level, method, int(z.shape[0]), "two", "no episodes")
    if not np.all((z == 0) | (z == 1)):
        raise EvalError("sim_success: values must be 0/1 (or bools)", key="sim_success")
    real_counts = Counter(real_strata)
    n_real = len(real_strata)
    labels = np.asarray([str(h) for h in sim_strata])
    missing = [h for h in real_counts if not np.any(labels == str(h))]
    if missing:
        raise EvalError(
            f"real_strata: stratum {missing[0]!r} has real episodes but no sim episodes",
            key="real_strata",
        )
    value, var = 0.0, 0.0
    sim_counts = Counter(str(h) for h in sim_strata)
    weights: dict[str, float] = {}
    for h, count in real_counts.items():
        share = count / n_real
        mask = labels == str(h)
        n_h = int(mask.sum())
        s_h = float(z[mask].sum())
        value += share * s_h / n_h
        p_t = (s_h + 0.5) / (n_h + 1.0)
        var += share**2 * p_t * (1.0 - p_t) / n_h
        weights[str(h)] = share / (sim_counts[str(h)] / z.shape[0])
    for h in sim_counts:
        weights.setdefault(h, 0.0)  # sim-only strata carry no weight
    half = float(stats.norm.ppf(0.5 + level / 2.0)) * math.sqrt(var)
    return Estimate(
        value,
        max(0.0, value - half),
        min(1.0, value + half),
        level,
        method,
        int(z.shape[0]),
        "two",
        extra={"weights": weights},
    )
