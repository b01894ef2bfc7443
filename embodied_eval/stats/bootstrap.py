"""Bootstrap intervals: cluster and stratified bootstraps of success rates on sufficient
statistics, a generic bootstrap of any statistic, and block bootstraps of autocorrelated series.

Episodes are clustered (task instances, seeds, days), so the reported CI of a success rate
resamples *clusters*. For 0/1 outcomes, resampling episodes inside a cluster is the same in law as
drawing Binomial(n_c, p̂_c), and drawing a cluster w times then its episodes is
Binomial(w·n_c, p̂_c): so a two-level resample costs one binomial draw per cluster instead of one
index per episode, vectorized over resamples.

Validity (what the coverage suite checks, see `embodied_eval.stats.coverage_sim` and the full
table in benchmarks/coverage.py): the two-level cluster bootstrap covers within 2 points of
nominal with ≥ 20 clusters, ≥ 20 episodes and the pooled rate away from 0 and 1; the one-level
scheme needs ≥ 50 clusters (with 20 clusters its percentile interval covered ~92 %). With fewer
clusters, fewer than 20 episodes, or a rate at 0 % / 100 % the interval is too short (at p̂ = 1 it
collapses to [1, 1]): use Clopper–Pearson there. The two-level scheme adds within-cluster noise on
top of the between-cluster spread and is mildly conservative.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_level
from embodied_eval.stats.estimate import Estimate

METHODS = ("percentile", "bca")
BLOCK_KINDS = ("stationary", "circular")
#: Resamples per vectorized chunk; bounds memory at ~chunk × clusters × 8 bytes.
_CHUNK = 1000
#: BCa jackknifes every observation: O(n²) work for a generic statistic.
_BCA_MAX_N = 5000


def _check_generator(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise EvalError(
            "rng: pass a numpy.random.Generator (e.g. numpy.random.default_rng(seed))", key="rng"
        )
    return rng


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise EvalError(f"method: {method!r} must be 'percentile' or 'bca'", key="method")
    return method


def _cluster_arrays(successes: ArrayLike, counts: ArrayLike) -> tuple[NDArray, NDArray]:
    s = np.asarray(successes, dtype=np.int64).ravel()
    n = np.asarray(counts, dtype=np.int64).ravel()
    if s.shape != n.shape:
        raise EvalError(
            f"successes/counts: {s.size} successes for {n.size} clusters", key="successes"
        )
    if s.size == 0:
        raise EvalError("successes: no clusters to resample", key="successes")
    if np.any(n < 0) or np.any(s < 0) or np.any(s > n):
        raise EvalError(
            "successes/counts: each cluster needs 0 <= successes <= counts", key="successes"
        )
    return s, n


def cluster_weights(n_clusters: int, rng: np.random.Generator, resamples: int) -> NDArray:
    """Multinomial cluster draws: how often each cluster appears in each resample.

    Pass the same weights to several `resample_cluster_rates` calls to resample metrics that
    share clusters (e.g. AR, SS and S2R of the same task instances) jointly.

    Args:
        n_clusters: C. rng: the generator. resamples: R.

    Returns:
        int64 array [R, C]; each row sums to C.
    """
    c = check_count(n_clusters, "n_clusters")
    r = check_count(resamples, "resamples")
    rng = _check_generator(rng)
    out = np.empty((r, c), dtype=np.int64)
    for start in range(0, r, _CHUNK):
        rows = min(_CHUNK, r - start)
        # Drawing C indices and counting them is much faster than rng.multinomial row by row.
        idx = rng.integers(0, c, size=(rows, c)) + (np.arange(rows) * c)[:, None]
        out[start : start + rows] = np.bincount(idx.ravel(), minlength=rows * c).reshape(rows, c)
    return out


def _group_clusters(s: NDArray, n: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Merge clusters with identical (n_c, s_c): returns group n, s, sizes and each cluster's group.

    Clusters with the same counts are exchangeable in the resampling, so drawing the number of
    draws per *group* (a multinomial) and one Binomial(k_g·n_g, p_g) per group is the same in law
    as drawing every cluster: with equal-sized clusters this cuts the binomial draws ~10×.
    """
    pairs = np.stack([n, s], axis=1)
    uniq, inverse, sizes = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
    return uniq[:, 0], uniq[:, 1], sizes, inverse.ravel()


def resample_cluster_rates(
    successes: ArrayLike,
    counts: ArrayLike,
    rng: np.random.Generator,
    resamples: int = 10_000,
    two_level: bool = True,
    weights: NDArray | None = None,
) -> NDArray:
    """Bootstrap replicates of the pooled success rate Σs/Σn under cluster resampling.

    Args:
        successes: s_c, successes per cluster, shape [C].
        counts: n_c, episodes per cluster, shape [C].
        rng: the generator (used for cluster draws unless `weights` is given, and for the
            within-cluster binomial draws when two_level).
        resamples: R (ignored when `weights` is given).
        two_level: also resample episodes within each drawn cluster (binomial on p̂_c).
        weights: optional [R, C] cluster multiplicities from `cluster_weights`, shared with other
            metrics to bootstrap them jointly.

    Returns:
        float array [R] of pooled rates (NaN where a resample drew only empty clusters).
    """
    s, n = _cluster_arrays(successes, counts)
    rng = _check_generator(rng)
    gn, gs, sizes, group_of = _group_clusters(s, n)
    n_groups, n_clusters = gn.size, s.size
    if weights is not None:
        weights = np.asarray(weights)
        if weights.ndim != 2 or weights.shape[1] != n_clusters:
            raise EvalError(
                f"weights: shape {weights.shape} does not match {n_clusters} clusters",
                key="weights",
            )
        r = weights.shape[0]
    else:
        r = check_count(resamples, "resamples")
    gp = np.divide(gs, gn, out=np.zeros(n_groups), where=gn > 0)
    out = np.empty(r)
    for start in range(0, r, _CHUNK):
        rows = min(_CHUNK, r - start)
        if weights is not None:
            # Aggregate the shared cluster multiplicities to groups (same law, fewer draws).
            k = np.zeros((rows, n_groups), dtype=np.int64)
            np.add.at(k.T, group_of, weights[start : start + rows].T)
        elif 4 * n_groups <= n_clusters:
            k = rng.multinomial(n_clusters, sizes / n_clusters, size=rows)
        else:
            idx = group_of[rng.integers(0, n_clusters, size=(rows, n_clusters))]
            idx += (np.arange(rows) * n_groups)[:, None]
            k = np.bincount(idx.ravel(), minlength=rows * n_groups).reshape(rows, n_groups)
        if two_level:
            # k copies of a cluster, each re-drawing its n episodes: Binomial(k·n, p̂).
            hits = rng.binomial(k * gn, gp).sum(axis=1, dtype=np.float64)
        else:
            hits = k @ gs.astype(float)
        total = k @ gn.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + rows] = hits / total
    return out


def _bca_bounds(
    replicates: NDArray, estimate: float, jackknife: NDArray, level: float
) -> tuple[float, float]:
    """BCa interval from replicates, the point estimate and leave-one-out jackknife values."""
    alpha = 1.0 - level
    r = replicates.size
    # Ties are common with 0/1 data: count half of them as below (mid-rank bias correction).
    below = np.count_nonzero(replicates < estimate) + 0.5 * np.count_nonzero(replicates == estimate)
    frac = np.clip(below / r, 0.5 / r, 1.0 - 0.5 / r)
    z0 = float(stats.norm.ppf(frac))
    dev = jackknife.mean() - jackknife
    denom = 6.0 * float(np.sum(dev**2)) ** 1.5
    accel = float(np.sum(dev**3)) / denom if denom > 0 else 0.0
    z = stats.norm.ppf([alpha / 2.0, 1.0 - alpha / 2.0])
    adj = stats.norm.cdf(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    low, high = np.quantile(replicates, adj)
    return float(low), float(high)


def _interval(
    replicates: NDArray,
    estimate: float,
    level: float,
    method: str,
    jackknife: Callable[[], NDArray],
) -> tuple[float, float, int]:
    """Percentile or BCa bounds from finite replicates; returns (low, high, dropped count)."""
    finite = replicates[np.isfinite(replicates)]
    dropped = replicates.size - finite.size
    if finite.size == 0:
        raise EvalError("bootstrap: every resample gave an undefined statistic", key="statistic")
    if method == "bca":
        low, high = _bca_bounds(finite, estimate, jackknife(), level)
    else:
        alpha = 1.0 - level
        low, high = (float(v) for v in np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0]))
    return low, high, dropped


def cluster_bootstrap_mean(
    successes: ArrayLike,
    counts: ArrayLike,
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
    two_level: bool = True,
    method: str = "percentile",
) -> Estimate:
    """Cluster-bootstrap CI of a pooled success rate (AR) from per-cluster sufficient statistics.

    Valid (coverage within 2 points of nominal) with ≥ 20 clusters and p̂ away from 0 and 1; see
    the module docstring. BCa uses the leave-one-cluster-out jackknife for its acceleration.

    Args:
        successes: s_c, successes per cluster, shape [C].
        counts: n_c, episodes per cluster, shape [C].
        rng: the generator. resamples: R. level: two-sided confidence level.
        two_level: also resample episodes within clusters (binomial draws).
        method: "percentile" or "bca".

    Returns:
        Estimate(value=Σs/Σn, low, high, n=C clusters, method naming the scheme).
    """
    s, n = _cluster_arrays(successes, counts)
    level = check_level(level)
    method = _check_method(method)
    total = int(n.sum())
    scheme = "two-level cluster bootstrap" if two_level else "cluster bootstrap"
    name = f"{scheme} ({method}, {resamples} resamples)"
    if total == 0:
        return Estimate(None, None, None, level, name, int(s.size), "two", "no episodes")
    estimate = float(s.sum()) / total
    reps = resample_cluster_rates(s, n, rng, resamples, two_level)

    def jackknife() -> NDArray:
        rest_n = total - n
        return np.divide(s.sum() - s, rest_n, out=np.full(s.size, estimate), where=rest_n > 0)

    low, high, _ = _interval(reps, estimate, level, method, jackknife)
    return Estimate(estimate, low, high, level, name, int(s.size), "two", extra={"episodes": total})


def stratified_bootstrap_mean(
    successes: ArrayLike,
    counts: ArrayLike,
    strata: Sequence[Any] | NDArray,
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
    two_level: bool = True,
    stratum_weighting: str = "episodes",
) -> Estimate:
    """Stratified cluster bootstrap (percentile): clusters are resampled within their stratum
    (e.g. task), so every resample keeps each task's number of clusters.

    Args:
        successes, counts: per-cluster s_c, n_c, shape [C].
        strata: stratum label of each cluster, length C.
        rng: the generator. resamples: R. level: two-sided level. two_level: see
            `resample_cluster_rates`.
        stratum_weighting: "episodes" (pooled Σs/Σn) or "equal" (mean of per-stratum rates).

    Returns:
        Estimate(value, low, high, n=C clusters, extra={"strata": number of strata}).
    """
    s, n = _cluster_arrays(successes, counts)
    level = check_level(level)
    rng = _check_generator(rng)
    r = check_count(resamples, "resamples")
    labels = np.asarray([str(v) for v in strata])
    if labels.size != s.size:
        raise EvalError(f"strata: {labels.size} labels for {s.size} clusters", key="strata")
    if stratum_weighting not in ("episodes", "equal"):
        raise EvalError(
            f"stratum_weighting: {stratum_weighting!r} must be 'episodes' or 'equal'",
            key="stratum_weighting",
        )
    groups = [np.flatnonzero(labels == u) for u in np.unique(labels)]
    name = f"stratified cluster bootstrap ({stratum_weighting}-weighted, percentile, {r} resamples)"
    if stratum_weighting == "equal" and any(n[g].sum() == 0 for g in groups):
        raise EvalError("strata: a stratum has no episodes; use 'episodes' weighting", key="strata")
    if n.sum() == 0:
        return Estimate(None, None, None, level, name, int(s.size), "two", "no episodes")
    if stratum_weighting == "equal":
        estimate = float(np.mean([s[g].sum() / n[g].sum() for g in groups]))
        reps = np.mean(
            [resample_cluster_rates(s[g], n[g], rng, r, two_level) for g in groups], axis=0
        )
    else:
        estimate = float(s.sum() / n.sum())
        weights = np.zeros((r, s.size), dtype=np.int64)
        for g in groups:
            weights[:, g] = cluster_weights(g.size, rng, r)
        reps = resample_cluster_rates(s, n, rng, r, two_level, weights=weights)
    low, high, _ = _interval(reps, estimate, level, "percentile", lambda: np.empty(0))
    return Estimate(
        estimate, low, high, level, name, int(s.size), "two", extra={"strata": len(groups)}
    )


def _as_samples(samples: NDArray | Sequence[ArrayLike]) -> tuple[NDArray, ...]:
    if isinstance(samples, tuple | list):
        arrays = tuple(np.asarray(a) for a in samples)
    else:
        arrays = (np.asarray(samples),)
    if not arrays or any(a.ndim == 0 or a.shape[0] == 0 for a in arrays):
        raise EvalError("samples: every sample needs at least one observation", key="samples")
    return arrays


def bootstrap_statistic(
    samples: NDArray | Sequence[ArrayLike],
    statistic: Callable[..., Any],
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
    method: str = "percentile",
    *,
    paired: bool = False,
    vectorized: bool = False,
) -> Estimate:
    """Bootstrap CI of any statistic of one or several samples (rows are resampled).

    E.g. E = geometric mean of (AR, SS, S2R) from three samples, or an AAI index.

    Args:
        samples: one array [n, ...] or a tuple of arrays [n_j, ...]; rows are observations.
        statistic: f(*samples) -> float. With `vectorized`, each argument arrives with a leading
            resample axis, [B, n_j, ...], and f must return shape [B].
        rng: the generator. resamples: R. level: two-sided level.
        method: "percentile", or "bca" (jackknife over every row: n ≤ 5000 in total).
        paired: resample the same row indices in every sample (all n_j equal); otherwise each
            sample is resampled independently.
        vectorized: see `statistic`.

    Returns:
        Estimate(value=f(samples), low, high, n=total rows); the note counts resamples where f
        was undefined (NaN), which are dropped.
    """
    arrays = _as_samples(samples)
    rng = _check_generator(rng)
    r = check_count(resamples, "resamples")
    level = check_level(level)
    method = _check_method(method)
    sizes = [a.shape[0] for a in arrays]
    if paired and len(set(sizes)) != 1:
        raise EvalError(f"samples: paired samples need equal lengths, got {sizes}", key="samples")
    if method == "bca" and sum(sizes) > _BCA_MAX_N:
        raise EvalError(
            f"method: 'bca' jackknifes all {sum(sizes)} rows (n² cost); use 'percentile' "
            f"above {_BCA_MAX_N} rows",
            key="method",
        )

    def call(*args: NDArray) -> float:
        if vectorized:
            return float(np.asarray(statistic(*(a[None] for a in args)))[0])
        return float(statistic(*args))

    estimate = call(*arrays)

    def draw(rows: int) -> list[NDArray]:
        if paired:
            idx = rng.integers(0, sizes[0], size=(rows, sizes[0]))
            return [idx] * len(arrays)
        return [rng.integers(0, m, size=(rows, m)) for m in sizes]

    reps = np.empty(r)
    if vectorized:
        for start in range(0, r, _CHUNK):
            rows = min(_CHUNK, r - start)
            idx = draw(rows)
            reps[start : start + rows] = statistic(
                *(a[i] for a, i in zip(arrays, idx, strict=True))
            )
    else:
        for start in range(0, r, _CHUNK):
            rows = min(_CHUNK, r - start)
            idx = draw(rows)
            for k in range(rows):
                reps[start + k] = statistic(*(a[i[k]] for a, i in zip(arrays, idx, strict=True)))

    def jackknife() -> NDArray:
        values: list[float] = []
        if paired:
            for i in range(sizes[0]):
                keep = np.arange(sizes[0]) != i
                values.append(call(*(a[keep] for a in arrays)))
            return np.asarray(values)
        for j, a in enumerate(arrays):
            for i in range(a.shape[0]):
                keep = np.arange(a.shape[0]) != i
                args = [b if m != j else b[keep] for m, b in enumerate(arrays)]
                values.append(call(*args))
        return np.asarray(values)

    low, high, dropped = _interval(reps, estimate, level, method, jackknife)
    note = f"{dropped} of {r} resamples undefined and dropped" if dropped else ""
    name = f"bootstrap ({method}, {r} resamples{', paired' if paired else ''})"
    return Estimate(estimate, low, high, level, name, int(sum(sizes)), "two", note)


def block_bootstrap_mean(
    series: ArrayLike,
    rng_seed_or_generator: int | np.random.Generator,
    resamples: int = 2000,
    level: float = 0.95,
    kind: str = "stationary",
) -> Estimate:
    """Block-bootstrap CI (percentile) of the mean of an autocorrelated series, e.g. the 0/1
    outcomes of one long session in time order, via arch.bootstrap.

    The block length is arch's `optimal_block_length` (Politis–White); a series with no variance
    (or too short to estimate it) uses blocks of 1.

    Args:
        series: observations in time order, shape [T].
        rng_seed_or_generator: an int seed or a Generator (passed to arch explicitly).
        resamples: R. level: two-sided level. kind: "stationary" or "circular".

    Returns:
        Estimate(value=mean, low, high, n=T, extra={"block_length": b}).
    """
    from arch.bootstrap import CircularBlockBootstrap, StationaryBootstrap, optimal_block_length

    x = np.asarray(series, dtype=float).ravel()
    level = check_level(level)
    r = check_count(resamples, "resamples")
    if kind not in BLOCK_KINDS:
        raise EvalError(f"kind: {kind!r} must be 'stationary' or 'circular'", key="kind")
    if x.size < 2:
        raise EvalError(
            f"series: {x.size} observation(s); a block bootstrap needs >= 2", key="series"
        )
    rng = (
        rng_seed_or_generator
        if isinstance(rng_seed_or_generator, np.random.Generator)
        else np.random.default_rng(check_count(rng_seed_or_generator, "rng_seed_or_generator"))
    )
    block = 1.0
    if np.ptp(x) > 0 and x.size >= 10:
        with np.errstate(all="ignore"):
            b = float(optimal_block_length(x)[kind].iloc[0])
        if np.isfinite(b) and b >= 1.0:
            block = b
    if kind == "stationary":
        # arch takes the mean block length of the stationary bootstrap as a float.
        boot: Any = StationaryBootstrap(block, x, seed=rng)  # type: ignore[arg-type]
    else:
        block = float(np.ceil(block))
        boot = CircularBlockBootstrap(int(block), x, seed=rng)
    ci = boot.conf_int(lambda v: np.mean(v, keepdims=True), reps=r, method="percentile", size=level)
    name = f"{kind} block bootstrap (percentile, block {block:.1f}, {r} resamples)"
    return Estimate(
        float(x.mean()),
        float(ci[0, 0]),
        float(ci[1, 0]),
        level,
        name,
        int(x.size),
        "two",
        extra={"block_length": block},
    )
