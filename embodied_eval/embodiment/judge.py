"""Who judged the real episodes, how accurate that judge was on this window, and AR corrected.

Every real episode names its judge (`Episode.judge`: kind, name, version). The detector's
accuracy is measured on the window's own episodes: a technician labels an audit sample of them
from their recordings (`embodied-eval trial audit`, `embodiment.window_audit`), the labels reach
the episodes as `audited_success` through the ledger's scored view, and Se and Sp per family,
with exact (Clopper–Pearson) intervals, come from the labelled episodes the detector judged —
"cannot judge" counting as the judge's own outcome (it lowers Se's or Sp's numerator).

A benchmark-measured table shipped with the detector (`embodied_eval.plugins.JUDGE_ACCURACY`:
the twin against its oracle) is shown beside it, labelled "benchmark (twin vs its oracle), not
this window's audit", with the SHA-256 of its entry, and never used for the correction.

With `[real] judge_correction = true`, AR is corrected for the detector's errors with the
Rogan–Gladen estimator (`beyond.rogan_gladen`): AR_RG = (AR + Sp − 1)/(Se + Sp − 1), clipped to
[0, 1]. Its Se and Sp are the judge's on the window's judged episodes: counted on a proportional
subsample of the audit's labels over family × verdict (`window_audit.proportional_labels`: the
audit draws its strata at different rates, and the counts of such a sample are not the window's),
cannot-judge episodes left out (AR over every attempt bounds them). Its bounds never claim more than the data support (`stats.misclassified`): α is split
over the judged rate, Se and Sp; the judged rate's bound is the smaller of the exact
Clopper–Pearson one and a cluster bootstrap over task instances (exact binomial draws inside each
resample, `resampling.success_rate_draws`), Se's and Sp's are exact Clopper–Pearson bounds, and
the corrected bound is Rogan–Gladen at the least favourable corner. The gate bound is that
one-sided lower bound at the protocol's confidence; the reported interval takes each end the same
way at α/2. The corrected AR replaces AR in the report, in E's bootstrap (each resample of AR
corrected with a parametric resample of Se and Sp; a proportion observed at 0 or 1 is drawn from
Beta(1, m) or Beta(m, 1)) and in the AR gate. The correction applies only when every counted
real episode was judged by one detector, the window's audit labelled true successes and
failures, Se + Sp > 1 and the judged rate is one the audited sensitivity allows; otherwise (no
audit included) AR and its exact bound stay as judged and the note says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.canonical import canonical_hash
from embodied_eval.embodiment.beyond import rogan_gladen
from embodied_eval.embodiment.detector_accuracy import counts_of
from embodied_eval.embodiment.resampling import success_rate_draws
from embodied_eval.embodiment.selection import CLUSTER_UNIT, OutcomeArrays, outcome_arrays
from embodied_eval.embodiment.window_audit import (
    AuditAccuracy,
    ProportionalLabels,
    detector_of_episode,
    proportional_labels,
    verdict_of,
    window_audit_accuracy,
)
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

#: How the shipped benchmark table is labelled wherever it is shown.
BENCHMARK_LABEL = "benchmark (twin vs its oracle), not this window's audit"


@dataclass(frozen=True)
class JudgeSummary:
    """The judges of the counted real episodes, the detector's accuracy on the window's audit
    ({"all": ..., family: ...}; empty without labels), the benchmark entry shown beside it, and
    the correction."""

    judges: list[dict[str, Any]]
    accuracy: dict[str, AuditAccuracy] = field(default_factory=dict)
    benchmark: dict[str, Any] = field(default_factory=dict)
    correction_asked: bool = False
    corrected: Estimate | None = None
    corrected_bound: Estimate | None = None
    resamples: tuple[np.ndarray, np.ndarray] | None = None
    note: str = ""
    corner: CorrectedBound | None = None
    audited: tuple[str, ...] = ()
    sample: ProportionalLabels | None = None

    def to_json(self, level: float) -> dict[str, Any]:
        bench = self.benchmark
        return {
            "judges": [dict(j) for j in self.judges],
            "accuracy": None
            if not self.accuracy
            else {
                **self.accuracy["all"].to_json(level),
                "measured_on": "this window's audit",
                "audited_episodes": list(self.audited),
                "by_family": {k: v.to_json(level) for k, v in self.accuracy.items() if k != "all"},
            },
            "benchmark": None
            if not bench
            else {
                **counts_of(bench).to_json(level),
                "label": BENCHMARK_LABEL,
                "measured_on": bench.get("measured_on", ""),
                "episodes": bench.get("episodes"),
                "sha256": canonical_hash(bench),
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
                        "sample": None
                        if self.sample is None
                        else {
                            "fraction": self.sample.fraction,
                            "labels": sorted(self.sample.labels),
                            "strata": {
                                h: dict(zip(("judged", "labelled", "kept"), c, strict=True))
                                for h, c in self.sample.strata.items()
                            },
                        },
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


def audit_of(
    window_real: Sequence[Episode], name: str, version: str
) -> tuple[dict[str, AuditAccuracy], tuple[str, ...]]:
    """The detector `name` `version`'s accuracy on the window's labelled episodes it judged
    (`audited_success` set by an audit label), and their ids; ({}, ()) without any."""
    labelled = [
        e
        for e in window_real
        if e.audited_success is not None and detector_of_episode(e) == (name, version)
    ]
    labels = {e.episode_id: "success" if e.audited_success else "failure" for e in labelled}
    accuracy = window_audit_accuracy(labelled, labels)
    if accuracy["all"].positives + accuracy["all"].negatives == 0:
        return {}, ()
    return accuracy, tuple(sorted(labels))


def judge_summary(
    real: Sequence[Episode],
    correction: bool,
    rng: np.random.Generator,
    resamples: int,
    level: float,
    arrays: OutcomeArrays | None = None,
    window_real: Sequence[Episode] | None = None,
) -> JudgeSummary:
    """The judge summary of the counted real episodes (see the module docstring).

    Args:
        real: first scored real attempts, shape [n].
        correction: the protocol's `[real] judge_correction`.
        rng, resamples, level: bootstrap settings and confidence level.
        arrays: the outcomes AR counts (`EpisodeSets.arrays`: unsafe successes may count as
            failures there); default: as judged.
        window_real: every real episode of the window, every attempt (the audit's labels may
            be on cannot-judge attempts too); default `real`.
    """
    judges = judges_of(real)
    detectors = [j for j in judges if j["kind"] == "detector"]
    accuracy: dict[str, AuditAccuracy] = {}
    audited: tuple[str, ...] = ()
    benchmark: dict[str, Any] = {}
    note = ""
    if len(detectors) == 1:
        name, version = detectors[0]["name"], detectors[0]["version"]
        accuracy, audited = audit_of(real if window_real is None else window_real, name, version)
        benchmark = _stored(name, version) or {}
        if not accuracy:
            note = (
                f"no audit of {name} {version} on this window (`trial audit`): its accuracy "
                "here is unmeasured"
            )

    def summary(**kw: Any) -> JudgeSummary:
        return JudgeSummary(judges, accuracy, benchmark, audited=audited, **kw)

    if not correction:  # the unaudited judge is named where the accuracy is shown
        return summary()
    if not real:
        return summary(correction_asked=True, note="no real episode")
    if not accuracy or len(judges) != 1:
        why = note or "the real episodes were not all judged by one audited detector"
        return summary(correction_asked=True, note=f"AR not corrected: {why}")
    outcomes = arrays if arrays is not None else outcome_arrays(real, [])
    n, k = len(real), int(outcomes.real_z.sum())
    window = real if window_real is None else window_real
    sample = correction_sample(window, judges[0])
    if sample.missing:
        return summary(
            correction_asked=True,
            note=f"AR not corrected: the window's audit has no label among its {sample.missing} "
            "episodes, so the judge's errors there are unmeasured",
        )
    total = window_audit_accuracy(window, sample.labels)["all"]
    # Judged episodes only: the correction corrects the judged rate (cannot-judge ones are
    # bounded by AR over every attempt).
    pos = total.true_positive + total.false_negative
    neg = total.true_negative + total.false_positive
    if pos == 0 or neg == 0:
        return summary(
            correction_asked=True,
            note="AR not corrected: the window's audit needs labelled true successes and failures",
        )
    tp, tn = total.true_positive, total.true_negative
    se, sp = tp / pos, tn / neg
    point = rogan_gladen(k / n, se, sp)
    if not np.isfinite(point):
        return summary(
            correction_asked=True,
            note="AR not corrected: Se + Sp ≤ 1 (the detector is no better than chance)",
        )
    alpha = 1.0 - level
    gate_tail, end_tail = alpha / SPLIT, alpha / (2 * SPLIT)
    (low_gate, low_end), (_, high_end) = clustered_judged_bounds(
        outcomes, rng, resamples, (gate_tail, end_tail)
    )
    corner = corrected_bound(k, n, tp, pos, tn, neg, level, judged_low=low_gate)
    if not corner.corrected:
        return summary(
            correction_asked=True,
            note="AR not corrected: the judged rate's bound is above what the judge's audited "
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
    return summary(
        correction_asked=True,
        corrected=corrected,
        corrected_bound=bound,
        resamples=(se_b, sp_b),
        note=f"AR corrected for {name} (Se {se:.3f}, Sp {sp:.3f} from {pos + neg} labels of "
        f"this window's audit: a proportional sample, {sample.fraction:.3f} of each family × "
        "verdict stratum of its judged episodes): E and the AR gate use it",
        corner=corner,
        sample=sample,
    )


def correction_sample(window_real: Sequence[Episode], judge: dict[str, Any]) -> ProportionalLabels:
    """The audit labels the correction uses: `window_audit.proportional_labels` over the
    window's episodes `judge` judged (success/failure), from their `audited_success`."""
    key = (str(judge["name"]), str(judge["version"]))
    judged = [
        e
        for e in window_real
        if detector_of_episode(e) == key and verdict_of(e) in ("success", "failure")
    ]
    labels = {
        e.episode_id: "success" if e.audited_success else "failure"
        for e in judged
        if e.audited_success is not None
    }
    return proportional_labels(judged, labels)
