"""Resampling helpers for the scoring core: iid and moving-block bootstrap indices, percentile
intervals and the normal approximation behind an interval. Every function takes an explicit
`numpy.random.Generator`; nothing here touches a global RNG.

One resampling module per concern:

- `embodied_eval.stats.bootstrap`: the statistics library — cluster and stratified bootstraps of
  success rates on sufficient statistics, a bootstrap (percentile or BCa) of any statistic of
  samples, block bootstraps of a series through `arch`;
- this module: the AAI scoring core's resampling of a statistic given as a function of row
  indices (tasks, days, checkpoints; iid or moving-block), for the axes, dynamics, curvature,
  frontier and closures;
- `embodied_eval.embodiment.resampling`: the embodiment metrics' joint resampling — one set of
  cluster weights shared by E, QC and $_phys, with exact Beta/Gamma draws per resample.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_level
from embodied_eval.stats.estimate import Estimate

#: Default number of bootstrap resamples. Small enough for CI machines, large enough for 95 %
#: percentile bounds to settle to about two decimals.
DEFAULT_RESAMPLES = 2000


def iid_indices(n: int, n_resamples: int, rng: np.random.Generator) -> NDArray[np.intp]:
    """Indices of an ordinary (iid) bootstrap.

    Args:
        n: number of observations.
        n_resamples: number of bootstrap resamples B.
        rng: the generator all draws come from.
    Returns:
        Integer array of shape (B, n).
    """
    return rng.integers(0, n, size=(n_resamples, n))


def default_block_length(n: int) -> int:
    """Block length for the moving-block bootstrap: ⌈n^(1/3)⌉ (Hall, Horowitz & Jing 1995)."""
    return max(1, math.ceil(n ** (1.0 / 3.0)))


def block_indices(
    n: int, n_resamples: int, rng: np.random.Generator, block_length: int | None = None
) -> NDArray[np.intp]:
    """Indices of a moving-block bootstrap over an ordered series (days, checkpoints, draws).

    Blocks of `block_length` consecutive observations start at uniformly drawn positions
    0 … n − block_length and are concatenated, then cut to length n, so autocorrelation within a
    block is kept.

    Args:
        n: series length.
        n_resamples: number of resamples B.
        rng: the generator all draws come from.
        block_length: consecutive observations per block (default `default_block_length(n)`).
    Returns:
        Integer array of shape (B, n).
    """
    b = default_block_length(n) if block_length is None else int(block_length)
    if b < 1:
        raise EvalError(f"block_length: {block_length} must be at least 1", key="block_length")
    b = min(b, n)
    n_blocks = math.ceil(n / b)
    starts = rng.integers(0, n - b + 1, size=(n_resamples, n_blocks))
    idx = (starts[:, :, None] + np.arange(b)[None, None, :]).reshape(n_resamples, n_blocks * b)
    return idx[:, :n]


def percentile_estimate(
    point: float,
    replicates: ArrayLike,
    *,
    level: float,
    method: str,
    n: int,
    note: str = "",
) -> Estimate:
    """Percentile interval from bootstrap replicates around a point estimate.

    Args:
        point: the estimate on the original sample.
        replicates: shape (B,) statistics on the resamples; NaN replicates (a resample where the
            statistic is undefined) are counted in `note` and left out of the quantiles.
        level: two-sided confidence level.
        method: method name for the report.
        n: sample size the estimate rests on.
    Returns:
        Estimate with the (1 ± level)/2 quantiles as bounds.
    """
    reps = np.asarray(replicates, dtype=float)
    finite = reps[np.isfinite(reps)]
    dropped = reps.size - finite.size
    if finite.size == 0:
        return Estimate(point, None, None, level, method, n, note="no defined resample")
    alpha = 1.0 - level
    low, high = np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0])
    if dropped:
        extra = f"{dropped} of {reps.size} resamples undefined"
        note = f"{note}; {extra}" if note else extra
    return Estimate(float(point), float(low), float(high), level, method, n, note=note)


def bootstrap_statistic(
    statistic: Callable[[NDArray[np.intp]], float],
    n: int,
    rng: np.random.Generator,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    block_length: int | None = None,
    blocked: bool = False,
    method: str | None = None,
) -> tuple[Estimate, NDArray[np.float64]]:
    """Bootstrap a statistic given as a function of row indices.

    Args:
        statistic: maps an index array of shape (n,) to a float (NaN when undefined).
        n: number of observations (tasks, episodes, days).
        rng: the generator all draws come from.
        n_resamples: number of resamples B.
        level: two-sided confidence level.
        block_length: block length for `blocked=True`.
        blocked: moving-block bootstrap (ordered, autocorrelated data) instead of iid.
        method: method name (default "percentile bootstrap" / "block bootstrap").
    Returns:
        (Estimate with percentile bounds, replicates of shape (B,)).
    """
    check_level(level)
    if n < 1:
        raise EvalError("nothing to resample: no observations", key="observations")
    point = statistic(np.arange(n))
    idx = (
        block_indices(n, n_resamples, rng, block_length)
        if blocked
        else iid_indices(n, n_resamples, rng)
    )
    reps = np.array([statistic(row) for row in idx], dtype=float)
    name = method or ("block bootstrap (percentile)" if blocked else "percentile bootstrap")
    return percentile_estimate(point, reps, level=level, method=name, n=n), reps


def two_sided_z(level: float) -> float:
    """Standard-normal quantile for a two-sided interval at `level` (1.96 at 0.95)."""
    return float(norm.ppf(0.5 + check_level(level) / 2.0))


def standard_error_from_interval(estimate: Estimate) -> float | None:
    """Standard error implied by an interval under a normal approximation.

    Two-sided: (high − low) / (2 z); one-sided lower: (value − low) / z₁; one-sided upper:
    (high − value) / z₁ with z₁ the one-sided quantile. None when the interval is missing.
    """
    v, lo, hi = estimate.value, estimate.low, estimate.high
    if v is None:
        return None
    finite = [x is not None and math.isfinite(x) for x in (lo, hi)]
    if estimate.sided == "two" and all(finite):
        assert lo is not None and hi is not None
        return (hi - lo) / (2.0 * two_sided_z(estimate.level))
    z1 = float(norm.ppf(estimate.level))
    if finite[0] and estimate.sided != "upper":
        assert lo is not None
        return (v - lo) / z1
    if finite[1]:
        assert hi is not None
        return (hi - v) / z1
    return None


def normal_estimate(
    value: float, se: float, *, level: float, method: str, n: int = 0, clip: bool = True
) -> Estimate:
    """Two-sided normal interval value ± z·se, clipped to [0, 1] when `clip`."""
    z = two_sided_z(level)
    low, high = value - z * se, value + z * se
    if clip:
        low, high = max(0.0, low), min(1.0, high)
    return Estimate(value, low, high, level, method, n)
