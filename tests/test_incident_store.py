"""Incident store: append-only rows, amendments, escalation, the review rules, exposure, close."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import ExposureEntry, SafetyEvent
from embodied_eval.store.core import Store
from embodied_eval.store.signing_keys import generate_key
from incident_logging.chain import TABLE
from incident_logging.ingest import ingest_safety_events
from incident_logging.record import IncidentRecord
from incident_logging.store import IncidentStore, window_exposure, window_incidents
from tests.conftest import make_episode

pytestmark = pytest.mark.timeout(60)


def make_record(incident_id: str = "INC-1", **overrides: Any) -> IncidentRecord:
    """A manual real-side report: an unintended 100 N chest contact (within the 140 N limit →
    minor)."""
    fields: dict[str, Any] = {
        "incident_id": incident_id,
        "window": "w1",
        "occurred_at": "2026-11-02T10:00:00Z",
        "event_type": "contact",
        "source": "manual",
        "provisional_severity": "near_miss",
        "reporter": "alice",
        "measurements": {"contact_force_n": 100.0, "body_region": "chest"},
        "what_happened": "arm brushed the operator's chest",
    }
    fields.update(overrides)
    return IncidentRecord(**fields)


class Team:
    """A store with a registered key per role (alice reports; rita reviews; sam and sara are
    safety officers; tom is a technician; paul owns the protocol)."""

    def __init__(self, path: Path) -> None:
        self.store = IncidentStore(path)
        self.keys = {}
        for holder, role in (
            ("rita", "reviewer"),
            ("rex", "reviewer"),
            ("sam", "safety_officer"),
            ("sara", "safety_officer"),
            ("alice", "safety_officer"),
            ("tom", "technician"),
            ("paul", "protocol_owner"),
        ):
            key = generate_key()
            self.store.register_key(key, holder, role)
            self.keys[holder] = key

    def review(self, who: str, incident: str, severity: str, decision="classify", why=""):
        return self.store.review(
            incident, self.keys[who], decision=decision, severity=severity, rationale=why
        )

    def exposure(self, hours: float = 10.0, window: str = "w1", **kw) -> None:
        self.store.add_exposure(
            ExposureEntry(
                entry_id=kw.pop("entry_id", f"E-{window}-{hours}"),
                window=window,
                start=kw.pop("start", "2026-11-02T00:00:00Z"),
                end=kw.pop("end", "2026-11-03T00:00:00Z"),
                active_hours=hours,
                how_measured="robot_clock",
                **kw,
            )
        )


@pytest.fixture
def team(tmp_path: Path):
    t = Team(tmp_path / "log.db")
    yield t
    t.store.close()


# --------------------------------------------------------------------------- append-only


def test_report_classifies_and_chains(team):
    stored = team.store.report(make_record())
    assert stored.provisional_severity == "minor"
    assert stored.sequence == team.store.head()[0] and stored.recorded_at
    assert stored.threshold_version and len(stored.threshold_hash) == 64
    assert team.store.verify().ok


def test_triggers_refuse_update_and_delete(team):
    team.store.report(make_record())
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        team.store.conn.execute(f"UPDATE {TABLE} SET body = '{{}}' WHERE seq = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        team.store.conn.execute(f"DELETE FROM {TABLE} WHERE seq = 1")
    assert team.store.verify().ok


def test_amendment_never_changes_the_original_row(team):
    team.store.report(make_record())
    before = team.store.conn.execute(
        f"SELECT seq, body, hash FROM {TABLE} WHERE kind = 'incident'"
    ).fetchall()
    team.store.amend(
        "INC-1",
        {"what_happened": "arm touched the chest while retracting"},
        reason="narrative completed the same shift",
        author="alice",
        role="technician",
    )
    after = team.store.conn.execute(
        f"SELECT seq, body, hash FROM {TABLE} WHERE kind = 'incident'"
    ).fetchall()
    assert before == after
    state = team.store.state("INC-1")
    assert state.original.what_happened == "arm brushed the operator's chest"
    assert state.current.what_happened == "arm touched the chest while retracting"
    (amendment,) = state.amendments
    assert amendment["changes"] == [
        {
            "field": "what_happened",
            "old": "arm brushed the operator's chest",
            "new": "arm touched the chest while retracting",
        }
    ]
    assert (amendment["author"], amendment["role"], amendment["reason"]) == (
        "alice",
        "technician",
        "narrative completed the same shift",
    )


def test_identity_and_classification_fields_cannot_be_amended(team):
    team.store.report(make_record())
    for field in ("provisional_severity", "incident_id", "window", "rules_fired"):
        with pytest.raises(EvalError, match="cannot be amended"):
            team.store.amend("INC-1", {field: "x"}, reason="r", author="a", role="technician")
    with pytest.raises(EvalError, match="reason"):
        team.store.amend("INC-1", {"treatment": "ice"}, reason=" ", author="a", role="technician")


# --------------------------------------------------------------------------- escalation / downgrade


def test_new_facts_escalate_automatically_but_never_downgrade(team):
    team.store.report(make_record())
    payload = team.store.amend(
        "INC-1",
        {"injury_level": "medical_treatment"},
        reason="clinic visit reported",
        author="alice",
        role="technician",
    )
    assert payload["escalation"]["from"] == "minor" and payload["escalation"]["to"] == "major"
    assert team.store.state("INC-1").severity == "major"
    # A permitted 100 N contact (below the band [112, 140] N) makes the classifier say less;
    # nothing drops.
    payload = team.store.amend(
        "INC-1",
        {"injury_level": "none", "measurements.permitted": True},
        reason="re-measured",
        author="alice",
        role="technician",
    )
    assert "escalation" not in payload and payload["classifier"]["severity"] is None
    assert team.store.state("INC-1").severity == "major"


def test_downgrade_needs_a_written_rationale(team):
    team.store.report(make_record())  # provisional minor
    with pytest.raises(EvalError, match="downgrading INC-1 from minor to near_miss needs"):
        team.review("rita", "INC-1", "near_miss")
    team.review("rita", "INC-1", "near_miss", why="force sensor spike; video shows no contact")
    # A proposal does not change the severity; the officer's signed final does.
    assert team.store.state("INC-1").severity == "minor"
    with pytest.raises(EvalError, match="rationale"):
        team.review("sam", "INC-1", "near_miss", decision="final")
    team.review("sam", "INC-1", "near_miss", decision="final", why="agree with reviewer")
    state = team.store.state("INC-1")
    assert (state.severity, state.reviewed, state.provisional_severity) == (
        "near_miss",
        True,
        "minor",
    )
    assert state.to_contract().severity == "near_miss" and state.to_contract().reviewed


def test_escalation_is_allowed_without_rationale_and_counts_at_once(team):
    team.store.report(make_record())
    team.review("rita", "INC-1", "major")
    assert team.store.state("INC-1").severity == "major"
    assert not team.store.state("INC-1").reviewed


def test_escalation_after_final_reopens_the_review(team):
    team.store.report(make_record())
    team.review("sam", "INC-1", "minor", decision="final")
    assert team.store.state("INC-1").reviewed
    team.store.amend(
        "INC-1", {"damage_cost": 5000.0}, reason="repair quote", author="tom", role="technician"
    )
    state = team.store.state("INC-1")
    assert (state.severity, state.reviewed) == ("major", False)
    assert state.unreviewed_serious


# --------------------------------------------------------------------------- role rules


def test_technician_cannot_review_and_reviewer_cannot_sign_final(team):
    team.store.report(make_record())
    with pytest.raises(EvalError, match="only a reviewer or safety_officer"):
        team.review("tom", "INC-1", "minor")
    with pytest.raises(EvalError, match="only a safety_officer signs the final severity"):
        team.review("rita", "INC-1", "minor", decision="final")


def test_minor_final_needs_one_safety_officer(team):
    team.store.report(make_record())
    team.review("sam", "INC-1", "minor", decision="final")
    assert team.store.state("INC-1").reviewed


def test_major_final_needs_two_distinct_signers(team):
    team.store.report(make_record(injury_level="days_away"))  # major
    with pytest.raises(EvalError, match="two distinct signers"):
        team.review("sam", "INC-1", "major", decision="final")
    # sam's own earlier proposal does not count as a second signer.
    team.review("sam", "INC-1", "major")
    with pytest.raises(EvalError, match="two distinct signers"):
        team.review("sam", "INC-1", "major", decision="final")
    # A proposal at another severity does not concur: rex escalates to critical (counts at
    # once), so sam's major final is a downgrade with only sam behind "major".
    team.review("rex", "INC-1", "critical")
    assert team.store.state("INC-1").severity == "critical"
    why = "no safety function failed; injury is recordable, not severe"
    with pytest.raises(EvalError, match="two distinct signers"):
        team.review("sam", "INC-1", "major", decision="final", why=why)
    team.review("rita", "INC-1", "major", why=why)
    team.review("sam", "INC-1", "major", decision="final", why=why)
    state = team.store.state("INC-1")
    assert (state.severity, state.reviewed, state.signers) == (
        "major",
        True,
        ("sam", "rex", "rita"),
    )


def test_reporter_cannot_sign_off_a_major(team):
    # alice reported it and also holds a safety_officer key.
    team.store.report(make_record(injury_level="days_away"))
    team.review("rita", "INC-1", "major")
    with pytest.raises(EvalError, match="cannot be signed off by the reporter"):
        team.review("alice", "INC-1", "major", decision="final")
    team.review("sam", "INC-1", "major", decision="final")
    assert team.store.state("INC-1").reviewed


def test_counting_change_needs_a_safety_officer_signature(team):
    team.store.report(make_record())
    with pytest.raises(EvalError, match="only a safety_officer"):
        team.store.amend(
            "INC-1",
            {"counts_toward_window": False},
            reason="outside the trial",
            author="alice",
            role="safety_officer",
        )
    team.store.amend(
        "INC-1",
        {"counts_toward_window": False},
        reason="happened during maintenance, outside trial exposure",
        author="sam",
        role="safety_officer",
        key=team.keys["sam"],
    )
    current = team.store.state("INC-1").current
    assert not current.counts_toward_window
    assert current.counts_justification == "happened during maintenance, outside trial exposure"
    assert team.store.verify().ok  # the signed amendment verifies


def test_sim_side_incident_never_counts(team):
    with pytest.raises(EvalError, match="sim-side"):
        team.store.report(make_record(side="sim"))
    stored = team.store.report(
        make_record(side="sim", counts_toward_window=False, counts_justification="sim")
    )
    assert stored.to_contract().side == "sim"


# --------------------------------------------------------------------------- exposure / close


def test_exposure_overlap_is_refused_and_blind_periods_are_kept(team):
    team.exposure(8.0, entry_id="E1", robot_id="r1")
    with pytest.raises(EvalError, match="overlaps E1"):
        team.exposure(2.0, entry_id="E2", robot_id="r1", start="2026-11-02T12:00:00Z")
    team.exposure(
        3.0,
        entry_id="E3",
        robot_id="r1",
        blind=True,
        start="2026-11-03T00:00:00Z",
        end="2026-11-03T05:00:00Z",
    )
    assert [(e.entry_id, e.blind) for e in team.store.exposure("w1")] == [
        ("E1", False),
        ("E3", True),
    ]


def test_close_window_rules(team):
    team.store.report(make_record(injury_level="days_away"))  # unreviewed major
    with pytest.raises(EvalError, match="only the protocol_owner"):
        team.store.close_window("w1", team.keys["sam"])
    with pytest.raises(EvalError, match="unreviewed major/critical incident"):
        team.store.close_window("w1", team.keys["paul"])
    team.review("rita", "INC-1", "major")
    team.review("sam", "INC-1", "major", decision="final")
    with pytest.raises(EvalError, match="no exposure hours"):
        team.store.close_window("w1", team.keys["paul"])
    team.exposure(12.5)
    count, head = team.store.head()
    closed = team.store.close_window("w1", team.keys["paul"])
    assert (closed["head_hash"], closed["record_count"], closed["exposure_h"]) == (
        head,
        count,
        12.5,
    )
    assert team.store.window_close("w1")["owner"] == "paul"
    with pytest.raises(EvalError, match="closed"):
        team.store.report(make_record("INC-2"))
    with pytest.raises(EvalError, match="closed"):
        team.exposure(
            1.0, entry_id="late", start="2026-11-05T00:00:00Z", end="2026-11-05T02:00:00Z"
        )
    with pytest.raises(EvalError, match="closed"):
        team.store.close_window("w1", team.keys["paul"])
    assert team.store.verify().ok


def test_window_entry_points_return_contract_records(team):
    team.store.report(make_record())
    team.exposure(4.0)
    path = team.store.path
    incidents = window_incidents(path, "w1")
    assert [(i.incident_id, i.severity, i.reviewed) for i in incidents] == [
        ("INC-1", "minor", False)
    ]
    assert incidents[0].rule == "R5.unintended_contact"
    assert [e.active_hours for e in window_exposure(path, "w1")] == [4.0]


# --------------------------------------------------------------------------- ingest


def test_ingest_classifies_stored_safety_events_once(tmp_path: Path):
    db = tmp_path / "store.db"
    proto = load_protocol(example_protocol_path())
    real = make_episode(window=proto.window_id, started_at="2026-11-02T10:00:00Z")
    sim = make_episode(episode_id="p0001-sim-a1", side="sim", engine="mujoco", window="w-sim")
    with Store(db) as core:
        core.write_episode(
            real,
            [
                SafetyEvent(
                    kind="contact", t_s=3.5, contact_force_n=100.0, body_region="chest"
                ).to_dict(),
                SafetyEvent(kind="contact", t_s=4.0, contact_with="fixture").to_dict(),
                SafetyEvent(kind="protective_stop", t_s=5.0, stop_category=2).to_dict(),
            ],
        )
        core.write_episode(
            sim,
            [
                SafetyEvent(
                    kind="separation", separation_m=0.3, protective_separation_m=0.5
                ).to_dict()
            ],
        )
    # Contact (minor), stop (near-miss) and the sim separation; the fixture touch is no incident.
    assert ingest_safety_events(db, proto) == 3
    assert ingest_safety_events(db, proto) == 0
    with IncidentStore(db) as log:
        states = {s.current.event_type: s.current for s in log.states()}
        assert log.verify().ok
    contact = states["contact"]
    assert (contact.provisional_severity, contact.occurred_at) == ("minor", "2026-11-02T10:00:03Z")
    assert (contact.source, contact.episode_id, contact.event_ordinal) == (
        "auto",
        real.episode_id,
        0,
    )
    assert contact.robot_id == proto.robot_id and contact.window == proto.window_id
    assert contact.detector_version.endswith(contact.threshold_version)
    assert states["protective_stop"].provisional_severity == "near_miss"
    sim_incident = states["separation"]
    assert (sim_incident.side, sim_incident.counts_toward_window) == ("sim", False)
    assert sim_incident.window == "w-sim"


def test_every_stored_body_is_canonical_json(team):
    """Bodies are encoded by the C encoder for speed; they must equal canonical_json exactly."""
    from embodied_eval.canonical import canonical_json

    team.store.report(make_record(persons=("P-ü1",), treatment="Kühlpack, 2 min"))
    team.review("rita", "INC-1", "major")
    team.exposure(3.5)
    bodies = [r[0] for r in team.store.conn.execute(f"SELECT body FROM {TABLE}")]
    assert len(bodies) > 8
    for body in bodies:
        assert canonical_json(json.loads(body)) == body


def test_plugin_registry_resolves_every_incident_service():
    import inspect

    from embodied_eval.plugins import INCIDENT_LOG, resolve

    services = {name: resolve(target) for name, target in INCIDENT_LOG.items()}
    assert services["open"] is IncidentStore
    assert list(inspect.signature(services["import"]).parameters) == ["db_path", "file"]
    assert list(inspect.signature(services["export"]).parameters) == ["db_path", "out", "window"]
    assert list(inspect.signature(services["window_incidents"]).parameters) == [
        "db_path",
        "window",
    ]
    params = inspect.signature(services["ingest_safety_events"]).parameters
    assert list(params)[:3] == ["db_path", "protocol", "robot_id"]
