"""Who judged the real episodes, how accurate that judge is, and AR corrected for it.

Every real episode names its judge (`Episode.judge`: kind, name, version). For a detector, its
measured accuracy ships with it (`embodied_eval.plugins.JUDGE_ACCURACY`: confusion counts against
the twin's oracle, by name and version); sensitivity and specificity are computed from those
counts with Wilson intervals (`embodied_eval.embodiment.detector_accuracy`).

With `[real] judge_correction = true`, AR is corrected for the detector's errors with the
Rogan–Gladen estimator (`beyond.rogan_gladen`): AR_RG = (AR + Sp − 1)/(Se + Sp − 1), clipped to
[0, 1]. Its uncertainty combines the three binomial proportions (AR over the n counted real
episodes, Se over the measured true successes, Sp over the measured true failures) in a
parametric bootstrap; a proportion observed at 0 or 1 is drawn from Beta(1, m) or Beta(m, 1)
instead of a degenerate binomial, so the interval never collapses to a point. The corrected AR
replaces AR in the report, in E's bootstrap (each resample of AR corrected with that resample's
Se and Sp) and in the AR gate (the one-sided lower percentile). The correction applies only when
every counted real episode was judged by one detector whose accuracy was measured; otherwise AR
stays as judged and the note says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.embodiment.beyond import rogan_gladen
from embodied_eval.embodiment.detector_accuracy import JudgeAccuracy, counts_of
from embodied_eval.embodiment.resampling import percentile_estimate
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from embodied_eval.stats import Estimate


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
) -> JudgeSummary:
    """The judge summary of the counted real episodes (see the module docstring).

    Args:
        real: first scored real attempts, shape [n].
        correction: the protocol's `[real] judge_correction`.
        rng, resamples, level: parametric bootstrap settings.
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
    method = f"Rogan-Gladen with the judge's measured Se and Sp, parametric bootstrap ({resamples})"
    if not real:
        return JudgeSummary(judges, accuracy, measured, True, note="no real episode")
    if accuracy is None or len(judges) != 1:
        why = note or "the real episodes were not all judged by one measured detector"
        return JudgeSummary(judges, accuracy, measured, True, note=f"AR not corrected: {why}")
    n, k = len(real), sum(e.success for e in real)
    pos, neg = accuracy.positives, accuracy.negatives
    if pos == 0 or neg == 0:
        return JudgeSummary(
            judges,
            accuracy,
            measured,
            True,
            note="AR not corrected: the accuracy needs measured true successes and failures",
        )
    se, sp = accuracy.true_positive / pos, accuracy.true_negative / neg
    point = rogan_gladen(k / n, se, sp)
    if not np.isfinite(point):
        return JudgeSummary(
            judges,
            accuracy,
            measured,
            True,
            note="AR not corrected: Se + Sp ≤ 1 (the detector is no better than chance)",
        )
    p_b = rate_resamples(k, n, rng, resamples)
    se_b = rate_resamples(accuracy.true_positive, pos, rng, resamples)
    sp_b = rate_resamples(accuracy.true_negative, neg, rng, resamples)
    corrected_b = np.nan_to_num(rogan_gladen(p_b, se_b, sp_b), nan=0.0)
    corrected = percentile_estimate(point, corrected_b, level, method, n)
    bound = percentile_estimate(
        point, corrected_b, level, method + ", one-sided", n, sided="lower"
    )
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
    )
