"""Cluster-resampled ratios shared by E, QC and $_phys (one set of cluster draws, many metrics).

Metrics that are ratios of per-cluster sums, r = Σ_c num_c / Σ_c den_c, are resampled exactly by
drawing cluster multiplicities W [R, C] (`embodied_eval.stats.cluster_weights`) and computing
(W @ num) / (W @ den): one matrix product per metric instead of one pass over the episodes per
resample. Passing the same W to several metrics resamples them jointly.

Exact draws inside a resample (AR, SS and the paired gap of E; AR's reported interval). Resampling
clusters alone cannot move a rate whose every episode succeeded (each resample is n/n = 1) nor a
count of zero incidents, so such intervals collapse to a point. Instead, each resample r draws
the quantity from the distributions whose quantiles are the exact bounds for that resample's
counts, at one uniform u_r per resample (inverse CDF, so the draws are coupled across data sets):

* a success rate with S_r successes and F_r failures: lower side Beta(S_r, F_r + 1), upper side
  Beta(S_r + 1, F_r) — their quantiles are the Clopper–Pearson ends of S_r/(S_r + F_r)
  (`success_rate_draws`);
* an event rate with k events in H hours: lower side Gamma(k, 1)/H, upper side Gamma(k + 1, 1)/H
  — their quantiles are the Garwood ends (`event_rate_draws`).

With a single cluster the percentile ends of these draws are the exact intervals themselves;
with several, the cluster spread adds to them. Lower-side draws give lower bounds and upper-side
draws upper bounds (`two_sided_estimate`). Because each draw is monotone in the counts for a
fixed u_r and fixed cluster weights, one more failure (or incident) never raises a lower end:
the same generator gives the same W and u, and every replicate moves down or stays.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import NDArray
from scipy import special

from embodied_eval.errors import EvalError
from embodied_eval.stats import Estimate


def resampled_ratio(weights: NDArray, numerator: NDArray, denominator: NDArray) -> NDArray:
    """(W @ num) / (W @ den) per resample.

    Args:
        weights: cluster multiplicities, shape [R, C].
        numerator, denominator: per-cluster sums, shape [C].

    Returns:
        float array [R]; NaN where a resample drew only clusters with a zero denominator.
    """
    num = weights @ np.asarray(numerator, dtype=float)
    den = weights @ np.asarray(denominator, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: NDArray = num / den
    out[den == 0] = np.nan
    return out


def percentile_estimate(
    value: float | None,
    replicates: NDArray,
    level: float,
    method: str,
    n: int,
    *,
    sided: str = "two",
) -> Estimate:
    """Percentile interval from bootstrap replicates (undefined replicates are dropped).

    Args:
        value: the point estimate. replicates: shape [R]. level: confidence level.
        method: method name. n: sample size to report.
        sided: "two" (α/2 each side), "lower" (only the α quantile, high = +inf) or "upper".

    Returns:
        Estimate; the note counts dropped replicates.
    """
    if value is None:
        return Estimate(None, None, None, level, method, n, sided)
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        raise EvalError("bootstrap: every resample gave an undefined statistic", key="statistic")
    dropped = replicates.size - finite.size
    note = f"{dropped} of {replicates.size} resamples undefined and dropped" if dropped else ""
    alpha = 1.0 - level
    if sided == "two":
        low, high = (float(v) for v in np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0]))
    elif sided == "lower":
        low, high = float(np.quantile(finite, alpha)), float("inf")
    else:
        low, high = float("-inf"), float(np.quantile(finite, level))
    return Estimate(value, low, high, level, method, n, sided, note)


def success_rate_draws(
    weights: NDArray, successes: NDArray, counts: NDArray, uniforms: NDArray
) -> tuple[NDArray, NDArray]:
    """Exact binomial draws of a pooled success rate per cluster resample (lower, upper side).

    Resample r holds S_r = W_r·s successes and F_r = W_r·(n − s) failures. The lower-side draw is
    the u_r-quantile of Beta(S_r, F_r + 1) (0 when S_r = 0), the upper-side draw the u_r-quantile of
    Beta(S_r + 1, F_r) (1 when F_r = 0): the beta distributions of the Clopper–Pearson bounds
    (statistics notes, "Success rates"), so with one cluster the α-quantile of the lower draws is
    the one-sided Clopper–Pearson lower bound (α^(1/n) for n/n).

    Args:
        weights: cluster multiplicities W, shape [R, C].
        successes, counts: per-cluster s_c and n_c, shape [C].
        uniforms: u_r in (0, 1), shape [R].

    Returns:
        (lower-side draws [R], upper-side draws [R]); NaN where a resample holds no episode.
    """
    w = np.asarray(weights, dtype=float)
    s_r = w @ np.asarray(successes, dtype=float)
    f_r = w @ (np.asarray(counts, dtype=float) - np.asarray(successes, dtype=float))
    u = np.asarray(uniforms, dtype=float)
    low, high = np.zeros(u.shape), np.ones(u.shape)
    some = s_r > 0
    low[some] = special.betaincinv(s_r[some], f_r[some] + 1.0, u[some])
    fails = f_r > 0
    high[fails] = special.betaincinv(s_r[fails] + 1.0, f_r[fails], u[fails])
    empty = (s_r + f_r) <= 0
    low[empty] = np.nan
    high[empty] = np.nan
    return low, high


def event_rate_draws(
    events: int, hours: float, uniforms: NDArray, per: float = 100.0
) -> tuple[NDArray, NDArray]:
    """Exact Poisson (Garwood) draws of an event rate per `per` hours (lower, upper side).

    The lower-side draw is the u_r-quantile of Gamma(k, 1)/H (0 when k = 0), the upper-side draw
    that of Gamma(k + 1, 1)/H: Gamma(k + 1, 1)'s (1 − α)-quantile over H is the one-sided Garwood
    upper bound χ²(1 − α; 2k + 2)/(2H) (statistics notes, "Event rates"), so zero incidents in a
    few minutes draw rates in the hundreds per 100 h, not 0.

    Args:
        events: k ≥ 0. hours: H > 0. uniforms: u_r, shape [R]. per: rate unit in hours.

    Returns:
        (lower-side rates [R], upper-side rates [R]).
    """
    u = np.asarray(uniforms, dtype=float)
    scale = per / hours
    high: NDArray = special.gammaincinv(events + 1.0, u) * scale
    low: NDArray = (
        special.gammaincinv(float(events), u) * scale if events > 0 else np.zeros(u.shape)
    )
    return low, high


def two_sided_estimate(
    value: float,
    low_draws: NDArray,
    high_draws: NDArray,
    level: float,
    method: str,
    n: int,
    *,
    sided: str = "two",
) -> Estimate:
    """Percentile ends from lower- and upper-side replicates (undefined replicates dropped).

    Two-sided: [α/2-quantile of the lower-side draws, (1 − α/2)-quantile of the upper-side draws];
    "lower": the α-quantile of the lower-side draws (high = +inf). The ends are widened to contain
    the point `value`.

    Args:
        value: the point estimate. low_draws, high_draws: replicates, shape [R] each.
        level, method, n: as in `percentile_estimate`. sided: "two" or "lower".

    Returns:
        Estimate.
    """
    low_est = percentile_estimate(value, low_draws, level, method, n, sided=sided)
    if sided == "lower":
        assert low_est.low is not None
        return dataclasses.replace(low_est, low=min(low_est.low, value))
    high_est = percentile_estimate(value, high_draws, level, method, n, sided=sided)
    assert low_est.low is not None and high_est.high is not None
    note = "; ".join(dict.fromkeys(x for x in (low_est.note, high_est.note) if x))
    return Estimate(
        value, min(low_est.low, value), max(high_est.high, value), level, method, n, sided, note
    )
