"""The ROS 2 bridge against the twin robot in a separate process (one DDS domain per test).

Each test starts its own twin (`python -m real_bridge.twin`) on loopback-only discovery and a
domain id of its own, and the fixture always stops it (SIGTERM, then SIGKILL). No test asserts
on timing: deadlines are given and the outcome (status, reason, records) is checked.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec
from embodied_eval.store import Store
from real_bridge.bridge_config import BridgeConfig, Deadlines, ServiceNames, TopicNames
from real_bridge.discovery import domain_id_for_test
from real_bridge.ros2_backend import Ros2Backend
from real_bridge.twin.process import TwinProcess, shm_leftovers

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

_counter = itertools.count()
#: Faster than real time so episodes take a couple of seconds; the physics is unchanged.
TIME_SCALE = 3.0
#: Panda joint 1 upper limit in pybullet_data/franka_panda/panda.urdf (<limit upper="2.9671">).
JOINT1_UPPER = 2.9671


@pytest.fixture
def domain():
    return domain_id_for_test(next(_counter))


@pytest.fixture(scope="module", autouse=True)
def no_shm_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers(before) == set()


def spec(episode="e1", task="pick_place/cube_center", attempt=1, seed=3):
    return EpisodeSpec(
        episode_id=f"{episode}-real-ros2-a{attempt}",
        pair_id=episode,
        side="real",
        family=task.split("/")[0],
        task_id=task,
        seed=seed,
        drift_name="nominal",
        engine="ros2",
        attempt=attempt,
        target_quality=0.8,
    )


def backend(domain, **deadlines):
    base = {"discovery_s": 20.0, "service_s": 5.0, "state_stale_s": 1.0, "episode_s": 60.0}
    base.update(deadlines)
    return Ros2Backend(None, config=BridgeConfig(domain_id=domain, deadlines=Deadlines(**base)))


def read_mcap(path):
    out: dict[str, list] = {}
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for _, channel, message, decoded in reader.iter_decoded_messages():
            out.setdefault(channel.topic, []).append((message, decoded))
    return out


def test_state_stream_and_applied_command(domain):
    with TwinProcess(domain) as twin, backend(domain) as robot:
        assert twin.ready["joints"][0] == "panda_joint1"
        first = robot.get_observation()
        assert first.joint_names[:7] == tuple(f"panda_joint{i}" for i in range(1, 8))
        assert first.position.shape == (9,) and np.all(np.isfinite(first.position))
        link = robot.link
        assert link.session.wait_for(lambda: link.state_count >= 20, 10.0)
        stamps = [s.stamp_ns for s in list(link.recent_states)]
        steps = np.diff(stamps)
        assert np.all(steps > 0)
        assert np.all(steps % 2_000_000 == 0)  # 500 Hz ticks of the twin's clock: 2 ms apart
        robot.enable()
        applied = robot.send_action([5.0, *first.position[1:7]])
        assert applied.confirmed
        assert applied.positions[0] == JOINT1_UPPER  # clipped to the URDF limit
        np.testing.assert_allclose(applied.positions[1:7], first.position[1:7])
        assert robot.safety_state().protective_stop is False


def test_episode_end_to_end_with_verdict_faults_and_recording(domain, tmp_path):
    with (
        TwinProcess(domain, time_scale=TIME_SCALE, faults="perception_dropout") as twin,
        backend(domain) as robot,
    ):
        outcome = robot.run_episode(spec(), None, tmp_path / "rec")
        # Running the same episode id again (as after a crash before it was stored) must wait for
        # the new verdict, not take the first one: had it ended at once, the recording would
        # have stopped before the new verdict was published.
        again = robot.run_episode(spec(), None, tmp_path / "rerun").episode
        assert again.status == "ok"
        (rerun_verdict,) = read_mcap(again.artifacts[0].path)["/episode/verdict"]
        assert json.loads(rerun_verdict[1].data)["quality"] == again.quality
    ep = outcome.episode
    assert ep.status == "ok", ep.status_reason
    assert (ep.side, ep.engine, ep.seed, ep.attempt) == ("real", "ros2", 3, 1)
    assert 0.0 <= ep.quality <= 1.0 and ep.success == (ep.quality >= 0.8)
    assert ep.duration_s > 0 and ep.actions > 0
    (fault,) = ep.faults
    assert fault.kind == "perception_dropout" and fault.episode_id == ep.episode_id
    assert ep.control["twin_gap"]["friction_scale"] == 0.85  # the twin's default reality gap
    assert outcome.safety_events == ()
    assert twin.exit_info["episodes"] == 2  # each run ran once on the twin, which exited cleanly
    assert twin.proc.returncode == 0

    (artifact,) = ep.artifacts
    data = (tmp_path / "rec" / f"{ep.episode_id}.mcap").read_bytes()
    assert artifact.kind == "mcap" and hashlib.sha256(data).hexdigest() == artifact.sha256
    recorded = read_mcap(artifact.path)
    counts = {topic: len(items) for topic, items in recorded.items()}
    claimed = ep.control["bridge_recorded_messages"]
    assert counts == {topic: n for topic, n in claimed.items() if n > 0}
    assert counts["/joint_states"] >= ep.control["bridge_state_messages"] > 0
    assert counts["/wrench"] > 0
    manifest = json.loads(recorded["/episode/manifest"][-1][1].data)
    assert manifest["episode"]["episode_id"] == ep.episode_id
    verdicts = [json.loads(m.data) for _, m in recorded["/episode/verdict"]]
    ours = [v for v in verdicts if v["episode_id"] == ep.episode_id]
    assert len(ours) == 1 and ours[0]["quality"] == ep.quality
    assert ours[0]["faults"][0]["kind"] == "perception_dropout"
    names = recorded["/joint_states"][0][1].name
    assert list(names[:2]) == ["panda_joint1", "panda_joint2"]

    with Store(tmp_path / "t.db") as store:
        assert store.write_episode(ep, [e.to_dict() for e in outcome.safety_events])
        assert store.write_episode(ep) is False  # idempotent by episode id
        assert store.get_episode(ep.episode_id) == ep


def test_protective_stop_becomes_a_safety_event_and_a_safety_stop(domain, tmp_path):
    # Grasping the cube presses ~15 N on the robot; a 5 N force limit trips the twin's monitor.
    with TwinProcess(domain, time_scale=TIME_SCALE, force_limit_n=5.0), backend(domain) as robot:
        outcome = robot.run_episode(spec(), None, tmp_path)
        state = robot.safety_state()
    ep = outcome.episode
    assert ep.status == "safety_stop" and not ep.success and ep.scored
    assert "protective_stop" in ep.status_reason
    stops = [e for e in outcome.safety_events if e.kind == "protective_stop"]
    assert len(stops) == 1  # republished while latched, counted once
    stop = stops[0]
    assert stop.contact_force_n is not None and stop.contact_force_n > 5.0
    assert stop.stop_category == 2 and stop.source_rule == "twin.force_limit"
    assert 0.0 < stop.t_s <= ep.actions * 0.02 + 1e-9  # within the episode's control steps
    assert state.protective_stop  # still latched until the next reset
    diagnostics = read_mcap(ep.artifacts[0].path)["/diagnostics"]
    assert any(s.name == "safety/protective_stop" for _, m in diagnostics for s in m.status)


def test_killed_robot_gives_aborted_and_the_retry_runs_on_a_new_twin(domain, tmp_path):
    robot = backend(domain, state_stale_s=0.5, safe_stop_s=0.5)
    try:
        with TwinProcess(domain, time_scale=1.0) as twin:
            robot.connect()
            link = robot.link

            def kill_mid_episode() -> None:
                # The twin reports its phase in `robot/state` diagnostics (2 Hz); a pick takes
                # ~4 s, so half a second after "running" is mid-episode.
                def running() -> bool:
                    readings, _ = link.diagnostics_since(0)
                    return any(("phase", "running") in r.values for r in readings)

                while not running() and twin.alive():
                    time.sleep(0.01)
                time.sleep(0.5)
                twin.kill()

            killer = threading.Thread(target=kill_mid_episode, daemon=True)
            killer.start()
            outcome = robot.run_episode(spec(), None, tmp_path / "a1")
            killer.join(10)
            assert not twin.alive()
        ep = outcome.episode
        assert ep.status == "aborted" and not ep.scored, ep.status_reason
        assert "robot stopped answering: no joint state" in ep.status_reason, ep.status_reason
        assert "safe stop" in ep.status_reason  # the stop/disable calls could not be confirmed
        kept = read_mcap(ep.artifacts[0].path)  # what was received before the kill is kept
        assert len(kept["/joint_states"]) > 0
        kept_bytes = Path(ep.artifacts[0].path).read_bytes()
        assert hashlib.sha256(kept_bytes).hexdigest() == ep.artifacts[0].sha256
        with TwinProcess(domain, time_scale=TIME_SCALE):
            retry = robot.run_episode(spec(attempt=2), None, tmp_path / "a2")
        assert retry.episode.status == "ok", retry.episode.status_reason
        assert retry.episode.attempt == 2 and retry.episode.seed == ep.seed
    finally:
        robot.disconnect()


def test_frozen_robot_is_aborted_within_the_deadlines(domain, tmp_path):
    with (
        TwinProcess(domain, hang_after_s=0.3),
        backend(domain, state_stale_s=0.5, safe_stop_s=0.5) as robot,
    ):
        outcome = robot.run_episode(spec(), None, tmp_path)
    ep = outcome.episode
    assert ep.status == "aborted"
    assert "no joint state on /joint_states" in ep.status_reason
    assert "did not answer" in ep.status_reason  # stop and disable calls hit their deadline


def test_wrong_names_fail_with_a_clear_error_within_the_deadline(domain):
    wrong = BridgeConfig(
        domain_id=domain,
        topics=TopicNames(joint_state="/franka/joint_states"),
        services=ServiceNames(reset="/episode/reset_to_manifest"),
        deadlines=Deadlines(discovery_s=1.5),
    )
    with TwinProcess(domain):
        started = time.monotonic()
        with pytest.raises(EvalError) as err:
            Ros2Backend(None, config=wrong).connect()
        assert time.monotonic() - started >= 1.5  # it waited for the deadline, then gave up
    message = str(err.value)
    assert "no messages on /franka/joint_states" in message
    assert "service /episode/reset_to_manifest not available" in message
    assert "/joint_states" in message.split("topics seen:")[1]  # says what is there instead
    assert "\n" not in message
