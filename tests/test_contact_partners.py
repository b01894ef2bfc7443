"""Unknown is not harmless: who a contact was with, and the lowest body-region limit.

Every expected severity and limit below is worked out by hand from the default ISO/TS 15066
table (quasi-static N: skull/forehead 130, face 65, neck 150, back/shoulders 210, chest 140,
abdomen 110, pelvis 180, upper arm 150, lower arm 160, hands/fingers 140, thighs/knees 220,
lower legs 130; transient = 2 ×, except skull/forehead and face, which have no transient
allowance; pressure N/cm²: chest 120, hands/fingers 200; environment limit 150 N):

* lowest quasi-static force limit = min of the list = 65 N (face);
* lowest transient force limit = min(65 face, 130 skull, 2 × 110 = 220 abdomen, 2 × 130 = 260
  lower legs, …) = 65 N (face: no transient allowance) — the same 65 N;
* with no region exempt from the transient allowance, the lowest transient limit is
  2 × 65 = 130 N (face), the quasi-static one still 65 N;
* lowest pressure limit: quasi-static 120 N/cm² (chest), transient 2 × 120 = 240 N/cm².
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.records import SafetyEvent
from incident_logging.classifier import classify
from incident_logging.rule_base import fired
from incident_logging.thresholds import ThresholdTable, default_table, threshold_table
from tests.test_incident_cli import fails, ok

pytestmark = pytest.mark.timeout(120)

#: No region without a transient allowance: the transient limit is 2 × quasi-static everywhere.
ALL_TRANSIENT = threshold_table({"no_transient_regions": []})

#: (contact_with, body_region, force N, contact type, table) → (severity, deciding rule, limit N).
TABLE: list[tuple[str | None, str | None, float, str | None, ThresholdTable, tuple]] = [
    # The four findings: 500 N with no region is over every region's limit → critical.
    ("technician", None, 500.0, None, default_table(), ("critical", "R7.force_over_lowest_limit", 65.0)),
    ("visitor", None, 500.0, None, default_table(), ("critical", "R7.force_over_lowest_limit", 65.0)),
    ("operator", None, 500.0, None, default_table(), ("critical", "R7.force_over_lowest_limit", 65.0)),
    (None, None, 500.0, None, default_table(), ("critical", "R7.force_over_lowest_limit", 65.0)),
    # Duration: transient under the default table is still held to the face's 65 N.
    ("person", None, 66.0, "transient", default_table(), ("critical", "R7.force_over_lowest_limit", 65.0)),
    # At the lowest limit is not above it (strict): minor, injury check.
    (None, None, 65.0, "quasi_static", default_table(), ("minor", "R5.unknown_region", 65.0)),
    ("visitor", None, 60.0, None, default_table(), ("minor", "R5.unknown_region", 65.0)),
    # Duration matters when the face has a transient allowance: 2 × 65 = 130 N transient.
    (None, None, 100.0, "transient", ALL_TRANSIENT, ("minor", "R5.unknown_region", 130.0)),
    (None, None, 100.0, "quasi_static", ALL_TRANSIENT, ("critical", "R7.force_over_lowest_limit", 65.0)),
    (None, None, 131.0, "transient", ALL_TRANSIENT, ("critical", "R7.force_over_lowest_limit", 130.0)),
    # A body region given: that region's limit (chest transient 2 × 140 = 280 N).
    ("technician", "chest", 500.0, "transient", default_table(), ("critical", "R7.force_over_limit", 280.0)),
    ("technician", "chest", 250.0, "transient", default_table(), ("minor", "R5.unintended_contact", 280.0)),
    # The sim's human proxy carries its part's region: hands 140 N quasi-static.
    ("human_proxy", "hands_fingers", 150.0, "quasi_static", default_table(), ("critical", "R7.force_over_limit", 140.0)),
    # Declared environment partners: the force margin (150 N), as before.
    ("table", None, 500.0, None, default_table(), ("near_miss", "R2.force_margin", 150.0)),
    ("  Table ", None, 500.0, None, default_table(), ("near_miss", "R2.force_margin", 150.0)),
    ("environment", None, 500.0, "transient", default_table(), ("near_miss", "R2.force_margin", 150.0)),
    ("hole", None, 151.0, None, default_table(), ("near_miss", "R2.force_margin", 150.0)),
    ("environment", None, 140.0, None, default_table(), (None, None, None)),
]  # fmt: skip


@pytest.mark.parametrize(("partner", "region", "force", "ctype", "table", "expected"), TABLE)
def test_classification_table(partner, region, force, ctype, table, expected):
    event = SafetyEvent(
        kind="contact",
        contact_force_n=force,
        contact_with=partner,
        body_region=region,
        contact_type=ctype,
    )
    result = classify(event, table)
    severity, rule, limit = expected
    assert result.severity == severity
    if rule is None:
        assert result.rules == ()
        return
    assert rule in result.top_rules
    decided = next(r for r in result.rules if r.rule == rule)
    assert decided.limit == limit
    if limit is not None:
        assert decided.margin == force - limit


def test_the_rule_names_who_and_the_lowest_region():
    unnamed = classify(SafetyEvent(kind="contact", contact_force_n=500.0)).rules[0]
    assert "unnamed partner (a person until declared otherwise)" in unnamed.basis
    assert "quasi-static force limit of any body region: 65 N (face)" in unnamed.basis
    assert "quasi-static assumed" in unnamed.basis
    named = classify(SafetyEvent(kind="contact", contact_force_n=500.0, contact_with="Visitor"))
    assert "a person (visitor)" in named.rules[0].basis
    assert named.injury_check_required


def test_pressure_without_a_region_is_held_to_the_lowest_pressure_limit():
    over = classify(
        SafetyEvent(kind="contact", contact_pressure_ncm2=130.0, contact_type="quasi_static")
    )
    assert over.severity == "critical"
    (rule,) = over.rules
    assert (rule.rule, rule.limit) == ("R7.pressure_over_lowest_limit", 120.0)  # chest
    within = classify(
        SafetyEvent(kind="contact", contact_pressure_ncm2=130.0, contact_type="transient")
    )
    assert within.severity == "minor" and within.top_rules == ("R5.unknown_region",)
    assert "240 N/cm² (chest)" in within.rules[0].basis  # 2 × 120


def test_a_force_measured_with_a_stop_and_no_partner_is_a_person_contact():
    stop = SafetyEvent(kind="protective_stop", stop_category=1, contact_force_n=90.0)
    result = classify(stop)
    assert result.severity == "critical"  # 90 > 65 N (face)
    assert set(result.top_rules) == {"R7.force_over_lowest_limit"}
    basis = next(r.basis for r in result.rules if r.rule == "R1.stop")
    assert "an unnamed partner" in basis and "90 N measured" in basis


def test_unknown_partner_words_are_refused_with_both_lists():
    with pytest.raises(EvalError) as caught:
        classify(SafetyEvent(kind="contact", contact_force_n=500.0, contact_with="box"))
    message = str(caught.value)
    assert caught.value.key == "contact_with"
    assert "'box' is not a known contact partner" in message
    assert "technician" in message and "visitor" in message and "environment" in message


def test_a_protocol_declares_its_own_fixtures():
    event = SafetyEvent(kind="contact", contact_force_n=500.0, contact_with="conveyor")
    with pytest.raises(EvalError):
        classify(event)
    lab = threshold_table({"environment_partners": ["Conveyor", "parts bin"]})
    assert classify(event, lab).severity == "near_miss"
    assert "parts_bin" in lab.environment_partners and "table" in lab.environment_partners
    assert lab.table_hash != default_table().table_hash
    with pytest.raises(EvalError, match="names a person"):
        threshold_table({"environment_partners": ["operator"]})
    with pytest.raises(EvalError, match="environment_partners"):
        threshold_table({"environment_partners": "conveyor"})


def test_every_fixture_the_sim_scenes_name_is_a_declared_environment_partner():
    from sim_suites.engines.base import TABLE as TABLE_BODY
    from sim_suites.tasks.catalog import TASK_SPECS, make_task

    partners = set(default_table().environment_partners)
    for task_id in TASK_SPECS:
        scene = make_task(task_id).scene()
        # What the safety monitor names a fixture contact by (`sim_suites.env`).
        monitored = {
            TABLE_BODY,
            "obstacle",
            *scene.names("fixture"),
            *scene.names("drawer"),
            *scene.names("distractor"),
        }
        assert monitored <= partners, (task_id, monitored - partners)


# --------------------------------------------------------------------------- the command


@pytest.mark.parametrize("partner", ["technician", "visitor", "operator", None])
def test_report_500_n_without_a_region_is_critical(tmp_path: Path, capsys, partner):
    db = str(tmp_path / "s.db")
    args = [
        "incidents", "report", "--window", "w1", "--reporter", "amy",
        "--occurred", "2026-11-02T10:00:00Z", "--event-type", "contact", "--force", "500",
        "--db", db, "--json",
    ]  # fmt: skip
    if partner is not None:
        args += ["--contact-with", partner]
    stored = json.loads(ok(capsys, *args))
    assert stored["provisional_severity"] == "critical"
    (rule,) = [r for r in stored["rules_fired"] if r["severity"] == "critical"]
    assert (rule["rule"], rule["limit"], rule["margin"]) == (
        "R7.force_over_lowest_limit",
        65.0,
        435.0,  # 500 − 65 N
    )


def test_report_refuses_an_unknown_partner_and_stores_nothing(tmp_path: Path, capsys):
    db = tmp_path / "s.db"
    line = fails(
        capsys, "incidents", "report", "--window", "w1", "--reporter", "amy",
        "--occurred", "2026-11-02T10:00:00Z", "--event-type", "contact", "--force", "500",
        "--contact-with", "gripper jaw", "--db", str(db),
    )  # fmt: skip
    assert "'gripper jaw' is not a known contact partner" in line
    assert "technician" in line and "environment" in line
    assert not db.exists()


def test_verify_lists_incidents_the_new_rules_classify_differently(tmp_path: Path, capsys):
    from incident_logging.record import IncidentRecord
    from incident_logging.store import IncidentStore

    db = tmp_path / "s.db"
    # Records as the earlier rules stored them: 500 N "technician" was an environment force
    # margin (near-miss) then; 500 N on the table still is; "gripper" is refused now.
    table = default_table()
    margin = fired("R2.force_margin", "near_miss", "contact_force_n", 500.0, 150.0, "N", "old")

    def old(iid: str, partner: str) -> IncidentRecord:
        return IncidentRecord(
            incident_id=iid,
            window="w1",
            occurred_at="2026-11-02T10:00:00Z",
            event_type="contact",
            source="manual",
            reporter="amy",
            provisional_severity="near_miss",
            measurements={"contact_force_n": 500.0, "contact_with": partner},
            rules_fired=(margin.to_dict(),),
            threshold_version=table.version,
            threshold_hash=table.table_hash,
        )

    with IncidentStore(db) as log:
        for iid, partner in (("INC-a", "technician"), ("INC-b", "table"), ("INC-c", "gripper")):
            log.append_incident(old(iid, partner), table=table)
    out = ok(capsys, "incidents", "verify", "--db", str(db))
    assert "2 incident(s) the current classifier rules would classify differently" in out
    assert "INC-b" not in out
    assert (
        "INC-a (seq 2) keeps near_miss: classified near_miss (R2.force_margin); the current "
        "rules (rules-3) would give critical (R7.force_over_lowest_limit) — above the severity "
        "it holds" in " ".join(out.split())
    )
    assert "'gripper' is not a known contact partner" in " ".join(out.split())
    report = json.loads(ok(capsys, "incidents", "verify", "--db", str(db), "--json"))
    assert [c["incident_id"] for c in report["reclassification"]] == ["INC-a", "INC-c"]
    assert report["ok"]
    with IncidentStore(db) as log:
        assert log.state("INC-a").severity == "near_miss"  # kept
