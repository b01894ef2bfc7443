"""Coverage and savings of the prediction-powered success rate (AR_ppi), by simulation.

Scenarios (`PPIScenario`): episodes in task-instance clusters with cluster success rates
p_c ~ Beta(mean p, intra-cluster correlation icc) (icc = 0: independent episodes); each episode
has a latent real outcome Y ~ Bernoulli(p_c) and a sim prediction f drawn from it by the sim's
quality:

* "good": f = Y except a flip with probability 1 − agree (sim and real agree on ~agree of pairs);
* "biased": optimistic sim: f = 1 when Y = 1, and f = 1 with probability `bias` when Y = 0;
* "bad": f ~ Bernoulli(0.5) independent of Y (the sim predicts nothing).

A random `n_pairs` of the episodes get their real outcome observed (the pairs); the others keep
only f (the unlabeled sim episodes). Claims checked here (and in the coverage table):

* iid PPI interval: coverage ≥ nominal − 1 pt for independent episodes with ≥ 100 pairs and
  0.2 ≤ p ≤ 0.8, for every sim quality (good, biased, useless). Not claimed with clustered
  episodes (it ignores the clustering: 75–90 % at ICC 0.1), with a rate near 0 or 1, or with
  fewer than ~50 pairs.
* cluster jackknife PPI interval: coverage ≥ nominal − 1 pt with ≥ 40 task instances and
  ICC ≤ 0.1, any sim quality, clustered or not. Not claimed with fewer instances or strongly
  skewed instance rates (20 instances, ICC 0.2, p = 0.8: ~93 %, as for the real-only interval),
  nor below 10 instances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from embodied_eval.stats.ppi import PPIResult, ppi_mean, ppi_mean_clustered, ppi_validity

GOOD, BIASED, BAD = "good", "biased", "bad"


@dataclass(frozen=True)
class PPIScenario:
    """One cell of the AR_ppi grid (see the module docstring)."""

    name: str
    p: float
    quality: str
    n_pairs: int
    n_sim: int
    clusters: int
    icc: float = 0.0
    agree: float = 0.95
    bias: float = 0.4

    def draw(self, rng: np.random.Generator) -> dict[str, NDArray]:
        """One window: paired (Y, f, cluster) and unlabeled (f, cluster) arrays."""
        total = self.n_pairs + self.n_sim
        cluster = np.arange(total) % self.clusters
        if self.icc > 0.0:
            k = (1.0 - self.icc) / self.icc
            rates = rng.beta(self.p * k, (1.0 - self.p) * k, size=self.clusters)[cluster]
        else:
            rates = np.full(total, self.p)
        y = (rng.random(total) < rates).astype(float)
        if self.quality == GOOD:
            f = np.where(rng.random(total) < self.agree, y, 1.0 - y)
        elif self.quality == BIASED:
            f = np.where(y == 1.0, 1.0, (rng.random(total) < self.bias).astype(float))
        else:
            f = (rng.random(total) < 0.5).astype(float)
        labeled = np.zeros(total, bool)
        labeled[rng.choice(total, self.n_pairs, replace=False)] = True
        return {
            "y": y[labeled],
            "f": f[labeled],
            "pair_cluster": cluster[labeled],
            "g": f[~labeled],
            "sim_cluster": cluster[~labeled],
        }

    def truth(self) -> float:
        """The estimand: the real success rate (the mean of the cluster rates' law)."""
        return self.p


def ppi_fit(data: dict[str, NDArray], level: float, clustered: bool) -> PPIResult:
    """AR_ppi on one simulated window (iid or cluster-robust)."""
    if clustered:
        return ppi_mean_clustered(
            data["y"], data["f"], data["pair_cluster"], data["g"], data["sim_cluster"], level
        )
    return ppi_mean(data["y"], data["f"], data["g"], level)


@dataclass(frozen=True)
class PPICoverage:
    coverage: float
    mc_se: float
    mean_width: float
    classical_width: float
    mean_effective_n: float


def ppi_coverage(
    scenario: PPIScenario,
    rng: np.random.Generator,
    reps: int = 1000,
    level: float = 0.95,
    clustered: bool = True,
) -> PPICoverage:
    """Simulated coverage of the AR_ppi interval (and its width against the classical CLT one,
    which for the cluster version is the cluster-robust interval of the real mean alone)."""
    hits = 0
    widths, cl_widths, effs = [], [], []
    for _ in range(reps):
        data = scenario.draw(rng)
        r = ppi_fit(data, level, clustered)
        est = r.estimate
        assert est.low is not None and est.high is not None
        hits += est.low <= scenario.truth() <= est.high
        widths.append(est.high - est.low)
        q = est.high - est.low
        cl_widths.append(q * math.sqrt(r.classical_variance / r.variance) if r.variance else q)
        effs.append(r.effective_n)
    cov = hits / reps
    return PPICoverage(
        cov,
        math.sqrt(cov * (1 - cov) / reps),
        float(np.mean(widths)),
        float(np.mean(cl_widths)),
        float(np.mean(effs)),
    )


def real_trials_for_classical_width(
    scenario: PPIScenario,
    rng_seed: int,
    reps: int = 300,
    level: float = 0.95,
    clustered: bool = False,
) -> tuple[int, int, float]:
    """Real trials AR_ppi needs for the mean interval width the classical real-only interval has
    at `scenario.n_pairs` trials (same sim episodes N), by bisection over n on simulated widths
    (common random numbers: the same seed at every n).

    Returns:
        (n classical, n for AR_ppi, fraction fewer = 1 − n_ppi / n_classical).
    """
    z = float(stats.norm.ppf(0.5 + level / 2.0))

    def widths(n: int) -> tuple[float, float]:
        rng = np.random.default_rng(rng_seed)
        cell = PPIScenario(**{**scenario.__dict__, "n_pairs": n})
        w, wc = [], []
        for _ in range(reps):
            data = cell.draw(rng)
            r = ppi_fit(data, level, clustered)
            w.append(2 * z * math.sqrt(r.variance))
            wc.append(2 * z * math.sqrt(r.classical_variance))
        return float(np.mean(w)), float(np.mean(wc))

    target = widths(scenario.n_pairs)[1]
    lo, hi = 2, scenario.n_pairs
    if widths(hi)[0] > target:
        return scenario.n_pairs, scenario.n_pairs, 0.0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if widths(mid)[0] <= target:
            hi = mid
        else:
            lo = mid
    return scenario.n_pairs, hi, 1.0 - hi / scenario.n_pairs


@dataclass(frozen=True)
class FloorCoverage:
    """Coverage of the cluster PPI interval among windows above the validity floor: two-sided
    at `level`, and of its low end alone (the AR gate's bound under this version's floor);
    `valid` is the share of windows above the floor."""

    two_sided: float
    lower_end: float
    valid: float
    reps: int


def floor_coverage(
    scenario: PPIScenario, rng: np.random.Generator, reps: int = 1000, level: float = 0.95
) -> FloorCoverage:
    """Simulated coverage of the cluster AR_ppi interval where it would be used: only windows
    above `ppi.ppi_validity`'s floor count."""
    two = low_hits = valid = 0
    truth = scenario.truth()
    for _ in range(reps):
        data = scenario.draw(rng)
        r = ppi_fit(data, level, True)
        if ppi_validity(r, data["y"]):
            continue
        valid += 1
        est = r.estimate
        assert est.low is not None and est.high is not None
        two += est.low <= truth <= est.high
        low_hits += est.low <= truth
    return FloorCoverage(two / max(valid, 1), low_hits / max(valid, 1), valid / reps, reps)
