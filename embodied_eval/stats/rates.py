"""Event rates, MTBF/MTBSI and demonstration hours from k events in H exposure hours.

All intervals are the exact chi-square (Garwood) intervals of a Poisson count; the notes' vectors:
3 events in 250 h → rate/100 h 95 % [0.2475, 3.5069], one-sided upper 3.1015, MTBF time-terminated
[28.515, 404.091] h. MTBSI is an MTBF whose "failures" are safety incidents.

Conventions:
    * `per` scales a rate: per=100 gives "events per 100 h".
    * time-terminated (the test stopped at a fixed time): the MTBF lower bound uses 2k+2 degrees
      of freedom; failure-terminated (stopped at the k-th failure) uses 2k.
"""

from __future__ import annotations

import math

from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_level, check_nonnegative, check_positive
from embodied_eval.stats.estimate import Estimate

TERMINATIONS = ("time", "failure")


def _chi2(q: float, dof: float) -> float:
    """Chi-square quantile χ²(q; dof); χ²(q; 0) = 0 (a point mass at zero)."""
    if dof <= 0:
        return 0.0
    return float(stats.chi2.ppf(q, dof))


def _no_exposure(events: int, level: float, method: str, sided: str) -> Estimate:
    if events:
        raise EvalError(f"exposure_h: {events} event(s) need exposure hours > 0", key="exposure_h")
    return Estimate(None, None, None, level, method, 0, sided, "no exposure hours")


def poisson_rate_interval(
    events: int, exposure_h: float, level: float = 0.95, per: float = 100.0
) -> Estimate:
    """Two-sided exact (Garwood) interval of an event rate.

    λ_L = χ²(α/2; 2k)/(2H) (0 when k = 0), λ_U = χ²(1−α/2; 2k+2)/(2H), both times `per`.

    Args:
        events: k, the number of events observed (>= 0).
        exposure_h: H, exposure in hours (> 0; 0 with no events gives an empty estimate).
        level: confidence level 1 − α.
        per: hours the rate is expressed per (100 → "per 100 h").

    Returns:
        Estimate(value=k/H·per, low, high, sided="two", n=k); with k = 0 the note says
        "0 observed" (value 0.0 is only meaningful beside its upper bound).
    """
    k = check_count(events, "events")
    hours = check_nonnegative(exposure_h, "exposure_h")
    level = check_level(level)
    per = check_positive(per, "per")
    method = "Garwood exact (Poisson)"
    if hours == 0.0:
        return _no_exposure(k, level, method, "two")
    alpha = 1.0 - level
    low = _chi2(alpha / 2.0, 2 * k) / (2.0 * hours) * per
    high = _chi2(1.0 - alpha / 2.0, 2 * k + 2) / (2.0 * hours) * per
    note = "0 observed" if k == 0 else ""
    return Estimate(k / hours * per, low, high, level, method, k, "two", note)


def poisson_rate_upper(
    events: int, exposure_h: float, level: float = 0.95, per: float = 100.0
) -> Estimate:
    """One-sided upper confidence bound of an event rate: χ²(1−α; 2k+2)/(2H) · per.

    With zero events this is −ln α / H (2.9957/H at 95 %), e.g. 0 majors in 500 h shows only
    rate ≤ 0.599/100 h.

    Args:
        events: k (>= 0). exposure_h: H in hours. level: 1 − α. per: rate unit in hours.

    Returns:
        Estimate(value=k/H·per, low=0, high=upper bound, sided="upper", n=k).
    """
    k = check_count(events, "events")
    hours = check_nonnegative(exposure_h, "exposure_h")
    level = check_level(level)
    per = check_positive(per, "per")
    method = "Garwood exact (Poisson), one-sided"
    if hours == 0.0:
        return _no_exposure(k, level, method, "upper")
    high = _chi2(level, 2 * k + 2) / (2.0 * hours) * per
    note = "0 observed; upper bound only" if k == 0 else ""
    return Estimate(k / hours * per, 0.0, high, level, method, k, "upper", note)


def _check_termination(terminated: str, k: int) -> None:
    if terminated not in TERMINATIONS:
        raise EvalError(f"terminated: {terminated!r} must be 'time' or 'failure'", key="terminated")
    if terminated == "failure" and k == 0:
        raise EvalError(
            "terminated: a failure-terminated test needs at least 1 failure; use 'time'",
            key="terminated",
        )


def _mtbf_point(k: int, hours: float) -> tuple[float, str]:
    if k == 0:
        return math.inf, "0 observed; point estimate H/0 is unbounded, use the lower bound"
    return hours / k, ""


def mtbf_interval(
    failures: int, exposure_h: float, level: float = 0.95, terminated: str = "time"
) -> Estimate:
    """Two-sided exact chi-square interval of the MTBF (or MTBSI, with incidents as failures).

    Time-terminated: [2H/χ²(1−α/2; 2k+2), 2H/χ²(α/2; 2k)]; failure-terminated uses 2k degrees of
    freedom for both bounds. With k = 0 the upper bound is ∞.

    Args:
        failures: k (>= 0; >= 1 when failure-terminated).
        exposure_h: H, total operating hours.
        level: 1 − α.
        terminated: "time" (test stopped at a fixed time) or "failure" (stopped at k-th failure).

    Returns:
        Estimate(value=H/k (∞ when k = 0, said in the note), low, high, sided="two", n=k).
    """
    k = check_count(failures, "failures")
    hours = check_nonnegative(exposure_h, "exposure_h")
    level = check_level(level)
    _check_termination(terminated, k)
    method = f"chi-square exact MTBF ({terminated}-terminated)"
    if hours == 0.0:
        return _no_exposure(k, level, method, "two")
    alpha = 1.0 - level
    lower_dof = 2 * k + 2 if terminated == "time" else 2 * k
    low = 2.0 * hours / _chi2(1.0 - alpha / 2.0, lower_dof)
    high = 2.0 * hours / _chi2(alpha / 2.0, 2 * k) if k > 0 else math.inf
    value, note = _mtbf_point(k, hours)
    return Estimate(value, low, high, level, method, k, "two", note)


def mtbf_lower_bound(
    failures: int, exposure_h: float, level: float = 0.95, terminated: str = "time"
) -> Estimate:
    """One-sided lower confidence bound of the MTBF: 2H/χ²(1−α; 2k+2) (time-terminated) or
    2H/χ²(1−α; 2k) (failure-terminated).

    Args:
        failures: k. exposure_h: H in hours. level: 1 − α. terminated: "time" or "failure".

    Returns:
        Estimate(value=H/k (∞ when k = 0), low=bound, high=∞, sided="lower", n=k).
    """
    k = check_count(failures, "failures")
    hours = check_nonnegative(exposure_h, "exposure_h")
    level = check_level(level)
    _check_termination(terminated, k)
    method = f"chi-square exact MTBF ({terminated}-terminated), one-sided"
    if hours == 0.0:
        return _no_exposure(k, level, method, "lower")
    dof = 2 * k + 2 if terminated == "time" else 2 * k
    low = 2.0 * hours / _chi2(level, dof)
    value, note = _mtbf_point(k, hours)
    return Estimate(value, low, math.inf, level, method, k, "lower", note)


def hours_to_demonstrate_rate(
    max_rate: float, observed: int, level: float = 0.95, per: float = 100.0
) -> float:
    """Total exposure hours needed so the one-sided upper rate bound with `observed` events is
    <= `max_rate` (per `per` hours): H = χ²(level; 2k+2) / 2 / (max_rate / per).

    E.g. "≤ 1 minor per 100 h" at 95 %: 299.6 / 474.4 / 629.6 / 775.4 h for k = 0..3.

    Args:
        max_rate: the gate's rate ceiling, in events per `per` hours (> 0).
        observed: events observed so far (and assumed to be all there will be).
        level: 1 − α. per: rate unit in hours.

    Returns:
        Total hours (not the remaining hours: subtract the hours already run).
    """
    max_rate = check_positive(max_rate, "max_rate")
    k = check_count(observed, "observed")
    level = check_level(level)
    per = check_positive(per, "per")
    return _chi2(level, 2 * k + 2) / 2.0 / (max_rate / per)


def hours_to_demonstrate_mtbf(min_mtbf_h: float, observed: int, level: float = 0.95) -> float:
    """Total hours needed so the time-terminated one-sided MTBF lower bound with `observed`
    failures is >= `min_mtbf_h`: H = θ · χ²(level; 2k+2) / 2.

    E.g. "MTBSI ≥ 50 h" at 95 %: 149.8 / 237.2 / 314.8 / 387.7 h for k = 0..3.

    Args:
        min_mtbf_h: the gate's minimum MTBF/MTBSI in hours (> 0).
        observed: failures (incidents) observed so far. level: 1 − α.

    Returns:
        Total hours (subtract the hours already run for the remaining hours).
    """
    theta = check_positive(min_mtbf_h, "min_mtbf_h")
    k = check_count(observed, "observed")
    level = check_level(level)
    return theta * _chi2(level, 2 * k + 2) / 2.0
