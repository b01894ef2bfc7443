"""The expansion audit computed from the harness's own episodes (seed §3.4, §7 AAI-3).

The protocol's `[expansion]` table declares a new capability (end-effector, tool or perception
pipeline), the families whose tasks require it, and the policies of the three conditions: S_pre
(before), S_post (with it) and S_abl (S_post with it disabled). Each condition is run on the same
manifest (`embodied-eval run --condition ...`): the same task instances, seeds and drifts, so the
conditions are matched row by row (`manifest.manifest_row_key`).

C(·) is the success rate on the declared side (first scored attempts) over the rows of the
families requiring the capability; the frozen control C_ctrl is the same rate over the control
families (which do not require it), before (S_pre) and after (S_post). Rows are matched across
conditions, so every difference is a *paired* difference of proportions:

* C(S_post) − C(S_pre) on the treated rows T, and C_ctrl^post − C_ctrl^pre on the control rows K:
  Newcombe's method 10 (`stats.paired_gap_interval`) on each 2×2 table of matched rows;
* gain ΔC_DiD = (post − pre on T) − (post − pre on K): the two paired gaps are on disjoint rows,
  so their intervals combine by MOVER (`stats.difference_of_independent`);
* C(S_abl) − C(S_pre) on T: Newcombe; ΔC_DiD(S_abl) = (abl − pre on T) − (post − pre on K): MOVER.

All intervals are two-sided at 2c − 1 for the protocol's confidence c: the gain is decided on the
lower end (a one-sided bound at c), and the two "≤ ε" ablation checks are equivalence tests
(TOST) on the whole interval, as S2R's gap. Without control families the control term is 0 by
design; with control families declared but fewer than 2 matched control rows the closure is
inconclusive (a control never measured is not "no change"). The closure itself is
`scoring.closures.expansion_closure`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_eval.manifest import manifest_row_key
from embodied_eval.protocol.closure_audits import ExpansionPlan
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, first_attempts
from embodied_eval.scoring.closures import ExpansionAudit, expansion_closure
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict
from embodied_eval.stats import (
    Estimate,
    difference_of_independent,
    paired_gap_interval,
    wilson_interval,
)

CONDITIONS = ("pre", "post", "ablated")


@dataclass(frozen=True)
class ExpansionResult:
    """An expansion audit computed from the store, with the closure it gives."""

    plan: ExpansionPlan
    rows: dict[str, int]
    rates: dict[str, Estimate]
    audit: ExpansionAudit | None
    closure: GateResult
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        a = self.audit
        return {
            "plan": self.plan.canonical(),
            "rows": dict(self.rows),
            "rates": {k: v.to_json() for k, v in self.rates.items()},
            "gain_did": None if a is None or a.gain is None else a.gain.to_json(),
            "ablated_minus_pre": None
            if a is None or a.ablated_difference is None
            else a.ablated_difference.to_json(),
            "ablated_did": None
            if a is None or a.ablated_gain is None
            else a.ablated_gain.to_json(),
            "closure": self.closure.to_json(),
            "notes": list(self.notes),
        }


def _outcomes(
    episodes: Sequence[Episode], plan: ExpansionPlan, policy: str, families: Sequence[str]
) -> dict[str, bool]:
    """Row key → success of `policy`'s first scored attempt on the plan's side (and engine)."""
    mine = [
        e
        for e in episodes
        if e.policy == policy
        and e.side == plan.side
        and e.family in families
        and e.scored
        and (plan.side == "real" or e.engine == plan.engine)
    ]
    return {manifest_row_key(e.pair_id): e.success for e in first_attempts(mine)}


def paired_gap(
    after: Mapping[str, bool], before: Mapping[str, bool], rows: Sequence[str], level: float
) -> Estimate:
    """C(after) − C(before) on matched rows: Newcombe's method 10 at 2·level − 1 (two-sided)."""
    a = sum(after[r] and before[r] for r in rows)
    b = sum(after[r] and not before[r] for r in rows)
    c = sum(before[r] and not after[r] for r in rows)
    d = len(rows) - a - b - c
    return paired_gap_interval(a, b, c, d, 2.0 * level - 1.0)


def expansion_audit(episodes: Sequence[Episode], protocol: Protocol) -> ExpansionResult | None:
    """The protocol's expansion audit from the window's episodes (module docstring).

    Args:
        episodes: the window's episodes (every policy, both sides).
        protocol: declares `[expansion]`; None is returned when it does not.

    Returns:
        ExpansionResult (closure evidence_missing until every condition has ≥ 2 matched rows).
    """
    plan = protocol.expansion
    if plan is None:
        return None
    level = protocol.confidence
    treated = {c: _outcomes(episodes, plan, plan.policy(c), plan.families) for c in CONDITIONS}
    control = {
        c: _outcomes(episodes, plan, plan.policy(c), plan.control_families) for c in ("pre", "post")
    }
    t_rows = sorted(set.intersection(*(set(v) for v in treated.values())))
    k_rows = sorted(set(control["pre"]) & set(control["post"]))
    rates = {
        name: wilson_interval(sum(outcomes[r] for r in rows), len(rows), level)
        for name, outcomes, rows in (
            ("pre", treated["pre"], t_rows),
            ("post", treated["post"], t_rows),
            ("ablated", treated["ablated"], t_rows),
            ("control_pre", control["pre"], k_rows),
            ("control_post", control["post"], k_rows),
        )
        if rows
    }
    counts = {"treated_rows": len(t_rows), "control_rows": len(k_rows)}
    counts.update({f"{c}_rows": len(treated[c]) for c in CONDITIONS})
    notes: list[str] = []
    if plan.control_families and len(k_rows) < 2:
        notes.append("fewer than 2 matched control rows: no control term yet")
    if len(t_rows) < 2:
        notes.append(
            "fewer than 2 manifest rows ran under all of pre, post and ablated in "
            f"{', '.join(plan.families)}: run each condition (embodied-eval run --condition ...)"
        )
        closure = expansion_closure(None, epsilon=plan.epsilon, level=level)
        return ExpansionResult(plan, counts, rates, None, closure, tuple(notes))

    gain_t = paired_gap(treated["post"], treated["pre"], t_rows, level)
    abl_t = paired_gap(treated["ablated"], treated["pre"], t_rows, level)
    if len(k_rows) >= 2:
        ctrl = paired_gap(control["post"], control["pre"], k_rows, level)
        gain = difference_of_independent(gain_t, ctrl)
        abl_did = difference_of_independent(abl_t, ctrl)
        c_pre, c_post = rates["control_pre"], rates["control_post"]
    else:
        gain, abl_did = gain_t, abl_t
        # A term fixed by the design, not measured: a point without an interval.
        c_pre = c_post = Estimate(0.0, None, None, level, "no control rows: control term 0")
    audit = ExpansionAudit(
        name=plan.name,
        pre=rates["pre"],
        post=rates["post"],
        ablated=rates["ablated"],
        control_pre=c_pre,
        control_post=c_post,
        matched=True,
        kind=plan.kind,
        gain=dataclasses.replace(gain, sided="lower", high=None, level=level),
        ablated_difference=abl_t,
        ablated_gain=abl_did,
    )
    closure = expansion_closure(audit, epsilon=plan.epsilon, level=level)
    if plan.control_families and len(k_rows) < 2:
        # Declared control families that have not run would otherwise count as "no change":
        # the gain would pass against a control that was never measured.
        check = GateCheck(
            "frozen control measured",
            Verdict.INCONCLUSIVE,
            detail=(
                f"{len(k_rows)} matched control row(s) in {', '.join(plan.control_families)}: "
                "the gain is not a difference in differences until the control has run"
            ),
        )
        closure = GateResult(closure.name, (*closure.checks, check))
    return ExpansionResult(plan, counts, rates, audit, closure, tuple(notes))
