"""Every attempt counts: AR over each real pair's first attempt, whatever became of it.

AR as judged (`reliability.actuation_reliability`) counts each pair's first *scored* attempt: an
attempt the judge could not judge is aborted and retried, and a policy-contract error (NaN, wrong
shape) ends `error` and is retried, so a policy that crashes on its hardest instances, or a judge
that goes blind on failures, raises it. Here each real pair of the evaluated policy counts once,
by its first attempt (lowest attempt number):

* scored (ok, safety stop, out of bounds): its outcome z;
* `error` (a policy error): a failure — the policy failed;
* `aborted` with the judge's "cannot judge" reason, or any other abort (the harness stopped, a
  remote policy stopped answering): unknown — a failure in the worst case, a success in the best.

Reported beside AR as judged: the worst- and best-case rates over the pairs with exact
Clopper–Pearson intervals, the worst case's one-sided bound, and the counts. The AR gate uses the
worst-case bound when the protocol's `[real] missing_outcomes` is "worst" (the default) and some
first attempt was not scored; "judged" keeps AR as judged in the gate (the worst/best figures are
still reported). Retries stay visible in the certificate's trial counts and episode table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from embodied_eval.records import Episode
from embodied_eval.stats import Estimate, clopper_pearson_interval

#: `[real] missing_outcomes` values.
WORST, JUDGED = "worst", "judged"
MISSING_OUTCOME_RULES = (WORST, JUDGED)
#: What the judge's abort reason says when it cannot judge an episode.
CANNOT_JUDGE = "cannot judge"


def first_attempts_per_pair(real_all: Sequence[Episode]) -> list[Episode]:
    """Each pair's first attempt (lowest attempt number, then earliest start), by pair id."""
    first: dict[str, Episode] = {}
    for e in real_all:
        seen = first.get(e.pair_id)
        if seen is None or (e.attempt, e.started_at) < (seen.attempt, seen.started_at):
            first[e.pair_id] = e
    return [first[k] for k in sorted(first)]


def outcome_kind(e: Episode) -> str:
    """ "scored", "policy_error", "cannot_judge" or "aborted" (another abort)."""
    if e.scored:
        return "scored"
    if e.status == "error":
        return "policy_error"
    return "cannot_judge" if CANNOT_JUDGE in e.status_reason.lower() else "aborted"


@dataclass(frozen=True)
class EveryAttempt:
    """AR over every pair's first attempt (module docstring)."""

    pairs: int
    successes: int
    counts: dict[str, int]
    worst: Estimate
    best: Estimate
    worst_bound: Estimate
    rule: str

    @property
    def unknown(self) -> int:
        return self.counts["cannot_judge"] + self.counts["aborted"]

    @property
    def gate_uses_worst(self) -> bool:
        """True when the AR gate takes the worst-case bound."""
        return self.rule == WORST and self.pairs > self.counts["scored"]

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "first_attempts": dict(self.counts),
            "successes": self.successes,
            "worst_case": self.worst.to_json(),
            "best_case": self.best.to_json(),
            "worst_case_bound": self.worst_bound.to_json(),
            "rule": self.rule,
            "gate_uses_worst_case": self.gate_uses_worst,
        }


def every_attempt(real_all: Sequence[Episode], level: float, rule: str = WORST) -> EveryAttempt:
    """AR over each pair's first attempt, worst and best case (module docstring).

    Args:
        real_all: every real episode of the evaluated policy (any attempt, any status).
        level: confidence level (two-sided intervals; the bound is one-sided at `level`).
        rule: the protocol's `[real] missing_outcomes`.
    """
    first = first_attempts_per_pair(real_all)
    counts = {"scored": 0, "policy_error": 0, "cannot_judge": 0, "aborted": 0}
    for e in first:
        counts[outcome_kind(e)] += 1
    k = sum(e.success for e in first if e.scored)
    n = len(first)
    unknown = counts["cannot_judge"] + counts["aborted"]
    how = (
        "Clopper–Pearson over every pair's first attempt; policy errors fail, cannot-judge and "
        "other aborts {}"
    )
    worst = dataclasses.replace(
        clopper_pearson_interval(k, n, level), method=how.format("fail (worst case)")
    )
    best = dataclasses.replace(
        clopper_pearson_interval(k + unknown, n, level),
        method=how.format("succeed (best case)"),
    )
    bound = dataclasses.replace(
        clopper_pearson_interval(k, n, level, sided="lower"),
        method=how.format("fail (worst case)") + ", one-sided",
    )
    return EveryAttempt(n, k, counts, worst, best, bound, rule)
