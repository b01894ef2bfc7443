"""Benchmark: cluster-bootstrap CI of AR on sufficient statistics vs scipy.stats.bootstrap.

Data: 100 000 episodes in 1 000 clusters of 100 (cluster rates ~ Beta around 0.75). Ours: the
two-level cluster bootstrap (10 000 resamples) of `embodied_eval.stats.cluster_bootstrap_mean`.
Reference: scipy.stats.bootstrap (percentile) resampling the 100 000 episodes themselves
(episode-level, i.e. ignoring clusters), timed on fewer resamples and scaled linearly to 10 000
when --scipy-resamples is below 10 000 (the output says so).

Also timed: the prediction-powered AR (estimate + interval) for 100 000 sim + 1 000 paired real
episodes (iid CLT and cluster jackknife over 100 task instances; target ≤ 0.2 s), and the
sequential A/B test's per-trial update (target ≤ 50 µs).

The leaderboard (`--only-rank`): Bradley–Terry strengths of 20 policies from 2 000 pairwise
episodes (one random pair of policies per instance, success vs failure, ties when both succeed or
both fail) with 1 000 bootstrap resamples of instances, both tie models (target < 2 s); also the
heavier reading, 2 000 pairwise episodes per policy (20 000 comparisons).

Run: python benchmarks/stats_bench.py [--repeats 5] [--scipy-resamples 1000] [--only-new]
     [--only-rank]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np
from scipy import stats

from embodied_eval.stats import (
    Estimate,
    SequentialComparison,
    cluster_bootstrap_mean,
    ppi_mean,
    ppi_mean_clustered,
)

N_CLUSTERS = 1_000
CLUSTER_SIZE = 100
RESAMPLES = 10_000


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(successes [C], counts [C], episode outcomes [C·m]) with between-cluster variance."""
    rng = np.random.default_rng(seed)
    rates = rng.beta(0.75 * 9, 0.25 * 9, size=N_CLUSTERS)  # ICC 0.1
    counts = np.full(N_CLUSTERS, CLUSTER_SIZE)
    successes = rng.binomial(counts, rates)
    episodes = np.concatenate(
        [np.r_[np.ones(s), np.zeros(m - s)] for s, m in zip(successes, counts, strict=True)]
    )
    return successes, counts, episodes


def time_ours(s: np.ndarray, n: np.ndarray, repeats: int, method: str) -> tuple[float, Estimate]:
    times: list[float] = []
    est: Estimate | None = None
    for r in range(repeats):
        rng = np.random.default_rng(100 + r)
        t0 = time.perf_counter()
        est = cluster_bootstrap_mean(s, n, rng, RESAMPLES, 0.95, two_level=True, method=method)
        times.append(time.perf_counter() - t0)
    assert est is not None
    return statistics.median(times), est


def time_scipy(episodes: np.ndarray, resamples: int, repeats: int) -> tuple[float, Any]:
    times: list[float] = []
    ci: Any = None
    for r in range(repeats):
        t0 = time.perf_counter()
        res = stats.bootstrap(
            (episodes,),
            np.mean,
            n_resamples=resamples,
            method="percentile",
            batch=50,  # 50 × 100 000 indices per batch keeps memory near 40 MB
            rng=np.random.default_rng(200 + r),
        )
        times.append(time.perf_counter() - t0)
        ci = res.confidence_interval
    return statistics.median(times), ci


def ppi_and_sequential(repeats: int) -> None:
    """AR_ppi for 100k sim + 1k real, and the sequential A/B test's per-trial update cost."""
    rng = np.random.default_rng(3)
    n_sim, n_real, tasks = 100_000, 1_000, 100
    y_all = (rng.random(n_sim + n_real) < 0.75).astype(float)
    f_all = np.where(rng.random(y_all.size) < 0.9, y_all, 1.0 - y_all)
    cl = rng.integers(0, tasks, size=y_all.size)
    y, f, pc = y_all[:n_real], f_all[:n_real], cl[:n_real]
    g, sc = f_all[n_real:], cl[n_real:]
    for label, fn in (
        ("iid CLT", lambda: ppi_mean(y, f, g, 0.95)),
        (f"cluster jackknife, {tasks} task instances", lambda: ppi_mean_clustered(y, f, pc, g, sc)),
    ):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = fn()
            times.append(time.perf_counter() - t0)
        est = r.estimate
        print(
            f"AR_ppi {label}, {n_sim} sim + {n_real} real: median {statistics.median(times):.4f} s "
            f"over {repeats} runs (target ≤ 0.2 s); {est.value:.4f} [{est.low:.4f}, "
            f"{est.high:.4f}], n_eff {r.effective_n:.0f}"
        )
    trials = 20_000
    a = rng.random(trials) < 0.6
    b = rng.random(trials) < 0.6
    per = []
    for _ in range(repeats):
        test = SequentialComparison(delta=0.02, max_trials=trials)  # small δ: runs long
        t0 = time.perf_counter()
        done = 0
        for xa, xb in zip(a, b, strict=True):
            done += 1
            if test.update(bool(xa), bool(xb)) != "continue":
                break
        per.append((time.perf_counter() - t0) / done)
    print(
        f"sequential A/B update: median {statistics.median(per) * 1e6:.1f} µs per trial "
        f"(target ≤ 50 µs)"
    )


def rank_bench(repeats: int) -> None:
    """20 policies, pairwise episodes on shared instances, 1 000 resamples (target < 2 s)."""
    from embodied_eval.stats.ranking import PairwiseOutcomes, rank_policies

    k = 20
    rng = np.random.default_rng(11)
    rates = np.linspace(0.3, 0.9, k)
    for comparisons in (2_000, 20_000):
        first = rng.integers(0, k, size=comparisons)
        second = (first + rng.integers(1, k, size=comparisons)) % k
        z1 = rng.random(comparisons) < rates[first]
        z2 = rng.random(comparisons) < rates[second]
        outcome = z1.astype(np.int64) - z2.astype(np.int64)
        data = PairwiseOutcomes(
            tuple(f"policy_{i:02d}" for i in range(k)),
            np.arange(comparisons, dtype=np.int64),
            first.astype(np.int64),
            second.astype(np.int64),
            outcome,
            comparisons,
        )
        for model in ("davidson", "half"):
            times, cpu = [], []
            for r in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                ranking = rank_policies(data, np.random.default_rng(r), model=model,
                                        resamples=1000)  # fmt: skip
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            top = ranking.pieces[0].rows[0]
            print(
                f"rank {k} policies, {comparisons} pairwise episodes, 1000 resamples, {model}: "
                f"median {statistics.median(times):.3f} s wall, {statistics.median(cpu):.3f} s CPU "
                f"over {repeats} runs (target < 2 s); "
                f"best {top.policy} (true best policy_{k - 1:02d}), P(best) {top.p_best:.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only-new", action="store_true", help="only AR_ppi and the A/B test")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of ours (median)")
    parser.add_argument("--scipy-repeats", type=int, default=1, help="timed runs of scipy")
    parser.add_argument(
        "--scipy-resamples", type=int, default=1000, help="scipy resamples (scaled to 10 000)"
    )
    parser.add_argument("--only-rank", action="store_true", help="only the leaderboard")
    args = parser.parse_args()
    if args.only_rank:
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        rank_bench(args.repeats)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    if args.only_new:
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        ppi_and_sequential(args.repeats)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return

    s, n, episodes = make_data()
    print(f"data: {episodes.size} episodes in {N_CLUSTERS} clusters, AR = {episodes.mean():.4f}")
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    ours_t, ours = time_ours(s, n, args.repeats, "percentile")
    bca_t, bca = time_ours(s, n, args.repeats, "bca")
    print(
        f"ours  two-level cluster percentile, {RESAMPLES} resamples: median {ours_t:.3f} s "
        f"over {args.repeats} runs  CI [{ours.low:.4f}, {ours.high:.4f}]"
    )
    print(
        f"ours  two-level cluster BCa,        {RESAMPLES} resamples: median {bca_t:.3f} s "
        f"CI [{bca.low:.4f}, {bca.high:.4f}]"
    )

    # Worst case for the grouping of identical clusters: every cluster size distinct.
    rng = np.random.default_rng(1)
    n_uneq = rng.integers(50, 151, size=N_CLUSTERS)
    s_uneq = rng.binomial(n_uneq, rng.beta(6.75, 2.25, size=N_CLUSTERS))
    groups = np.unique(np.stack([n_uneq, s_uneq], axis=1), axis=0).shape[0]
    uneq_t, _ = time_ours(s_uneq, n_uneq, args.repeats, "percentile")
    print(
        f"ours  unequal cluster sizes ({int(n_uneq.sum())} episodes, {groups} distinct "
        f"clusters): median {uneq_t:.3f} s"
    )

    sp_t, ci = time_scipy(episodes, args.scipy_resamples, args.scipy_repeats)
    scale = RESAMPLES / args.scipy_resamples
    sp_full = sp_t * scale
    scaled = (
        f" (timed on {args.scipy_resamples} resamples, scaled ×{scale:g} linearly)"
        if scale != 1
        else ""
    )
    print(
        f"scipy episode-level percentile: {sp_full:.2f} s for {RESAMPLES} resamples{scaled}; "
        f"median of {args.scipy_repeats}; CI [{ci.low:.4f}, {ci.high:.4f}] (ignores clusters)"
    )
    print(f"ratio scipy/ours: {sp_full / ours_t:.0f}× (target ≥ 10×; ours target ≤ 1 s)")
    ppi_and_sequential(args.repeats)
    rank_bench(args.repeats)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
