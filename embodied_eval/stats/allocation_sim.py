"""Operating characteristics of the N-policy adaptive comparison against a round-robin fixed
design, by simulation (the table in `benchmarks/coverage.py` and the tests).

Binary outcomes: policy i succeeds on a fresh instance with probability `rates[i]`,
independently of the other policies (or, with probability `shared`, through one common uniform:
common random numbers, as the same instance, seed and drift give).

The fixed design it is measured against runs *every* policy on each of n instances (the
round-robin design that gives every pair n paired trials for K episodes per instance, the
cheapest fixed design that compares all pairs), then decides with paired z-tests at a
Bonferroni level: α/(K − 1) per pair for "best" (the winner against each other policy), α over
the K(K − 1)/2 pairs for "order". n is the paired z-test's sample size at that level with the
requested power when two policies differ by δ (`stats.comparison.fixed_n_pairs`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from embodied_eval.stats.allocation import AllocationState
from embodied_eval.stats.comparison import fixed_n_pairs


@dataclass(frozen=True)
class AllocationOC:
    """Fractions of runs per outcome and the mean episodes they used.

    `wrong_better`: some "better" claimed between policies that are not (the type-I error);
    `wrong_within`: some "within δ" claimed between policies δ or more apart; `correct`: a
    decision with neither; `undecided`: stopped at the cap (or, fixed design, nothing shown)."""

    correct: float
    wrong_better: float
    wrong_within: float
    undecided: float
    mean_trials: float
    reps: int

    @property
    def mc_se(self) -> float:
        """Monte Carlo standard error of the wrong-"better" fraction."""
        return math.sqrt(max(self.wrong_better * (1 - self.wrong_better), 1e-12) / self.reps)


def judge(
    decision: str, rates: Sequence[float], names: Sequence[str], delta: float
) -> tuple[bool, bool]:
    """(a wrong "better" claimed, a wrong "within δ" claimed) in a decision string."""
    mu = dict(zip(names, rates, strict=True))
    kind, _, rest = decision.partition(": ")
    if kind == "best":
        return any(mu[j] >= mu[rest] for j in names if j != rest), False
    if kind == "best within δ":
        group = rest.split(", ")
        lead = group[0]
        bad_better = any(mu[j] >= mu[lead] for j in names if j not in group)
        bad_within = any(abs(mu[lead] - mu[j]) >= delta - 1e-12 for j in group[1:])
        return bad_better, bad_within
    tokens = rest.split(" ")
    bad_better = bad_within = False
    for a, rel, c in zip(tokens[0::2], tokens[1::2], tokens[2::2], strict=False):
        if rel == ">":
            bad_better |= mu[a] <= mu[c]
        else:
            bad_within |= abs(mu[a] - mu[c]) >= delta - 1e-12
    return bad_better, bad_within


def adaptive_oc(
    rates: Sequence[float],
    decide: str,
    rng: np.random.Generator,
    *,
    delta: float = 0.2,
    alpha: float = 0.05,
    power: float = 0.8,
    max_trials: int = 2000,
    reps: int = 500,
    shared: float = 0.0,
) -> AllocationOC:
    """Run the adaptive rule (`AllocationState`, the same code `RankingAllocation` runs) on
    `reps` simulated comparisons at once (see the module docstring)."""
    k = len(rates)
    names = [f"p{i}" for i in range(k)]
    r = np.asarray(rates, dtype=float)
    state = AllocationState(reps, k, decide, delta, alpha, power)
    active = np.ones(reps, dtype=bool)
    trials = np.zeros(reps)
    counts = np.zeros(4)  # correct, wrong better, wrong within, undecided
    mask = state.next_mask()
    while active.any():
        ran = mask & active[:, None]
        u = rng.random((reps, 1))
        common = rng.random((reps, 1)) < shared
        x = (np.where(common, u, rng.random((reps, k))) < r).astype(float)
        state.update(x, ran)
        trials += ran.sum(axis=1)
        mask = state.next_mask()
        pending = mask.any(axis=1)
        for run in np.flatnonzero(active & ~pending):
            bad_better, bad_within = judge(state.decision(int(run), names), rates, names, delta)
            counts += [not (bad_better or bad_within), bad_better, bad_within, 0]
        capped = active & pending & (trials + mask.sum(axis=1) > max_trials)
        counts[3] += capped.sum()
        active &= pending & ~capped
    f = counts / reps
    return AllocationOC(f[0], f[1], f[2], f[3], float(trials.mean()), reps)


def pair_alpha(k: int, decide: str, alpha: float) -> float:
    """Two-sided level of each pairwise test of the fixed design (Bonferroni)."""
    return alpha / (k - 1) if decide == "best" else alpha / (k * (k - 1) / 2)


def round_robin_instances(
    k: int, decide: str, delta: float, sd: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Instances n of the round-robin fixed design (each runs all K policies: K·n episodes)."""
    return fixed_n_pairs(delta, sd, pair_alpha(k, decide, alpha), power)


def round_robin_oc(
    rates: Sequence[float],
    decide: str,
    instances: int,
    rng: np.random.Generator,
    *,
    alpha: float = 0.05,
    reps: int = 2000,
    shared: float = 0.0,
) -> AllocationOC:
    """Simulate the fixed design: all K policies on `instances` instances, then paired z-tests
    (Bonferroni); "best" when one policy beats every other, "order" when every neighbour in
    the order of wins is significantly apart; otherwise nothing is shown (counted undecided).
    It claims no "within δ"."""
    k = len(rates)
    names = [f"p{i}" for i in range(k)]
    r = np.asarray(rates, dtype=float)
    u = rng.random((reps, instances, 1))
    common = rng.random((reps, instances, 1)) < shared
    own = rng.random((reps, instances, k))
    x = (np.where(common, u, own) < r).astype(float)
    z_crit = float(stats.norm.ppf(1 - pair_alpha(k, decide, alpha) / 2))
    better = np.zeros((reps, k, k), dtype=bool)
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            d = x[:, :, i] - x[:, :, j]
            sd = d.std(axis=1, ddof=1)
            # sd = 0 with a non-zero mean (one policy always ahead) is a decided difference.
            z = np.where(sd > 0, d.mean(axis=1) / np.maximum(sd, 1e-12) * math.sqrt(instances),
                         np.sign(d.mean(axis=1)) * 1e9)  # fmt: skip
            better[:, i, j] = z > z_crit
    wins = better.sum(axis=2)
    counts = np.zeros(4)
    for rep in range(reps):
        said = None
        if decide == "best":
            top = np.flatnonzero(wins[rep] == k - 1)
            said = f"best: {names[top[0]]}" if top.size else None
        else:
            order = sorted(range(k), key=lambda i: -wins[rep, i])
            if all(better[rep, a, c] for a, c in itertools.pairwise(order)):
                said = "order: " + " > ".join(names[i] for i in order)
        if said is None:
            counts[3] += 1
            continue
        bad_better, _ = judge(said, rates, names, 1.0)
        counts[1] += bad_better
        counts[0] += not bad_better
    f = counts / reps
    return AllocationOC(f[0], f[1], f[2], f[3], float(k * instances), reps)


def design_sd(delta: float, shared: float = 0.0, centre: float = 0.5) -> float:
    """σ_D of the paired difference at the design alternative: two policies at centre ± δ/2."""
    qa, qb = centre + delta / 2, centre - delta / 2
    differ = shared * abs(qa - qb) + (1 - shared) * (qa * (1 - qb) + qb * (1 - qa))
    return math.sqrt(differ - (qa - qb) ** 2)


def round_robin_matching(
    rates: Sequence[float],
    decide: str,
    target: float,
    rng: np.random.Generator,
    *,
    alpha: float = 0.05,
    reps: int = 1000,
    shared: float = 0.0,
    most: int = 2000,
) -> int:
    """Fewest instances n (bisection) with which the fixed design's correct-decision rate
    reaches `target` (as the adaptive rule's), or `most` when it does not by then."""
    lo, hi = 2, most
    if (
        round_robin_oc(rates, decide, hi, rng, alpha=alpha, reps=reps, shared=shared).correct
        < target
    ):
        return most
    while hi - lo > 1:
        mid = (lo + hi) // 2
        oc = round_robin_oc(rates, decide, mid, rng, alpha=alpha, reps=reps, shared=shared)
        lo, hi = (mid, hi) if oc.correct < target else (lo, mid)
    return hi
