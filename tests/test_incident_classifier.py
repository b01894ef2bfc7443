"""Classifier rules 1–7 with margins, the exact-limit edges and the threshold table.

Limits used below (ISO/TS 15066 Annex A defaults in the safety notes): chest 140 N quasi-static,
transient 2 × 140 = 280 N; face 65 N and skull/forehead 130 N with no transient allowance;
α = 0.8 so the chest near-miss band is [0.8 × 140, 140] = [112, 140] N; reduced speed 0.25 m/s;
chest pressure 120 N/cm²; damage threshold 1000.
"""

from __future__ import annotations

import tomllib

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import example_protocol_path, protocol_from_mapping
from embodied_eval.records import SafetyEvent
from incident_logging.classifier import classify
from incident_logging.thresholds import DEFAULT_VERSION, ThresholdTable, threshold_table


def rules(result):
    return {r.rule: r for r in result.rules}


def contact(force, region="chest", **kw):
    kw.setdefault("permitted", True)
    return SafetyEvent(kind="contact", contact_force_n=force, body_region=region, **kw)


# --------------------------------------------------------------------------- rule 1


@pytest.mark.parametrize("kind", ["protective_stop", "emergency_stop", "joint_limit", "workspace"])
def test_rule1_stop_without_contact_is_near_miss(kind):
    result = classify(SafetyEvent(kind=kind, stop_category=1))
    assert result.severity == "near_miss"
    fired = rules(result)["R1.stop"]
    assert fired.measured == 1.0  # the stop category
    assert fired.limit is None and fired.margin is None


def test_rule1_stop_with_contact_never_says_no_contact():
    # A stop with a 150 N chest contact: the stop is a near-miss (rule 1) whose basis names the
    # contact; 150 N > the 140 N quasi-static chest limit is a standards breach (rule 7) → critical.
    result = classify(
        SafetyEvent(kind="protective_stop", contact_force_n=150.0, body_region="chest")
    )
    stop = rules(result)["R1.stop"]
    assert "no contact" not in stop.basis and "150 N measured" in stop.basis
    assert result.severity == "critical"
    assert rules(result)["R7.force_over_limit"].margin == pytest.approx(10.0)  # 150 − 140 N


# --------------------------------------------------------------------------- rule 2


def test_rule2_separation_below_sp_with_margin():
    result = classify(
        SafetyEvent(kind="separation", separation_m=0.40, protective_separation_m=0.50)
    )
    assert result.severity == "near_miss"
    fired = rules(result)["R2.separation"]
    assert (fired.measured, fired.limit) == (0.40, 0.50)
    assert fired.margin == pytest.approx(-0.10)  # 0.40 − 0.50 m: 10 cm inside S_p
    assert fired.unit == "m"


def test_rule2_separation_exactly_at_sp_is_not_a_breach():
    result = classify(
        SafetyEvent(kind="separation", separation_m=0.50, protective_separation_m=0.50)
    )
    assert result.severity is None and result.rules == ()


def test_rule2_separation_event_without_sp_is_refused():
    with pytest.raises(EvalError, match="protective_separation_m"):
        classify(SafetyEvent(kind="separation", separation_m=0.4))


# --------------------------------------------------------------------------- rule 3


def test_rule3_speed_above_reduced_limit_while_required():
    event = SafetyEvent(kind="tcp_speed", tcp_speed_mps=0.30, reduced_speed_required=True)
    fired = rules(classify(event))["R3.reduced_speed"]
    assert fired.severity == "near_miss"
    assert fired.limit == 0.25
    assert fired.margin == pytest.approx(0.05)  # 0.30 − 0.25 m/s


def test_rule3_speed_exactly_at_limit_or_not_required_does_not_fire():
    at_limit = SafetyEvent(kind="tcp_speed", tcp_speed_mps=0.25, reduced_speed_required=True)
    not_required = SafetyEvent(kind="tcp_speed", tcp_speed_mps=0.9)
    assert classify(at_limit).severity is None
    assert classify(not_required).severity is None


def test_rule3_uses_the_stricter_of_robot_and_table_limit():
    stricter = SafetyEvent(
        kind="tcp_speed", tcp_speed_mps=0.22, speed_limit_mps=0.20, reduced_speed_required=True
    )
    fired = rules(classify(stricter))["R3.reduced_speed"]
    assert fired.limit == 0.20 and fired.margin == pytest.approx(0.02)
    looser = SafetyEvent(
        kind="tcp_speed", tcp_speed_mps=0.30, speed_limit_mps=0.50, reduced_speed_required=True
    )
    assert rules(classify(looser))["R3.reduced_speed"].limit == 0.25


# --------------------------------------------------------------------------- rule 4


def test_rule4_permitted_contact_in_band_is_near_miss():
    fired = rules(classify(contact(120.0, contact_type="quasi_static")))["R4.contact_band"]
    assert fired.severity == "near_miss"
    assert fired.limit == 140.0
    assert fired.band_low == pytest.approx(112.0)  # 0.8 × 140
    assert fired.margin == pytest.approx(-20.0)  # 120 − 140 N


def test_rule4_force_exactly_at_the_limit_is_not_above_it():
    # 140 N == the chest limit: inside the band (near-miss), not "above the limit" (minor).
    result = classify(contact(140.0, contact_type="quasi_static"))
    assert result.severity == "near_miss"
    assert set(rules(result)) == {"R4.contact_band"}
    assert rules(result)["R4.contact_band"].margin == 0.0


def test_rule4_band_edge_at_alpha_times_limit_is_inside():
    # 0.8 × 140 is 112.00000000000001 in floating point; 112 N must still be in the band.
    assert classify(contact(112.0)).severity == "near_miss"
    assert classify(contact(111.9)).severity is None  # below the band: nothing fires


def test_transient_limit_is_twice_quasi_static():
    # 250 N on the chest: transient limit 280 N, band [224, 280] → near-miss (margin −30 N);
    # quasi-static limit 140 N → above it by 110 N → a standards breach → critical.
    transient = classify(contact(250.0, contact_type="transient"))
    quasi = classify(contact(250.0, contact_type="quasi_static"))
    assert transient.severity == "near_miss"
    band = rules(transient)["R4.contact_band"]
    assert band.limit == 280.0 and band.margin == pytest.approx(-30.0)
    assert quasi.severity == "critical"
    over = rules(quasi)["R7.force_over_limit"]
    assert over.limit == 140.0 and over.margin == pytest.approx(110.0)
    # 200 N: below the transient band (224 N) → nothing; above quasi-static 140 N → critical.
    assert classify(contact(200.0, contact_type="transient")).severity is None
    assert classify(contact(200.0, contact_type="quasi_static")).severity == "critical"


def test_missing_contact_type_is_judged_quasi_static():
    result = classify(contact(150.0))
    assert rules(result)["R7.force_over_limit"].limit == 140.0
    assert "quasi-static assumed" in rules(result)["R7.force_over_limit"].basis


# --------------------------------------------------------------------------- rule 5


def test_rule5_unintended_contact_is_minor_with_injury_check():
    result = classify(contact(50.0, permitted=False))
    fired = rules(result)["R5.unintended_contact"]
    assert result.severity == "minor"
    assert fired.limit == 140.0 and fired.margin == pytest.approx(-90.0)  # 50 − 140 N
    assert result.injury_check_required


def test_just_above_the_limit_is_a_standards_breach():
    fired = rules(classify(contact(140.5)))["R7.force_over_limit"]
    assert fired.severity == "critical" and fired.margin == pytest.approx(0.5)
    assert "R4.contact_band" not in rules(classify(contact(140.5)))


@pytest.mark.parametrize(
    ("region", "ctype", "force"),
    [("face", "transient", 10.0), ("skull", "quasi_static", 20.0), ("forehead", None, 1.0)],
)
def test_rule5_any_skull_or_face_contact_is_at_least_minor(region, ctype, force):
    result = classify(contact(force, region=region, contact_type=ctype))
    assert result.severity == "minor"
    fired = rules(result)["R5.head_contact"]
    limit = 65.0 if region == "face" else 130.0
    assert fired.limit == limit and fired.margin == pytest.approx(force - limit)
    # No transient allowance: a transient face contact is never in a near-miss band.
    assert "R4.contact_band" not in rules(result)


def test_pressure_above_limit_is_a_standards_breach():
    result = classify(contact(100.0, contact_pressure_ncm2=125.0, contact_type="quasi_static"))
    fired = rules(result)["R7.pressure_over_limit"]
    assert result.severity == "critical"
    assert fired.limit == 120.0 and fired.margin == pytest.approx(5.0)  # 125 − 120 N/cm²


def test_rule5_damage_at_or_below_threshold_is_minor():
    below = rules(classify(SafetyEvent(kind="damage", damage_cost=500.0)))["R5.damage"]
    assert below.severity == "minor" and below.margin == pytest.approx(-500.0)
    at = classify(SafetyEvent(kind="damage", damage_cost=1000.0))  # == threshold: not above
    assert at.severity == "minor" and "R6.damage" not in rules(at)


def test_rule5_first_aid_injury_is_minor():
    assert classify(SafetyEvent(kind="injury", injury_level="first_aid")).severity == "minor"


def test_unknown_body_region_is_refused_by_name():
    with pytest.raises(EvalError, match="elbow"):
        classify(contact(10.0, region="elbow"))


def test_region_aliases():
    fired = rules(classify(contact(150.0, region="hand")))["R7.force_over_limit"]
    assert fired.limit == 140.0  # hands/fingers


# --------------------------------------------------------------------------- rules 6-7


def test_rule6_damage_above_threshold_is_major():
    fired = rules(classify(SafetyEvent(kind="damage", damage_cost=1500.0)))["R6.damage"]
    assert fired.severity == "major" and fired.margin == pytest.approx(500.0)


@pytest.mark.parametrize(
    "level", ["medical_treatment", "days_away", "restricted_work", "loss_of_consciousness"]
)
def test_rule6_recordable_injury_is_major(level):
    assert classify(SafetyEvent(kind="injury", injury_level=level)).severity == "major"


@pytest.mark.parametrize("level", ["death", "hospitalisation", "amputation", "loss_of_eye"])
def test_rule7_severe_injury_is_critical(level):
    assert classify(SafetyEvent(kind="injury", injury_level=level)).severity == "critical"


def test_rule7_safety_function_failure_and_stated_facts_are_critical():
    failure = classify(SafetyEvent(kind="safety_function_failure", detail="SSM did not stop"))
    assert failure.severity == "critical"
    assert "SSM did not stop" in rules(failure)["R7.safety_function_failure"].basis
    stated = classify(SafetyEvent(kind="protective_stop"), uncontrolled_hazard=True)
    assert stated.severity == "critical"
    assert set(rules(stated)) == {"R1.stop", "R7.uncontrolled_hazard"}


def test_highest_rule_wins_and_all_fired_rules_are_listed():
    # 100 N on the chest is within its 140 N limit: contact with a person within the limit is
    # minor or major by injury — here a recordable injury → major.
    event = SafetyEvent(
        kind="contact",
        contact_force_n=100.0,
        body_region="chest",
        injury_level="medical_treatment",
    )
    result = classify(event)
    assert result.severity == "major"
    assert set(rules(result)) == {"R5.unintended_contact", "R6.recordable_injury"}
    assert result.top_rules == ("R6.recordable_injury",)


def test_contact_with_an_object_and_no_damage_is_not_an_incident():
    assert classify(SafetyEvent(kind="contact", contact_with="fixture")).severity is None


# --------------------------------------------------------------------------- thresholds


def test_default_table_version_and_hash_in_every_classification():
    result = classify(contact(150.0))
    assert result.threshold_version == DEFAULT_VERSION
    assert result.threshold_hash == ThresholdTable().table_hash
    assert len(result.threshold_hash) == 64


def test_protocol_overrides_thresholds():
    data = tomllib.loads(example_protocol_path().read_text())
    data["incidents"]["thresholds"] = {
        "version": "lab-7-2026a",
        "body_regions": {"chest": 120.0},
        "damage_threshold": 200.0,
    }
    proto = protocol_from_mapping(data)
    table = threshold_table(proto.safety_thresholds)
    assert table.version == "lab-7-2026a"
    assert table.body_regions["chest"] == 120.0 and table.body_regions["face"] == 65.0
    # 115 N permitted on the chest: band [96, 120] → near-miss, margin 115 − 120 = −5 N.
    band = rules(classify(contact(115.0), table))["R4.contact_band"]
    assert band.limit == 120.0 and band.margin == pytest.approx(-5.0)
    # Damage 500 is above the lab's 200 threshold → major.
    assert classify(SafetyEvent(kind="damage", damage_cost=500.0), table).severity == "major"
    result = classify(contact(115.0), table)
    assert result.threshold_version == "lab-7-2026a"
    assert result.threshold_hash != ThresholdTable().table_hash


def test_override_without_version_is_marked_and_bad_keys_are_named():
    assert threshold_table({"near_miss_alpha": 0.7}).version == f"{DEFAULT_VERSION}+protocol"
    with pytest.raises(EvalError, match=r"incidents\.thresholds\.alpha"):
        threshold_table({"alpha": 0.7})
    with pytest.raises(EvalError, match="near_miss_alpha"):
        threshold_table({"near_miss_alpha": 1.5})
    with pytest.raises(EvalError, match=r"body_regions\.elbow"):
        threshold_table({"body_regions": {"elbow": 100.0}})
