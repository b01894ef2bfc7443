"""Closures (§3.4), CHC-core gates (eq. (33)), AAI-5 gates (eqs. (19)–(29)) and the level
assignment procedure (§3.5, Table 1, §7)."""

from __future__ import annotations

import dataclasses

import pytest

from embodied_eval.scoring.calibration import AXES, axis_from_value
from embodied_eval.scoring.chc import (
    ChcThresholds,
    chc_core_gates,
    cognitive_core_score,
    delayed_recall,
    retrieval_fidelity,
    verified_retrieval_precision,
    working_memory_span,
)
from embodied_eval.scoring.checks import check_count
from embodied_eval.scoring.closures import (
    ExpansionAudit,
    MaintenanceAudit,
    expansion_closure,
    maintenance_closure,
)
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict
from embodied_eval.scoring.levels import KappaFamily, LevelEvidence, LevelPolicy, assign_level
from embodied_eval.scoring.superintelligence import (
    SuperintelligenceEvidence,
    innovation_rate,
    standardized_margin,
    superhuman_coverage,
    superintelligence_gates,
)
from embodied_eval.stats.estimate import Estimate

pytestmark = pytest.mark.timeout(60)


def est(value, low=None, high=None):
    return Estimate(value, low, high, 0.95, "reported")


# --- maintenance closure ----------------------------------------------------------------------


def audit(days=(2, 5, 8), indices=None, patches=0, drifts=("ui",)):
    if indices is None:
        indices = [est(0.55, 0.52, 0.58), est(0.50, 0.49, 0.51), est(0.53, 0.50, 0.56)]
    return MaintenanceAudit(est(0.60), list(days), indices, patches, tuple(drifts))


def test_maintenance_closure_passes_when_every_bound_holds():
    # α·C₀ = 0.8 · 0.60 = 0.48; worst checkpoint 0.50 with lower bound 0.49 ≥ 0.48; 8 ≥ 7 days
    r = maintenance_closure(audit())
    assert r.verdict is Verdict.PASS
    idx = r.checks[0]
    assert idx.threshold == pytest.approx(0.48) and idx.value == 0.50 and idx.bound == 0.49


def test_maintenance_closure_fails_and_stays_open():
    dropped = audit(indices=[est(0.55, 0.52, 0.58), est(0.45, 0.43, 0.47), est(0.53, 0.5, 0.56)])
    assert maintenance_closure(dropped).verdict is Verdict.FAIL  # 0.45 < 0.48
    assert maintenance_closure(audit(patches=1)).verdict is Verdict.FAIL  # a human patch
    short = maintenance_closure(audit(days=(1, 3, 5)))
    assert short.verdict is Verdict.INCONCLUSIVE  # 5 of 7 days
    assert short.checks[1].remaining == {"days": 2.0}
    # lower bound 0.47 < 0.48 while the point 0.50 clears: not demonstrated
    loose = audit(indices=[est(0.55, 0.52, 0.58), est(0.50, 0.47, 0.53), est(0.53, 0.5, 0.56)])
    assert maintenance_closure(loose).verdict is Verdict.INCONCLUSIVE
    assert maintenance_closure(audit(patches=None)).verdict is Verdict.EVIDENCE_MISSING
    robot = maintenance_closure(
        audit(days=(4, 9, 14)),
        days=14,
        required_drifts=("payload", "friction", "lighting", "firmware"),
    )
    assert robot.verdict is Verdict.EVIDENCE_MISSING
    assert "payload" in robot.checks[3].detail
    assert maintenance_closure(None).verdict is Verdict.EVIDENCE_MISSING


# --- expansion closure ------------------------------------------------------------------------


def expansion(ablated=est(0.505, 0.50, 0.51), matched=True, name="geo API", kind="api"):
    return ExpansionAudit(
        name,
        pre=est(0.50, 0.48, 0.52),
        post=est(0.60, 0.58, 0.62),
        ablated=ablated,
        control_pre=est(0.50, 0.49, 0.51),
        control_post=est(0.51, 0.50, 0.52),
        matched=matched,
        kind=kind,
    )


def test_expansion_closure_pass_by_hand():
    r = expansion_closure(expansion(), epsilon=0.05)
    gain, abl, abl_did, matched = r.checks
    # ΔC_DiD = (0.60 − 0.50) − (0.51 − 0.50) = 0.09
    assert gain.value == pytest.approx(0.09)
    # se: post, pre 0.04/3.919928 = 0.010204; controls 0.02/3.919928 = 0.005102
    # se_DiD = √(2·0.010204² + 2·0.005102²) = 0.016134; lower = 0.09 − 1.959964·0.016134 = 0.05838
    assert gain.bound == pytest.approx(0.05838, abs=1e-4) and gain.verdict is Verdict.PASS
    # |C(S_abl) − C(S_pre)| = 0.005; se √(0.002551² + 0.010204²) = 0.010518 → ±0.020615:
    # upper bound of |·| = 0.025615 ≤ 0.05
    assert abl.value == pytest.approx(0.005) and abl.bound == pytest.approx(0.025615, abs=1e-5)
    # ablated DiD = 0.005 − 0.01 = −0.005 → |·| = 0.005
    assert abl_did.value == pytest.approx(0.005)
    assert r.verdict is Verdict.PASS and matched.verdict is Verdict.PASS


def test_expansion_closure_fails_when_ablation_keeps_the_gain():
    # ablated 0.58: |0.58 − 0.50| = 0.08 > ε = 0.05 — the gain did not come from the new tool
    r = expansion_closure(expansion(ablated=est(0.58, 0.57, 0.59)), epsilon=0.05)
    assert r.checks[1].verdict is Verdict.FAIL and r.verdict is Verdict.FAIL
    # with ε = 0.01 the ±0.0206 band of a 0.005 difference cannot show |·| ≤ ε
    assert expansion_closure(expansion(), epsilon=0.01).verdict is Verdict.INCONCLUSIVE
    assert (
        expansion_closure(expansion(matched=None), epsilon=0.05).verdict is Verdict.EVIDENCE_MISSING
    )
    # points only: nothing can be significant
    pts = ExpansionAudit("x", est(0.5), est(0.6), est(0.5), est(0.5), est(0.5), True)
    assert expansion_closure(pts).checks[0].verdict is Verdict.INCONCLUSIVE


# --- CHC, counts, AAI-5 -----------------------------------------------------------------------


def test_chc_probes_and_gates():
    # VRP@2 = mean(1, 0.5, 1, 0.5) = 0.75; Hall@2 = 0.25
    y = [[1, 1], [1, 0], [1, 1], [0, 1]]
    assert verified_retrieval_precision(y) == 0.75
    _vrp, hall = retrieval_fidelity(y)
    assert hall.value == 0.25
    # spans per seed: s1 passes up to 6, s2 up to 5, s3 up to 7 → median 6
    acc = {
        "s1": {4: 1.0, 5: 0.9, 6: 0.8, 7: 0.5},
        "s2": {4: 1.0, 5: 0.8, 6: 0.6},
        "s3": {5: 0.9, 7: 0.8},
    }
    assert working_memory_span(acc, theta=0.75) == 6.0
    assert delayed_recall([1, 1, 0, 1]) == 0.75
    g = chc_core_gates(
        vrp=est(0.97, 0.96, 0.98),
        hallucination=est(0.03, 0.02, 0.04),
        wm_span=est(7, 6, 8),
        recall=est(0.8, 0.75, 0.85),
        thresholds=ChcThresholds(wm_span=5, delayed_recall=0.7),
    )
    assert g.verdict is Verdict.PASS
    # τ_w, τ_ms have no default (human medians): missing ⇒ evidence_missing, never pass
    g2 = chc_core_gates(
        vrp=est(0.97, 0.96, 0.98),
        hallucination=est(0.03, 0.02, 0.04),
        wm_span=est(7, 6, 8),
        recall=est(0.8, 0.75, 0.85),
    )
    assert g2.verdict is Verdict.EVIDENCE_MISSING
    # equal-weight geometric mean of six domains: all 0.81 → 0.81
    assert cognitive_core_score(
        dict.fromkeys(["Gc", "Grw", "Gf", "Gwm", "Gls", "Glr"], 0.81)
    ) == pytest.approx(0.81)


def test_check_count_semantics():
    ok, maybe, no, absent = (
        Verdict.PASS,
        Verdict.INCONCLUSIVE,
        Verdict.FAIL,
        Verdict.EVIDENCE_MISSING,
    )
    assert check_count("k", [ok, ok, no], 2).verdict is ok
    assert check_count("k", [ok, maybe, no], 2).verdict is maybe
    assert check_count("k", [ok, no, no], 2).verdict is no
    assert check_count("k", [ok, absent], 2).verdict is absent
    assert check_count("k", [], 1).verdict is absent


def test_standardized_margin_and_coverage():
    # diffs 0.2, 0.05, 0.15, 0.15: mean 0.1375, sd (n−1) = √(0.011875/3) = 0.0629153,
    # σ_Δ = 0.0629153/√4 = 0.0314576 → m = 0.1375/0.0314576 = 4.370957
    m = standardized_margin([0.9, 0.8, 0.85, 0.95], [0.7, 0.75, 0.7, 0.8])
    assert m == pytest.approx(4.370957, abs=1e-5)
    # Γ = share of families with m ≥ ζ = 2: 3 of 4 = 0.75
    assert superhuman_coverage({"a": 4.4, "b": 2.0, "c": 2.5, "d": 1.9}) == 0.75
    # I = min(1, 0.2·2 + 0.1·3) = 0.7; capped at 1
    assert innovation_rate(2, 3, 0.2, 0.1) == pytest.approx(0.7)
    assert innovation_rate(10, 3, 0.2, 0.1) == 1.0


def test_superintelligence_gates():
    axes = {x: est(0.95, 0.92, 0.97) for x in AXES}
    ev = SuperintelligenceEvidence(
        margins={"a": 4.4, "b": 3.0},
        curvatures={"a": est(0.01, 0.002, 0.02), "b": est(0.0, -0.001, 0.001)},
        gamma=0.005,
        innovation=0.85,
        innovation_audited=True,
        capability_aai4=0.5,
        step_delta=1.0,
    )
    # G6: Step²(0.5) on surprisal with Δ = 1 is 0.932332; C = 0.95 [0.94, 0.96] clears it
    r = superintelligence_gates(ev, axes=axes, capability=est(0.95, 0.94, 0.96), embodied=True)
    by = {c.name.split(" ")[0] + c.name.split(" ")[1]: c for c in r.checks}
    assert by["G6C"].threshold == pytest.approx(0.932332, abs=1e-6)
    # G2: δκ̃ ≥ 0 on ≥ 80 % of 2 families needs 2; family b's lower bound −0.001 < 0 → inconclusive
    assert r.verdict is Verdict.INCONCLUSIVE
    g2 = next(c for c in r.checks if c.name.startswith("G2 δκ̃ ≥ 0"))
    assert g2.verdict is Verdict.INCONCLUSIVE and g2.threshold == 2.0
    low_margin = dataclasses.replace(ev, margins={"a": 4.4, "b": 1.5})
    r2 = superintelligence_gates(
        low_margin, axes=axes, capability=est(0.95, 0.94, 0.96), embodied=True
    )
    assert r2.checks[0].verdict is Verdict.FAIL and r2.checks[0].value == 0.5
    missing = superintelligence_gates(
        SuperintelligenceEvidence(), axes=axes, capability=None, embodied=False
    )
    assert missing.verdict is Verdict.EVIDENCE_MISSING


# --- level assignment -------------------------------------------------------------------------


def aai3_candidate(**changes):
    axes = {x: axis_from_value(x, est(0.8, 0.78, 0.82)) for x in AXES}
    base = dict(
        axes=axes,
        index=est(0.8, 0.78, 0.82),
        kappa={
            "web": KappaFamily(est(0.02, 0.015, 0.025), 10.0),
            "code": KappaFamily(est(0.03, 0.02, 0.04), 12.0),
        },
        kappa_star=0.01,
        maintenance=[audit()],
        expansion=[expansion()],
        vrp=est(0.97, 0.96, 0.98),
        hallucination=est(0.03, 0.02, 0.04),
        wm_span=est(7, 6, 8),
        delayed_recall=est(0.8, 0.75, 0.85),
        n_tools=5,
        tool_success_mild_shift=est(0.72, 0.65, 0.79),
        revision_auditable=True,
        persistence_days=40.0,
    )
    base.update(changes)
    return LevelEvidence(**base)


POLICY = LevelPolicy(expansion_epsilon=0.05, chc=ChcThresholds(wm_span=5, delayed_recall=0.7))


def test_full_evidence_reaches_aai3_and_aai4_is_blocked_by_axes():
    a = assign_level(aai3_candidate(), POLICY, embodied=False)
    assert a.level == 3 and a.name == "AAI-3 Baby AGI"
    blocking = {g.gate.name: g.gate.verdict for g in a.blocking()}
    assert blocking["AAI-4 axis thresholds (Table 1)"] is Verdict.FAIL  # A 0.8 < 0.9


def test_a_single_missing_closure_caps_the_level():
    a = assign_level(aai3_candidate(expansion=[]), POLICY, embodied=False)
    assert a.level == 2
    assert [(g.gate.name, g.gate.verdict) for g in a.blocking()] == [
        ("AAI-3 expansion closure", Verdict.EVIDENCE_MISSING)
    ]
    b = assign_level(aai3_candidate(maintenance=[]), POLICY, embodied=False)
    assert b.level == 1  # the maintenance closure is an AAI-2 gate
    # an expansion of a kind the profile does not count does not help
    c = assign_level(
        aai3_candidate(expansion=[expansion(kind="perception")]), POLICY, embodied=False
    )
    assert c.level == 2


def test_kappa_significance_and_duration():
    # κ* gate on the lower bound: web's 0.015 ≥ 0.01 but code's lower bound 0.008 < 0.01
    weak = {
        "web": KappaFamily(est(0.02, 0.015, 0.025), 10.0),
        "code": KappaFamily(est(0.03, 0.008, 0.04), 12.0),
    }
    a = assign_level(aai3_candidate(kappa=weak), POLICY, embodied=False)
    assert a.level == 2
    kap = next(g for g in a.gates if g.gate.name == "AAI-3 self-improvement κ")
    assert kap.gate.verdict is Verdict.INCONCLUSIVE
    # κ > 0 for only 5 days: AAI-2 needs ≥ 7
    short = {"web": KappaFamily(est(0.02, 0.015, 0.025), 5.0)}
    assert assign_level(aai3_candidate(kappa=short), POLICY, embodied=False).level == 1
    assert assign_level(aai3_candidate(kappa_star=None), POLICY, embodied=False).level == 2


def test_missing_evidence_never_passes():
    empty = assign_level(LevelEvidence(), LevelPolicy(), embodied=False)
    assert empty.level == 0
    assert all(g.gate.verdict is not Verdict.PASS for g in empty.gates)
    # point-only axes cannot demonstrate a threshold: inconclusive, not pass
    pts = {x: axis_from_value(x, 0.99) for x in AXES}
    p = assign_level(aai3_candidate(axes=pts), POLICY, embodied=False)
    assert p.level == 0
    assert p.blocking()[0].gate.checks[0].verdict is Verdict.INCONCLUSIVE


def robot_gate(level, verdict=Verdict.PASS):
    return GateResult(f"AAI-{level} (Robotics)", (GateCheck(f"E ≥ 0.{level + 4}", verdict, 0.6),))


def test_robotics_profile_uses_the_embodiment_report():
    policy = LevelPolicy.for_profile(
        "robotics", expansion_epsilon=0.05, chc=ChcThresholds(wm_span=5, delayed_recall=0.7)
    )
    assert policy.maintenance_days == 14.0
    robot_audit = audit(
        days=(7, 14),
        indices=[est(0.55, 0.52, 0.58), est(0.53, 0.50, 0.56)],
        drifts=("payload", "friction", "lighting", "firmware"),
    )
    gates = [robot_gate(2), robot_gate(3)]
    ev = aai3_candidate(
        maintenance=[robot_audit],
        robotics_gates=gates,
        expansion=[expansion(kind="end_effector", name="suction gripper")],
    )
    assert assign_level(ev, policy, embodied=True).level == 3
    # the 8-day software audit is too short for Y = 14 d under robotics
    assert (
        assign_level(dataclasses.replace(ev, maintenance=[audit()]), policy, embodied=True).level
        == 1
    )
    # a failing AAI-3 (Robotics) gate from the report caps at AAI-2
    fail3 = dataclasses.replace(ev, robotics_gates=[robot_gate(2), robot_gate(3, Verdict.FAIL)])
    assert assign_level(fail3, policy, embodied=True).level == 2
    # no report at all: AAI-2 (Robotics) evidence_missing caps at AAI-1
    none = assign_level(dataclasses.replace(ev, robotics_gates=()), policy, embodied=True)
    assert none.level == 1
    assert ("AAI-2 (Robotics)", Verdict.EVIDENCE_MISSING) in [
        (g.gate.name, g.gate.verdict) for g in none.blocking()
    ]
