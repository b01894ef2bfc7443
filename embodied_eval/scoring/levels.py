"""Level gates AAI-1 … AAI-5 and the level-assignment procedure (§3.5, Table 1, eq. (33), §7,
eqs. (24)–(29)).

Levels nest: level n is awarded when its own gates and those of every level below pass. AAI-0
(fixed automation) is the floor every rated system holds; its profile (A ≥ 0.95 on scripted
workflows, P ≈ 0, T ≤ 1, R = 0) describes RPA and gates nothing. The "R = 0, no closure" notes
of AAI-0/1 likewise describe those classes and are not requirements.

Procedure (§3.5): compute the index; for each candidate level check the hard gates (axis
thresholds), then the closures (maintenance (α, Y), expansion with ablation), then κ
significance (interval and duration), then the CHC-core gates and, for the robotics profile, the
robotics annex gates from the embodiment report; return the highest level whose gates all pass.
Every check is pass / inconclusive / fail / evidence_missing; only pass counts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from embodied_eval.scoring.chc import chc_core_gates
from embodied_eval.scoring.checks import check_above, check_count, check_flag
from embodied_eval.scoring.closures import expansion_closure, maintenance_closure
from embodied_eval.scoring.gate_checks import (
    GateCheck,
    GateResult,
    Verdict,
    check_at_least,
    combine_verdicts,
)
from embodied_eval.scoring.level_model import (
    LEVEL_NAMES,
    TABLE1,
    KappaFamily,
    LevelAssignment,
    LevelEvidence,
    LevelGate,
    LevelPolicy,
)
from embodied_eval.scoring.superintelligence import (
    SuperintelligenceEvidence,
    superintelligence_gates,
)
from embodied_eval.stats.estimate import Estimate

__all__ = [
    "LEVEL_NAMES",
    "TABLE1",
    "KappaFamily",
    "LevelAssignment",
    "LevelEvidence",
    "LevelGate",
    "LevelPolicy",
    "assign_level",
    "level_gates",
]

_ROBOTICS_LEVEL = re.compile(r"AAI-(\d)")


def _axis_estimate(ev: LevelEvidence, axis: str) -> Estimate | None:
    score = ev.axes.get(axis)
    return None if score is None else score.value


def axis_threshold_gate(ev: LevelEvidence, level: int, name: str | None = None) -> GateResult:
    """Hard gates of Table 1 for `level` (2, 3 or 4) on the normalized axes."""
    checks = []
    for axis, (cmp, thr) in TABLE1[level].items():
        est = _axis_estimate(ev, axis)
        if cmp == ">":
            checks.append(check_above(f"{axis} > {thr:g}", est, thr))
        else:
            checks.append(check_at_least(f"{axis} ≥ {thr:g}", est, thr))
    return GateResult(name or f"AAI-{level} axis thresholds (Table 1)", tuple(checks))


def aai1_gate(ev: LevelEvidence, policy: LevelPolicy) -> GateResult:
    """AAI-1 (§3.5): A ≥ 0.5 on bounded tasks; P ≥ 0.3; T ≥ 3 tools with ≥ 60 % success under
    mild shift."""
    if ev.n_tools is None:
        tools = GateCheck(
            f"≥ {policy.min_tools_aai1} tools used",
            Verdict.EVIDENCE_MISSING,
            float(policy.min_tools_aai1),
            ">=",
            detail="tool count not reported",
        )
    else:
        ok = ev.n_tools >= policy.min_tools_aai1
        tools = GateCheck(
            f"≥ {policy.min_tools_aai1} tools used",
            Verdict.PASS if ok else Verdict.FAIL,
            float(policy.min_tools_aai1),
            ">=",
            value=float(ev.n_tools),
        )
    return GateResult(
        "AAI-1 gates (§3.5)",
        (
            check_at_least("A ≥ 0.5", _axis_estimate(ev, "A"), 0.5),
            check_at_least("P ≥ 0.3", _axis_estimate(ev, "P"), 0.3),
            tools,
            check_at_least(
                f"tool success under mild shift ≥ {policy.tool_success_aai1:g}",
                ev.tool_success_mild_shift,
                policy.tool_success_aai1,
            ),
        ),
    )


def _kappa_family_verdict(fam: KappaFamily, threshold: float, strict: bool, days: float) -> Verdict:
    est = fam.estimate
    check = check_above("κ", est, threshold) if strict else check_at_least("κ", est, threshold)
    if fam.days is None:
        duration = Verdict.EVIDENCE_MISSING
    elif fam.days >= days:
        duration = Verdict.PASS
    else:
        duration = Verdict.INCONCLUSIVE if check.verdict is not Verdict.FAIL else Verdict.FAIL
    return combine_verdicts([check.verdict, duration])


def kappa_gate(ev: LevelEvidence, policy: LevelPolicy, *, level: int) -> GateResult:
    """κ significance (§3.5 step 4): AAI-2 κ > 0 on ≥ 1 family; AAI-3 κ ≥ κ* on ≥ 2 families;
    AAI-4 κ ≥ κ* on every family (≥ 2); each on the lower bound of κ̂'s interval and over a
    window of ≥ `kappa_days` days."""
    fams = dict(ev.kappa)
    detail = ", ".join(
        f"{f}: κ̂ = {k.estimate.value:.4g} [{'—' if k.estimate.low is None else f'{k.estimate.low:.4g}'}]"
        f" over {k.days if k.days is not None else '?'} d"
        for f, k in fams.items()
        if k.estimate.value is not None
    )
    if level == 2:
        verdicts = [_kappa_family_verdict(k, 0.0, True, policy.kappa_days) for k in fams.values()]
        check = check_count(
            f"κ > 0 for ≥ {policy.kappa_days:g} days on ≥ 1 family", verdicts, 1, detail=detail
        )
        return GateResult("AAI-2 self-improvement κ", (check,))
    if ev.kappa_star is None:
        check = GateCheck("κ ≥ κ*", Verdict.EVIDENCE_MISSING, detail="κ* not published")
        return GateResult(f"AAI-{level} self-improvement κ", (check,))
    verdicts = [
        _kappa_family_verdict(k, ev.kappa_star, False, policy.kappa_days) for k in fams.values()
    ]
    if level == 3:
        need = policy.kappa_families_aai3
        label = f"κ ≥ κ* = {ev.kappa_star:g} on ≥ {need} families"
    else:
        need = max(len(verdicts), 2)
        label = f"κ ≥ κ* = {ev.kappa_star:g} sustained on every family (≥ 2)"
    return GateResult(
        f"AAI-{level} self-improvement κ", (check_count(label, verdicts, need, detail=detail),)
    )


_RANK = {Verdict.PASS: 0, Verdict.INCONCLUSIVE: 1, Verdict.EVIDENCE_MISSING: 2, Verdict.FAIL: 3}


def _best(results: Sequence[GateResult]) -> GateResult | None:
    return min(results, key=lambda r: _RANK[r.verdict]) if results else None


def maintenance_gate(ev: LevelEvidence, policy: LevelPolicy, level: int) -> GateResult:
    """The best maintenance audit under the policy's (α, Y) and drift kinds (§3.4)."""
    results = [
        maintenance_closure(
            a,
            alpha=policy.maintenance_alpha,
            days=policy.maintenance_days,
            required_drifts=policy.required_drifts,
        )
        for a in ev.maintenance
    ]
    best = _best(results) or maintenance_closure(
        None, alpha=policy.maintenance_alpha, days=policy.maintenance_days
    )
    return GateResult(f"AAI-{level} {best.name}", best.checks)


def expansion_gate(ev: LevelEvidence, policy: LevelPolicy, level: int) -> GateResult:
    """At least one expansion audit of an allowed kind passes (§3.4; §7 for robotics)."""
    eligible = [a for a in ev.expansion if a.kind in policy.expansion_kinds]
    results = [expansion_closure(a, epsilon=policy.expansion_epsilon) for a in eligible]
    best = _best(results)
    if best is None:
        other = [a.name for a in ev.expansion if a.kind not in policy.expansion_kinds]
        detail = f"kinds counted: {', '.join(policy.expansion_kinds)}"
        if other:
            detail += f"; not counted: {', '.join(other)}"
        return GateResult(
            f"AAI-{level} expansion closure",
            (GateCheck("expansion audit", Verdict.EVIDENCE_MISSING, detail=detail),),
        )
    return GateResult(f"AAI-{level} {best.name}", best.checks)


def robotics_gate(ev: LevelEvidence, level: int) -> GateResult:
    """The embodiment report's robotics annex gate(s) for `level` (§7), matched by "AAI-n" in
    their names; several results for one level are merged."""
    mine = [
        g
        for g in ev.robotics_gates
        if (m := _ROBOTICS_LEVEL.search(g.name)) and int(m.group(1)) == level
    ]
    name = f"AAI-{level} (Robotics)"
    if not mine:
        return GateResult(
            name,
            (
                GateCheck(
                    f"{name} gates", Verdict.EVIDENCE_MISSING, detail="not in the embodiment report"
                ),
            ),
        )
    if len(mine) == 1:
        return mine[0]
    return GateResult(name, tuple(c for g in mine for c in g.checks))


def level_gates(ev: LevelEvidence, policy: LevelPolicy, *, embodied: bool) -> list[LevelGate]:
    """Every gate of AAI-1 … AAI-5 in procedure order within each level."""
    gates: list[LevelGate] = [LevelGate(1, aai1_gate(ev, policy))]
    chc = chc_core_gates(
        vrp=ev.vrp,
        hallucination=ev.hallucination,
        wm_span=ev.wm_span,
        recall=ev.delayed_recall,
        thresholds=policy.chc,
        name="AAI-2 CHC core (eq. 33)",
    )
    # level 2
    gates.append(LevelGate(2, axis_threshold_gate(ev, 2)))
    gates.append(
        LevelGate(
            2,
            GateResult(
                "AAI-2 self-revision with auditable diffs",
                (
                    check_above("R > 0", _axis_estimate(ev, "R"), 0.0),
                    check_flag("auditable diffs", ev.revision_auditable),
                ),
            ),
        )
    )
    gates.append(LevelGate(2, maintenance_gate(ev, policy, 2)))
    gates.append(LevelGate(2, kappa_gate(ev, policy, level=2)))
    if policy.require_chc:
        gates.append(LevelGate(2, chc))
    if policy.robotics:
        gates.append(LevelGate(2, robotics_gate(ev, 2)))
    # level 3
    gates.append(LevelGate(3, axis_threshold_gate(ev, 3)))
    gates.append(LevelGate(3, GateResult("AAI-3 project memory", (_persistence(ev, policy),))))
    gates.append(LevelGate(3, expansion_gate(ev, policy, 3)))
    gates.append(LevelGate(3, kappa_gate(ev, policy, level=3)))
    if policy.require_chc and policy.chc.core_min is not None:
        gates.append(
            LevelGate(
                3,
                GateResult(
                    "AAI-3 cognitive core (eq. 36)",
                    (
                        check_at_least(
                            f"AAI_core ≥ {policy.chc.core_min:g}",
                            ev.core_score,
                            policy.chc.core_min,
                        ),
                    ),
                ),
            )
        )
    if policy.robotics:
        gates.append(LevelGate(3, robotics_gate(ev, 3)))
    # level 4
    gates.append(LevelGate(4, axis_threshold_gate(ev, 4)))
    gates.append(LevelGate(4, maintenance_gate(ev, policy, 4)))
    gates.append(LevelGate(4, expansion_gate(ev, policy, 4)))
    gates.append(LevelGate(4, kappa_gate(ev, policy, level=4)))
    if policy.robotics:
        gates.append(LevelGate(4, robotics_gate(ev, 4)))
    # level 5
    axes = {x: s.value for x, s in ev.axes.items()}
    gates.append(
        LevelGate(
            5,
            superintelligence_gates(
                ev.superintelligence or SuperintelligenceEvidence(),
                axes=axes,
                capability=ev.index,
                embodied=embodied,
            ),
        )
    )
    return gates


def _persistence(ev: LevelEvidence, policy: LevelPolicy) -> GateCheck:
    name = f"memory persists over ≥ {policy.persistence_days:g} days"
    if ev.persistence_days is None or math.isnan(ev.persistence_days):
        return GateCheck(
            name,
            Verdict.EVIDENCE_MISSING,
            policy.persistence_days,
            ">=",
            detail="no persistence span reported",
        )
    ok = ev.persistence_days >= policy.persistence_days
    return GateCheck(
        name,
        Verdict.PASS if ok else Verdict.FAIL,
        policy.persistence_days,
        ">=",
        value=ev.persistence_days,
    )


def assign_level(ev: LevelEvidence, policy: LevelPolicy, *, embodied: bool) -> LevelAssignment:
    """The level-assignment procedure (§3.5): the highest n such that every gate of levels
    1 … n passes; 0 (the floor) when AAI-1 does not pass.

    Args:
        ev: the evidence.
        policy: published thresholds (see `LevelPolicy.for_profile`).
        embodied: E applies (weight > 0 in the profile), for G3 of AAI-5.
    Returns:
        LevelAssignment with every gate checked.
    """
    gates = level_gates(ev, policy, embodied=embodied)
    level = 0
    for n in range(1, 6):
        if all(g.gate.verdict is Verdict.PASS for g in gates if g.level == n):
            level = n
        else:
            break
    return LevelAssignment(level, tuple(gates))
