"""Sim↔real agreement across policies: MMRV, Pearson and Spearman, with Fisher-z and
episode-level bootstrap intervals.

Inputs are per-policy success rates (one entry per policy, same order in sim and real). These
are usually computed on 3–9 policies, so report intervals: Fisher-z needs ≥ 4 policies and assumes
bivariate normality; the episode-level bootstrap captures only episode noise (the policies are
fixed).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_level
from embodied_eval.stats.estimate import Estimate

STATISTICS = ("mmrv", "pearson", "spearman")


def _paired_rates(sim_rates: ArrayLike, real_rates: ArrayLike) -> tuple[NDArray, NDArray]:
    sim = np.asarray(sim_rates, dtype=float).ravel()
    real = np.asarray(real_rates, dtype=float).ravel()
    if sim.shape != real.shape:
        raise EvalError(
            f"sim_rates/real_rates: {sim.size} sim policies vs {real.size} real policies",
            key="real_rates",
        )
    if not (np.all(np.isfinite(sim)) and np.all(np.isfinite(real))):
        raise EvalError("sim_rates/real_rates: rates must be finite numbers", key="sim_rates")
    return sim, real


def _mmrv_batch(sim: NDArray, real: NDArray) -> NDArray:
    """MMRV of each row of sim/real arrays [B, K] (see `mmrv`)."""
    s_gt = sim[:, :, None] > sim[:, None, :]
    r_gt = real[:, :, None] > real[:, None, :]
    gaps = np.abs(real[:, :, None] - real[:, None, :]) * (s_gt != r_gt)
    out: NDArray = gaps.max(axis=2).mean(axis=1)
    return out


def mmrv(sim_rates: ArrayLike, real_rates: ArrayLike) -> float:
    """Mean maximum rank violation (SIMPLER) between sim and real policy success rates.

    RV_i = max_j |R_i − R_j| · 1[(S_i > S_j) ≠ (R_i > R_j)], MMRV = mean_i RV_i. Argument order
    matters: the first argument is the **sim** rates S, the second the **real** rates R, and each
    violation is weighted by the *real* gap |R_i − R_j|. 0 means sim ranks the policies as real
    does; a violation between policies that differ little in reality costs little.

    Args:
        sim_rates: S, sim success rate per policy, shape [K].
        real_rates: R, real success rate per policy, shape [K], same policy order.

    Returns:
        MMRV in [0, 1] (0.0 for fewer than 2 policies).
    """
    sim, real = _paired_rates(sim_rates, real_rates)
    if sim.size < 2:
        return 0.0
    return float(_mmrv_batch(sim[None], real[None])[0])


def _fisher_z(r: float, k: int, level: float, se_scale: float) -> tuple[float | None, float | None]:
    if k < 4:
        return None, None
    if abs(r) >= 1.0:
        return r, r  # degenerate: atanh(±1) is infinite
    half = float(stats.norm.ppf(0.5 + level / 2.0)) * math.sqrt(se_scale / (k - 3))
    z = math.atanh(r)
    return math.tanh(z - half), math.tanh(z + half)


def _correlation(sim_rates: ArrayLike, real_rates: ArrayLike, level: float, kind: str) -> Estimate:
    sim, real = _paired_rates(sim_rates, real_rates)
    level = check_level(level)
    k = int(sim.size)
    # Spearman's Fisher-z standard error uses Fieller et al.'s 1.06/(k−3).
    se_scale = 1.0 if kind == "pearson" else 1.06
    method = f"{kind.capitalize()} r, Fisher-z interval"
    if k < 2 or np.ptp(sim) == 0 or np.ptp(real) == 0:
        note = "undefined: fewer than 2 policies or constant rates"
        return Estimate(None, None, None, level, method, k, "two", note)
    if kind == "pearson":
        r = float(stats.pearsonr(sim, real).statistic)
    else:
        r = float(stats.spearmanr(sim, real).statistic)
    low, high = _fisher_z(r, k, level, se_scale)
    note = "" if low is not None else "interval needs >= 4 policies"
    return Estimate(r, low, high, level, method, k, "two", note)


def pearson_agreement(sim_rates: ArrayLike, real_rates: ArrayLike, level: float = 0.95) -> Estimate:
    """Pearson correlation of policy-level sim and real success rates, Fisher-z interval.

    tanh(atanh r ± z_{1−α/2}/√(K − 3)); needs K ≥ 4 policies for an interval.

    Args:
        sim_rates, real_rates: per-policy success rates, shape [K]. level: two-sided level.

    Returns:
        Estimate(value=r, low, high, n=K); value None for constant rates or K < 2.
    """
    return _correlation(sim_rates, real_rates, level, "pearson")


def spearman_agreement(
    sim_rates: ArrayLike, real_rates: ArrayLike, level: float = 0.95
) -> Estimate:
    """Spearman rank correlation of policy-level sim and real success rates, Fisher-z interval
    with Fieller's standard error √(1.06/(K − 3)).

    Args:
        sim_rates, real_rates: per-policy success rates, shape [K]. level: two-sided level.

    Returns:
        Estimate(value=ρ, low, high, n=K); value None for constant rates or K < 2.
    """
    return _correlation(sim_rates, real_rates, level, "spearman")


def _rank_rows(x: NDArray) -> NDArray:
    """Average ranks along the last axis (ties share their mean rank)."""
    out: NDArray = stats.rankdata(x, axis=-1)
    return out


def _corr_rows(x: NDArray, y: NDArray) -> NDArray:
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    denom = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out: NDArray = (xc * yc).sum(axis=1) / denom
    return out


def policy_agreement_bootstrap(
    sim_successes: ArrayLike,
    sim_counts: ArrayLike,
    real_successes: ArrayLike,
    real_counts: ArrayLike,
    rng: np.random.Generator,
    statistic: str = "mmrv",
    resamples: int = 10_000,
    level: float = 0.95,
) -> Estimate:
    """Episode-level bootstrap (percentile) CI of an agreement statistic across policies.

    Episodes are resampled within each policy and domain: for 0/1 outcomes that is a
    Binomial(n, p̂) draw per policy and domain (sufficient statistics), vectorized.

    Args:
        sim_successes, sim_counts: sim successes and episodes per policy, shape [K].
        real_successes, real_counts: the same for real, shape [K], same policy order.
        rng: the generator. statistic: "mmrv", "pearson" or "spearman".
        resamples: R. level: two-sided level.

    Returns:
        Estimate(value on the observed rates, low, high, n=K policies); resamples where the
        correlation is undefined (constant rates) are dropped and counted in the note.
    """
    if statistic not in STATISTICS:
        raise EvalError(
            f"statistic: {statistic!r} must be one of {', '.join(STATISTICS)}", key="statistic"
        )
    if not isinstance(rng, np.random.Generator):
        raise EvalError("rng: pass a numpy.random.Generator", key="rng")
    level = check_level(level)
    r = check_count(resamples, "resamples")
    arrays = [
        np.asarray(v, dtype=np.int64).ravel()
        for v in (sim_successes, sim_counts, real_successes, real_counts)
    ]
    ss, sn, rs, rn = arrays
    if len({a.size for a in arrays}) != 1:
        raise EvalError("sim/real successes and counts: one entry per policy each", key="counts")
    if np.any(sn <= 0) or np.any(rn <= 0) or np.any(ss > sn) or np.any(rs > rn):
        raise EvalError(
            "counts: every policy needs >= 1 episode and successes <= episodes", key="counts"
        )
    if np.any(ss < 0) or np.any(rs < 0):
        raise EvalError("successes: must be >= 0", key="successes")
    k = ss.size
    sim_p, real_p = ss / sn, rs / rn
    method = f"{statistic}, episode-level bootstrap (percentile, {r} resamples)"
    if statistic == "mmrv":
        value: float | None = mmrv(sim_p, real_p)
    else:
        value = _correlation(sim_p, real_p, level, statistic).value
    sim_b = rng.binomial(sn, sim_p, size=(r, k)) / sn
    real_b = rng.binomial(rn, real_p, size=(r, k)) / rn
    if statistic == "mmrv":
        reps = np.concatenate(
            [_mmrv_batch(sim_b[i : i + 1000], real_b[i : i + 1000]) for i in range(0, r, 1000)]
        )
    elif statistic == "pearson":
        reps = _corr_rows(sim_b, real_b)
    else:
        reps = _corr_rows(_rank_rows(sim_b), _rank_rows(real_b))
    finite = reps[np.isfinite(reps)]
    dropped = r - finite.size
    note = f"{dropped} of {r} resamples undefined and dropped" if dropped else ""
    if finite.size == 0:
        return Estimate(value, None, None, level, method, k, "two", "every resample undefined")
    alpha = 1.0 - level
    low, high = (float(v) for v in np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0]))
    return Estimate(value, low, high, level, method, k, "two", note)
