"""The data contract: validation of every field and enum, z derivation, JSON round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodied_eval.errors import EvalError
from embodied_eval.records import (
    STATUSES,
    Artifact,
    Episode,
    EpisodeSpec,
    ExposureEntry,
    Fault,
    Incident,
    SafetyEvent,
    first_attempts,
    severity_rank,
)
from tests.conftest import make_episode

SHA = "a" * 64


@pytest.mark.parametrize(
    ("quality", "target", "status", "z"),
    [
        (0.8, 0.8, "ok", True),  # q = q* counts as success (z = 1{q ≥ q*})
        (0.79, 0.8, "ok", False),
        (1.0, 0.8, "safety_stop", False),  # a safety stop forces z = 0
        (1.0, 0.8, "out_of_bounds", False),  # so does a workspace breach
        (1.0, 0.8, "aborted", False),
        (1.0, 0.8, "error", False),
    ],
)
def test_success_is_derived_from_quality_target_and_status(quality, target, status, z):
    ep = make_episode(quality=quality, target_quality=target, status=status)
    assert ep.success is z


def test_aborted_and_error_are_not_scored():
    assert make_episode(status="ok").scored
    assert make_episode(status="safety_stop").scored
    assert make_episode(status="out_of_bounds").scored
    assert not make_episode(status="aborted").scored
    assert not make_episode(status="error").scored


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("episode_id", ""),
        ("pair_id", "  "),
        ("side", "both"),
        ("status", "crashed"),
        ("quality", 1.01),
        ("quality", -0.1),
        ("quality", float("nan")),
        ("target_quality", 2.0),
        ("seed", 1.5),
        ("seed", "seven"),
        ("duration_s", -1.0),
        ("interventions", -1),
        ("actions", 2.5),
        ("attempt", -1),
        ("energy_wh", -0.5),
        ("qc", 1.5),
        ("started_at", "yesterday"),
        ("drift", ["not", "a", "dict"]),
        ("cost", {"energy": "cheap"}),
        ("audited_success", "yes"),
        ("engine", ""),
    ],
)
def test_episode_rejects_bad_fields_naming_the_field(field, value):
    with pytest.raises(EvalError) as info:
        make_episode(**{field: value})
    assert info.value.key is not None
    assert info.value.key.split(".")[0] == field
    assert field in str(info.value)


def test_every_status_is_accepted():
    for status in STATUSES:
        assert make_episode(status=status).status == status


def test_fault_and_artifact_validation():
    with pytest.raises(EvalError, match="recovered_autonomously"):
        Fault(kind="grasp_slip", recovered_autonomously="yes")  # type: ignore[arg-type]
    with pytest.raises(EvalError, match="repair_s"):
        Fault(kind="grasp_slip", recovered_autonomously=False, repair_s=-3)
    with pytest.raises(EvalError, match="kind"):
        Fault(kind="", recovered_autonomously=True)
    with pytest.raises(EvalError, match="sha256"):
        Artifact(path="x.mcap", sha256="abc")
    with pytest.raises(EvalError, match="sha256"):
        Artifact(path="x.mcap", sha256="A" * 64)


def test_incident_validation():
    ok = Incident(incident_id="i1", occurred_at="2026-11-02T10:00:00Z", severity="minor")
    assert ok.counts_toward_window
    with pytest.raises(EvalError, match="severity"):
        Incident(incident_id="i1", occurred_at="2026-11-02T10:00:00Z", severity="serious")
    with pytest.raises(EvalError, match="source"):
        Incident(
            incident_id="i1", occurred_at="2026-11-02T10:00:00Z", severity="minor", source="robot"
        )
    with pytest.raises(EvalError, match="occurred_at"):
        Incident(incident_id="i1", occurred_at="noon", severity="minor")
    assert [severity_rank(s) for s in ("near_miss", "minor", "major", "critical")] == [0, 1, 2, 3]


def test_exposure_entry_checks_hours_against_the_period():
    entry = ExposureEntry(
        entry_id="x1",
        window="w",
        start="2026-11-02T08:00:00Z",
        end="2026-11-02T12:00:00Z",
        active_hours=3.5,
        how_measured="robot_clock",
    )
    assert entry.active_hours == 3.5
    with pytest.raises(EvalError, match="active_hours"):
        entry.replace(active_hours=4.5)  # the period is only 4 h long
    with pytest.raises(EvalError, match="end"):
        entry.replace(end="2026-11-02T07:00:00Z")


def test_safety_event_and_spec_validation():
    ev = SafetyEvent(
        kind="contact", contact_force_n=150.0, body_region="chest", contact_type="transient"
    )
    assert SafetyEvent.from_dict(ev.to_dict()) == ev
    with pytest.raises(EvalError, match="kind"):
        SafetyEvent(kind="bump")
    with pytest.raises(EvalError, match="contact_type"):
        SafetyEvent(kind="contact", contact_type="long")
    spec = EpisodeSpec(
        episode_id="e",
        pair_id="p",
        side="sim",
        family="push",
        task_id="push/block_left",
        seed=3,
        drift_name="nominal",
    )
    assert EpisodeSpec.from_json(spec.to_json()) == spec


def test_to_episode_copies_what_the_manifest_row_fixes_and_fields_override():
    drift = {"day": 14}
    spec = EpisodeSpec(
        episode_id="p1-real-ur5-a2",
        pair_id="p1",
        side="real",
        family="push",
        task_id="push/block_0",
        seed=11,
        drift_name="worn",
        drift=drift,
        engine="ur5",
        policy="pkg:pol",
        attempt=2,
        window="w1",
        protocol_hash="h1",
        target_quality=0.6,
    )
    ep = spec.to_episode(0.7, status="ok", duration_s=3.0, actions=5)
    copied = (ep.episode_id, ep.pair_id, ep.side, ep.family, ep.task_id, ep.seed, ep.engine)
    assert copied == ("p1-real-ur5-a2", "p1", "real", "push", "push/block_0", 11, "ur5")
    assert (ep.policy, ep.attempt, ep.window, ep.protocol_hash) == ("pkg:pol", 2, "w1", "h1")
    assert (ep.quality, ep.target_quality, dict(ep.drift)) == (0.7, 0.6, {"day": 14})
    assert (ep.status, ep.duration_s, ep.actions) == ("ok", 3.0, 5)
    assert ep.success  # z = 1{0.7 >= 0.6} with status ok
    # Fields the row does not fix keep the Episode defaults.
    assert (ep.qc, ep.faults, ep.artifacts, dict(ep.control)) == (None, (), (), {})
    # drift is a copy: changing the row's dict afterwards leaves the record alone.
    drift["day"] = 99
    assert dict(ep.drift) == {"day": 14}
    # A field the row fixes can be overridden (the engine a bridge really ran, the window a
    # backend fills in, a drift carrying its name).
    over = spec.to_episode(
        0.5, engine="ros2", window="w2", target_quality=0.4, drift={"name": "worn"}
    )
    assert (over.engine, over.window, over.target_quality) == ("ros2", "w2", 0.4)
    assert dict(over.drift) == {"name": "worn"}
    assert over.success  # z = 1{0.5 >= 0.4}: the overriding q* is the one used
    assert (over.episode_id, over.protocol_hash) == ("p1-real-ur5-a2", "h1")
    # The Episode's own validation still applies.
    with pytest.raises(EvalError, match="quality"):
        spec.to_episode(1.5)


def test_first_attempts_keeps_the_lowest_attempt_per_pair_and_side():
    first = make_episode(episode_id="e1", attempt=1, quality=0.1)
    retry = make_episode(episode_id="e2", attempt=2, quality=0.95)
    other = make_episode(episode_id="e3", pair_id="p0002", attempt=1)
    kept = first_attempts([retry, first, other])
    assert sorted(e.episode_id for e in kept) == ["e1", "e3"]


def test_unknown_field_in_json_is_rejected():
    data = make_episode().to_dict()
    data["colour"] = "red"
    with pytest.raises(EvalError, match="colour"):
        Episode.from_dict(data)


finite = st.floats(min_value=0, max_value=1, allow_nan=False)
# Cc and Zs excluded: U+0085 and U+00A0 are whitespace to str.strip(), so an id made of them
# is (rightly) rejected as empty.
text = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_categories=("Cc", "Zs")),
    min_size=1,
    max_size=12,
)
json_values = st.one_of(
    st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False), text, st.booleans()
)


@st.composite
def episodes(draw):
    faults = draw(
        st.lists(
            st.builds(
                Fault,
                kind=st.sampled_from(["grasp_slip", "actuator_stall", "perception_dropout"]),
                recovered_autonomously=st.booleans(),
                repair_s=st.floats(0, 1e4, allow_nan=False),
            ),
            max_size=3,
        )
    )
    return make_episode(
        episode_id=draw(text),
        pair_id=draw(text),
        **draw(st.sampled_from([{"side": "sim", "engine": "mujoco"}, {"side": "real"}])),
        seed=draw(st.integers(0, 2**63 - 1)),
        quality=draw(finite),
        target_quality=draw(finite),
        status=draw(st.sampled_from(STATUSES)),
        duration_s=draw(st.floats(0, 1e5, allow_nan=False)),
        drift=draw(st.dictionaries(text, json_values, max_size=3)),
        randomization=draw(st.dictionaries(text, json_values, max_size=3)),
        faults=tuple(faults),
        attempt=draw(st.integers(1, 5)),
        artifacts=(Artifact(path="rec/e.mcap", sha256=SHA, kind="mcap", size_bytes=10),),
        cost=draw(st.dictionaries(text, st.floats(0, 1e3, allow_nan=False), max_size=3)),
        qc=draw(st.one_of(st.none(), finite)),
    )


@settings(max_examples=60, deadline=None)
@given(episodes())
def test_episode_json_round_trip(ep):
    again = Episode.from_json(ep.to_json())
    assert again == ep
    assert again.success == ep.success
    assert json.loads(again.to_json()) == json.loads(ep.to_json())


def test_episode_judge_is_checked_and_round_trips():
    from embodied_eval.records import Episode

    base = dict(
        episode_id="e-real-ros2-a1", pair_id="e", side="real", family="push",
        task_id="push/block_left", seed=1, policy="p", engine="ros2", quality=0.9,
        target_quality=0.8,
    )  # fmt: skip
    detector = {"kind": "detector", "name": "cube-on-target", "version": "1.2"}
    ep = Episode(**base, judge=detector)
    assert Episode.from_dict(ep.to_dict()) == ep
    for bad in (
        {"kind": "vibes", "name": "x", "version": ""},
        {"kind": "detector", "name": "", "version": "1"},
        {"kind": "technician", "name": "Ada", "version": ""},  # unsigned
        {"kind": "detector", "name": "x", "version": "1", "colour": "red"},
    ):
        with pytest.raises(EvalError):
            Episode(**base, judge=bad)
