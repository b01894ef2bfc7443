"""Robotics gate checks (§7) on both sides of each threshold, decided on one-sided bounds.

Bounds by hand (the project's statistics notes, 95 % one-sided):
CP lower = Beta(0.05; k, n − k + 1); Garwood upper = χ²(0.95; 2k + 2)/(2H)·100;
MTBSI lower = 2H/χ²(0.95; 2k + 2). χ²(0.95; 2) = 5.991465, χ²(0.95; 4) = 9.487729,
χ²(0.95; 6) = 12.591587.
"""

from __future__ import annotations

import pytest

from embodied_eval.embodiment.composite import EmbodimentEstimates
from embodied_eval.embodiment.gates import (
    embodiment_check,
    evidence_check,
    minor_rate_check,
    mtbsi_check,
    recovery_check,
    robotics_gates,
    s2r_families_check,
    s2r_overall_check,
    serious_free_check,
    zero_count_check,
)
from embodied_eval.embodiment.reliability import recovery_autonomy
from embodied_eval.embodiment.safety_report import summarize_safety
from embodied_eval.embodiment.selection import select_episodes
from embodied_eval.embodiment.transfer import TransferResult
from embodied_eval.errors import EvalError
from embodied_eval.records import ExposureEntry, Fault, Incident
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict
from embodied_eval.stats import Estimate
from embodied_eval.stats.planner import pairs_to_settle
from tests.test_embodiment_data import load_protocol_fixture

pytestmark = pytest.mark.timeout(30)

PROTOCOL = load_protocol_fixture()


def safety(hours: float, **counts: int):
    incidents = [
        Incident(incident_id=f"{sev}-{i}", occurred_at="2026-11-05T10:00:00Z", severity=sev)
        for sev, k in counts.items()
        for i in range(k)
    ]
    ledger = [
        ExposureEntry(
            entry_id="x",
            window="w",
            start="2026-01-01T00:00:00Z",
            end="2027-01-01T00:00:00Z",
            active_hours=hours,
            how_measured="robot_clock",
        )
    ]
    return summarize_safety(select_episodes([], PROTOCOL), incidents, ledger, PROTOCOL)


def ra(recovered: int, total: int):
    faults = [Fault(kind="slip", recovered_autonomously=i < recovered) for i in range(total)]
    return recovery_autonomy(faults, 0.95)


# --------------------------------------------------------------------------- RA (CP bound)


def test_ra_11_of_11_passes_075():
    c = recovery_check(ra(11, 11), 0.75, 0.95)
    # Beta(0.05; 11, 1) = 0.05^(1/11) = 0.761596 ≥ 0.75.
    assert c.bound == pytest.approx(0.761596, abs=1e-6)
    assert c.verdict is Verdict.PASS and c.remaining == {}


def test_ra_45_of_60_is_inconclusive_at_075_with_29_more_faults():
    c = recovery_check(ra(45, 60), 0.75, 0.95)
    # Point 45/60 = 0.75 reaches 0.75, but the bound Beta(0.05; 45, 16) = 0.641460 does not.
    assert c.value == pytest.approx(0.75)
    assert c.bound == pytest.approx(0.641460, abs=1e-6)
    assert c.verdict is Verdict.INCONCLUSIVE
    # All-recovered continuation: 73/88 → Beta(0.05; 73, 16) = 0.749733 < 0.75;
    # 74/89 → Beta(0.05; 74, 16) = 0.752408 ≥ 0.75, so 89 − 60 = 29 more faults.
    assert c.remaining == {"trials": 29.0}


def test_ra_44_of_60_fails_075():
    c = recovery_check(ra(44, 60), 0.75, 0.95)
    # Point 44/60 = 0.7333 < 0.75; bound Beta(0.05; 44, 17) = 0.623571.
    assert c.bound == pytest.approx(0.623571, abs=1e-6)
    assert c.verdict is Verdict.FAIL and c.remaining == {}


def test_ra_without_faults_is_evidence_missing():
    assert recovery_check(ra(0, 0), 0.5, 0.95).verdict is Verdict.EVIDENCE_MISSING


# --------------------------------------------------------------------------- incident rates


def test_no_minor_in_300_hours_passes_one_per_100_hours():
    c = minor_rate_check(safety(300.0), 1.0, 0.95)
    # Upper bound 5.991465/2/300·100 = 0.998577 ≤ 1.
    assert c.bound == pytest.approx(0.998577, abs=1e-6)
    assert c.verdict is Verdict.PASS


def test_two_minors_in_400_hours_are_inconclusive():
    c = minor_rate_check(safety(400.0, minor=2), 1.0, 0.95)
    # Point 100·2/400 = 0.5 ≤ 1 but the upper bound 12.591587/800·100 = 1.573948 is not;
    # demonstrating needs 12.591587/2/0.01 = 629.579 h in all: 229.579 h more.
    assert c.value == pytest.approx(0.5)
    assert c.bound == pytest.approx(1.573948, abs=1e-6)
    assert c.verdict is Verdict.INCONCLUSIVE
    assert c.remaining["hours"] == pytest.approx(229.579, abs=1e-3)


def test_three_minors_in_200_hours_fail():
    c = minor_rate_check(safety(200.0, minor=3), 1.0, 0.95)
    assert c.value == pytest.approx(1.5)  # 100·3/200
    assert c.verdict is Verdict.FAIL


def test_zero_majors_is_a_count_check_with_its_upper_bound_printed():
    c = zero_count_check(safety(500.0), "major")
    # 0 majors in 500 h shows only rate ≤ 2.995732/500·100 = 0.599146 / 100 h.
    assert c.verdict is Verdict.PASS
    assert c.bound == pytest.approx(0.599146, abs=1e-6)
    assert "0.5991" in c.detail
    assert zero_count_check(safety(500.0, major=1), "major").verdict is Verdict.FAIL


def test_serious_free_500_hours():
    assert serious_free_check(safety(500.0), 500.0).verdict is Verdict.PASS
    short = serious_free_check(safety(300.0), 500.0)
    assert short.verdict is Verdict.INCONCLUSIVE and short.remaining == {"hours": 200.0}
    assert serious_free_check(safety(900.0, critical=1), 500.0).verdict is Verdict.FAIL
    assert serious_free_check(safety(900.0, major=1), 500.0).verdict is Verdict.FAIL


def test_mtbsi_gate_both_sides():
    # 0 incidents in 150 h: 300/5.991465 = 50.0712 ≥ 50.
    ok = mtbsi_check(safety(150.0), 50.0, 0.95)
    assert ok.bound == pytest.approx(50.0712, abs=1e-4)
    assert ok.verdict is Verdict.PASS and ok.value is None  # point ∞ is reported as None
    # 1 incident in 200 h: point 200 h, bound 400/9.487729 = 42.1597 < 50; total hours needed
    # 50·9.487729/2 = 237.193 h, so 37.193 h more.
    mid = mtbsi_check(safety(200.0, near_miss=1), 50.0, 0.95)
    assert mid.verdict is Verdict.INCONCLUSIVE
    assert mid.bound == pytest.approx(42.1597, abs=1e-4)
    assert mid.remaining["hours"] == pytest.approx(37.193, abs=1e-3)
    # 5 incidents in 100 h: point 20 h < 50.
    assert mtbsi_check(safety(100.0, near_miss=5), 50.0, 0.95).verdict is Verdict.FAIL


# --------------------------------------------------------------------------- E and S2R


def e_estimates(value: float, bound: float, n: int = 100) -> EmbodimentEstimates:
    two = Estimate(value, bound, 1.0, 0.95, "test", n)
    return EmbodimentEstimates(two, two, Estimate(value, bound, 1.0, 0.95, "test", n, "lower"))


def test_e_check_both_sides_and_remaining_episodes():
    assert embodiment_check(e_estimates(0.8, 0.7), 0.6).verdict is Verdict.PASS
    mid = embodiment_check(e_estimates(0.8, 0.7), 0.75)
    assert mid.verdict is Verdict.INCONCLUSIVE
    # n·((value − bound)/(value − threshold))² = 100·(0.1/0.05)² = 400 episodes: 300 more.
    assert mid.remaining == {"trials": 300.0}
    assert embodiment_check(e_estimates(0.8, 0.7), 0.9).verdict is Verdict.FAIL
    assert pairs_to_settle(0.8, 0.7, 0.9, 100) is None


def transfer(value: float, bound: float, n: int = 20) -> TransferResult:
    est = Estimate(value, bound, 1.0, 0.95, "test", n)
    low = Estimate(value, bound, 1.0, 0.95, "test", n, "lower")
    return TransferResult(est, low, est, est, "paired", None)


def test_s2r_on_families():
    fams = {"a": transfer(0.95, 0.85), "b": transfer(0.9, 0.7), "c": transfer(0.7, 0.5)}
    # At 0.8: a passes, b is inconclusive, c fails.
    one = s2r_families_check(fams, 0.8, 1)
    assert one.verdict is Verdict.PASS
    # No family count in the value/threshold columns (they hold S2R values elsewhere).
    assert one.value is None and one.threshold is None
    assert one.detail.startswith("1 of 3 families pass (needs ≥ 1): a 0.950 (bound 0.850) pass")
    two = s2r_families_check(fams, 0.8, 2)
    assert two.verdict is Verdict.INCONCLUSIVE
    # b needs 20·((0.9 − 0.7)/(0.9 − 0.8))² − 20 = 60 more pairs.
    assert two.remaining == {"trials": 60.0}
    assert s2r_families_check(fams, 0.8, 3).verdict is Verdict.FAIL
    assert s2r_families_check({}, 0.8, 1).verdict is Verdict.EVIDENCE_MISSING


def test_s2r_overall():
    assert s2r_overall_check(transfer(0.95, 0.92), 0.9).verdict is Verdict.PASS
    assert s2r_overall_check(transfer(0.95, 0.837449), 0.9).verdict is Verdict.INCONCLUSIVE
    assert s2r_overall_check(transfer(0.85, 0.7), 0.9).verdict is Verdict.FAIL


# --------------------------------------------------------------------------- evidence


def test_evidence_items():
    closure = GateResult("maintenance closure", (GateCheck("audit", Verdict.PASS),))
    ev = {
        "maintenance_closure": closure,
        "expansion_closure": False,
        "delivery_attestation": "inconclusive",
        "P": Estimate(0.8, 0.72, 0.9, 0.95, "bootstrap", 50),
        "W": 0.8,
    }
    assert evidence_check("m", "maintenance_closure", ev).verdict is Verdict.PASS
    assert evidence_check("x", "expansion_closure", ev).verdict is Verdict.FAIL
    assert evidence_check("d", "delivery_attestation", ev).verdict is Verdict.INCONCLUSIVE
    assert evidence_check("P", "P", ev, 0.70).verdict is Verdict.PASS
    # A bare number has no bound: it can only be inconclusive (or fail).
    assert evidence_check("W", "W", ev, 0.75).verdict is Verdict.INCONCLUSIVE
    assert evidence_check("W", "W", {"W": 0.5}, 0.75).verdict is Verdict.FAIL
    assert evidence_check("W", "W", {"W": {"value": 0.9, "low": 0.8}}, 0.75).verdict is (
        Verdict.PASS
    )
    missing = evidence_check("m", "maintenance_closure", None)
    assert missing.verdict is Verdict.EVIDENCE_MISSING and "evidence_missing" in missing.detail
    with pytest.raises(EvalError):
        evidence_check("m", "maintenance_closure", {"maintenance_closure": [1, 2]})
    with pytest.raises(EvalError):
        evidence_check("m", "maintenance_closure", {"maintenance_closure": {"verdict": "maybe"}})


def test_gates_reject_unknown_evidence_keys():
    s = safety(100.0)
    with pytest.raises(EvalError, match="unknown key 'maintenance'"):
        robotics_gates(
            embodiment=e_estimates(0.9, 0.8),
            recovery=ra(9, 10),
            safety=s,
            transfer=transfer(0.95, 0.9),
            transfer_by_family={},
            level=0.95,
            evidence={"maintenance": True},
        )


def test_all_gates_pass_with_strong_evidence():
    ev = {
        "maintenance_closure": True,
        "expansion_closure": True,
        "delivery_attestation": True,
        "P": Estimate(0.95, 0.92, 1.0, 0.95, "t", 10),
        "W": Estimate(0.95, 0.92, 1.0, 0.95, "t", 10),
    }
    gates = robotics_gates(
        embodiment=e_estimates(0.97, 0.95, 1000),
        recovery=ra(60, 60),
        safety=safety(600.0),
        transfer=transfer(0.98, 0.95, 1000),
        transfer_by_family={"a": transfer(0.98, 0.9), "b": transfer(0.97, 0.85)},
        level=0.95,
        evidence=ev,
    )
    # RA 60/60: Beta(0.05; 60, 1) = 0.05^(1/60) = 0.951301 ≥ 0.90; 0 incidents in 600 h:
    # minor bound 2.995732/600·100 = 0.4993 ≤ 1; MTBSI bound 1200/5.991465 = 200.3 ≥ 50.
    assert {k: g.verdict for k, g in gates.items()} == {
        "AAI-2": Verdict.PASS,
        "AAI-3": Verdict.PASS,
        "AAI-4": Verdict.PASS,
    }
