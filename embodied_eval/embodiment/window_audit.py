"""The judge's accuracy measured on the window's own episodes: an audit sample and its labels.

A technician watches the recording of a sample of the window's judged real episodes and says
what truly happened (`success`, `failure`, or `cannot_tell` from the recording). The sample is
drawn with a recorded seed, stratified by family × the judge's verdict (`success`, `failure`,
`cannot_judge`): up to `per_stratum` episodes of each judged stratum at random, and every episode
the judge could not judge (`draw_audit`). The labels give, per family and over all,

    Se = TP / (TP + FN + CJ₊)      Sp = TN / (TN + FP + CJ₋)

where CJ₊ (CJ₋) counts true successes (failures) the judge could not judge: "cannot judge" is
the judge's own outcome, so it lowers the numerator, never the denominator (`AuditAccuracy`).
Intervals are exact (Clopper–Pearson). A `cannot_tell` label counts in no rate.

The strata are sampled at different rates (every cannot-judge episode, up to `per_stratum` of
the others), so Se and Sp above are those of the audited episodes. The AR correction needs the
judge's Se and Sp on the window's *judged* episodes: `proportional_labels` keeps, from each family
× verdict stratum of the judged episodes, the same fraction f of the window's episodes among its
labelled ones (f is the smallest labelled share of any stratum; a seeded order picks which), so the
kept labels are a proportionally allocated stratified sample of the judged episodes — self-weighting,
so its counts estimate the window's Se and Sp without reweighting and their exact intervals apply.
Cannot-judge episodes are left out there: the correction corrects the judged rate, and AR over
every attempt bounds them separately (`embodiment.every_attempt`).

`audits_for_width` is the planner: how many audits give Se and Sp exact intervals no wider than
a width, at the window's success rate.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.embodiment.every_attempt import outcome_kind
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from embodied_eval.stats import Estimate, clopper_pearson_interval

#: The judge's verdicts an audit stratifies by.
VERDICTS = ("success", "failure", "cannot_judge")
#: What a technician may answer from the recording.
LABELS = ("success", "failure", "cannot_tell")


def verdict_of(e: Episode) -> str | None:
    """The judge's verdict on real episode `e`: "success"/"failure" when scored, "cannot_judge"
    when aborted because the judge could not judge; None for anything else (nothing to audit)."""
    if e.side != "real":
        return None
    kind = outcome_kind(e)
    if kind == "scored":
        return "success" if e.success else "failure"
    return "cannot_judge" if kind == "cannot_judge" else None


def detector_of_episode(e: Episode) -> tuple[str, str] | None:
    """(name, version) of the detector that judged `e`, or tried to: its `judge` when a detector
    gave the verdict; for a cannot-judge episode (no verdict, so no `judge`), the detector
    recorded in `control.detector`. None otherwise."""
    if e.judge:
        if e.judge.get("kind") != "detector":
            return None
        return str(e.judge.get("name", "")), str(e.judge.get("version", ""))
    tried = e.control.get("detector") if isinstance(e.control, Mapping) else None
    if verdict_of(e) == "cannot_judge" and isinstance(tried, Mapping) and tried.get("name"):
        return str(tried["name"]), str(tried.get("version", ""))
    return None


def recording_of(e: Episode) -> str:
    """Where the episode's recording is: the paths of its artifacts (camera strip, MCAP), or
    "no recording stored"."""
    paths = [a.path for a in e.artifacts]
    return ", ".join(paths) if paths else "no recording stored"


@dataclass(frozen=True)
class AuditDraw:
    """A drawn audit sample.

    Attributes:
        seed: the seed of the draw (numpy default_rng). per_stratum: judged episodes per
            family × verdict stratum (every cannot-judge episode is taken).
        episode_ids: the sample, in stratum order (family, verdict, then id).
        strata: {"family/verdict": [episodes in the window, episodes drawn]}.
    """

    seed: int
    per_stratum: int
    episode_ids: tuple[str, ...]
    strata: Mapping[str, list[int]]

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "per_stratum": self.per_stratum,
            "episode_ids": list(self.episode_ids),
            "strata": {k: list(v) for k, v in self.strata.items()},
        }


def draw_audit(episodes: Iterable[Episode], seed: int, per_stratum: int) -> AuditDraw:
    """Draw the audit sample of the window's judged real episodes (module docstring).

    Args:
        episodes: the window's episodes (any side; only real ones with a verdict count).
        seed: seed of the draw; the same episodes and seed give the same sample.
        per_stratum: judged episodes drawn per family × verdict stratum (≥ 1).
    """
    if isinstance(per_stratum, bool) or not isinstance(per_stratum, int) or per_stratum < 1:
        raise EvalError(f"--per-stratum {per_stratum!r}: expected a whole number ≥ 1")
    groups: dict[tuple[str, str], list[str]] = {}
    for e in episodes:
        verdict = verdict_of(e)
        if verdict is not None:
            groups.setdefault((e.family, verdict), []).append(e.episode_id)
    rng = np.random.default_rng(seed)
    chosen: list[str] = []
    strata: dict[str, list[int]] = {}
    for (family, verdict), ids in sorted(groups.items()):
        ids = sorted(ids)
        if verdict == "cannot_judge" or len(ids) <= per_stratum:
            picked = ids
        else:
            picked = sorted(ids[int(i)] for i in rng.choice(len(ids), per_stratum, replace=False))
        chosen += picked
        strata[f"{family}/{verdict}"] = [len(ids), len(picked)]
    return AuditDraw(int(seed), per_stratum, tuple(chosen), strata)


@dataclass(frozen=True)
class AuditAccuracy:
    """The judge against technicians' labels: counts, Se and Sp with exact intervals.

    `cannot_judge_success` (`cannot_judge_failure`) are true successes (failures) the judge could
    not judge; `cannot_tell` are labels that name no truth.
    """

    true_positive: int = 0
    false_negative: int = 0
    false_positive: int = 0
    true_negative: int = 0
    cannot_judge_success: int = 0
    cannot_judge_failure: int = 0
    cannot_tell: int = 0

    @property
    def positives(self) -> int:
        """Audited true successes (the judge's cannot-judge ones included)."""
        return self.true_positive + self.false_negative + self.cannot_judge_success

    @property
    def negatives(self) -> int:
        """Audited true failures (the judge's cannot-judge ones included)."""
        return self.true_negative + self.false_positive + self.cannot_judge_failure

    def sensitivity(self, level: float = 0.95) -> Estimate:
        """Se = TP/(TP + FN + CJ₊) with its Clopper–Pearson interval."""
        return clopper_pearson_interval(self.true_positive, self.positives, level)

    def specificity(self, level: float = 0.95) -> Estimate:
        """Sp = TN/(TN + FP + CJ₋) with its Clopper–Pearson interval."""
        return clopper_pearson_interval(self.true_negative, self.negatives, level)

    def add(self, verdict: str, label: str) -> AuditAccuracy:
        """These counts with one more (judge's verdict, technician's label)."""
        if label not in LABELS:
            raise EvalError(f"label {label!r}: expected one of {', '.join(LABELS)}", key="label")
        if verdict not in VERDICTS:
            raise EvalError(f"verdict {verdict!r}: expected one of {', '.join(VERDICTS)}")
        key = {
            ("success", "success"): "true_positive",
            ("failure", "success"): "false_negative",
            ("cannot_judge", "success"): "cannot_judge_success",
            ("success", "failure"): "false_positive",
            ("failure", "failure"): "true_negative",
            ("cannot_judge", "failure"): "cannot_judge_failure",
        }.get((verdict, label), "cannot_tell")
        return AuditAccuracy(**{**self.counts(), key: self.counts()[key] + 1})

    def counts(self) -> dict[str, int]:
        return {
            "true_positive": self.true_positive,
            "false_negative": self.false_negative,
            "false_positive": self.false_positive,
            "true_negative": self.true_negative,
            "cannot_judge_success": self.cannot_judge_success,
            "cannot_judge_failure": self.cannot_judge_failure,
            "cannot_tell": self.cannot_tell,
        }

    def to_json(self, level: float = 0.95) -> dict[str, Any]:
        return {
            **self.counts(),
            "sensitivity": self.sensitivity(level).to_json(),
            "specificity": self.specificity(level).to_json(),
        }


def audit_accuracy(
    verdicts: Iterable[tuple[str, str, str]],
) -> dict[str, AuditAccuracy]:
    """{"all": ..., family: ...} from (family, judge's verdict, technician's label) triples."""
    out: dict[str, AuditAccuracy] = {"all": AuditAccuracy()}
    for family, verdict, label in verdicts:
        out["all"] = out["all"].add(verdict, label)
        out[family] = out.get(family, AuditAccuracy()).add(verdict, label)
    return {"all": out["all"], **{k: out[k] for k in sorted(out) if k != "all"}}


def window_audit_accuracy(
    episodes: Sequence[Episode], labels: Mapping[str, str]
) -> dict[str, AuditAccuracy]:
    """Per-family accuracy of the judge on the window's episodes with a label ({id: label})."""
    triples = []
    for e in episodes:
        label = labels.get(e.episode_id)
        verdict = verdict_of(e)
        if label is not None and verdict is not None:
            triples.append((e.family, verdict, label))
    return audit_accuracy(triples)


@dataclass(frozen=True)
class ProportionalLabels:
    """The labels the AR correction uses (`proportional_labels`).

    Attributes:
        labels: {episode_id: "success" | "failure"} kept. fraction: f, the share of each
            stratum's judged episodes kept. strata: {"family/verdict": (judged, labelled, kept)}.
        missing: the first stratum with judged episodes but no label ("" when none).
    """

    labels: dict[str, str]
    fraction: float
    strata: dict[str, tuple[int, int, int]]
    missing: str = ""


def _stratum_order(episode_id: str) -> str:
    """The seeded order labels are kept in within a stratum: SHA-256 of the episode id (fixed,
    recomputable by anyone from the id alone)."""
    return hashlib.sha256(episode_id.encode("utf-8")).hexdigest()


def proportional_labels(
    judged: Sequence[Episode], labels: Mapping[str, str]
) -> ProportionalLabels:
    """A proportional subsample of the audit labels over the family × verdict strata of the
    judged episodes (module docstring).

    With N_h judged episodes and m_h labelled ones ("success"/"failure"; cannot-tell labels name
    no truth) in stratum h, f = min_h m_h/N_h and stratum h keeps ⌊f·N_h⌋ = ⌊m_min·N_h/N_min⌋
    labels, the first in `_stratum_order`. A stratum with judged episodes but no label makes
    f = 0 (nothing kept, `missing` names it).

    Args:
        judged: the window's episodes the judge gave a success/failure verdict (others ignored).
        labels: {episode_id: technician's label}.
    """
    members: dict[str, list[str]] = {}
    for e in judged:
        verdict = verdict_of(e)
        if verdict in ("success", "failure"):
            members.setdefault(f"{e.family}/{verdict}", []).append(e.episode_id)
    with_truth = {
        name: sorted(
            (i for i in ids if labels.get(i) in ("success", "failure")), key=_stratum_order
        )
        for name, ids in members.items()
    }
    if not members:
        return ProportionalLabels({}, 0.0, {})
    # The stratum with the smallest labelled share sets f (exact, as a ratio of integers).
    low = min(members, key=lambda h: (len(with_truth[h]) / len(members[h]), h))
    m_min, n_min = len(with_truth[low]), len(members[low])
    kept: dict[str, str] = {}
    strata: dict[str, tuple[int, int, int]] = {}
    for name in sorted(members):
        take = m_min * len(members[name]) // n_min
        for episode_id in with_truth[name][:take]:
            kept[episode_id] = labels[episode_id]
        strata[name] = (len(members[name]), len(with_truth[name]), take)
    return ProportionalLabels(kept, m_min / n_min, strata, "" if m_min else low)


def cp_width(k: int, n: int, level: float = 0.95) -> float:
    """Width of the two-sided Clopper–Pearson interval of k/n (1 when n = 0)."""
    est = clopper_pearson_interval(k, n, level)
    return 1.0 if est.low is None or est.high is None else float(est.high - est.low)


def audits_for_width(
    width: float, success_rate: float, accuracy: float = 0.9, level: float = 0.95
) -> dict[str, int]:
    """How many audits give Se and Sp exact intervals no wider than `width`.

    Se's denominator is the audited true successes, about `success_rate` of the audits; Sp's the
    true failures. Each needs the fewest m with the Clopper–Pearson interval of
    round(accuracy·m)/m no wider than `width`; the audits are max(⌈m/rate⌉, ⌈m/(1 − rate)⌉).

    Args:
        width: wanted interval width, in (0, 1). success_rate: the window's success rate, in
            (0, 1). accuracy: the Se and Sp expected (the interval is widest at 0.5).
        level: confidence level.

    Returns:
        {"per_outcome": m, "audits": total audits, "successes": m, "failures": m}.
    """
    if not 0.0 < width < 1.0:
        raise EvalError(f"--width {width!r}: expected a width in (0, 1)", key="width")
    if not 0.0 < success_rate < 1.0:
        raise EvalError(
            f"success rate {success_rate!r}: the planner needs one in (0, 1)", key="success_rate"
        )
    if not 0.0 <= accuracy <= 1.0:
        raise EvalError(f"--accuracy {accuracy!r}: expected a value in [0, 1]", key="accuracy")
    m = 1
    while cp_width(round(accuracy * m), m, level) > width:
        m += 1
        if m > 100_000:
            raise EvalError(f"--width {width}: needs more than 100000 audits", key="width")
    total = max(math.ceil(m / success_rate), math.ceil(m / (1.0 - success_rate)))
    return {"per_outcome": m, "audits": total, "successes": m, "failures": m}
