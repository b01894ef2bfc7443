"""Quality of control (QC) and physical throughput $_phys (seed §7, §3.1 $ eq. (11)).

QC: each episode carries `qc` ∈ [0, 1], the suite's published control-quality functional
(weighted norms of tracking error and contact stability against the task's tracking tolerance).
The aggregate is the mean qc over the first scored real attempts, with a cluster bootstrap over
task instances; per task instance the report gives the distribution (n, mean, median, p10, p90,
min, max) and the tolerance band the functional used (the protocol's `qc_tolerance`).

$_phys = TPH_{Q*} / CPH, in tasks per currency unit, over every real episode of the evaluated
policy (every attempt and status: retries and aborts take robot time and consumables):

* TPH_{Q*} = N_success / T, N_success = episodes with z = 1 (q ≥ q*, the threshold AR uses),
  T = their summed durations in hours.
* CPH = energy + wear + consumables + operator, each per hour of T:
  energy = Σ energy_wh / 1000 × energy_per_kwh / T; wear = wear_per_hour;
  consumables = consumables_per_task × episodes / T; operator = operator_per_hour × operator_fraction.
* Interval: cluster bootstrap over task instances of the ratio
  N_success / (energy cost + consumables cost + (wear + operator)·T).

`cost_share` per item is that item's fraction of CPH: it is also the elasticity of $_phys to that
price (a 10 % price rise lowers $_phys by ≈ share × 10 %), the sensitivity the seed asks for.
Episodes' own `cost` items are not added to CPH (the price card is the declared accounting).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.embodiment.resampling import percentile_estimate, resampled_ratio
from embodied_eval.embodiment.selection import CLUSTER_UNIT
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode
from embodied_eval.stats import Estimate, cluster_weights


@dataclass(frozen=True)
class ControlQuality:
    """QC aggregate and per-task distributions."""

    overall: Estimate
    by_task: dict[str, dict[str, Any]]
    missing: int

    def to_json(self) -> dict[str, Any]:
        out = self.overall.to_json()
        out["by_task"] = self.by_task
        out["episodes_without_qc"] = self.missing
        return out


def control_quality(
    real: Sequence[Episode],
    protocol: Protocol,
    rng: np.random.Generator,
    resamples: int,
    level: float,
) -> ControlQuality:
    """QC: mean control-quality score with per-task distributions and tolerance bands (§7 QC).

    Args:
        real: first scored real attempts, shape [n]; episodes without qc are counted, not used.
        protocol: per-instance qc tolerances. rng, resamples, level: bootstrap settings.

    Returns:
        ControlQuality.
    """
    values: dict[str, list[float]] = defaultdict(list)
    missing = 0
    for e in real:
        if e.qc is None:
            missing += 1
        else:
            values[e.task_id].append(e.qc)
    tasks = sorted(values)
    method = f"cluster bootstrap over {CLUSTER_UNIT}s (percentile, {resamples} resamples)"
    n = sum(len(v) for v in values.values())
    if n == 0:
        empty = Estimate(None, None, None, level, method, 0, "two", "no episode has qc")
        return ControlQuality(empty, {}, missing)
    sums = np.array([sum(values[t]) for t in tasks])
    counts = np.array([len(values[t]) for t in tasks], dtype=float)
    w = cluster_weights(len(tasks), rng, resamples)
    overall = percentile_estimate(
        float(sums.sum() / counts.sum()), resampled_ratio(w, sums, counts), level, method, n
    )
    tolerances = {inst.task_id: inst.qc_tolerance for inst in protocol.instances}
    by_task = {}
    for t in tasks:
        arr = np.asarray(values[t])
        by_task[t] = {
            "n": int(arr.size),
            "mean": float(arr.mean()),
            "median": float(np.median(arr)),
            "p10": float(np.quantile(arr, 0.1)),
            "p90": float(np.quantile(arr, 0.9)),
            "min": float(arr.min()),
            "max": float(arr.max()),
            "qc_tolerance": tolerances.get(t),
        }
    return ControlQuality(overall, by_task, missing)


@dataclass(frozen=True)
class PhysicalThroughput:
    """$_phys with TPH, CPH and the itemized cost per hour."""

    value: Estimate
    tasks_per_hour: float | None
    cost_per_hour: float | None
    items_per_hour: dict[str, float]
    cost_share: dict[str, float]
    currency: str
    successes: int
    episodes: int
    hours: float

    def to_json(self) -> dict[str, Any]:
        out = self.value.to_json()
        out.update(
            {
                "unit": f"tasks per {self.currency}",
                "tasks_per_hour": self.tasks_per_hour,
                "cost_per_hour": self.cost_per_hour,
                "cost_items_per_hour": dict(self.items_per_hour),
                "cost_share": dict(self.cost_share),
                "currency": self.currency,
                "successes": self.successes,
                "episodes": self.episodes,
                "hours": self.hours,
            }
        )
        return out


def physical_throughput(
    real_all: Sequence[Episode],
    protocol: Protocol,
    rng: np.random.Generator,
    resamples: int,
    level: float,
) -> PhysicalThroughput:
    """$_phys = TPH_{Q*}/CPH, seed §7 ($_phys) after eq. (11), itemized by the price card.

    Args:
        real_all: every real episode of the evaluated policy, shape [n].
        protocol: the price card. rng, resamples, level: bootstrap settings.

    Returns:
        PhysicalThroughput (value None without real hours).
    """
    card = protocol.price_card
    method = f"cluster bootstrap over {CLUSTER_UNIT}s (percentile, {resamples} resamples)"
    tasks = sorted({e.task_id for e in real_all})
    index = {t: i for i, t in enumerate(tasks)}
    idx = np.asarray([index[e.task_id] for e in real_all], dtype=np.int64)

    def per_task(values: list[float] | None = None) -> np.ndarray:
        return np.bincount(idx, weights=values, minlength=len(tasks)).astype(float)

    succ = per_task([float(e.success) for e in real_all])
    hours = per_task([e.duration_s / 3600.0 for e in real_all])
    energy_wh = per_task([e.energy_wh for e in real_all])
    episodes = per_task()
    total_h = float(hours.sum())
    items = {
        "energy": float(energy_wh.sum()) / 1000.0 * card.energy_per_kwh,
        "wear": card.wear_per_hour * total_h,
        "consumables": card.consumables_per_task * float(episodes.sum()),
        "operator": card.operator_per_hour * card.operator_fraction * total_h,
    }
    n_succ, n_ep = int(succ.sum()), len(real_all)
    if total_h <= 0.0:
        empty = Estimate(None, None, None, level, method, n_ep, "two", "no real operating hours")
        return PhysicalThroughput(empty, None, None, {}, {}, card.currency, n_succ, n_ep, 0.0)
    cost = sum(items.values())
    per_hour = {k: v / total_h for k, v in items.items()}
    share = {k: (v / cost if cost > 0 else 0.0) for k, v in items.items()}
    tph = n_succ / total_h
    cph = cost / total_h
    if cost <= 0.0:
        note = "the price card gives zero cost per hour: $_phys is unbounded"
        empty = Estimate(None, None, None, level, method, n_ep, "two", note)
        return PhysicalThroughput(
            empty, tph, cph, per_hour, share, card.currency, n_succ, n_ep, total_h
        )
    cluster_cost = (
        energy_wh / 1000.0 * card.energy_per_kwh
        + card.consumables_per_task * episodes
        + (card.wear_per_hour + card.operator_per_hour * card.operator_fraction) * hours
    )
    w = cluster_weights(len(tasks), rng, resamples)
    value = percentile_estimate(
        n_succ / cost, resampled_ratio(w, succ, cluster_cost), level, method, n_ep
    )
    return PhysicalThroughput(
        value, tph, cph, per_hour, share, card.currency, n_succ, n_ep, total_h
    )
