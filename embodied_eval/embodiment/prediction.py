"""AR_ppi: the real success rate from every sim episode of the window plus the paired real ones.

The sim engine paired with the real side (see `selection`) predicts z for every task instance,
drift and seed of the manifest; the pairs give real z beside the sim's prediction for the same
instance and seed. The prediction-powered estimator (`stats.ppi`) adds the pairs' mean residual
(real − λ·sim) to λ × the mean sim prediction over the sim episodes without a real episode, so a
biased sim is corrected and a sim that predicts real well narrows the interval.

Method: the cluster-aware PPI++ interval over task instances (delete-one-cluster jackknife, λ
re-tuned per replicate, t quantile), clipped to [0, 1]. It is used only above the PPI validity
floor (`stats.ppi.ppi_validity`: ≥ 100 labelled pairs, ≥ 40 task instances, the real rate in
0.2–0.8 and at least 5/n from 0 and 1, a non-degenerate variance: where the coverage simulation
shows the gate's bound within 1 pt of nominal; the floor and that coverage are in the JSON). Below the floor AR_ppi falls back to the
classical AR (its estimate and interval) with a note naming the floors not met; the PPI fit's λ,
effective n and pairs are still reported, to show how far the window is from the floor. With
fewer than 3 task instances the fit is the iid one (diagnostic only: it is always below the
floor). Never [1, 1] from 5 all-success pairs.

AR_ppi is reported beside AR with its effective real sample size. It replaces AR in E and in the
AR gate bound only when the protocol sets `[embodiment] ar_estimator = "ppi"` and the fit is above
the floor; the report's notes (and so the certificate) then say so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodied_eval.embodiment.selection import CLUSTER_UNIT, EpisodeSets
from embodied_eval.stats import Estimate, PPIResult, ppi_mean, ppi_mean_clustered, ppi_validity
from embodied_eval.stats.ppi_floor import FLOOR_COVERAGE, PPIFloor

#: The cluster jackknife needs at least this many task instances to be computed at all.
MIN_FIT_CLUSTERS = 3
#: `[embodiment] ar_estimator` values.
CLASSICAL, PPI = "classical", "ppi"


@dataclass(frozen=True)
class PredictionPoweredAR:
    """AR_ppi with what it rests on.

    Attributes:
        estimate: AR_ppi (two-sided interval at the protocol's level, clipped to [0, 1]).
        result: the PPI fit (None when there are fewer than 2 pairs).
        in_use: True when the protocol's `ar_estimator` is "ppi" and the fit is above its
            validity floor (E and the AR gate then use it).
        parts: per-task-instance sums for the joint bootstrap of E: pairs n/y/f and unlabeled
            m/g, aligned with `sets.arrays.tasks`, plus "extra_m"/"extra_g" for sim-only tasks.
        below_floor: the validity floors not met (empty: the PPI interval is reported and valid).
        requested: True when the protocol's `ar_estimator` is "ppi".
    """

    estimate: Estimate
    result: PPIResult | None
    in_use: bool
    parts: dict[str, Any]
    below_floor: tuple[str, ...] = ()
    requested: bool = False
    floor: PPIFloor = field(default_factory=PPIFloor)

    @property
    def valid(self) -> bool:
        """True when the fit is above the PPI validity floor."""
        return self.result is not None and not self.below_floor

    def to_json(self) -> dict[str, Any]:
        out = self.estimate.to_json()
        r = self.result
        out["effective_n"] = (
            None if r is None or not np.isfinite(r.effective_n) else round(r.effective_n, 3)
        )
        out["lambda"] = None if r is None else r.lam
        out["pairs"] = 0 if r is None else r.n_pairs
        out["sim_unpaired"] = 0 if r is None else r.n_sim
        out["clusters"] = None if r is None else r.clusters
        out["in_use"] = self.in_use
        out["valid"] = self.valid
        out["below_floor"] = list(self.below_floor)
        out["floor"] = self.floor.to_json()
        if self.floor == PPIFloor():
            out["floor"]["coverage"] = dict(FLOOR_COVERAGE)
        return out


def prediction_powered_ar(
    sets: EpisodeSets,
    level: float,
    in_use: bool,
    classical: Estimate | None = None,
    floor: PPIFloor | None = None,
) -> PredictionPoweredAR:
    """AR_ppi of the selected episodes (see the module docstring).

    Args:
        sets: the selected episodes (pairs on the paired sim engine; its other sim episodes).
        level: two-sided level.
        in_use: whether the protocol opted in (`ar_estimator = "ppi"`).
        classical: the classical AR estimate reported instead below the validity floor (without
            it, the fallback reports the PPI point with no interval).
        floor: the validity floor (default: this version's; a recomputed certificate's own).

    Returns:
        PredictionPoweredAR; value None with a note when fewer than 2 pairs exist.
    """
    fl = floor if floor is not None else PPIFloor()
    a = sets.arrays
    paired_ids = {r.pair_id for _, r in sets.pairs}
    unpaired = [e for e in sets.sim if e.pair_id not in paired_ids]
    tasks = list(a.tasks)
    index = {t: i for i, t in enumerate(tasks)}
    for e in unpaired:
        if e.task_id not in index:
            index[e.task_id] = len(index)
    y = a.pair_real_z.astype(float)
    f = a.pair_sim_z.astype(float)
    g = np.asarray([e.success for e in unpaired], dtype=float)
    sim_cluster = np.asarray([index[e.task_id] for e in unpaired], dtype=np.int64)
    parts = _parts(len(tasks), a.pair_task, y, f, sim_cluster, g)
    if y.size < 2:
        est = Estimate(None, None, None, level, "prediction-powered mean", int(y.size), "two",
                       "fewer than 2 sim/real pairs: AR_ppi undefined")  # fmt: skip
        return PredictionPoweredAR(
            est, None, False, parts, ("fewer than 2 sim/real pairs",), in_use, fl
        )
    pair_cluster = a.pair_task
    used = set(pair_cluster.tolist()) | set(sim_cluster.tolist())
    if len(used) >= MIN_FIT_CLUSTERS:
        result = ppi_mean_clustered(y, f, pair_cluster, g, sim_cluster, level)
        method = result.estimate.method.replace("clusters", f"{CLUSTER_UNIT}s")
    else:
        result = ppi_mean(y, f, g, level)
        method = result.estimate.method
    reasons = tuple(ppi_validity(result, y, fl))
    notes = []
    if g.size == 0:
        notes.append("no sim episode without a real episode: AR_ppi is the real mean")
    fit = result.estimate
    assert fit.value is not None and fit.low is not None and fit.high is not None
    if reasons:
        why = "; ".join(reasons)
        note = f"PPI below its validity floor ({why}): the classical AR is reported instead"
        if classical is not None:
            est = dataclasses.replace(
                classical,
                method=f"classical AR, {classical.method} (PPI below its validity floor)",
                note="; ".join(x for x in (note, classical.note) if x),
                extra={**classical.extra, "ppi_point": fit.value},
            )
        else:
            est = Estimate(fit.value, None, None, level, method, fit.n, "two", note)
        return PredictionPoweredAR(est, result, False, parts, reasons, in_use, fl)
    est = dataclasses.replace(
        fit,
        low=max(0.0, fit.low),
        high=min(1.0, fit.high),
        method=method + ("; in E and the AR gate" if in_use else "; reported beside AR"),
        note="; ".join(notes),
    )
    return PredictionPoweredAR(est, result, in_use, parts, (), in_use, fl)


def prediction_powered_ar_bound(
    sets: EpisodeSets, level: float, floor: PPIFloor | None = None
) -> Estimate:
    """One-sided lower bound of AR_ppi at `level`, the AR gate bound when the protocol opts in
    and the fit is above its validity `floor`: the low end of the two-sided interval at `level`
    (the (2·level − 1) interval's under earlier floors, `PPIFloor.gate_two_sided`)."""
    fl = floor if floor is not None else PPIFloor()
    # This version's floor: the two-sided interval's low end, whose coverage was shown.
    fit_level = level if fl.gate_two_sided else 2.0 * level - 1.0
    est = prediction_powered_ar(sets, fit_level, True, floor=fl).estimate
    return dataclasses.replace(
        est, level=level, high=1.0 if est.value is not None else None, sided="lower",
        method=est.method + ", one-sided",
    )  # fmt: skip


def _parts(
    n_tasks: int,
    pair_task: NDArray[np.int64],
    y: NDArray[np.float64],
    f: NDArray[np.float64],
    sim_cluster: NDArray[np.int64],
    g: NDArray[np.float64],
) -> dict[str, Any]:
    size = max(n_tasks, int(sim_cluster.max(initial=-1)) + 1)
    m_all = np.bincount(sim_cluster, minlength=size).astype(float)
    g_all = np.bincount(sim_cluster, weights=g, minlength=size)
    return {
        "n": np.bincount(pair_task, minlength=n_tasks).astype(float)[:n_tasks],
        "y": np.bincount(pair_task, weights=y, minlength=n_tasks)[:n_tasks],
        "f": np.bincount(pair_task, weights=f, minlength=n_tasks)[:n_tasks],
        "m": m_all[:n_tasks],
        "g": g_all[:n_tasks],
        "extra_m": float(m_all[n_tasks:].sum()),
        "extra_g": float(g_all[n_tasks:].sum()),
    }


def resampled_ppi(w: NDArray[np.float64], parts: dict[str, Any], lam: float) -> NDArray:
    """AR_ppi per bootstrap resample of task-instance multiplicities w [R, C], λ held fixed.

    Sim-only task instances (no counted real episode) are not resampled: their sim episodes
    enter every resample as they are.
    """
    n = w @ parts["n"]
    y = (w @ parts["y"]) / np.where(n > 0, n, 1.0)
    f = (w @ parts["f"]) / np.where(n > 0, n, 1.0)
    m = w @ parts["m"] + parts["extra_m"]
    g = np.where(m > 0, (w @ parts["g"] + parts["extra_g"]) / np.where(m > 0, m, 1.0), 0.0)
    lam_eff = np.where(m > 0, lam, 0.0)
    out: NDArray = np.where(n > 0, lam_eff * g + y - lam_eff * f, np.nan)
    return out
