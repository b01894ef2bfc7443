"""Severities follow the seed's taxonomy and what was measured.

Taxonomy (the seed): near-miss = protective stop or breach of a distance/force margin; minor =
contact or property damage below the reporting threshold; major = reportable injury or
significant damage; critical = severe injury, uncontrolled hazard or standards breach.

ISO/TS 15066 quasi-static force limits (the project's safety notes), N: skull/forehead 130,
face 65, neck 150, back/shoulders 210, chest 140, abdomen 110, pelvis 180, upper arm 150, lower
arm 160, hands/fingers 140, thighs/knees 220, lower legs 130; transient = 2 × quasi-static except
skull/forehead and face (no transient allowance). A force on a person above its limit is a
standards breach → critical. Contact with the environment above the force limit (150 N here) is
a force-margin breach → near-miss, or minor with property damage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.records import SafetyEvent
from incident_logging.classifier import classify
from incident_logging.record import IncidentRecord
from incident_logging.thresholds import (
    DEFAULT_BODY_REGION_LIMITS_N,
    ThresholdTable,
    default_table,
    table_from_dict,
    threshold_table,
)

#: The notes' table, typed in by hand (not read from the code).
ISO_TS_15066_N = {
    "skull_forehead": 130.0,
    "face": 65.0,
    "neck": 150.0,
    "back_shoulders": 210.0,
    "chest": 140.0,
    "abdomen": 110.0,
    "pelvis": 180.0,
    "upper_arm": 150.0,
    "lower_arm": 160.0,
    "hands_fingers": 140.0,
    "thighs_knees": 220.0,
    "lower_legs": 130.0,
}
#: Transient limits by hand: 2 × the above, skull/forehead and face unchanged.
TRANSIENT_N = {
    "skull_forehead": 130.0,
    "face": 65.0,
    "neck": 300.0,
    "back_shoulders": 420.0,
    "chest": 280.0,
    "abdomen": 220.0,
    "pelvis": 360.0,
    "upper_arm": 300.0,
    "lower_arm": 320.0,
    "hands_fingers": 280.0,
    "thighs_knees": 440.0,
    "lower_legs": 260.0,
}


def rules(result: Any) -> dict[str, Any]:
    return {r.rule: r for r in result.rules}


def person(force: float, region: str, **kw: Any) -> SafetyEvent:
    return SafetyEvent(kind="contact", contact_force_n=force, body_region=region, **kw)


# --------------------------------------------------------------------------- table values


def test_iso_ts_15066_table_values_are_the_notes():
    assert dict(DEFAULT_BODY_REGION_LIMITS_N) == ISO_TS_15066_N
    table = default_table()
    assert sorted(table.no_transient_regions) == ["face", "skull_forehead"]
    assert table.transient_factor == 2.0
    assert table.environment_force_limit_n == 150.0
    for region, quasi in ISO_TS_15066_N.items():
        assert table.force_limit_n(region, "quasi_static") == quasi
        assert table.force_limit_n(region, "transient") == TRANSIENT_N[region]


@pytest.mark.parametrize("region", sorted(ISO_TS_15066_N))
def test_every_region_just_over_its_limit_is_a_critical_standards_breach(region):
    quasi = ISO_TS_15066_N[region]
    over = classify(person(quasi + 1.0, region, contact_type="quasi_static", permitted=True))
    assert over.severity == "critical"
    breach = rules(over)["R7.force_over_limit"]
    assert (breach.measured, breach.limit, breach.margin) == (quasi + 1.0, quasi, 1.0)
    assert "standards breach" in breach.basis and region in breach.basis
    # At the limit (not above it): no breach.
    at = classify(person(quasi, region, contact_type="quasi_static", permitted=True))
    assert at.severity != "critical" and "R7.force_over_limit" not in rules(at)
    # Transient: over 2 × the limit (or over the limit itself on skull/forehead and face).
    transient = TRANSIENT_N[region]
    t_over = classify(person(transient + 1.0, region, contact_type="transient", permitted=True))
    assert rules(t_over)["R7.force_over_limit"].limit == transient
    assert t_over.severity == "critical"


# --------------------------------------------------------------------------- the findings


def test_real_protective_stop_at_1353_n_on_the_environment_is_a_force_margin_near_miss():
    # The robot's own report, as the bridge stored it before events carried the limit; the twin's
    # force monitor declares the partner (`environment`): without it the contact would be held
    # to a person's limits (see test_contact_partners.py).
    event = SafetyEvent(
        kind="protective_stop",
        t_s=2.4,
        stop_category=2,
        contact_force_n=1353.0,
        contact_with="environment",
        detail="contact force 1353.0 N above the 150.0 N limit",
        source_rule="twin.force_limit",
    )
    result = classify(event)
    assert result.severity == "near_miss"
    by_id = rules(result)
    assert set(by_id) == {"R1.stop", "R2.force_margin"}
    assert "no contact" not in by_id["R1.stop"].basis
    assert "1353 N measured" in by_id["R1.stop"].basis
    margin = by_id["R2.force_margin"]
    assert (margin.measured, margin.limit, margin.margin, margin.unit) == (
        1353.0,
        150.0,
        1203.0,  # 1353 − 150 N
        "N",
    )
    assert "force margin" in margin.basis


def test_robot_limit_reported_with_the_event_is_used_when_stricter():
    event = SafetyEvent(
        kind="protective_stop",
        stop_category=2,
        contact_force_n=1353.0,
        force_limit_n=100.0,
        contact_with="environment",
    )
    margin = rules(classify(event))["R2.force_margin"]
    assert (margin.limit, margin.margin) == (100.0, 1253.0)  # 1353 − 100 N
    assert "robot's configured force limit 100 N" in margin.basis
    looser = SafetyEvent(
        kind="protective_stop",
        contact_force_n=1353.0,
        force_limit_n=400.0,
        contact_with="environment",
    )
    assert rules(classify(looser))["R2.force_margin"].limit == 150.0


def test_environment_contact_with_damage_is_minor_and_states_the_margin():
    event = SafetyEvent(kind="contact", contact_force_n=1353.0, contact_with="fixture")
    near = classify(event)
    assert near.severity == "near_miss" and set(rules(near)) == {"R2.force_margin"}
    damaged = classify(event, damage_reported=True)
    assert damaged.severity == "minor"
    rule = rules(damaged)["R5.force_margin_damage"]
    assert (rule.measured, rule.limit, rule.margin) == (1353.0, 150.0, 1203.0)
    assert "R5.damage" in rules(damaged)  # the damage itself, no cost yet
    costed = classify(
        SafetyEvent(kind="contact", contact_force_n=1353.0, contact_with="fixture", damage_cost=80)
    )
    assert costed.severity == "minor" and "R5.force_margin_damage" in rules(costed)


def test_environment_contact_at_or_below_the_limit_is_no_force_margin():
    assert (
        classify(SafetyEvent(kind="contact", contact_force_n=150.0, contact_with="table")).rules
        == ()
    )
    stop = classify(
        SafetyEvent(
            kind="protective_stop", stop_category=2, contact_force_n=140.0, contact_with="table"
        )
    )
    assert stop.severity == "near_miss" and set(rules(stop)) == {"R1.stop"}
    assert rules(stop)["R1.stop"].basis == (
        "protective stop on contact with table (140 N measured) (stop category 2)"
    )
    plain = classify(SafetyEvent(kind="protective_stop", stop_category=1))
    assert rules(plain)["R1.stop"].basis == "protective stop with no contact (stop category 1)"


def hand_report(**measurements: Any) -> IncidentRecord:
    return IncidentRecord(
        incident_id="INC-forehead",
        window="w1",
        occurred_at="2026-11-02T10:00:00Z",
        event_type="contact",
        source="manual",
        provisional_severity="near_miss",
        reporter="amy",
        injury_level="first_aid",
        measurements=measurements,
    )


def test_hand_reported_400_n_forehead_strike_is_critical_without_the_breach_flag():
    record = hand_report(contact_force_n=400.0, body_region="forehead", contact_with="person")
    result = record.classify()
    assert result.severity == "critical"
    breach = rules(result)["R7.force_over_limit"]
    assert (breach.measured, breach.limit, breach.margin) == (400.0, 130.0, 270.0)  # 400 − 130
    assert "R7.standards_breach" not in rules(result)  # nobody ticked the box
    assert {"R5.head_contact", "R5.unintended_contact", "R5.first_aid"} <= set(rules(result))
    assert record.with_classification(result).top_rule == "R7.force_over_limit"
    # Transient makes no difference on the forehead: no transient allowance.
    transient = hand_report(contact_force_n=400.0, body_region="forehead", contact_type="transient")
    assert rules(transient.classify())["R7.force_over_limit"].limit == 130.0


@pytest.mark.parametrize("ctype", ["quasi_static", "transient", None])
def test_skull_contact_at_100_n_is_minor(ctype):
    result = classify(person(100.0, "skull", contact_type=ctype, permitted=True))
    assert result.severity == "minor"
    head = rules(result)["R5.head_contact"]
    assert (head.limit, head.margin) == (130.0, -30.0)  # 100 − 130 N
    assert not any(r.rule.startswith("R7.") for r in result.rules)


def test_chest_300_n_transient_is_critical_and_250_n_is_not_a_breach():
    over = classify(person(300.0, "chest", contact_type="transient", permitted=True))
    assert over.severity == "critical"
    breach = rules(over)["R7.force_over_limit"]
    assert (breach.limit, breach.margin) == (280.0, 20.0)  # 300 − 2 × 140 N
    permitted = classify(person(250.0, "chest", contact_type="transient", permitted=True))
    assert permitted.severity == "near_miss"  # in the band [224, 280] N
    unintended = classify(person(250.0, "chest", contact_type="transient"))
    assert unintended.severity == "minor"
    for result in (permitted, unintended):
        assert not any(r.rule.startswith("R7.") for r in result.rules)


def test_contact_with_a_person_within_the_limit_is_minor_or_major_by_injury():
    assert classify(person(100.0, "chest")).severity == "minor"
    assert classify(person(100.0, "chest", injury_level="first_aid")).severity == "minor"
    assert classify(person(100.0, "chest", injury_level="days_away")).severity == "major"
    assert classify(person(100.0, "chest", injury_level="hospitalisation")).severity == "critical"


# --------------------------------------------------------------------------- the taxonomy


@pytest.mark.parametrize(
    ("event", "flags", "severity"),
    [
        # near-miss: a protective stop; a distance margin; a force margin
        (SafetyEvent(kind="protective_stop", stop_category=1), {}, "near_miss"),
        (
            SafetyEvent(kind="separation", separation_m=0.3, protective_separation_m=0.5),
            {},
            "near_miss",
        ),
        (SafetyEvent(kind="contact", contact_force_n=151.0, contact_with="table"), {}, "near_miss"),
        # minor: contact (within the limit); property damage below the reporting threshold
        (SafetyEvent(kind="contact", contact_force_n=50.0, body_region="neck"), {}, "minor"),
        (SafetyEvent(kind="damage", damage_cost=1000.0), {}, "minor"),
        # major: reportable injury; significant damage
        (SafetyEvent(kind="injury", injury_level="medical_treatment"), {}, "major"),
        (SafetyEvent(kind="damage", damage_cost=1000.5), {}, "major"),
        # critical: severe injury; uncontrolled hazard; standards breach (measured or stated)
        (SafetyEvent(kind="injury", injury_level="loss_of_eye"), {}, "critical"),
        (SafetyEvent(kind="protective_stop"), {"uncontrolled_hazard": True}, "critical"),
        (SafetyEvent(kind="contact", contact_force_n=151.0, body_region="neck"), {}, "critical"),
        (SafetyEvent(kind="protective_stop"), {"standards_breach": True}, "critical"),
    ],
)
def test_seed_taxonomy(event, flags, severity):
    assert classify(event, **flags).severity == severity


# --------------------------------------------------------------------------- thresholds


def test_environment_force_limit_is_a_protocol_threshold():
    table = threshold_table({"environment_force_limit_n": 200.0})
    assert (
        classify(
            SafetyEvent(kind="contact", contact_force_n=180.0, contact_with="table"), table
        ).severity
        is None
    )
    margin = rules(
        classify(SafetyEvent(kind="contact", contact_force_n=250.0, contact_with="table"), table)
    )["R2.force_margin"]
    assert (margin.limit, margin.margin) == (200.0, 50.0)
    with pytest.raises(EvalError, match="environment_force_limit_n"):
        threshold_table({"environment_force_limit_n": 0})


def test_a_table_stored_before_the_environment_limit_still_loads():
    stored = ThresholdTable().to_dict()
    del stored["environment_force_limit_n"]
    assert table_from_dict(stored).environment_force_limit_n == 150.0


def test_a_force_limit_of_zero_is_refused():
    with pytest.raises(EvalError, match="force_limit_n"):
        SafetyEvent(kind="protective_stop", contact_force_n=10.0, force_limit_n=0.0)


# --------------------------------------------------------------------------- emitters


def test_twin_force_stop_carries_the_force_the_limit_and_what_was_touched():
    """The twin's force stop is the scene's own monitor (the sim episode's): the net external
    force on the robot, 1353 N against the table, over the 150 N limit."""
    from sim_suites.panda_kinematics import panda_kinematics
    from sim_suites.safety_monitors import SafetyLimits, SafetyMonitor

    kin = panda_kinematics()
    monitor = SafetyMonitor(SafetyLimits(), kin.lower, kin.upper, kin.vel_limit, None, ())
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785])
    decision = monitor.update(
        120, 2.4, q, np.zeros(7), np.array([0.5, 0.0, 0.02]), 0.1,
        {("robot", "table"): 1300.0}, np.array([0.5, 0.0, 0.02]),
        external_force=np.array([0.0, 0.0, 1353.0]),
    )  # fmt: skip
    assert decision is not None and decision.status == "safety_stop"
    (event,) = [e for e in monitor.events if e.kind == "protective_stop"]
    assert (event.contact_force_n, event.force_limit_n, event.contact_with) == (
        1353.0,
        150.0,
        "table",
    )
    result = classify(event)
    assert result.severity == "near_miss"
    assert rules(result)["R2.force_margin"].margin == 1203.0


def test_bridge_reads_the_force_limit_from_the_robots_diagnostics():
    from real_bridge.interface import read_safety_status, safety_key_values

    event = SafetyEvent(
        kind="protective_stop",
        stop_category=2,
        contact_force_n=1353.0,
        force_limit_n=150.0,
        contact_with="environment",
    )
    values = safety_key_values(event, episode_id="e1", event_id="s1")
    reading = read_safety_status("safety/protective_stop", 2, "stop", values, t_s=1.0)
    assert reading is not None and reading.event is not None
    assert (reading.event.contact_force_n, reading.event.force_limit_n) == (1353.0, 150.0)


def test_sim_table_press_stop_names_the_contact_and_its_force_margin():
    from sim_suites.episode import run_episode
    from tests.test_sim_safety import Constant, spec

    outcome = run_episode(spec("push/block_forward"), policy=Constant([0, 0, -1, -1]))
    (stop,) = [e for e in outcome.safety_events if e.kind == "protective_stop"]
    (contact,) = [e for e in outcome.safety_events if e.kind == "contact"]
    assert (stop.contact_with, stop.force_limit_n, contact.force_limit_n) == ("table", 150.0, 150.0)
    assert stop.contact_force_n is not None and stop.contact_force_n > 150.0
    stopped = classify(stop)
    assert stopped.severity == "near_miss"
    assert "no contact" not in rules(stopped)["R1.stop"].basis
    margin = rules(stopped)["R2.force_margin"]
    assert margin.limit == 150.0 and margin.margin == pytest.approx(stop.contact_force_n - 150.0)
    assert classify(contact).severity == "near_miss"
