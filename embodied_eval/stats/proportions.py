"""Success-rate intervals (Wilson, Clopper–Pearson) and the trials needed to demonstrate a rate.

Vectors from the project's statistics notes: 45/60 → Wilson 95 % [0.6277, 0.8422],
Clopper–Pearson 95 % [0.6214, 0.8528]; the one-sided 95 % CP lower bound of 45/60 is 0.6415.
"""

from __future__ import annotations

import math

from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_level
from embodied_eval.stats.estimate import SIDED, Estimate


def _check_table(successes: int, n: int) -> tuple[int, int]:
    s = check_count(successes, "successes")
    n = check_count(n, "n")
    if s > n:
        raise EvalError(f"successes: {s} is more than the {n} trials", key="successes")
    return s, n


def wilson_bounds(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score bounds (l, u) of a binomial proportion at two-sided `level` (n > 0)."""
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    p = successes / n
    z2n = z * z / n
    center = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    # The closed form reaches 0 and 1 exactly at the edges only up to rounding.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def wilson_interval(successes: int, n: int, level: float = 0.95) -> Estimate:
    """Two-sided Wilson score interval of a success rate.

    Its coverage is close to nominal on average over p but not pointwise (exact enumeration:
    ~0.91–0.93 at some p for n ≤ 30); gates are decided on Clopper–Pearson instead.

    Args:
        successes: episodes with z = 1. n: scored episodes. level: confidence level.

    Returns:
        Estimate(value=s/n, low, high, sided="two", n=n); n = 0 gives value None ("no trials").
    """
    s, n = _check_table(successes, n)
    level = check_level(level)
    if n == 0:
        return Estimate(None, None, None, level, "Wilson", 0, "two", "no trials")
    low, high = wilson_bounds(s, n, level)
    return Estimate(s / n, low, high, level, "Wilson", n, "two")


def _cp_lower(s: int, n: int, tail: float) -> float:
    """CP lower bound with tail probability `tail`: Beta(tail; s, n−s+1); 0 when s = 0."""
    return 0.0 if s == 0 else float(stats.beta.ppf(tail, s, n - s + 1))


def _cp_upper(s: int, n: int, tail: float) -> float:
    """CP upper bound with tail probability `tail`: Beta(1−tail; s+1, n−s); 1 when s = n."""
    return 1.0 if s == n else float(stats.beta.ppf(1.0 - tail, s + 1, n - s))


def clopper_pearson_interval(
    successes: int, n: int, level: float = 0.95, sided: str = "two"
) -> Estimate:
    """Clopper–Pearson (exact binomial) interval of a success rate.

    The one-sided lower bound at 95 % equals the two-sided 90 % lower bound; gates "AR ≥ x" are
    decided on it (45/60 → 0.6415, 11/11 → 0.7616).

    Args:
        successes: episodes with z = 1. n: scored episodes. level: confidence level.
        sided: "two", "lower" (high = 1) or "upper" (low = 0).

    Returns:
        Estimate(value=s/n, low, high, sided, n=n); n = 0 gives value None ("no trials").
    """
    s, n = _check_table(successes, n)
    level = check_level(level)
    if sided not in SIDED:
        raise EvalError(f"sided: {sided!r} is not one of {', '.join(SIDED)}", key="sided")
    method = "Clopper-Pearson" if sided == "two" else "Clopper-Pearson, one-sided"
    if n == 0:
        return Estimate(None, None, None, level, method, 0, sided, "no trials")
    alpha = 1.0 - level
    if sided == "two":
        low, high = _cp_lower(s, n, alpha / 2.0), _cp_upper(s, n, alpha / 2.0)
    elif sided == "lower":
        low, high = _cp_lower(s, n, alpha), 1.0
    else:
        low, high = 0.0, _cp_upper(s, n, alpha)
    return Estimate(s / n, low, high, level, method, n, sided)


def trials_to_demonstrate_rate(
    threshold: float,
    successes: int,
    n: int,
    level: float = 0.95,
    max_extra: int = 100_000,
) -> int | None:
    """Fewest additional trials that, if all succeed, lift the one-sided CP lower bound to
    >= `threshold`.

    From 0/0, a gate "AR ≥ 0.75" at 95 % needs 11 straight successes (10/10 → 0.7411,
    11/11 → 0.7616).

    Args:
        threshold: the gate's minimum success rate in [0, 1] (EvalError outside).
        successes, n: results so far.
        level: one-sided confidence level.
        max_extra: search cap.

    Returns:
        0 when the bound already clears the threshold; None when no number up to `max_extra`
        does (e.g. threshold = 1, which no finite run demonstrates).
    """
    s, n = _check_table(successes, n)
    level = check_level(level)
    max_extra = check_count(max_extra, "max_extra")
    threshold = float(threshold)
    if math.isnan(threshold) or not 0.0 <= threshold <= 1.0:
        raise EvalError(f"threshold: {threshold} must be a rate between 0 and 1", key="threshold")
    if threshold >= 1.0:
        return None
    alpha = 1.0 - level

    def clears(extra: int) -> bool:
        return _cp_lower(s + extra, n + extra, alpha) >= threshold

    if n > 0 and clears(0):
        return 0
    if not clears(max_extra):
        return None
    # Each added success raises the lower bound, so the predicate is monotone: bisect.
    lo, hi = 0, max_extra  # clears(lo) is False (or n = 0), clears(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if clears(mid):
            hi = mid
        else:
            lo = mid
    return hi
