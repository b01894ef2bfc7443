"""Full coverage table of the statistics package's interval methods.

Exact methods are enumerated (no Monte-Carlo error); bootstrap methods and sequences are
simulated (Monte-Carlo standard error ≈ √(0.95·0.05/reps), printed). A row marked "claimed"
is one where the docstrings claim validity (exact: ≥ nominal − 0.01; bootstrap: ≥ nominal − 0.02);
"not claimed" rows show where a method is known to fall short (Wilson pointwise, cluster bootstrap
with few clusters or a rate at 0 %/100 %).

Run: python benchmarks/coverage.py [--reps 1000] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from embodied_eval.stats import (
    clopper_pearson_interval,
    mtbf_interval,
    mtbf_lower_bound,
    poisson_rate_interval,
    poisson_rate_upper,
)
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


def row(name: str, value: float, claimed: bool, tol: float) -> str:
    ok = value >= NOMINAL - tol
    flag = ("ok" if ok else "BELOW") if claimed else "not claimed"
    return f"  {name:<52} {value:7.4f}  {flag}"


def binomial_table() -> None:
    print("Success rates (exact enumeration), 95 %:")
    for n in (5, 12, 20, 30, 60, 200, 1000):
        for p in (0.01, 0.05, 0.2, 0.5, 0.75, 0.9, 0.99):
            cp = exact_binomial_coverage(lambda k, m: clopper_pearson_interval(k, m), n, p)
            cpl = exact_binomial_coverage(
                lambda k, m: clopper_pearson_interval(k, m, sided="lower"), n, p
            )
            w = wilson_coverage(n, p)
            print(row(f"n={n:<5} p={p:<5} Clopper-Pearson two-sided", cp, True, 0.01))
            print(row(f"n={n:<5} p={p:<5} Clopper-Pearson one-sided lower", cpl, True, 0.01))
            print(row(f"n={n:<5} p={p:<5} Wilson (pointwise)", w, False, 0.01))


def poisson_table() -> None:
    print("Rates and MTBF (exact enumeration), 95 %, H = 200 h:")
    hours = 200.0
    for expected in (0.05, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0):
        rate, mtbf = expected / hours * 100.0, hours / expected
        zero = math.exp(-expected)
        label = f"E[k]={expected:<6} P(0 observed)={zero:.2f}"
        for name, fn, truth in (
            ("rate two-sided", lambda k: poisson_rate_interval(k, hours), rate),
            ("rate upper", lambda k: poisson_rate_upper(k, hours), rate),
            ("MTBF two-sided", lambda k: mtbf_interval(k, hours), mtbf),
            ("MTBF lower", lambda k: mtbf_lower_bound(k, hours), mtbf),
        ):
            print(row(f"{label} {name}", exact_poisson_coverage(fn, expected, truth), True, 0.01))


def paired_table() -> None:
    print("Paired gap, Newcombe method 10 (exact enumeration), 95 %:")
    for n, probs in (
        (15, (0.5, 0.2, 0.1, 0.2)),
        (20, (0.6, 0.1, 0.1, 0.2)),
        (30, (0.7, 0.12, 0.04, 0.14)),
        (30, (0.9, 0.05, 0.0, 0.05)),
        (40, (0.3, 0.3, 0.1, 0.3)),
    ):
        cov = exact_paired_coverage(n, probs, NOMINAL)
        print(row(f"n={n} cells={probs}", cov, True, 0.02))


def bootstrap_table(reps: int, seed: int) -> None:
    se = math.sqrt(NOMINAL * (1 - NOMINAL) / reps)
    print(f"Cluster bootstrap (simulated, {reps} data sets × 1000 resamples, MC s.e. {se:.4f}):")
    rng = np.random.default_rng(seed)
    scenarios = [
        (ClusterScenario("30x20 p=.75 icc=.1", 30, 20, 0.75, 0.1), True),
        (ClusterScenario("100x10 p=.5 icc=.2", 100, 10, 0.5, 0.2), True),
        (ClusterScenario("50x5 p=.3 icc=.3", 50, 5, 0.3, 0.3), True),
        (ClusterScenario("20x20 p=.75 icc=0", 20, 20, 0.75, 0.0), True),
        (ClusterScenario("1000x100 p=.75 icc=.1", 1000, 100, 0.75, 0.1), True),
        (ClusterScenario("8x20 p=.75 icc=.1 (few clusters)", 8, 20, 0.75, 0.1), False),
        (ClusterScenario("30x20 p=.97 icc=.05 (near 1)", 30, 20, 0.97, 0.05), False),
        (ClusterScenario("10x1 p=.75 (n < 20 episodes)", 10, 1, 0.75, 0.0), False),
    ]
    for scenario, claimed in scenarios:
        r = reps if scenario.n_clusters < 500 else max(200, reps // 2)
        for two_level in (True, False):
            for method in ("percentile", "bca"):
                cov = cluster_bootstrap_coverage(
                    scenario, rng, reps=r, resamples=1000, two_level=two_level, method=method
                )
                one_level_claimed = claimed and (two_level or scenario.n_clusters >= 50)
                label = f"{scenario.name} {'two' if two_level else 'one'}-level {method}"
                print(
                    row(label + ("" if r == reps else f" ({r} sets)"), cov, one_level_claimed, 0.02)
                )


def sequence_table(reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"Anytime validity, 500 looks, {reps} runs: P(true p excluded at some look):")
    for p in (0.6, 0.75, 0.9, 0.95):
        mix = anytime_miscoverage(p, 500, reps, rng, method="mixture")
        naive = anytime_miscoverage(p, 500, reps, rng, method="wilson")
        print(f"  p={p:<5} mixture CS {mix:.4f} (claim ≤ 0.05)   Wilson re-checked {naive:.4f}")
    print("Early stopping, gate p ≥ 0.75 (min 5, cap 400):")
    for p in (0.95, 0.9, 0.8, 0.75, 0.6):
        passed, failed, median = confidence_sequence_stopping(p, 0.75, reps, rng)
        print(f"  p={p:<5} pass {passed:.3f}  fail {failed:.3f}  median trials {median:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-bootstrap", action="store_true")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    binomial_table()
    poisson_table()
    paired_table()
    if not args.skip_bootstrap:
        bootstrap_table(args.reps, args.seed)
    sequence_table(args.reps, args.seed)
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
