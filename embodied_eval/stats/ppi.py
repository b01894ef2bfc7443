"""Prediction-powered inference (PPI) for a mean: many cheap sim predictions, few paired real runs.

Derived from Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, "Prediction-powered inference"
(Science 2023) and its power-tuned form PPI++ (Angelopoulos, Duchi, Zrnic 2023); applied to
sim+real robot evaluation as in "SureSim" (arXiv 2510.04354). The formulas below are the
well-known PPI mean estimator, written from its definition:

    labeled   : n pairs (Y_i, f_i)   real outcome Y and the sim's prediction f for the same
                task instance, seed and drift
    unlabeled : N sim predictions f̃_j of the same window that have no real episode
    estimator : θ̂_λ = mean_N(λ f̃) + mean_n(Y − λ f)          (the rectifier corrects sim bias)
    variance  : V(λ) = λ² σ²(f̃)/N + σ²(Y − λ f)/n
    interval  : θ̂_λ ± z_{1−α/2} √V(λ)                          (CLT, two-sided)

λ = 1 is classical PPI; λ = 0 is the classical mean of Y alone. PPI++ picks
λ̂ = Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1], which minimizes V(λ) (so the interval is
never wider than the classical CLT interval, up to the estimation of λ). When the sim predicts
nothing (constant f) λ̂ = 0 and the interval is exactly the classical one.

Cluster-aware version (episodes nested in task instances c = 1..C): the estimator is a sum of two
ratio means over the same clusters. λ minimizes its linearized variance Σ_c u_c(λ)², with
u_c = [Σ_{pairs∈c}(Y − λf) − n_c r̂]/n + λ[Σ_{sim∈c} f̃ − N_c m̂]/N (closed form), and the
variance is the delete-one-cluster jackknife V_J = (C − 1)/C Σ_k (θ̂_(k) − θ̄)², λ re-tuned in
every replicate, with a t_{C−1} quantile (the plain sandwich with C/(C − 1) under-covered by
1–2 points at 40 clusters in the coverage simulation; the jackknife did not).

Validity (checked by simulation in `coverage_ppi`; tables in benchmarks/coverage.py): both are
large-sample intervals. The iid version needs independent episodes (no task-instance clustering)
and ≳ 100 pairs with the rate away from 0/1. The cluster version was simulated on grids of task
instances (10–80), labelled pairs (50–400), true rates 0.3–0.9, ICC 0–0.2 and sim quality (good,
biased, useless): with 10–30 instances or 50 pairs it dips to 88–93 % (95 % nominal) at ordinary
rates, and at real rates of 0.85 and above it dips to 91–93 % even with 80 instances and 400
pairs. Hence the floor below; at it (40 instances, 100 or 200 pairs, rates 0.2–0.8) the low end
of the two-sided 95 % interval, the AR gate's bound, covers ≥ 95.2 % for true rates 0.3–0.8
(93.3 % at a true rate of 0.2, on the range's edge); the two-sided interval itself only ≥ 93.1 %
(92.8 % at 0.2), so the one-sided claim is the gate's: `FLOOR_COVERAGE`, stated in the
certificate. The PPI mean's validity does not depend on the sim's quality: a
biased or useless sim only widens the interval.

Validity floor (`ppi_validity`, `ppi_floor.PPIFloor`): neither interval is claimed valid, and
callers must fall back to the classical estimate, below any of
  * `MIN_PAIRS` = 100 labelled (sim, real) pairs;
  * `MIN_CLUSTERS` = 40 clusters (task instances) for the cluster version — the iid version is
    not valid on clustered episodes at all;
  * a real rate inside `RATE_RANGE` = [0.2, 0.8] and at least `EDGE_EVENTS`/n = 5/n away from 0
    and 1 (the CLT interval is skewed, then collapses, towards the edges);
  * a non-degenerate variance: V(λ) > 0 and the classical variance > 0 (otherwise the interval
    is a point, e.g. [1, 1] with λ = 0 when every pair succeeded).
The AR gate's bound is the low end of the two-sided interval at the protocol's level (the
(2·level − 1) interval's low end covered only 92.7 % in the grid). Certificates issued under the
earlier floor (50 pairs, 10 instances, no rate range, the (2·level − 1) low end) are recomputed
with it.

Effective real sample size: n_eff = n · V_classical / V_ppi, the number of real trials the
classical estimator would need for the same variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_level
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.ppi_floor import PPIFloor

IID = "iid"
CLUSTER = "cluster"
TUNED = "tuned"  # PPI++ power tuning
CLASSICAL_PPI = "classical"  # λ = 1


@dataclass(frozen=True)
class PPIResult:
    """A PPI mean with its interval and what it is worth in real trials.

    Attributes:
        estimate: the estimate (value, low, high, level, method, n = real pairs).
        variance: V(λ) of the estimator. classical_variance: the same-design variance of the
            real-only mean (σ²(Y)/n, or its cluster-robust form).
        lam: λ used. n_pairs: n. n_sim: N (unlabeled sim predictions). clusters: C (cluster
            version) or None.
        effective_n: n · classical_variance / variance (inf when variance is 0).
    """

    estimate: Estimate
    variance: float
    classical_variance: float
    lam: float
    n_pairs: int
    n_sim: int
    clusters: int | None
    effective_n: float

    def to_json(self) -> dict[str, Any]:
        out = self.estimate.to_json()
        out.update(
            effective_n=None if math.isinf(self.effective_n) else round(self.effective_n, 3),
            lambda_=self.lam,
            n_pairs=self.n_pairs,
            n_sim=self.n_sim,
            clusters=self.clusters,
        )
        out["lambda"] = out.pop("lambda_")
        return out


def _vector(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size and not np.all(np.isfinite(arr)):
        raise EvalError(f"{name}: values must be finite numbers", key=name)
    return arr


def _checked(
    real: ArrayLike, sim_paired: ArrayLike, sim_unpaired: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    y = _vector(real, "real")
    f = _vector(sim_paired, "sim_paired")
    g = _vector(sim_unpaired, "sim_unpaired")
    if y.size != f.size:
        raise EvalError(
            f"real / sim_paired: {y.size} real outcomes but {f.size} paired sim predictions; "
            "each pair needs both",
            key="sim_paired",
        )
    if y.size < 2:
        raise EvalError("real: PPI needs at least 2 paired real episodes", key="real")
    return y, f, g


def ppi_validity(result: PPIResult, real: ArrayLike, floor: PPIFloor | None = None) -> list[str]:
    """Why a PPI fit is below the validity floor (module docstring); empty when it is above it.

    Args:
        result: the fit (`ppi_mean` or `ppi_mean_clustered`). real: the pairs' real outcomes Y.
        floor: the floor (default: this version's, `PPIFloor()`).

    Returns:
        One reason per floor not met, in the users' words.
    """
    fl = floor if floor is not None else PPIFloor()
    y = _vector(real, "real")
    n = result.n_pairs
    reasons = []
    if n < fl.pairs:
        reasons.append(f"{n} labelled pair(s), fewer than {fl.pairs}")
    if result.clusters is None:
        reasons.append("iid interval: episodes clustered in task instances are not independent")
    elif result.clusters < fl.task_instances:
        reasons.append(f"{result.clusters} cluster(s), fewer than {fl.task_instances}")
    if n > 0:
        rate = float(np.mean(y))
        edge = fl.events_from_edge / n
        if rate <= edge or rate >= 1.0 - edge:
            reasons.append(
                f"real rate {rate:.3g} within {fl.events_from_edge}/n = {edge:.3g} of 0 or 1"
            )
        elif fl.rate_range is not None and not fl.rate_range[0] <= rate <= fl.rate_range[1]:
            low, high = fl.rate_range
            reasons.append(
                f"real rate {rate:.3g} outside {low:g}–{high:g}, where the interval's coverage "
                "was shown"
            )
    if not (result.variance > 0.0 and result.classical_variance > 0.0):
        reasons.append(f"degenerate variance (λ = {result.lam:.3g}, V = {result.variance:.3g})")
    return reasons


def _var(x: NDArray[np.float64]) -> float:
    """Sample variance with ddof = 1 (0 for fewer than 2 values)."""
    return float(np.var(x, ddof=1)) if x.size > 1 else 0.0


def ppi_lambda(real: ArrayLike, sim_paired: ArrayLike, n_sim: int) -> float:
    """PPI++ power-tuning λ̂ = Cov(Y, f)/((1 + n/N) Var(f)), clipped to [0, 1] (0 if Var f = 0).

    Var(f) pools the paired and unlabeled predictions in the paper; here it is taken on the
    paired predictions (ddof = 1), which keeps λ̂ a function of the labeled sample alone.
    """
    y, f = _vector(real, "real"), _vector(sim_paired, "sim_paired")
    var_f = _var(f)
    if var_f <= 0.0 or y.size < 2:
        return 0.0
    cov = float(np.cov(y, f, ddof=1)[0, 1])
    n = y.size
    lam = cov / ((1.0 + (n / n_sim if n_sim > 0 else math.inf)) * var_f)
    return float(min(1.0, max(0.0, lam)))


def ppi_mean(
    real: ArrayLike,
    sim_paired: ArrayLike,
    sim_unpaired: ArrayLike,
    level: float = 0.95,
    lam: float | str = TUNED,
) -> PPIResult:
    """PPI mean of the real outcome with a CLT interval (iid episodes): see the module docstring.

    Args:
        real: real outcomes Y of the pairs (0/1 success or graded q), shape [n].
        sim_paired: the sim's predictions f for the same pairs, shape [n].
        sim_unpaired: sim predictions f̃ without a real episode, shape [N] (may be empty).
        level: two-sided level.
        lam: "tuned" (PPI++), "classical" (λ = 1) or a number in [0, 1].

    Returns:
        PPIResult; method names the λ rule and "CLT".
    """
    level = check_level(level)
    y, f, g = _checked(real, sim_paired, sim_unpaired)
    n, big_n = y.size, g.size
    lam_v = _resolve_lambda(lam, y, f, big_n)
    if big_n == 0:
        lam_v = 0.0  # no unlabeled predictions: the rectifier alone is the classical mean
    value = (lam_v * float(g.mean()) if big_n else 0.0) + float(np.mean(y - lam_v * f))
    variance = (lam_v**2 * _var(g) / big_n if big_n else 0.0) + _var(y - lam_v * f) / n
    classical = _var(y) / n
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    half = z * math.sqrt(variance)
    method = f"prediction-powered mean ({_lambda_name(lam, lam_v)}), CLT interval, iid episodes"
    est = Estimate(value, value - half, value + half, level, method, n)
    return PPIResult(est, variance, classical, lam_v, n, big_n, None, _eff(n, classical, variance))


def ppi_mean_clustered(
    real: ArrayLike,
    sim_paired: ArrayLike,
    pair_cluster: ArrayLike,
    sim_unpaired: ArrayLike,
    sim_cluster: ArrayLike,
    level: float = 0.95,
    lam: float | str = TUNED,
) -> PPIResult:
    """PPI mean with a cluster-robust (linearized) variance over clusters and a t_{C−1} interval.

    Args:
        real, sim_paired: the pairs' real outcomes and sim predictions, shape [n].
        pair_cluster: cluster index (≥ 0) of each pair, shape [n].
        sim_unpaired: unlabeled sim predictions, shape [N]. sim_cluster: their clusters, [N].
        level: two-sided level. lam: as in `ppi_mean` (tuned: minimizes the cluster variance).

    Returns:
        PPIResult with clusters = number of clusters holding any episode.
    """
    level = check_level(level)
    y, f, g = _checked(real, sim_paired, sim_unpaired)
    pc = np.asarray(pair_cluster, dtype=np.int64).ravel()
    sc = np.asarray(sim_cluster, dtype=np.int64).ravel()
    if pc.size != y.size or sc.size != g.size:
        raise EvalError("pair_cluster / sim_cluster: one cluster index per episode", key="cluster")
    if (pc.size and pc.min() < 0) or (sc.size and sc.min() < 0):
        raise EvalError("pair_cluster / sim_cluster: indices must be >= 0", key="cluster")
    n, big_n = y.size, g.size
    size = int(max(pc.max(initial=-1), sc.max(initial=-1))) + 1
    used = (np.bincount(pc, minlength=size) + np.bincount(sc, minlength=size)) > 0
    c = int(used.sum())
    if c < 3:
        raise EvalError(
            "clusters: the cluster PPI interval needs at least 3 clusters", key="cluster"
        )
    sums = {
        "n": np.bincount(pc, minlength=size)[used].astype(float),
        "y": np.bincount(pc, weights=y, minlength=size)[used],
        "f": np.bincount(pc, weights=f, minlength=size)[used],
        "m": np.bincount(sc, minlength=size)[used].astype(float),
        "g": np.bincount(sc, weights=g, minlength=size)[used],
    }
    fixed = None if isinstance(lam, str) and lam == TUNED else _resolve_lambda(lam, y, f, big_n)
    if big_n == 0:
        fixed = 0.0
    value, lam_full = _cluster_fit(np.ones((1, c)), sums, fixed)
    # Delete-one-cluster jackknife, λ re-tuned in every replicate (its estimation counted).
    leave_out = 1.0 - np.eye(c)
    jack, _ = _cluster_fit(leave_out, sums, fixed)
    jack0, _ = _cluster_fit(leave_out, sums, 0.0)
    variance = (c - 1.0) / c * float(np.sum((jack - jack.mean()) ** 2))
    classical = (c - 1.0) / c * float(np.sum((jack0 - jack0.mean()) ** 2))
    t = float(stats.t.ppf(0.5 + level / 2.0, c - 1))
    half = t * math.sqrt(variance)
    point = float(value[0])
    lam_v = float(lam_full[0])
    method = (
        f"prediction-powered mean ({_lambda_name(lam, lam_v)}), delete-one-cluster jackknife "
        f"interval over {c} clusters (t, {c - 1} df)"
    )
    est = Estimate(point, point - half, point + half, level, method, n)
    return PPIResult(est, variance, classical, lam_v, n, big_n, c, _eff(n, classical, variance))


def _cluster_fit(
    w: NDArray[np.float64], sums: dict[str, NDArray[np.float64]], fixed: float | None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """PPI estimate on cluster-weighted data, one row of `w` [R, C] per replicate.

    λ (when not fixed) minimizes the linearized variance Σ_c (a_c − λ b_c)², where
    a_c = w_c(y_c − n_c ȳ)/n and b_c = w_c[(f_c − n_c f̄)/n − (g_c − m_c ḡ)/N].

    Returns:
        (estimates [R], λ [R]).
    """
    n = w @ sums["n"]
    big_n = w @ sums["m"]
    ybar = (w @ sums["y"]) / n
    fbar = (w @ sums["f"]) / n
    has_sim = big_n > 0
    gbar = np.where(has_sim, (w @ sums["g"]) / np.where(has_sim, big_n, 1.0), 0.0)
    if fixed is None:
        a = w * (sums["y"] - sums["n"] * ybar[:, None]) / n[:, None]
        b = w * (sums["f"] - sums["n"] * fbar[:, None]) / n[:, None]
        b = b - w * (sums["g"] - sums["m"] * gbar[:, None]) / np.where(has_sim, big_n, 1.0)[:, None]
        bb = np.sum(b * b, axis=1)
        ab = np.sum(a * b, axis=1)
        lam = np.where((bb > 0) & has_sim, np.clip(ab / np.where(bb > 0, bb, 1.0), 0.0, 1.0), 0.0)
    else:
        lam = np.where(has_sim, fixed, 0.0)
    return lam * gbar + ybar - lam * fbar, lam


def _resolve_lambda(
    lam: float | str, y: NDArray[np.float64], f: NDArray[np.float64], big_n: int
) -> float:
    if isinstance(lam, str):
        if lam == TUNED:
            return ppi_lambda(y, f, big_n)
        if lam == CLASSICAL_PPI:
            return 1.0
        raise EvalError(f"lam: {lam!r} is not 'tuned', 'classical' or a number", key="lam")
    value = float(lam)
    if not 0.0 <= value <= 1.0:
        raise EvalError(f"lam: {value} must be in [0, 1]", key="lam")
    return value


def _lambda_name(lam: float | str, value: float) -> str:
    if isinstance(lam, str) and lam == TUNED:
        return f"PPI++ power-tuned λ = {value:.3f}"
    return f"λ = {value:g}"


def _eff(n: int, classical: float, variance: float) -> float:
    if variance <= 0.0:
        return math.inf if classical > 0.0 else float(n)
    return n * classical / variance


def ppi_trials_needed(
    half_width: float,
    var_residual: float,
    var_sim: float,
    n_sim: int,
    level: float = 0.95,
) -> int | None:
    """Real trials n for a PPI interval half-width h: smallest n with
    z² (σ²_res/n + σ²_sim/N) ≤ h² (None when the sim term alone exceeds h²).

    Args:
        half_width: target half-width h. var_residual: σ²(Y − λf) per pair.
        var_sim: λ² σ²(f̃) (the unlabeled term's per-episode variance). n_sim: N.
        level: two-sided level.
    """
    z = float(stats.norm.ppf(0.5 + check_level(level) / 2.0))
    budget = (half_width / z) ** 2 - (var_sim / n_sim if n_sim > 0 else 0.0)
    if budget <= 0.0:
        return None
    return max(1, math.ceil(var_residual / budget - 1e-9))


@dataclass(frozen=True)
class SimAssistedPlan:
    """Real trials an "AR ≥ threshold" gate needs, with and without the sim's help.

    Both numbers use the same normal approximation (the one-sided bound p̂ − z_level·SE must
    clear the threshold with the rate staying at p̂): without sim SE² = σ²(Y)/n; with sim (PPI)
    SE² = σ²(Y − λf)/n + λ²σ²(f)/N (`ppi_trials_needed`).

    Attributes:
        threshold, level: the gate. rate: p̂ (the PPI estimate so far). pairs: n so far.
        n_sim: N sim predictions planned with. lam: λ. correlation: Pearson r of sim and real on
        the pairs. agreement: fraction of pairs where sim and real outcomes agree.
        trials_without_sim / trials_with_sim: total real trials needed (None: unreachable,
        the rate does not clear the threshold, or the sim term alone is too wide).
    """

    threshold: float
    level: float
    rate: float
    pairs: int
    n_sim: int
    lam: float
    correlation: float | None
    agreement: float
    trials_without_sim: int | None
    trials_with_sim: int | None

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["method"] = (
            "normal approximation of the one-sided bound at the current rate; with sim: "
            "prediction-powered (PPI++) variance"
        )
        return out


def plan_success_with_sim(
    threshold: float,
    real: ArrayLike,
    sim_paired: ArrayLike,
    sim_unpaired: ArrayLike,
    level: float = 0.95,
    n_sim: int | None = None,
) -> SimAssistedPlan:
    """How many real trials a success gate needs given the sim/real agreement seen so far.

    Args:
        threshold: the gate "AR ≥ threshold". real, sim_paired: the pairs so far (≥ 2).
        sim_unpaired: sim predictions without a real episode. level: one-sided level.
        n_sim: sim episodes to plan with (default: all sim episodes so far, paired included,
            as the sim can run every manifest row).
    """
    level = check_level(level)
    y, f, g = _checked(real, sim_paired, sim_unpaired)
    n = y.size
    big_n = int(n_sim) if n_sim is not None else n + g.size
    if big_n < 0:
        raise EvalError("n_sim: must be >= 0", key="n_sim")
    fit = ppi_mean(y, f, g, 0.5)
    lam = ppi_lambda(y, f, big_n) if big_n > 0 else 0.0
    rate = float(fit.estimate.value) if fit.estimate.value is not None else float(y.mean())
    margin = rate - float(threshold)
    two_sided = 2.0 * level - 1.0
    f_all = np.concatenate([f, g])
    without = with_sim = None
    if margin > 0:
        without = ppi_trials_needed(margin, _var(y), 0.0, 0, two_sided)
        with_sim = ppi_trials_needed(
            margin, _var(y - lam * f), lam**2 * _var(f_all), big_n, two_sided
        )
    corr = None
    if _var(y) > 0 and _var(f) > 0:
        corr = float(np.corrcoef(y, f)[0, 1])
    return SimAssistedPlan(
        float(threshold), level, rate, n, big_n, lam, corr, float(np.mean(y == f)), without,
        with_sim,
    )  # fmt: skip
