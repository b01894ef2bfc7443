"""Actuation reliability (AR), recovery autonomy (RA), MTBF and MTTR (seed §3.1 E, §7).

Formulas and bounds:

* AR = mean z over the first scored real attempts (selection rules in `selection`). Reported
  interval: cluster bootstrap over task instances with exact binomial draws inside each resample,
  widened to contain the exact Clopper–Pearson interval (`clustered_success_rate`): never a point
  on finite data. Gate bound: the exact one-sided Clopper–Pearson lower bound at the protocol's
  confidence.
* AR_with_retries = fraction of real pairs whose task succeeded at *any* scored attempt (Wilson).
  It is ≥ AR by construction and never enters E.
* RA = faults recovered autonomously / faults, over every fault of the evaluated policy's real
  episodes (any attempt, any status: a fault that ended an episode in an abort is still a fault
  that was not recovered). Clopper–Pearson, per fault kind with its denominator.
* MTBF = H / N_fail (time-terminated chi-square interval). N_fail counts scored real episodes of
  the evaluated policy with z = 0 (every attempt, since H includes every attempt). When an episode
  records a failure cause (`control["failure_cause"]`), only cause "actuation" counts; failures
  without a recorded cause count (they cannot be ruled out).
* MTTR = mean repair time of the real faults an operator had to repair (not recovered
  autonomously), in hours, with the exponential chi-square interval.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.embodiment.resampling import success_rate_draws, two_sided_estimate
from embodied_eval.embodiment.selection import CLUSTER_UNIT, EpisodeSets
from embodied_eval.records import Episode, Fault
from embodied_eval.stats import (
    Estimate,
    clopper_pearson_interval,
    cluster_weights,
    mtbf_interval,
    mttr_interval,
    wilson_interval,
)

#: Key of `Episode.control` naming why an episode failed ("actuation", "perception", ...).
FAILURE_CAUSE_KEY = "failure_cause"
#: The failure cause that counts toward MTBF when causes are recorded.
ACTUATION_CAUSE = "actuation"
#: Below this many clusters the between-cluster spread is poorly estimated (statistics notes).
MIN_BOOTSTRAP_CLUSTERS = 20


def cluster_counts(episodes: Sequence[Episode]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Successes and episodes per task instance.

    Args:
        episodes: scored episodes, shape [n].

    Returns:
        (task ids [C], successes [C] int64, counts [C] int64), task ids sorted.
    """
    succ: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    for e in episodes:
        count[e.task_id] += 1
        succ[e.task_id] += e.success
    tasks = sorted(count)
    return (
        tasks,
        np.array([succ[t] for t in tasks], dtype=np.int64),
        np.array([count[t] for t in tasks], dtype=np.int64),
    )


def clustered_success_rate(
    successes: np.ndarray,
    counts: np.ndarray,
    rng: np.random.Generator,
    resamples: int,
    level: float,
) -> Estimate:
    """Strict success rate Σs/Σn with a cluster bootstrap over task instances that never claims
    more than the exact binomial interval.

    Each resample draws task instances with replacement and then the rate from the exact
    binomial (Clopper–Pearson beta) draws of its counts (`resampling.success_rate_draws`); the
    percentile interval is then widened to contain the exact two-sided Clopper–Pearson interval of
    k/n. So the interval is never a point on finite data (20/20 on instances of sizes [1, 1, 18]
    gives a lower end ≤ 0.8316) and one more failure never raises either end (same generator).

    Args:
        successes, counts: per task instance, shape [C] (clusters with no episode are dropped).
        rng: generator for the bootstrap. resamples: R. level: two-sided level.

    Returns:
        Estimate(value = Σs/Σn, interval, n = episodes); extra["exact"] is the Clopper–Pearson
        interval, extra["bootstrap"] the bootstrap's own ends.
    """
    keep = counts > 0
    succ, count = successes[keep].astype(np.int64), counts[keep].astype(np.int64)
    n = int(count.sum())
    if n == 0:
        return Estimate(None, None, None, level, "no episodes", 0, "two", "no scored episodes")
    k = int(succ.sum())
    method = (
        f"cluster bootstrap over {CLUSTER_UNIT}s with exact binomial draws per resample "
        f"(percentile, {resamples} resamples), never narrower than Clopper–Pearson"
    )
    w = cluster_weights(succ.size, rng, resamples)
    low_draws, high_draws = success_rate_draws(w, succ, count, rng.random(resamples))
    boot = two_sided_estimate(k / n, low_draws, high_draws, level, method, n)
    exact = clopper_pearson_interval(k, n, level)
    assert boot.low is not None and boot.high is not None
    assert exact.low is not None and exact.high is not None
    notes = []
    if succ.size < MIN_BOOTSTRAP_CLUSTERS:
        notes.append(
            f"only {succ.size} task instance(s): the spread between instances rests on few of them"
        )
    if exact.low < boot.low or exact.high > boot.high:
        notes.append("an end is the exact Clopper–Pearson one (the bootstrap's was narrower)")
    return Estimate(
        k / n,
        min(boot.low, exact.low),
        max(boot.high, exact.high),
        level,
        method,
        n,
        "two",
        "; ".join(notes),
        extra={
            "clusters": int(succ.size),
            "successes": k,
            "exact": [exact.low, exact.high],
            "bootstrap": [boot.low, boot.high],
        },
    )


def success_rate(
    episodes: Sequence[Episode], rng: np.random.Generator, resamples: int, level: float
) -> Estimate:
    """`clustered_success_rate` of a list of scored episodes (clusters = task instances)."""
    _, succ, count = cluster_counts(episodes)
    return clustered_success_rate(succ, count, rng, resamples, level)


def actuation_reliability(
    sets: EpisodeSets, rng: np.random.Generator, resamples: int, level: float
) -> Estimate:
    """AR = E[z] over real episodes (seed §3.1 E, "Actuation reliability"), first scored attempts.

    Args:
        sets: the selected episodes (uses the counted real episodes).
        rng, resamples, level: see `clustered_success_rate`.

    Returns:
        Estimate of AR with the cluster-bootstrap interval.
    """
    a = sets.arrays
    succ = a.per_task(a.real_task, a.real_z.astype(float))
    return clustered_success_rate(succ, a.per_task(a.real_task), rng, resamples, level)


def paired_sim_success_rate(
    sets: EpisodeSets, rng: np.random.Generator, resamples: int, level: float
) -> Estimate:
    """AR_sim on the sim episodes of the pairs, cluster bootstrap over task instances."""
    a = sets.arrays
    succ = a.per_task(a.pair_task, a.pair_sim_z.astype(float))
    return clustered_success_rate(succ, a.per_task(a.pair_task), rng, resamples, level)


def actuation_reliability_bound(sets: EpisodeSets, level: float) -> Estimate:
    """One-sided exact Clopper–Pearson lower bound of AR at `level` (what an AR gate uses).

    Args:
        sets: the selected episodes. level: one-sided confidence level.

    Returns:
        Estimate(sided="lower").
    """
    k = int(sets.arrays.real_z.sum())
    return clopper_pearson_interval(k, len(sets.real), level, sided="lower")


def actuation_reliability_with_retries(sets: EpisodeSets, level: float) -> Estimate:
    """Fraction of real pairs that succeeded at any scored attempt (retries allowed), Wilson.

    Args:
        sets: the selected episodes (uses every scored real attempt of the evaluated policy).
        level: two-sided level.

    Returns:
        Estimate(n = pairs with at least one scored attempt); extra["retries"] counts the
        attempts beyond the counted one.
    """
    best: dict[str, bool] = {}
    for e in sets.real_all:
        if e.scored:
            best[e.pair_id] = best.get(e.pair_id, False) or e.success
    est = wilson_interval(sum(best.values()), len(best), level)
    return dataclasses.replace(
        est,
        method="Wilson; success at any scored attempt per pair (retries count)",
        extra={"retries": sets.retries_real},
    )


# --------------------------------------------------------------------------- faults


def real_faults(sets: EpisodeSets, faults: Iterable[Fault] = ()) -> tuple[list[Fault], int]:
    """Every fault of the evaluated policy's real episodes.

    Faults come from the episodes themselves and from `faults` (records naming their episode).
    The same fault present in both is counted once: per episode, each distinct fault counts as
    often as it appears in whichever source lists it more often.

    Args:
        sets: the selected episodes.
        faults: extra fault records with `episode_id` set.

    Returns:
        (faults, ignored) where `ignored` counts extra faults naming no episode of the window.
    """
    extra: dict[str, Counter[Fault]] = defaultdict(Counter)
    ignored = 0
    faults = list(faults)
    if faults:
        real_ids = {e.episode_id for e in sets.real_all}
        known_ids = real_ids | {e.episode_id for e in sets.window_real}
        known_ids |= {e.episode_id for e in sets.window_sim}
        for f in faults:
            if f.episode_id not in known_ids:
                ignored += 1
            elif f.episode_id in real_ids:
                extra[f.episode_id][f] += 1
    out: list[Fault] = []
    # Only episodes with faults cost anything: most episodes have none.
    for e in sets.real_all:
        if not e.faults and e.episode_id not in extra:
            continue
        embedded = Counter(
            f if f.episode_id else dataclasses.replace(f, episode_id=e.episode_id) for f in e.faults
        )
        merged = embedded | extra.get(e.episode_id, Counter())
        items = list(merged.items())
        if len(items) > 1:  # a stable order, whatever order the sources listed them in
            items.sort(key=lambda kv: kv[0].to_json())
        for fault, times in items:
            out.extend([fault] * times)
    return out, ignored


@dataclass(frozen=True)
class RecoveryResult:
    """RA overall, its gate bound, and per fault kind (with denominators)."""

    overall: Estimate
    bound: Estimate
    recovered: int
    faults: int
    by_kind: dict[str, dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        out = self.overall.to_json()
        out["recovered"] = self.recovered
        out["faults"] = self.faults
        out["by_kind"] = {
            kind: {
                "recovered": v["recovered"],
                "faults": v["faults"],
                "rate": v["rate"].to_json(),
            }
            for kind, v in self.by_kind.items()
        }
        return out


def recovery_autonomy(faults: Sequence[Fault], level: float) -> RecoveryResult:
    """RA: fraction of faults recovered autonomously (seed §7 RA), overall and per fault kind.

    Args:
        faults: the real faults of the evaluated policy (see `real_faults`).
        level: confidence level (two-sided for the reported intervals, one-sided for the bound).

    Returns:
        RecoveryResult; with no faults every estimate has value None (RA is then not evidenced).
    """
    recovered = sum(f.recovered_autonomously for f in faults)
    overall = clopper_pearson_interval(recovered, len(faults), level)
    bound = clopper_pearson_interval(recovered, len(faults), level, sided="lower")
    kinds: dict[str, list[Fault]] = defaultdict(list)
    for f in faults:
        kinds[f.kind].append(f)
    by_kind = {}
    for kind in sorted(kinds):
        k = sum(f.recovered_autonomously for f in kinds[kind])
        n = len(kinds[kind])
        by_kind[kind] = {
            "recovered": k,
            "faults": n,
            "rate": clopper_pearson_interval(k, n, level),
        }
    return RecoveryResult(overall, bound, recovered, len(faults), by_kind)


def mean_time_to_repair(faults: Sequence[Fault], level: float) -> Estimate:
    """MTTR in hours over faults an operator repaired, exponential chi-square interval.

    Args:
        faults: the real faults (see `real_faults`); autonomously recovered ones are skipped.
        level: two-sided level.

    Returns:
        Estimate(n = repairs); value None without repairs.
    """
    hours = [f.repair_s / 3600.0 for f in faults if not f.recovered_autonomously]
    est = mttr_interval(hours, level, method="exponential")
    return dataclasses.replace(
        est, method=f"{est.method}; operator repairs (faults not recovered autonomously)"
    )


# --------------------------------------------------------------------------- MTBF


def actuation_failures(episodes: Sequence[Episode]) -> tuple[int, bool]:
    """Failed scored episodes attributed to actuation (see the module docstring).

    Args:
        episodes: real episodes (any attempt); unscored ones are skipped.

    Returns:
        (N_fail, causes_recorded) where causes_recorded says whether any failure named a cause.
    """
    n_fail = 0
    recorded = False
    for e in episodes:
        if not e.scored or e.success:
            continue
        cause = e.control.get(FAILURE_CAUSE_KEY)
        if cause is None:
            n_fail += 1
        else:
            recorded = True
            n_fail += str(cause) == ACTUATION_CAUSE
    return n_fail, recorded


def mean_time_between_failures(
    failures: int, hours: float, level: float, *, hours_source: str, causes_recorded: bool
) -> Estimate:
    """MTBF = H / N_fail (seed §3.1 E "Report MTBF"), time-terminated chi-square interval.

    Args:
        failures: N_fail (see `actuation_failures`). hours: H in hours.
        level: two-sided level. hours_source: where H comes from (said in the method).
        causes_recorded: whether failure causes were used to keep only actuation failures.

    Returns:
        Estimate in hours (value ∞ with zero failures; the lower bound is then what to read).
    """
    est = mtbf_interval(failures, hours, level, terminated="time")
    which = (
        "failures attributed to actuation (z = 0, recorded cause 'actuation' or none)"
        if causes_recorded
        else "every failed scored episode (z = 0; no causes recorded)"
    )
    return dataclasses.replace(est, method=f"{est.method}; H from {hours_source}; {which}")
