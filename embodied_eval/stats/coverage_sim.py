"""Coverage checks of the interval methods: exact enumeration where the sampling law is discrete
and small (binomial, Poisson, paired 2×2 tables), simulation where it is not (cluster bootstrap,
anytime-valid sequences).

Used by the fast coverage tests and by the full coverage table (benchmarks/coverage.py). Claims:
    * Clopper–Pearson, Garwood (rate and MTBF), exponential MTTR: coverage ≥ nominal at every
      parameter value (exact methods; enumeration shows it).
    * Wilson and Newcombe method 10: close to nominal on average, but not guaranteed pointwise
      (they dip a few points below at some p for small n).
    * Cluster bootstrap: within 2 points of nominal with ≥ 20 clusters (two-level; ≥ 50 for the
      one-level scheme) and the rate away from 0 and 1; too short with few clusters, n < 20
      episodes, or p near 0/1.
    * Mixture confidence sequence: excludes the true p at *any* look with probability ≤ α.
    * Sequential A/B comparison: declares a winner between equal policies with probability ≤ α
      under a look after every trial (binary and graded outcomes), and "no difference" when
      |Δ| ≥ δ with probability ≤ 1 − power (`sequential_comparison_oc`).

AR_ppi's coverage grid is in `coverage_ppi`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from embodied_eval.stats.bootstrap import cluster_bootstrap_mean
from embodied_eval.stats.comparison import EffectSequence, betting_fractions
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.paired import paired_gap_interval
from embodied_eval.stats.proportions import wilson_bounds

IntervalFn = Callable[[int], Estimate]


def _covers(est: Estimate, truth: float) -> bool:
    low = -math.inf if est.low is None else est.low
    high = math.inf if est.high is None else est.high
    return low <= truth <= high


def exact_binomial_coverage(interval: Callable[[int, int], Estimate], n: int, p: float) -> float:
    """P_p(interval(K, n) ∋ p) for K ~ Binomial(n, p), by enumeration of k = 0..n.

    Args:
        interval: f(successes, n) -> Estimate. n: trials. p: true rate.
    """
    pmf = stats.binom.pmf(np.arange(n + 1), n, p)
    hits = np.array([_covers(interval(k, n), p) for k in range(n + 1)])
    return float(pmf[hits].sum())


def exact_poisson_coverage(
    interval: Callable[[int], Estimate], expected_events: float, truth: float
) -> float:
    """P(interval(K) ∋ truth) for K ~ Poisson(expected_events), summing k up to the
    1 − 1e-12 quantile.

    Args:
        interval: f(events) -> Estimate (exposure and units fixed by the caller).
        expected_events: λ·H. truth: the true value in the interval's units.
    """
    top = int(stats.poisson.ppf(1.0 - 1e-12, expected_events)) + 1
    ks = np.arange(top + 1)
    pmf = stats.poisson.pmf(ks, expected_events)
    hits = np.array([_covers(interval(int(k)), truth) for k in ks])
    return float(pmf[hits].sum())


def exact_paired_coverage(n: int, probs: tuple[float, float, float, float], level: float) -> float:
    """Exact coverage of the Newcombe paired-gap interval for n pairs with cell probabilities
    (both succeed, sim only, real only, both fail), enumerating all 2×2 tables.

    Args:
        n: pairs. probs: the four cell probabilities (sum 1). level: interval level.
    """
    truth = probs[1] - probs[2]
    total = 0.0
    log_p = np.log(np.maximum(np.asarray(probs, dtype=float), 1e-300))
    for a, b, c in itertools.product(range(n + 1), repeat=3):
        d = n - a - b - c
        if d < 0:
            continue
        counts = np.array([a, b, c, d])
        if np.any((np.asarray(probs) == 0) & (counts > 0)):
            continue
        logpmf = special.gammaln(n + 1) - special.gammaln(counts + 1).sum() + counts @ log_p
        if _covers(paired_gap_interval(a, b, c, d, level), truth):
            total += math.exp(logpmf)
    return total


def _wilson_estimate(k: int, n: int, level: float) -> Estimate:
    low, high = wilson_bounds(k, n, level)
    return Estimate(k / n, low, high, level, "Wilson", n)


def wilson_coverage(n: int, p: float, level: float = 0.95) -> float:
    """Exact coverage of the Wilson interval at (n, p)."""
    return exact_binomial_coverage(lambda k, m: _wilson_estimate(k, m, level), n, p)


@dataclass(frozen=True)
class ClusterScenario:
    """Clustered 0/1 outcomes: cluster rates p_c ~ Beta with mean `p` and intra-cluster
    correlation `icc` (0 = independent episodes), `cluster_size` episodes per cluster."""

    name: str
    n_clusters: int
    cluster_size: int
    p: float
    icc: float

    def draw(self, rng: np.random.Generator) -> tuple[NDArray, NDArray]:
        """One data set: (successes [C], counts [C])."""
        counts = np.full(self.n_clusters, self.cluster_size)
        if self.icc <= 0.0:
            rates = np.full(self.n_clusters, self.p)
        else:
            total = (1.0 - self.icc) / self.icc  # a + b of the Beta, from the ICC
            rates = rng.beta(self.p * total, (1.0 - self.p) * total, size=self.n_clusters)
        return rng.binomial(counts, rates), counts


def cluster_bootstrap_coverage(
    scenario: ClusterScenario,
    rng: np.random.Generator,
    reps: int = 500,
    resamples: int = 1000,
    level: float = 0.95,
    two_level: bool = True,
    method: str = "percentile",
) -> float:
    """Simulated coverage of `cluster_bootstrap_mean` for the scenario's true mean rate p."""
    hits = 0
    for _ in range(reps):
        s, n = scenario.draw(rng)
        est = cluster_bootstrap_mean(s, n, rng, resamples, level, two_level, method)
        hits += _covers(est, scenario.p)
    return hits / reps


def anytime_miscoverage(
    p: float,
    max_trials: int,
    reps: int,
    rng: np.random.Generator,
    alpha: float = 0.05,
    method: str = "mixture",
) -> float:
    """Fraction of runs in which the interval, checked after every trial up to `max_trials`,
    excludes the true p at least once.

    Args:
        p: true success rate. max_trials: looks per run. reps: runs. rng: the generator.
        alpha: 1 − level. method: "mixture" (Robbins confidence sequence, anytime-valid) or
            "wilson" (fixed-n Wilson interval re-checked each trial: not anytime-valid).
    """
    z = rng.random((reps, max_trials)) < p
    s = np.cumsum(z, axis=1)
    n = np.arange(1, max_trials + 1)[None, :]
    if method == "mixture":
        log_m = special.betaln(1 + s, 1 + n - s) - special.xlogy(s, p) - special.xlog1py(n - s, -p)
        excluded = log_m >= -math.log(alpha)
    else:
        zq = float(stats.norm.ppf(1.0 - alpha / 2.0))
        ph = s / n
        centre = (ph + zq**2 / (2 * n)) / (1 + zq**2 / n)
        half = zq / (1 + zq**2 / n) * np.sqrt(ph * (1 - ph) / n + zq**2 / (4 * n**2))
        excluded = (p < centre - half) | (p > centre + half)
    return float(np.mean(excluded.any(axis=1)))


def confidence_sequence_stopping(
    p: float,
    threshold: float,
    reps: int,
    rng: np.random.Generator,
    alpha: float = 0.05,
    min_trials: int = 5,
    max_trials: int = 400,
) -> tuple[float, float, float]:
    """Operating characteristics of `MixtureConfidenceSequence.decide(threshold)` at true rate p.

    The interval's low end clears the threshold exactly when M_n(threshold) ≥ 1/α with
    p̂ > threshold (and its high end falls below it when p̂ < threshold), so the whole run is
    vectorized over trials.

    Args:
        p: true success rate. threshold: the gate. reps: runs. rng: the generator.
        alpha, min_trials, max_trials: as in `MixtureConfidenceSequence`.

    Returns:
        (fraction passed, fraction failed, median trials at the decision).
    """
    z = rng.random((reps, max_trials)) < p
    s = np.cumsum(z, axis=1)
    n = np.arange(1, max_trials + 1)[None, :]
    log_m = (
        special.betaln(1 + s, 1 + n - s)
        - special.xlogy(s, threshold)
        - special.xlog1py(n - s, -threshold)
    )
    outside = (log_m >= -math.log(alpha)) & (n >= min_trials)
    passed = outside & (s > threshold * n)
    failed = outside & (s < threshold * n)
    decided = passed | failed
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), max_trials - 1)
    rows = np.arange(reps)
    pass_frac = float(np.mean(passed[rows, first]))
    fail_frac = 1.0 - pass_frac  # undecided at the cap counts as fail
    return pass_frac, fail_frac, float(np.median(first + 1))


# --------------------------------------------------------------------------- sequential A/B


def paired_outcomes(
    p_a: float, p_b: float, reps: int, trials: int, rng: np.random.Generator, shared: float = 0.0
) -> tuple[NDArray, NDArray]:
    """Binary paired trials: x_A ~ Bernoulli(p_a), x_B ~ Bernoulli(p_b), each pair drawn from one
    uniform with probability `shared` (common random numbers: same instance, seed, drift), else
    independently. Shapes [reps, trials]."""
    u = rng.random((reps, trials))
    v = np.where(rng.random((reps, trials)) < shared, u, rng.random((reps, trials)))
    return (u < p_a).astype(float), (v < p_b).astype(float)


@dataclass(frozen=True)
class ComparisonOC:
    """Operating characteristics of `SequentialComparison` by simulation."""

    a_better: float
    b_better: float
    no_difference: float
    undecided: float
    mean_trials: float
    mc_se: float


def sequential_comparison_oc(
    xa: NDArray,
    xb: NDArray,
    delta: float = 0.2,
    alpha: float = 0.05,
    power: float = 0.8,
) -> ComparisonOC:
    """Run `SequentialComparison`'s rule on many simulated runs at once, peeking after every
    trial; the cap is the number of columns.

    Args:
        xa, xb: outcomes of A and B, shape [reps, max_trials].
        delta, alpha, power: as in `SequentialComparison`.

    Returns:
        ComparisonOC (fractions of runs per decision; mean trials used; mc_se is the Monte Carlo
        standard error of the "A better" + "B better" fraction).
    """
    reps, cap = xa.shape
    d = xa - xb
    win, accept = math.log(2.0 / alpha), math.log(1.0 / (1.0 - power))
    wa, wb, ep, em = (np.zeros(reps) for _ in range(4))
    cross_p = np.zeros(reps, bool)
    cross_m = np.zeros(reps, bool)
    s1, s2 = np.zeros(reps), np.zeros(reps)
    decision = np.zeros(reps, dtype=np.int8)  # 0 open, 1 A, 2 B, 3 no difference
    used = np.full(reps, cap)
    sequence = EffectSequence(reps, alpha, delta)  # "no difference" needs it inside ±δ
    narrow = np.zeros(reps, bool)
    for t in range(cap):
        open_ = decision == 0
        if not open_.any():
            break
        rows = np.flatnonzero(open_)
        sequence.update(d[rows, t], rows)
        narrow[rows] = sequence.inside(rows)
        lam_a, lam_b, lam_e = betting_fractions(t, s1, s2, delta)
        dt = d[:, t]
        wa += np.log1p(lam_a * dt)
        wb += np.log1p(-lam_b * dt)
        ep += np.log1p(-lam_e * (dt - delta))
        em += np.log1p(lam_e * (dt + delta))
        s1 += dt
        s2 += dt * dt
        cross_p |= ep >= accept
        cross_m |= em >= accept
        new = np.where(
            wa >= win, 1, np.where(wb >= win, 2, np.where(cross_p & cross_m & narrow, 3, 0))
        ).astype(np.int8)
        hit = open_ & (new > 0)
        decision[hit] = new[hit]
        used[hit] = t + 1
    frac = [float(np.mean(decision == k)) for k in (1, 2, 3, 0)]
    wrong = frac[0] + frac[1]
    return ComparisonOC(
        frac[0],
        frac[1],
        frac[2],
        frac[3],
        float(used.mean()),
        math.sqrt(wrong * (1 - wrong) / reps),
    )
