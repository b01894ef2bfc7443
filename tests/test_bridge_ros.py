"""Real episodes the harness owns, against the twin robot in a separate process over DDS.

The twin (`python -m real_bridge.twin`) plays a plain ros2_control robot; the harness runs the
reference policy in its own loop, sends JointTrajectory commands, records everything and asks a
declared judge. Each test uses loopback-only discovery and a domain id of its own; fixtures always
stop the twin. Timing is not asserted except the deadman's 200 ms hold, which is the requirement.

Every test that runs an episode does so on the twin's simulated clock (`--sim-time`, the
`twin_sim` profile): the twin advances in lockstep with the harness, so machine load cannot
change what happens in it. Two tests use a twin on the wall clock on purpose: the state stream
(what a real robot's 500 Hz stream looks like) and the reference deadman relay's 200 ms deadline.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec
from embodied_eval.store.signing_keys import create_private_key
from real_bridge.bridge_config import (
    Deadlines,
    LoopSettings,
    ServiceNames,
    load_bridge_config,
    profile_path,
)
from real_bridge.detector import DETECTOR_NAME, DETECTOR_VERSION
from real_bridge.discovery import domain_id_for_test
from real_bridge.entry import Prompter, scripted_reader
from real_bridge.judges import verify_judge_record
from real_bridge.rejudge import rejudge_recording
from real_bridge.robot import JointCommand, Robot
from real_bridge.ros2_backend import Ros2Backend
from real_bridge.ros_node import stamp_to_ns
from real_bridge.twin.process import TwinProcess, shm_leftovers
from tests.recording_builder import strip_recording

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

_counter = itertools.count(10)
ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
#: Short episodes: 60 steps at 50 Hz = 1.2 s of policy loop.
STEPS = 60


@pytest.fixture(scope="module", autouse=True)
def no_shm_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers(before) == set()


@pytest.fixture(scope="module")
def twin():
    """The twin on its simulated clock (for the tests that run episodes)."""
    domain = domain_id_for_test(next(_counter))
    with TwinProcess(domain, sim_time=True) as process:
        yield process


@pytest.fixture(scope="module")
def wall_twin():
    """The twin on the wall clock, as a real robot runs (real time on purpose)."""
    domain = domain_id_for_test(next(_counter))
    with TwinProcess(domain) as process:
        yield process


def spec(episode="e1", task="pick_place/cube_center", attempt=1, seed=3, policy=None, drift=None):
    return EpisodeSpec(
        episode_id=f"{episode}-real-ros2-a{attempt}",
        pair_id=episode,
        side="real",
        family=task.split("/")[0],
        task_id=task,
        seed=seed,
        drift_name="worn" if drift else "nominal",
        drift=drift or {},
        engine="ros2",
        attempt=attempt,
        target_quality=0.8,
        policy=policy or "sim_suites.policies:scripted",
    )


def backend(
    domain, *, judge="oracle", prompter=None, reset_station=True, use_sim_time=True, **loop
):
    """The harness's backend for the twin on `domain`: on the twin's simulated clock (the
    `twin_sim` profile, its 30 s scene-reset deadline: a service call waits on the wall clock)
    unless `use_sim_time=False` (a twin on the wall clock, the `twin` profile)."""
    config = load_bridge_config(profile_path("twin_sim" if use_sim_time else "twin"))
    if not reset_station:
        config = config.replace(services=ServiceNames(scene_reset=""))
    config = config.replace(
        domain_id=domain,
        deadlines=Deadlines(
            discovery_s=20.0,
            service_s=config.deadlines.service_s if use_sim_time else 5.0,
            state_stale_s=1.0,
            judge_s=5.0,
        ),
        loop=LoopSettings(
            **{"judge": judge, "max_steps": STEPS, "use_sim_time": use_sim_time, **loop}
        ),
    )
    return Ros2Backend(None, config=config, prompter=prompter)


def read_mcap(path):
    out: dict[str, list] = {}
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for _, channel, message, decoded in reader.iter_decoded_messages():
            out.setdefault(channel.topic, []).append((message, decoded))
    return out


def test_state_stream_camera_and_a_checked_command(wall_twin):
    """The 500 Hz state stream, the camera and an applied command, as a real robot sends them:
    on the wall clock on purpose."""
    with backend(wall_twin.domain_id, use_sim_time=False) as backend_:
        robot = backend_.ros2_robot()
        assert isinstance(robot, Robot)  # the one robot interface, structurally
        first = robot.get_observation()
        assert first.joint_names[:7] == ARM and first.position.shape == (9,)

        def streamed() -> bool:
            counts = robot.stream_counts()
            return counts.states >= 20 and counts.images > 0

        assert robot.session.wait_for(streamed, 10.0)
        steps = np.diff([s.stamp_ns for s in list(robot.recent_states)])
        assert np.all(steps > 0) and np.all(steps % 2_000_000 == 0)  # 500 Hz: 2 ms apart
        assert robot.image[1:] == (128, 128, "rgb8")
        assert robot.get_observation().image.shape == (128, 128, 3)
        command_id = robot.send_action(JointCommand(first.position[:7] + 0.01, 0.2))
        assert robot.session.wait_for(lambda: robot.applied(command_id) is not None, 3.0)
        applied = robot.applied(command_id)
        assert applied.joint_names == ARM
        np.testing.assert_allclose(applied.positions, first.position[:7] + 0.01)


def test_technician_judge_signs_and_refuses_a_contradiction(twin, tmp_path):
    key = tmp_path / "technician.pem"
    create_private_key(key)
    said: list[str] = []
    # No reset station: the technician confirms the setup ("y"). Then the outcome: the first
    # answer contradicts itself (q = 0.9 ≥ q* = 0.8 but "no"): refused, asked again.
    prompter = Prompter(read=scripted_reader(["y", "0.9", "n", "0.9", "y"]), write=said.append)
    robot = backend(
        twin.domain_id,
        judge="technician",
        prompter=prompter,
        reset_station=False,
        technician_key=str(key),
        technician="Ada",
    )
    with robot:
        outcome = robot.run_episode(spec("tech"), None, tmp_path / "rec")
    ep = outcome.episode
    assert (ep.status, ep.quality, ep.audited_success) == ("ok", 0.9, True), ep.status_reason
    assert any("not accepted" in line and "did not succeed" in line for line in said)
    # The setup listed the manifest's placement for seed 3 before anything moved.
    assert any(line.strip().startswith("object at x=") for line in said)
    assert ep.judge["kind"] == "technician" and ep.judge["name"] == "Ada"
    assert verify_judge_record(dict(ep.judge))
    signed = json.loads(ep.judge["signed"])
    assert (signed["episode_id"], signed["quality"], signed["success"]) == (
        ep.episode_id,
        0.9,
        True,
    )
    tampered = dict(ep.judge, signed=ep.judge["signed"].replace("0.9", "0.95"))
    assert not verify_judge_record(tampered)
    # The harness ran the policy: 60 commands of one 20 ms control period each on the arm
    # controller's topic (plus the homing trajectory, resent if the arm was late).
    control = ep.control
    assert control["loop_steps"] == STEPS and control["loop_policy_calls"] == STEPS
    assert control["loop_latency_p50_ms"] > 0 and "loop_deadline_misses" in control
    rec = read_mcap(ep.artifacts[0].path)
    commands = rec["/joint_trajectory_controller/joint_trajectory"]
    assert len([d for d in policy_commands(rec) if _tfs(d) == pytest.approx(0.02)]) == STEPS
    assert all(tuple(d.joint_names) == ARM for _, d in commands)
    gripper = [d for _, d in rec["/gripper_controller/joint_trajectory"]]
    assert len([d for d in gripper if _tfs(d) == pytest.approx(0.02)]) == STEPS
    images = rec["/camera/image_raw/compressed"]
    assert images and images[0][1].format.endswith("png compressed rgb8")
    assert bytes(images[0][1].data[:8]) == b"\x89PNG\r\n\x1a\n"
    assert rec["/joint_states"] and rec["/force_torque_sensor_broadcaster/wrench"]
    assert rec["/joint_trajectory_controller/applied"]  # the twin's applied-command echo
    verdicts = [json.loads(d.data) for _, d in rec["/embodied_eval/verdict"]]
    assert any(v.get("kind") == "technician" and v.get("signature") for v in verdicts)


def test_detector_judges_from_the_recording_and_rejudge_reproduces_it(twin, tmp_path):
    # One episode per family, judged by the harness's detector from the recorded camera and
    # tracker; the twin's oracle verdict is recorded beside it (measurement only).
    tasks = (
        "pick_place/cube_center",
        "push/block_forward",
        "drawer_open/drawer_center",
        "peg_insert/peg_center",
    )
    with backend(twin.domain_id, judge="detector") as robot:
        episodes = [
            robot.run_episode(spec(f"det{i}", task=task, seed=4 + i), None, tmp_path / "rec").episode
            for i, task in enumerate(tasks)
        ]
    judged = [ep for ep in episodes if "detector" in ep.control]
    assert len(judged) >= 3, [ep.status_reason for ep in episodes]
    for ep in judged:
        detector = ep.control["detector"]
        if ep.status == "ok":
            assert ep.judge == {"kind": "detector", "name": DETECTOR_NAME, "version": DETECTOR_VERSION}
            assert ep.quality == detector["quality"]
        assert ep.control["oracle"]["kind"] == "oracle"  # labelled, never the judge
        replayed = rejudge_recording(ep.artifacts[0].path)
        assert replayed.to_json() == detector  # bit for bit: the same messages, the same verdict
        stripped = tmp_path / f"{ep.episode_id}-stripped.mcap"
        strip_recording(
            ep.artifacts[0].path, stripped, ("/object_pose", "/camera/image_raw/compressed")
        )
        blind = rejudge_recording(stripped)
        assert blind.success is None and blind.detail.startswith("cannot judge")


def test_the_trackers_latency_and_dropouts_show_in_the_recording(tmp_path):
    # A twin whose tracker is 100 ms late; a pick long enough for the hand to come over the cube.
    domain = domain_id_for_test(next(_counter))
    with (
        TwinProcess(domain, tracker_latency_s=0.1, sim_time=True),
        backend(domain, judge="oracle", max_steps=300) as robot,
    ):
        ep = robot.run_episode(spec("lat", seed=5), None, tmp_path / "rec").episode
    rec = read_mcap(ep.artifacts[0].path)

    def delay(topic):
        # The floor of received − stamped: the median of a 500 Hz stream grows with the harness's
        # queue on a loaded machine; its fastest message shows the transport delay alone.
        return min(m.log_time - stamp_to_ns(d.header.stamp) for m, d in rec[topic]) / 1e9

    # Received minus stamped: the joint states' transport delay, the tracker's 100 ms more.
    assert delay("/object_pose") - delay("/joint_states") == pytest.approx(0.1, abs=0.03)
    started = next(
        m.log_time for m, d in rec["/embodied_eval/episode"] if json.loads(d.data)["phase"] == "started"
    )
    times = np.array([m.log_time for m, _ in rec["/object_pose"] if m.log_time > started]) / 1e9
    # The hand over (or holding) the cube: no pose for a while.
    assert np.max(np.diff(times)) > 0.3, (ep.status, ep.status_reason)
    states = [
        dict((kv.key, kv.value) for kv in s.values)
        for _, d in rec["/diagnostics"]
        for s in d.status
        if s.name == "robot/state"
    ]
    assert int(states[-1]["pose_dropouts"]) > 0  # the twin counts what it did not publish


def test_oracle_is_refused_for_a_robot_that_is_not_the_twin():
    franka = load_bridge_config(profile_path("franka_ros2"))
    with pytest.raises(EvalError, match="never accepted"):
        Ros2Backend(None, config=franka, judge="oracle")
    with pytest.raises(EvalError, match="never accepted"):
        franka.replace(loop=LoopSettings(judge="oracle"))


SEEN: list[dict] = []


class WildChunk:
    """A joint-space policy whose second chunk jumps joint 1 by 0.5 rad in one step."""

    name = "tests.test_bridge_ros:wild_chunk"
    command_space = "joint_position"

    def reset(self, seed=None):
        self.calls = 0

    def act(self, obs):
        self.calls += 1
        SEEN.append({k: np.shape(v) for k, v in obs.items()})
        if self.calls == 1:  # hold exactly where it first saw the arm (no measured jitter)
            self.q0 = np.asarray(obs["joint_pos"][:7], dtype=float)
        q = self.q0
        chunk = np.repeat(q[None, :], 3, axis=0)
        if self.calls == 2:
            chunk[2, 0] += 0.5  # 25 rad/s at 50 Hz: far above 2.175 rad/s
        return chunk


def wild_chunk(task_id=None, **_):
    return WildChunk()


def test_a_violating_chunk_is_not_sent_and_the_hold_is_accepted(twin, tmp_path):
    with backend(twin.domain_id) as robot:
        out = robot.run_episode(
            spec("wild", policy="tests.test_bridge_ros:wild_chunk"), None, tmp_path / "rec"
        )
        ep = out.episode
        assert ep.status == "safety_stop" and "velocity" in ep.status_reason
        # The policy saw the joint state, the wrench and the camera, as the loop observes them.
        assert SEEN[0]["joint_pos"] == (9,) and SEEN[0]["wrench"] == (6,)
        assert SEEN[0]["image"] == (128, 128, 3)
        (event,) = out.safety_events
        assert event.kind == "protective_stop" and event.source_rule == "harness.command_check"
        rec = read_mcap(ep.artifacts[0].path)
        commands = policy_commands(rec)
        # The 3 targets of the first chunk (20 ms each); nothing of the second; then the hold.
        assert len([d for d in commands if _tfs(d) == pytest.approx(0.02)]) == 3
        hold = commands[-1]
        assert (hold.header.stamp.sec, hold.header.stamp.nanosec) == (0, 0)
        tfs = hold.points[0].time_from_start
        assert tfs.sec + tfs.nanosec * 1e-9 == pytest.approx(0.1)
        assert tuple(hold.joint_names) == ARM and len(hold.points) == 1
        # The twin applies what a joint_trajectory_controller accepts, and refused nothing.
        link = robot.ros2_robot()
        assert link.session.wait_for(lambda: _robot_state(link).get("commands_rejected"), 3.0)
        assert _robot_state(link)["commands_rejected"] == "0"


def policy_commands(rec):
    """The arm commands recorded after the episode's "started" event (not homing's)."""
    started = min(
        m.log_time
        for m, d in rec["/embodied_eval/episode"]
        if json.loads(d.data).get("phase") == "started"
    )
    arm = rec["/joint_trajectory_controller/joint_trajectory"]
    return [d for m, d in arm if m.log_time >= started]


def _tfs(trajectory):
    t = trajectory.points[-1].time_from_start
    return t.sec + t.nanosec * 1e-9


def _robot_state(link):
    readings, _ = link.safety_readings(0)
    states = [dict(r.values) for r in readings if r.name == "robot/state"]
    return states[-1] if states else {}


def test_reference_deadman_relay_sends_an_accepted_hold_within_200_ms(wall_twin):
    """20 heartbeat losses: the relay holds within 200 ms of the last heartbeat it received,
    every time, by its own log (a safety property: never rerun). A wall-clock deadline, so on
    the wall clock on purpose."""
    from real_bridge.deadman_relay import DeadmanRelay

    config = load_bridge_config(profile_path("twin")).replace(domain_id=wall_twin.domain_id)
    relay = DeadmanRelay(config)
    try:
        # Its heartbeat runs while connected.
        with backend(wall_twin.domain_id, use_sim_time=False) as robot:
            link = robot.ros2_robot()
            for trial in range(1, 21):
                # Armed: the heartbeat seen and the posture known (the hold needs it).
                assert link.session.wait_for(lambda: relay.armed, 10.0)
                link.stop_heartbeat()
                assert relay.session.wait_for(lambda t=trial: len(relay.holds) >= t, 5.0)
                link.start_heartbeat()
        gaps_ms = [
            (hold - beat) / 1e6
            for hold, beat in zip(relay.holds, relay.last_beat_before_hold, strict=True)
        ]
        assert len(gaps_ms) >= 20 and all(g < 200.0 for g in gaps_ms[:20]), gaps_ms
        hold = relay.hold_message()
        assert (hold.header.stamp.sec, hold.header.stamp.nanosec) == (0, 0)
        assert tuple(hold.joint_names) == ARM and _tfs(hold) == pytest.approx(0.1)
    finally:
        relay.close()


#: The protocol's two-week drift (an unmodelled 0.5 kg tool, firmware 5.0.0: servo gains × 0.7) on an
#: arm whose randomized gains came out at half.
WORN = {"payload_kg": 0.5, "firmware": "5.0.0", "controller_gain_scale": 0.5}




def test_homing_after_an_episode_on_a_worn_arm_that_ended_low(twin, tmp_path):
    # Episode 1 sets up the worn scene (its servos sag under the unknown tool) and ends with the
    # hand low over the table. Episode 2's homing runs in that scene, before its own reset: the
    # hand is lifted first, and the arm settles short of home by the sag — farther than the
    # 0.02 rad a straight "exactly there" criterion waited for in vain — and counts as homed.
    with backend(twin.domain_id) as robot:
        low = spec("low", policy="tests.joint_policies:reach_down", drift=WORN)
        first = robot.run_episode(low, None, tmp_path / "rec").episode
        assert first.status == "ok", first.status_reason
        tcp_z = robot.adapter().tcp_of(robot.ros2_robot().get_observation().position[:7])[2]
        assert tcp_z < 0.2, tcp_z  # the hand ended low (sagging below LOW_Q's 0.131 m)
        second = robot.run_episode(spec("after", seed=5), None, tmp_path / "rec").episode
    assert second.status == "ok", second.status_reason
    control = second.control
    assert control["homing_retreats"] >= 1 and control["homing_trajectories"] == 1, control
    assert 0.02 < control["homing_residual_rad"] <= 0.15, control


def test_tool_use_episode_end_to_end(twin, tmp_path):
    """The twin resets to the hook scene and tracks the block; the harness runs the reference
    policy on it for a whole episode and the harness's detector judges the block (the scored
    object, not the grasped hook)."""
    with backend(twin.domain_id, judge="detector", max_steps=450) as robot:
        outcome = robot.run_episode(spec("tool", task="tool_use/hook_center"), None, tmp_path)
    ep = outcome.episode
    assert ep.family == "tool_use" and ep.status in ("ok", "safety_stop"), ep.status_reason
    if ep.status == "ok":  # a protective stop ends the episode before any judge is asked
        assert (ep.judge["kind"], ep.judge["name"]) == ("detector", "scene-detector")
    # The twin's tracker saw the block out of reach (x ≈ 0.83 m) where the setup placed it.
    assert ep.scene["source"] == "tracker"
    assert abs(ep.scene["object_pos_m"][0] - 0.83) < 0.01
    assert 0.0 <= ep.quality <= 1.0 and ep.control["loop_steps"] > 0
