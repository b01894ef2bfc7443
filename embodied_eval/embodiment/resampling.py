"""Cluster-resampled ratios shared by E, QC and $_phys (one set of cluster draws, many metrics).

Metrics that are ratios of per-cluster sums, r = Σ_c num_c / Σ_c den_c, are resampled exactly by
drawing cluster multiplicities W [R, C] (`embodied_eval.stats.cluster_weights`) and computing
(W @ num) / (W @ den): one matrix product per metric instead of one pass over the episodes per
resample. Passing the same W to several metrics resamples them jointly.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

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
