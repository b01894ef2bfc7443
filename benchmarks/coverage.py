"""Full coverage table of the statistics package's interval methods.

Exact methods are enumerated (no Monte-Carlo error); bootstrap methods and sequences are
simulated (Monte-Carlo standard error ≈ √(0.95·0.05/reps), printed). A row marked "claimed"
is one where the docstrings claim validity (exact: ≥ nominal − 0.01; bootstrap: ≥ nominal − 0.02);
"not claimed" rows show where a method is known to fall short (Wilson pointwise, cluster bootstrap
with few clusters or a rate at 0 %/100 %).

AR_ppi at its validity floor (`--only-ppi-floor`): coverage among the windows above the floor.

AR_ppi (prediction-powered success rate): coverage of the iid and cluster intervals on a grid
of sim quality (predicts well / 90 % agreement / biased / useless), cluster layouts and p, and
the real trials it needs for the classical interval's width. Sequential A/B test: wrong-winner
rate between equal policies with a look after every trial, power, and average trials against
the fixed-n paired design at the same α and power, beside Wald's floor (the fewest expected trials
any test with the row's error rates can have).

N-policy adaptive comparison (`--only-allocation`): for equal and spread-out policies, the
rate of a wrong "better" (type-I error; ≤ α claimed), correct decisions, a wrong "within δ", and
mean episodes against the round-robin fixed design (every policy on each of n instances, paired
z-tests at Bonferroni levels, n from the per-pair power 0.8 at δ), and against the same fixed
design grown until its correct-decision rate equals the adaptive rule's (equal error).

Judge-corrected AR bound (`--only-judge`): coverage of the one-sided 95 % bound the AR gate uses
with `[real] judge_correction` over a grid of true AR, the judge's Se and Sp, window size n and
audits per class (claimed: ≥ nominal − 1 pt), beside the uncorrected exact bound's coverage
(which overclaims when Sp < 1), the mean bound, and clustered windows (ICC 0.1, whole procedure).

Run: python benchmarks/coverage.py [--reps 1000] [--seed 7] [--only-new] [--only-allocation]
     [--only-judge]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time

import numpy as np

from embodied_eval.embodiment.judge_coverage import (
    JudgeScenario,
    exact_coverage,
    procedure_coverage,
)
from embodied_eval.stats import (
    clopper_pearson_interval,
    mtbf_interval,
    mtbf_lower_bound,
    poisson_rate_interval,
    poisson_rate_upper,
)
from embodied_eval.stats.comparison import fewest_expected_pairs, fixed_n_pairs
from embodied_eval.stats.coverage_ppi import (
    BAD,
    BIASED,
    GOOD,
    PPIScenario,
    floor_coverage,
    ppi_coverage,
    real_trials_for_classical_width,
)
from embodied_eval.stats.coverage_sim import (
    ClusterScenario,
    anytime_miscoverage,
    cluster_bootstrap_coverage,
    confidence_sequence_stopping,
    exact_binomial_coverage,
    exact_paired_coverage,
    exact_poisson_coverage,
    paired_outcomes,
    sequential_comparison_oc,
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


PPI_QUALITIES = (
    ("predicts well (agree 95 %)", GOOD, 0.95),
    ("agree 90 %", GOOD, 0.90),
    ("biased (optimistic)", BIASED, 0.95),
    ("useless (coin flip)", BAD, 0.95),
)


def ppi_table(reps: int, seed: int) -> None:
    se = math.sqrt(NOMINAL * (1 - NOMINAL) / reps)
    print(
        f"AR_ppi coverage (simulated, {reps} windows, MC s.e. {se:.4f}; 'ok' = ≥ nominal − 1 pt "
        f"− 2 s.e.), 200 pairs + 2000 sim; width of AR_ppi vs the real-only interval:"
    )
    rng = np.random.default_rng(seed)
    layouts = (
        # (label, clusters, icc, interval, claimed)
        ("iid episodes, iid CLT", 2200, 0.0, False, True),
        ("iid episodes, cluster jackknife (200 groups)", 200, 0.0, True, True),
        ("40 instances icc .1, cluster jackknife", 40, 0.1, True, True),
        ("20 instances icc .2, cluster jackknife (skewed)", 20, 0.2, True, False),
        ("40 instances icc .1, iid CLT (ignores clusters)", 40, 0.1, False, False),
        ("6 instances icc .1, cluster jackknife (few)", 6, 0.1, True, False),
    )
    for p in (0.5, 0.8):
        for qlabel, quality, agree in PPI_QUALITIES:
            for label, clusters, icc, clustered, claimed in layouts:
                sc = PPIScenario("grid", p, quality, 200, 2000, clusters, icc, agree=agree)
                r = ppi_coverage(sc, rng, reps=reps, clustered=clustered)
                name = f"p={p} {qlabel}; {label}"
                print(
                    row(name, r.coverage, claimed, 0.01 + 2 * se)
                    + f"  width {r.mean_width:.3f} vs {r.classical_width:.3f}"
                )
    for p, n in ((0.97, 60), (0.5, 30)):
        sc = PPIScenario("edge", p, GOOD, n, 2000, 2000 + n, 0.0)
        r = ppi_coverage(sc, rng, reps=reps, clustered=False)
        print(row(f"p={p} {n} pairs (rate near 1 / few pairs), iid CLT", r.coverage, False, 0.01))


def ppi_savings_table(seed: int, reps: int = 300) -> None:
    print(
        "Real trials AR_ppi needs for the classical interval's mean width at 200 real trials "
        f"(2000 sim episodes; bisection on {reps} simulated windows per n):"
    )
    for p in (0.5, 0.8):
        for qlabel, quality, agree in PPI_QUALITIES:
            for label, clusters, icc, clustered in (
                ("iid", 2200, 0.0, False),
                ("40 instances icc .1", 40, 0.1, True),
            ):
                sc = PPIScenario("save", p, quality, 200, 2000, clusters, icc, agree=agree)
                n0, n1, saved = real_trials_for_classical_width(sc, seed, reps, clustered=clustered)
                print(f"  p={p} {qlabel:<28} {label:<20} {n0} → {n1:4d} real trials "
                      f"({saved * 100:5.1f} % fewer)")  # fmt: skip


def comparison_table(reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    delta, alpha, power, cap = 0.2, 0.05, 0.8, 400
    print(
        f"Sequential A/B (δ = {delta}, α = {alpha}, power {power}, cap {cap}, a look after every "
        f"trial, {reps} comparisons per row; fixed n = paired z-test at the same α, power, "
        f"⌈(z_(1−α/2) + z_power)² σ²_D / δ²⌉ at the σ_D of the design alternative; floor = Wald's "
        f"lower bound for any test with the row's error rates):"
    )
    ratios, floors = [], []
    for p_a, p_b, shared in (
        (0.6, 0.6, 0.0), (0.5, 0.5, 0.0), (0.85, 0.85, 0.0), (0.6, 0.6, 0.5),
        (0.7, 0.5, 0.0), (0.7, 0.5, 0.5), (0.5, 0.7, 0.0), (0.8, 0.4, 0.0),
    ):  # fmt: skip
        xa, xb = paired_outcomes(p_a, p_b, reps, cap, rng, shared)
        oc = sequential_comparison_oc(xa, xb, delta, alpha, power)
        # Fixed n designed for |Δ| = δ at the σ_D of the design alternative (same sharing).
        q_a, q_b = (p_a, p_b) if p_a != p_b else (0.5 + delta / 2 + (p_a - 0.5), p_a - delta / 2)
        # σ²_D = P(A ≠ B) − Δ²; with probability `shared` a pair uses one uniform (then
        # P(A ≠ B) = |q_a − q_b|), else independent draws.
        differ = shared * abs(q_a - q_b) + (1 - shared) * (q_a * (1 - q_b) + q_b * (1 - q_a))
        sd = math.sqrt(differ - (q_a - q_b) ** 2)
        n_fixed = fixed_n_pairs(delta, sd, alpha, power)
        ratio = oc.mean_trials / n_fixed
        # The row's own paired law: P(A wins the pair), P(B wins it).
        p10 = shared * max(p_a - p_b, 0.0) + (1 - shared) * p_a * (1 - p_b)
        p01 = shared * max(p_b - p_a, 0.0) + (1 - shared) * p_b * (1 - p_a)
        floor = fewest_expected_pairs(p10, p01, delta, alpha, power, oc.no_difference) / n_fixed
        if abs(p_a - p_b) in (0.0, 0.2) or math.isclose(abs(p_a - p_b), 0.2):
            ratios.append(ratio)
            floors.append(floor)
        kind = "equal" if p_a == p_b else f"Δ = {p_a - p_b:+.1f}"
        print(
            f"  A {p_a} B {p_b} shared {shared} ({kind}): A better {oc.a_better:.3f}, B better "
            f"{oc.b_better:.3f}, no diff {oc.no_difference:.3f}, undecided {oc.undecided:.3f}; "
            f"mean trials {oc.mean_trials:.1f} vs fixed {n_fixed} → {ratio:.2f}× "
            f"(floor {floor:.2f}×)"
        )
    g = np.random.default_rng(seed + 1)
    qa, qb = g.beta(3, 2, size=(reps, cap)), g.beta(3, 2, size=(reps, cap))
    oc = sequential_comparison_oc(qa, qb, delta, alpha, power)
    print(f"  graded q, equal Beta(3,2): wrong winner {oc.a_better + oc.b_better:.3f} (≤ {alpha})"
          f", mean trials {oc.mean_trials:.1f}")  # fmt: skip
    qa = np.clip(g.beta(3, 2, size=(reps, cap)) + delta, 0, 1)
    oc = sequential_comparison_oc(qa, qb, delta, alpha, power)
    print(f"  graded q, A shifted up by ≈ δ: A better {oc.a_better:.3f}, mean trials "
          f"{oc.mean_trials:.1f}")  # fmt: skip
    print(f"  average ratio over the equal and Δ = ±δ binary rows: {np.mean(ratios):.2f}× "
          f"(floor {np.mean(floors):.2f}×; the Δ = ±δ rows alone: {np.mean(ratios[4:]):.2f}×, "
          f"floor {np.mean(floors[4:]):.2f}×)")  # fmt: skip


def allocation_table(reps: int, seed: int) -> None:
    from embodied_eval.stats.allocation_sim import (
        adaptive_oc,
        design_sd,
        round_robin_instances,
        round_robin_matching,
        round_robin_oc,
    )

    rng = np.random.default_rng(seed)
    delta, alpha, power = 0.2, 0.05, 0.8
    print(
        f"N-policy adaptive comparison (δ = {delta}, α = {alpha}, power {power} per pair, "
        f"{reps} runs per row; episodes vs the round-robin fixed design):"
    )
    ratios = []
    for rates, decide, shared in (
        ((0.5,) * 4, "best", 0.0), ((0.5,) * 6, "best", 0.0), ((0.5,) * 4, "order", 0.0),
        ((0.8, 0.6, 0.5, 0.4), "best", 0.0), ((0.8, 0.6, 0.5, 0.4, 0.3, 0.2), "best", 0.0),
        ((0.75, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25), "best", 0.0),
        ((0.8, 0.6, 0.5, 0.4, 0.3, 0.2), "best", 0.5), ((0.7, 0.5, 0.5, 0.5), "best", 0.0),
        ((0.8, 0.6, 0.4), "order", 0.0), ((0.9, 0.7, 0.5, 0.3), "order", 0.0),
        ((0.9, 0.7, 0.5, 0.3, 0.1), "order", 0.0),
    ):  # fmt: skip
        k = len(rates)
        n = round_robin_instances(k, decide, delta, design_sd(delta, shared), alpha, power)
        cap = 4 * k * n
        oc = adaptive_oc(rates, decide, rng, delta=delta, alpha=alpha, power=power,
                         max_trials=cap, reps=reps, shared=shared)  # fmt: skip
        fixed = round_robin_oc(rates, decide, n, rng, alpha=alpha, reps=2000, shared=shared)
        line = (
            f"  {decide:<5} {' '.join(f'{r:g}' for r in rates):<36} shared {shared}: wrong better "
            f"{oc.wrong_better:.3f} (±{oc.mc_se:.3f}), correct {oc.correct:.3f}, wrong within "
            f"{oc.wrong_within:.3f}, undecided {oc.undecided:.3f}; episodes "
            f"{oc.mean_trials:.0f} vs fixed {k * n} ({oc.mean_trials / (k * n):.2f}×; fixed "
            f"correct {fixed.correct:.3f}, wrong better {fixed.wrong_better:.3f})"
        )
        if len(set(rates)) > 1:
            m = round_robin_matching(rates, decide, oc.correct, rng, alpha=alpha, reps=1000,
                                     shared=shared)  # fmt: skip
            ratio = oc.mean_trials / (k * m)
            ratios.append(ratio)
            line += f"; fixed at equal correct rate {k * m} → {ratio:.2f}×"
        print(line, flush=True)
    print(f"  mean ratio at equal correct rate over the unequal rows: {np.mean(ratios):.2f}×")


def ppi_floor_table(reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(
        f"AR_ppi at its validity floor (40 task instances; {reps} windows per row, only those "
        "above the floor counted); columns: the gate's bound (the two-sided 95 % interval's low "
        "end; claimed for true rates 0.3–0.8), the two-sided interval, share above the floor:"
    )
    for pairs, p, icc, quality in itertools.product(
        (100, 200), (0.2, 0.3, 0.5, 0.7, 0.8), (0.0, 0.1, 0.2), (GOOD, BIASED, BAD)
    ):
        c = floor_coverage(PPIScenario("floor", p, quality, pairs, 2000, 40, icc), rng, reps)
        name = f"{pairs} pairs p={p} ICC {icc} sim {quality}"
        print(
            row(name, c.lower_end, p >= 0.3, 0.01)
            + f"  two-sided {c.two_sided:.4f}  above floor {c.valid:.2f}"
        )


def judge_table(reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    se_mc = math.sqrt(NOMINAL * (1 - NOMINAL) / reps)
    print(
        f"Judge-corrected AR bound, one-sided 95 % ({reps} windows per row, MC s.e. {se_mc:.4f}); "
        "columns: coverage, uncorrected exact bound's coverage, share corrected, mean bound:"
    )
    worst = 1.0
    for ar, se, sp, n, audits in itertools.product(
        (0.5, 0.7, 0.9, 0.97), (0.8, 0.9, 1.0), (0.8, 0.9, 1.0), (20, 60, 200), (10, 30, 100)
    ):
        c = exact_coverage(JudgeScenario(ar, se, sp, n, 1, audits, audits), reps, rng)
        worst = min(worst, c.coverage)
        name = f"AR={ar:<4} Se={se:<3} Sp={sp:<3} n={n:<3} audits={audits:<3}"
        print(
            row(name, c.coverage, True, 0.01)
            + f"  uncorrected {c.uncorrected:.4f}  corrected {c.corrected_share:.2f}"
            + f"  mean bound {c.mean_bound:.3f}"
        )
    print(f"  worst coverage over the independent-episode grid: {worst:.4f}")
    print("  clustered windows (ICC 0.1, whole procedure with the cluster bootstrap):")
    for ar, instances in itertools.product((0.7, 0.9), (20, 40)):
        c = procedure_coverage(
            JudgeScenario(ar, 0.95, 0.95, instances, 3, 30, 30, icc=0.1), min(reps, 500), rng
        )
        name = f"AR={ar:<4} Se=0.95 Sp=0.95 {instances}×3 audits=30 ICC 0.1"
        print(row(name, c.coverage, True, 0.01) + f"  uncorrected {c.uncorrected:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-bootstrap", action="store_true")
    parser.add_argument("--only-new", action="store_true", help="only AR_ppi and the A/B test")
    parser.add_argument("--only-allocation", action="store_true", help="only N-policy compare")
    parser.add_argument("--only-judge", action="store_true", help="only the judge-corrected AR")
    parser.add_argument("--only-ppi-floor", action="store_true", help="only AR_ppi at its floor")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    if args.only_ppi_floor:
        ppi_floor_table(max(args.reps, 1500), args.seed)
        print(f"total {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")
        return
    if args.only_judge:
        judge_table(max(args.reps, 2000), args.seed)
        print(f"total {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")
        return
    if args.only_allocation:
        allocation_table(args.reps, args.seed)
        print(f"total {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")
        return
    if args.only_new:
        ppi_table(max(args.reps, 3000), args.seed)
        ppi_savings_table(args.seed)
        comparison_table(max(args.reps, 2000), args.seed)
        print(f"total {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")
        return
    binomial_table()
    poisson_table()
    paired_table()
    if not args.skip_bootstrap:
        bootstrap_table(args.reps, args.seed)
    sequence_table(args.reps, args.seed)
    ppi_table(max(args.reps, 3000), args.seed)
    ppi_savings_table(args.seed)
    comparison_table(max(args.reps, 2000), args.seed)
    allocation_table(args.reps, args.seed)
    ppi_floor_table(max(args.reps, 1500), args.seed)
    judge_table(max(args.reps, 2000), args.seed)
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
