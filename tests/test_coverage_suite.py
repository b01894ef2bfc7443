"""Fast subset of the coverage suite (the full table: benchmarks/coverage.py).

Exact methods are checked by *enumeration* (no Monte-Carlo error), so their coverage must be at
least nominal − 0.01 at every grid point (in theory ≥ nominal). Bootstrap methods are simulated
where they are claimed valid and must reach nominal − 0.02. Where a method is not claimed valid
(Wilson pointwise, bootstrap with few clusters or p near 0/1) the docstrings say so and the full
table shows it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.stats import (
    MixtureConfidenceSequence,
    clopper_pearson_interval,
    mtbf_interval,
    mtbf_lower_bound,
    mttr_interval,
    poisson_rate_interval,
    poisson_rate_upper,
)
from embodied_eval.stats.coverage_ppi import BAD, BIASED, GOOD, PPIScenario, ppi_coverage
from embodied_eval.stats.coverage_sim import (
    ClusterScenario,
    anytime_miscoverage,
    cluster_bootstrap_coverage,
    confidence_sequence_stopping,
    exact_binomial_coverage,
    exact_paired_coverage,
    exact_poisson_coverage,
    wilson_coverage,
)

NOMINAL = 0.95
N_GRID = (5, 12, 20, 60, 200)
P_GRID = (0.02, 0.1, 0.5, 0.75, 0.9, 0.98)


@pytest.mark.parametrize("n", N_GRID)
def test_clopper_pearson_exact_coverage(n):
    for p in P_GRID:
        two = exact_binomial_coverage(lambda k, m: clopper_pearson_interval(k, m), n, p)
        lower = exact_binomial_coverage(
            lambda k, m: clopper_pearson_interval(k, m, sided="lower"), n, p
        )
        assert two >= NOMINAL - 0.01, (n, p, two)
        assert lower >= NOMINAL - 0.01, (n, p, lower)


@pytest.mark.parametrize("n", (20, 60))
def test_wilson_average_coverage(n):
    # Wilson is close to nominal on average over p, not pointwise (it dips to ~0.93).
    grid = np.linspace(0.01, 0.99, 99)
    mean_cov = float(np.mean([wilson_coverage(n, p) for p in grid]))
    assert mean_cov >= NOMINAL - 0.01


@pytest.mark.parametrize("expected", (0.1, 0.5, 3.0, 10.0, 50.0))
def test_garwood_rate_and_mtbf_exact_coverage(expected):
    hours = 200.0  # true rate = expected/200 h; expected 0.1 is almost always "0 observed"
    rate = expected / hours * 100.0
    mtbf = hours / expected
    checks = {
        "rate two-sided": (lambda k: poisson_rate_interval(k, hours), rate),
        "rate upper": (lambda k: poisson_rate_upper(k, hours), rate),
        "mtbf two-sided": (lambda k: mtbf_interval(k, hours), mtbf),
        "mtbf lower": (lambda k: mtbf_lower_bound(k, hours), mtbf),
    }
    for name, (fn, truth) in checks.items():
        cov = exact_poisson_coverage(fn, expected, truth)
        assert cov >= NOMINAL - 0.01, (name, expected, cov)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("n", "probs"), [(20, (0.6, 0.1, 0.1, 0.2)), (30, (0.7, 0.12, 0.04, 0.14))]
)
def test_newcombe_paired_exact_coverage(n, probs):
    # Newcombe's method 10 is approximate (not exact): claimed within 2 points of nominal.
    assert exact_paired_coverage(n, probs, NOMINAL) >= NOMINAL - 0.02


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("scenario", "two_level", "reps"),
    [
        (ClusterScenario("30x20 p=.75 icc=.1", 30, 20, 0.75, 0.1), True, 400),
        (ClusterScenario("50x5 p=.3 icc=.3", 50, 5, 0.3, 0.3), True, 400),
        (ClusterScenario("100x10 p=.5 icc=.2", 100, 10, 0.5, 0.2), False, 600),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_cluster_bootstrap_coverage(scenario, two_level, reps):
    rng = np.random.default_rng(20240611)
    cov = cluster_bootstrap_coverage(scenario, rng, reps=reps, resamples=1000, two_level=two_level)
    assert cov >= NOMINAL - 0.02, cov


def test_confidence_sequence_is_anytime_valid():
    rng = np.random.default_rng(11)
    mixture = anytime_miscoverage(0.75, 300, 1000, rng, alpha=0.05, method="mixture")
    naive = anytime_miscoverage(0.75, 300, 1000, rng, alpha=0.05, method="wilson")
    assert mixture <= 0.05 + 0.015
    # A fixed-n interval re-checked every trial is not anytime-valid (~45 % in the notes).
    assert naive > 0.3


def test_mttr_exponential_coverage_under_exponential_repairs():
    rng = np.random.default_rng(5)
    theta = 0.2
    hits = 0
    reps = 2000
    for _ in range(reps):
        est = mttr_interval(rng.exponential(theta, size=8))
        hits += est.low <= theta <= est.high
    assert hits / reps >= NOMINAL - 0.02


@pytest.mark.parametrize(
    ("p", "passes", "median_range"),
    # Notes: true p 0.95 → pass, median 31 trials; 0.90 → pass, median 60; 0.60 → fail 99.8 %,
    # median 68 (gate 0.75, min 5, cap 400).
    [(0.95, True, (26, 36)), (0.90, True, (52, 68)), (0.60, False, (58, 80))],
)
def test_confidence_sequence_stopping_matches_notes(p, passes, median_range):
    rng = np.random.default_rng(int(p * 100))
    pass_frac, fail_frac, median = confidence_sequence_stopping(p, 0.75, 1000, rng)
    assert (pass_frac if passes else fail_frac) >= 0.99
    assert median_range[0] <= median <= median_range[1]


def test_stopping_simulation_agrees_with_the_class():
    # The vectorized simulation must take the same decision as feeding the class trial by trial.
    rng = np.random.default_rng(3)
    for p in (0.6, 0.8, 0.95):
        outcomes = rng.random(400) < p
        cs = MixtureConfidenceSequence()
        for z in outcomes:
            decision = cs.update(bool(z)).decide(0.75)
            if decision != "continue":
                break
        seq_rng = _ReplayGenerator(outcomes, p)
        pass_frac, _, median = confidence_sequence_stopping(p, 0.75, 1, seq_rng)  # type: ignore[arg-type]
        assert (pass_frac == 1.0) == (decision == "pass")
        assert median == cs.trials


class _ReplayGenerator:
    """Stands in for a Generator: `random` replays fixed outcomes (u < p exactly when z = 1)."""

    def __init__(self, outcomes: np.ndarray, p: float) -> None:
        self._u = np.where(outcomes, p / 2, (1 + p) / 2)[None, :]

    def random(self, shape: tuple[int, int]) -> np.ndarray:
        return self._u[:, : shape[1]]


# --------------------------------------------------------------------------- AR_ppi


@pytest.mark.parametrize("quality", [GOOD, BIASED, BAD])
@pytest.mark.parametrize(
    ("clusters", "icc", "clustered"),
    [(200, 0.0, False), (40, 0.1, True)],
    ids=["iid-episodes", "40-instances-icc0.1"],
)
def test_ar_ppi_coverage(quality, clusters, icc, clustered):
    # Claimed: iid interval with independent episodes; cluster jackknife with ≥ 20 instances.
    # Coverage must reach nominal − 1 pt, less 2 Monte-Carlo standard errors.
    reps = 1200
    scenario = PPIScenario("fast", 0.7, quality, 200, 2000, clusters, icc)
    r = ppi_coverage(scenario, np.random.default_rng(31), reps=reps, clustered=clustered)
    assert r.coverage >= 0.94 - 2 * math.sqrt(0.95 * 0.05 / reps)
    if quality == GOOD:  # sim agrees on 95 % of pairs: the interval is much narrower
        assert r.mean_width < 0.8 * r.classical_width


def test_ar_ppi_gate_bound_covers_at_its_floor():
    """At the validity floor (40 task instances, 100 pairs), a biased sim and ICC 0.1 at a true
    rate of 0.7 (the grid's worst gate-bound cell among rates 0.3–0.8, 0.955 over 1500 windows):
    the gate's bound, the two-sided interval's low end, covers ≥ nominal − 1 pt less 2 MC s.e."""
    from embodied_eval.stats.coverage_ppi import floor_coverage

    reps = 600
    c = floor_coverage(PPIScenario("floor", 0.7, BIASED, 100, 2000, 40, 0.1),
                       np.random.default_rng(41), reps)  # fmt: skip
    assert c.valid > 0.9
    assert c.lower_end >= 0.94 - 2 * math.sqrt(0.95 * 0.05 / reps)
