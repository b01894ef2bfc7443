"""A success detector's accuracy against a ground truth: confusion counts and what follows.

Sensitivity Se = TP/(TP + FN) and specificity Sp = TN/(TN + FP), with Wilson intervals, are
always computed from stored counts (`JudgeAccuracy`), never typed. Episodes the detector could
not judge are counted apart (`cannot_judge`). The harness's detector ships a benchmark of its
counts against the twin's oracle (`real_bridge.judge_accuracy`); the embodiment report reaches it
through `embodied_eval.plugins.JUDGE_ACCURACY` and shows it labelled as a benchmark, never as the
window's accuracy: that comes from the window's own audit (`embodiment.window_audit`), and only
that corrects AR (`embodiment.judge`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.stats import Estimate, wilson_interval

COUNT_KEYS = ("true_positive", "false_negative", "false_positive", "true_negative")


@dataclass(frozen=True)
class JudgeAccuracy:
    """Confusion counts of a detector against a ground truth, and what follows from them."""

    true_positive: int
    false_negative: int
    false_positive: int
    true_negative: int
    cannot_judge: int = 0

    @property
    def positives(self) -> int:
        return self.true_positive + self.false_negative

    @property
    def negatives(self) -> int:
        return self.true_negative + self.false_positive

    def sensitivity(self, level: float = 0.95) -> Estimate:
        """Se = TP/(TP + FN) with its Wilson interval."""
        return wilson_interval(self.true_positive, self.positives, level)

    def specificity(self, level: float = 0.95) -> Estimate:
        """Sp = TN/(TN + FP) with its Wilson interval."""
        return wilson_interval(self.true_negative, self.negatives, level)

    def to_json(self, level: float = 0.95) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in COUNT_KEYS},
            "cannot_judge": self.cannot_judge,
            "sensitivity": self.sensitivity(level).to_json(),
            "specificity": self.specificity(level).to_json(),
        }


def counts_of(data: Mapping[str, Any], where: str = "judge accuracy") -> JudgeAccuracy:
    """A JudgeAccuracy from a counts mapping; EvalError naming a bad count."""
    values = {}
    for key in (*COUNT_KEYS, "cannot_judge"):
        value = data.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EvalError(f"{where}.{key}: {value!r} is not a count", key=key)
        values[key] = value
    return JudgeAccuracy(**values)


def tally(pairs: Iterable[tuple[bool | None, bool]]) -> JudgeAccuracy:
    """Counts from (detector's success or None = cannot judge, oracle's success) pairs."""
    tp = fn = fp = tn = unjudged = 0
    for detected, truth in pairs:
        if detected is None:
            unjudged += 1
        elif truth and detected:
            tp += 1
        elif truth:
            fn += 1
        elif detected:
            fp += 1
        else:
            tn += 1
    return JudgeAccuracy(tp, fn, fp, tn, unjudged)


def accuracy_table(entry: Mapping[str, Any], level: float = 0.95) -> list[dict[str, Any]]:
    """Rows {"stratum", counts, "sensitivity", "specificity"} — all families first, then each
    family — computed from a stored entry's counts."""
    rows = [{"stratum": "all", **counts_of(entry).to_json(level)}]
    for family, counts in sorted(dict(entry.get("by_family", {})).items()):
        rows.append({"stratum": family, **counts_of(counts, family).to_json(level)})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The accuracy table as aligned text."""

    def cell(est: dict[str, Any]) -> str:
        if est["value"] is None:
            return "—"
        return f"{est['value']:.3f} [{est['low']:.3f}, {est['high']:.3f}] n={est['n']}"

    lines = [
        f"{'stratum':<12} {'TP':>4} {'FN':>4} {'FP':>4} {'TN':>4} {'?':>3}  "
        f"{'sensitivity (Wilson 95%)':<32} specificity (Wilson 95%)"
    ]
    for r in rows:
        lines.append(
            f"{r['stratum']:<12} {r['true_positive']:>4} {r['false_negative']:>4} "
            f"{r['false_positive']:>4} {r['true_negative']:>4} {r['cannot_judge']:>3}  "
            f"{cell(r['sensitivity']):<32} {cell(r['specificity'])}"
        )
    return "\n".join(lines)
