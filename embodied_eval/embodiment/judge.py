"""Who judged the real episodes, how accurate that judge is, and AR corrected for it.

Every real episode names its judge (`Episode.judge`: kind, name, version). For a detector, its
measured accuracy ships with it (`embodied_eval.plugins.JUDGE_ACCURACY`: confusion counts against
the twin's oracle, by name and version); sensitivity and specificity are computed from those
counts with Wilson intervals (`embodied_eval.embodiment.detector_accuracy`).

With `[real] judge_correction = true`, AR is corrected for the detector's errors with the
Rogan–Gladen estimator (`beyond.rogan_gladen`): AR_RG = (AR + Sp − 1)/(Se + Sp − 1), clipped to
[0, 1]. Its bounds never claim more than the data support (`stats.misclassified`): α is split
over the judged rate, Se and Sp; the judged rate's bound is the smaller of the exact
Clopper–Pearson one and a cluster bootstrap over task instances (exact binomial draws inside each
resample, `resampling.success_rate_draws`), Se's and Sp's are exact Clopper–Pearson bounds, and
the corrected bound is Rogan–Gladen at the least favourable corner. The gate bound is that
one-sided lower bound at the protocol's confidence; the reported interval takes each end the same
way at α/2. The corrected AR replaces AR in the report, in E's bootstrap (each resample of AR
corrected with a parametric resample of Se and Sp; a proportion observed at 0 or 1 is drawn from
Beta(1, m) or Beta(m, 1)) and in the AR gate. The correction applies only when every counted
real episode was judged by one detector whose accuracy was measured, with audited true successes
and failures, Se + Sp > 1 and a judged rate the measured sensitivity allows; otherwise AR and its
exact bound stay as judged and the note says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.embodiment.beyond import rogan_gladen
from embodied_eval.embodiment.detector_accuracy import JudgeAccuracy, counts_of
from embodied_eval.embodiment.resampling import success_rate_draws
from embodied_eval.embodiment.selection import CLUSTER_UNIT, OutcomeArrays, outcome_arrays
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from embodied_eval.stats import Estimate, cluster_weights
from embodied_eval.stats.misclassified import (
    SPLIT,
    CorrectedBound,
    corrected_bound,
    corrected_lower_bound,
    corrected_upper_bound,
)


@dataclass(frozen=True)
class JudgeSummary:
    """The judges of the counted real episodes, the detector's accuracy, and the correction."""

    judges: list[dict[str, Any]]
    accuracy: JudgeAccuracy | None = None
    measured: dict[str, Any] = field(default_factory=dict)
    correction_asked: bool = False
    corrected: Estimate | None = None
    corrected_bound: Estimate | None = None
    resamples: tuple[np.ndarray, np.ndarray] | None = None
    note: str = ""
    corner: CorrectedBound | None = None

    def to_json(self, level: float) -> dict[str, Any]:
        acc = self.accuracy
        return {
            "judges": [dict(j) for j in self.judges],
            "accuracy": None
            if acc is None
            else {
                **acc.to_json(level),
                "measured_on": self.measured.get("measured_on", ""),
                "episodes": self.measured.get("episodes"),
            },
            "correction": self.correction_asked,
            "AR_corrected": self.corrected.to_json() if self.corrected is not None else None,
            "note": self.note,
            **(
                {}
                if self.corner is None or self.corrected_bound is None
                else {
                    "AR_corrected_bound": {
                        **self.corrected_bound.to_json(),
                        "corner": self.corner.to_json(),
                    }
                }
            ),
        }


def judges_of(real: Sequence[Episode]) -> list[dict[str, Any]]:
    """[{kind, name, version, episodes}] of the real episodes' judges, most episodes first."""
    counts = Counter(
        tuple(str(e.judge.get(key, "")) for key in ("kind", "name", "version")) for e in real
    )
    return [
        {"kind": k or "none", "name": n, "version": v, "episodes": c}
        for (k, n, v), c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def rate_resamples(k: int, n: int, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Parametric resamples of a proportion k/n: Binomial(n, k/n)/n, or Beta(n, 1) when k = n
    and Beta(1, n) when k = 0 (never a constant)."""
    if k == n:
        return rng.beta(n, 1.0, resamples)
    if k == 0:
        return rng.beta(1.0, n, resamples)
    return rng.binomial(n, k / n, resamples) / n


def clustered_judged_bounds(
    arrays: OutcomeArrays, rng: np.random.Generator, resamples: int, tails: Sequence[float]
) -> tuple[list[float], list[float]]:
    """Cluster-bootstrap bounds of the judged success rate over task instances: for each tail t,
    the t-quantile of the lower-side exact draws and the (1 − t)-quantile of the upper-side ones
    (`resampling.success_rate_draws`; one set of cluster weights for every tail).

    Args:
        arrays: the counted real episodes' outcomes (`selection.outcome_arrays`).
        rng, resamples: bootstrap settings. tails: tail probabilities.

    Returns:
        (lower bounds, upper bounds), one per tail.
    """
    succ = arrays.per_task(arrays.real_task, arrays.real_z.astype(float))
    count = arrays.per_task(arrays.real_task)
    w = cluster_weights(succ.size, rng, resamples)
    low, high = success_rate_draws(w, succ, count, rng.random(resamples))
    return (
        [float(np.nanquantile(low, t)) for t in tails],
        [float(np.nanquantile(high, 1.0 - t)) for t in tails],
    )


def _stored(name: str, version: str) -> dict[str, Any] | None:
    from embodied_eval.plugins import JUDGE_ACCURACY, resolve

    try:
        lookup = resolve(JUDGE_ACCURACY)
    except EvalError:
        return None
    entry = lookup(name, version)
    return None if entry is None else dict(entry)


def judge_summary(
    real: Sequence[Episode],
    correction: bool,
    rng: np.random.Generator,
    resamples: int,
    level: float,
    arrays: OutcomeArrays | None = None,
) -> JudgeSummary:
    """The judge summary of the counted real episodes (see the module docstring).

    Args:
        real: first scored real attempts, shape [n].
        correction: the protocol's `[real] judge_correction`.
        rng, resamples, level: bootstrap settings and confidence level.
        arrays: the outcomes AR counts (`EpisodeSets.arrays`: unsafe successes may count as
            failures there); default: as judged.
    """
    judges = judges_of(real)
    detectors = [j for j in judges if j["kind"] == "detector"]
    accuracy, measured, note = None, {}, ""
    if len(detectors) == 1:
        entry = _stored(detectors[0]["name"], detectors[0]["version"])
        if entry is not None:
            accuracy, measured = counts_of(entry), entry
        else:
            note = f"no measured accuracy for {detectors[0]['name']} {detectors[0]['version']}"
    if not correction:
        return JudgeSummary(judges, accuracy, measured, False, note=note)
    if not real:
        return JudgeSummary(judges, accuracy, measured, True, note="no real episode")
    if accuracy is None or len(judges) != 1:
        why = note or "the real episodes were not all judged by one measured detector"
        return JudgeSummary(judges, accuracy, measured, True, note=f"AR not corrected: {why}")
    outcomes = arrays if arrays is not None else outcome_arrays(real, [])
    n, k = len(real), int(outcomes.real_z.sum())
    pos, neg = accuracy.positives, accuracy.negatives
    if pos == 0 or neg == 0:
        return JudgeSummary(
            judges,
            accuracy,
            measured,
            True,
            note="AR not corrected: the accuracy needs measured true successes and failures",
        )
    tp, tn = accuracy.true_positive, accuracy.true_negative
    se, sp = tp / pos, tn / neg
    point = rogan_gladen(k / n, se, sp)
    if not np.isfinite(point):
        return JudgeSummary(
            judges,
            accuracy,
            measured,
            True,
            note="AR not corrected: Se + Sp ≤ 1 (the detector is no better than chance)",
        )
    alpha = 1.0 - level
    gate_tail, end_tail = alpha / SPLIT, alpha / (2 * SPLIT)
    (low_gate, low_end), (_, high_end) = clustered_judged_bounds(
        outcomes, rng, resamples, (gate_tail, end_tail)
    )
    corner = corrected_bound(k, n, tp, pos, tn, neg, level, judged_low=low_gate)
    if not corner.corrected:
        return JudgeSummary(
            judges,
            accuracy,
            measured,
            True,
            note="AR not corrected: the judged rate's bound is above what the judge's measured "
            "sensitivity allows, or the accuracy's bounds reach Se + Sp ≤ 1; the gate uses the "
            "exact bound of AR as judged",
        )
    two = 1.0 - alpha / 2.0
    end_low, _ = corrected_lower_bound(k, n, tp, pos, tn, neg, two, judged_low=low_end)
    end_high = corrected_upper_bound(k, n, tp, pos, tn, neg, two, judged_high=high_end)
    method = (
        "Rogan-Gladen; bounds at the least favourable corner of the judged rate's (exact "
        f"Clopper–Pearson or {CLUSTER_UNIT} cluster bootstrap, the lower; {resamples} resamples), "
        "Se's and Sp's exact Clopper–Pearson bounds, α split in three"
    )
    corrected = Estimate(
        float(point), min(float(end_low), point), max(float(end_high), point), level, method, n
    )
    bound = Estimate(
        float(point), min(corner.bound, point), 1.0, level, method + ", one-sided", n, "lower"
    )
    se_b = rate_resamples(tp, pos, rng, resamples)
    sp_b = rate_resamples(tn, neg, rng, resamples)
    name = f"{judges[0]['name']} {judges[0]['version']}"
    return JudgeSummary(
        judges,
        accuracy,
        measured,
        True,
        corrected,
        bound,
        (se_b, sp_b),
        f"AR corrected for {name} (Se {se:.3f}, Sp {sp:.3f}): E and the AR gate use it",
        corner,
    )
