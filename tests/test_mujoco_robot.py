"""The episode loop, homing and the checks on the in-process MuJoCo robot (the twin's physics, no
ROS), through the one `Robot` interface. Every time asserted is on the robot's own clock
(physics steps of 2 ms; 50 Hz control ticks of 20 ms); safety tests are never retried."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.records import EpisodeSpec
from embodied_eval.runner.backend import backend_target
from real_bridge.bridge_config import load_bridge_config, profile_path
from real_bridge.episodes import EpisodeBackend
from real_bridge.interface import HOLD_TIME_FROM_START_S
from real_bridge.mujoco_robot import MujocoRobot, mujoco_backend
from real_bridge.robot import JointCommand, Robot
from real_bridge.twin.settings import Monitors, TwinSettings

pytestmark = pytest.mark.timeout(300)

ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
#: What the policies of this module can reach (set by each test).
HANDLE: dict[str, MujocoRobot] = {}


def spec(episode="e1", task="pick_place/cube_center", seed=3, policy=None):
    return EpisodeSpec(
        episode_id=f"{episode}-real-mujoco_robot-a1",
        pair_id=episode,
        side="real",
        family=task.split("/")[0],
        task_id=task,
        seed=seed,
        drift_name="nominal",
        engine="mujoco_robot",
        target_quality=0.8,
        policy=policy or "sim_suites.policies:scripted",
    )


def twin_config(max_steps=60, **deadlines):
    config = load_bridge_config(profile_path("twin"))
    return config.replace(
        loop=dataclasses.replace(config.loop, max_steps=max_steps),
        deadlines=dataclasses.replace(config.deadlines, **deadlines),
    )


def backend(config, monitors=None):
    settings = TwinSettings(monitors=monitors or Monitors())
    robot = MujocoRobot(config, settings)
    HANDLE["robot"] = robot
    return EpisodeBackend(lambda: robot), robot


class Hold:
    """A joint-space policy that keeps the arm where it first saw it; at its `stall_at`-th call it
    takes `stall_s` of the robot's clock, at its `lose_at`-th the robot stops answering, and its
    `wild_at`-th chunk puts joint 1 at 3.0 rad (its limit is 2.8973 rad)."""

    name = "tests.test_mujoco_robot:hold"
    command_space = "joint_position"

    def __init__(self, stall_at=0, stall_s=0.0, lose_at=0, wild_at=0):
        self.stall_at, self.stall_s, self.lose_at, self.wild_at = stall_at, stall_s, lose_at, wild_at

    def reset(self, seed=None):
        self.calls = 0

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            self.q0 = np.asarray(obs["joint_pos"][:7], dtype=float)
        robot = HANDLE["robot"]
        if self.calls == self.stall_at:
            robot.sleep(self.stall_s)
        if self.calls == self.lose_at:
            robot.answers_for_s = robot.now_s()
        chunk = np.repeat(self.q0[None, :], 3, axis=0)
        if self.calls == self.wild_at:
            chunk[2, 0] = 3.0
        return chunk


def stalls(task_id=None, **_):
    return Hold(stall_at=5, stall_s=0.115)


def loses_the_robot(task_id=None, **_):
    return Hold(lose_at=10)


def wild(task_id=None, **_):
    return Hold(wild_at=2)




def test_the_mujoco_backend_is_registered_and_runs_an_episode_on_the_robots_clock():
    assert backend_target("mujoco") == "real_bridge.mujoco_robot:mujoco_backend"
    with mujoco_backend(None, max_steps=60) as runner:
        robot = runner.require_robot()
        assert isinstance(robot, Robot)
        ep = runner.run_episode(spec(), None, None).episode
    assert ep.status == "ok", ep.status_reason
    assert ep.engine == "mujoco_robot" and ep.judge["kind"] == "oracle"
    assert ep.control["loop_steps"] == 60 and ep.control["loop_deadline_misses"] == 0
    # 60 ticks at 50 Hz: the last command goes out (60 − 1) / 50 = 1.18 s after the first, and
    # the robot streamed one joint state per 2 ms physics step meanwhile: 1.18 / 0.002 = 590.
    assert ep.duration_s == pytest.approx(1.18, abs=1e-9)
    assert ep.control["bridge_state_messages"] == 590
    assert ep.scene["source"] == "tracker"


def test_past_the_episode_deadline_the_loop_aborts_and_holds_the_arm():
    config = twin_config(max_steps=1000, episode_s=0.51)
    runner, robot = backend(config)
    with runner:
        ep = runner.run_episode(spec(policy="tests.test_mujoco_robot:stalls"), None, None).episode
        # One call per chunk of 3: the 5th call is the 13th step, at 12 × 0.02 = 0.24 s. It takes
        # 0.115 s of robot time (58 physics steps, 0.116 s): sent at 0.356 s, past that tick's
        # deadline of 0.26 s — one miss; the loop then skips the int(0.096 / 0.02) = 4 ticks it
        # missed and ticks on from 0.356 s. The first tick past 0.51 s is 0.356 + 8 × 0.02 =
        # 0.516 s: 13 + 8 = 21 commands went out.
        assert ep.status == "aborted" and "deadline of 0.51 s" in ep.status_reason
        assert ep.control["abort_cause"] == "robot_lost" and ep.control["loop_steps"] == 21
        assert ep.control["loop_deadline_misses"] == 1 and ep.control["loop_skipped_ticks"] == 4
        t_hold, hold_id, hold_q, hold_s = robot.commands[-1]
        assert hold_s == HOLD_TIME_FROM_START_S and hold_q is not None
        assert t_hold == pytest.approx(robot.now_s(), abs=1e-9)  # sent as the loop ended
        robot.sleep(0.1)
        assert robot.applied(hold_id) is not None  # a hold the robot follows
        robot.sleep(1.0)
        assert np.max(np.abs(robot.get_observation().velocity[:7])) < 0.05


def test_a_robot_that_stops_answering_is_lost_and_gets_no_hold_from_a_stale_posture():
    config = twin_config(max_steps=1000, state_stale_s=0.45)
    runner, robot = backend(config)
    with runner:
        ep = runner.run_episode(
            spec(policy="tests.test_mujoco_robot:loses_the_robot"), None, None
        ).episode
    # Lost at the 10th call (a chunk of 3 per call: the 28th step, 27 × 0.02 = 0.54 s): the
    # first tick whose state is older than 0.45 s is at 1.00 s (0.46 s old; 0.98 s gives 0.44 s):
    # ticks 0..49 sent, 50 commands.
    assert ep.status == "aborted" and ep.control["abort_cause"] == "robot_lost"
    assert "no joint state for 0.46 s" in ep.status_reason, ep.status_reason
    assert "hold not sent" in ep.status_reason and ep.control["loop_steps"] == 50
    assert robot.commands[-1][3] != HOLD_TIME_FROM_START_S


def test_an_out_of_limit_chunk_is_refused_before_any_of_it_is_sent():
    runner, robot = backend(twin_config())
    with runner:
        out = runner.run_episode(spec(policy="tests.test_mujoco_robot:wild"), None, None)
    ep = out.episode
    assert ep.status == "safety_stop"
    assert "panda_joint1: target 3.0000 rad outside the position limits" in ep.status_reason
    (event,) = out.safety_events
    assert event.kind == "protective_stop" and event.source_rule == "harness.command_check"
    # The first chunk's 3 targets went out (one per tick), nothing of the second, then the hold.
    assert ep.control["loop_steps"] == 3
    sent = [q for _, _, q, _ in robot.commands if q is not None]
    assert max(q[0] for q in sent) < 2.8973
    assert robot.commands[-1][3] == HOLD_TIME_FROM_START_S


def test_a_protective_stop_from_the_robot_ends_the_episode_and_latches_until_the_reset():
    runner, robot = backend(twin_config(max_steps=100), Monitors(stop_at_s=0.31))
    with runner:
        out = runner.run_episode(spec(), None, None)
        ep = out.episode
        assert ep.status == "safety_stop" and "stop drill" in ep.status_reason
        (event,) = out.safety_events
        assert event.kind == "protective_stop" and event.source_rule == "twin.stop_drill"
        # The drill fires on the first physics step at or after 0.31 s of the episode (the 2 ms
        # step grid: 0.310 or 0.312 s); the loop sees it at the next tick, 0.32 s: 16 ticks sent.
        assert 0.31 - 1e-9 <= event.t_s <= 0.312 + 1e-9
        assert ep.control["loop_steps"] == 16
        assert robot.safety_state().protective_stop and robot.mode == "stopped"
        robot.send_action(JointCommand(np.asarray(config_home(robot)), 1.0))
        assert robot.commands_ignored >= 1  # a latched robot follows no command


def config_home(robot):
    return robot.config.robot.home


def test_the_deadman_holds_within_one_physics_step_of_its_100_ms_on_the_robots_clock():
    robot = MujocoRobot(twin_config())
    with robot:
        robot.sleep(0.2)
        assert robot.safety_state().deadman_hold is False
        robot.stop_heartbeat()
        last_beat = robot.last_heartbeat_s
        robot.sleep(0.3)
        state = robot.safety_state()
        assert state.deadman_hold and robot.mode == "hold"
        # Checked every 2 ms step: the first step more than 100 ms after the last beat.
        assert robot.held_at_s - last_beat == pytest.approx(0.102, abs=1e-9)
        holds = [r for r in robot.safety_readings(0)[0] if dict(r.values).get("mode") == "hold"]
        assert len(holds) == 1 and holds[0].received_s == pytest.approx(robot.held_at_s)
        q_held = robot.get_observation().position[:7].copy()
        robot.send_action(JointCommand(q_held + 0.2, 0.2))  # ignored while unsupervised
        robot.sleep(0.5)
        assert robot.commands_ignored == 1
        assert np.max(np.abs(robot.get_observation().position[:7] - q_held)) < 0.01
        robot.start_heartbeat()
        robot.sleep(0.05)
        assert robot.mode == "follow"
        command_id = robot.send_action(JointCommand(q_held + 0.05, 0.2))
        robot.sleep(0.1)
        assert robot.applied(command_id) is not None


def test_homing_after_an_episode_that_ended_with_the_hand_low():
    runner, robot = backend(twin_config(max_steps=60))
    with runner:
        first = runner.run_episode(
            spec("low", policy="tests.joint_policies:reach_down"), None, None
        ).episode
        assert first.status == "ok", first.status_reason
        tcp_z = runner.adapter().tcp_of(robot.get_observation().position[:7])[2]
        assert tcp_z < 0.2, tcp_z
        second = runner.run_episode(spec("after", seed=5), None, None).episode
    assert second.status in ("ok", "safety_stop"), second.status_reason
    control = second.control
    # The hand was low: lifted first, then one trajectory home, settled within 0.15 rad.
    assert control["homing_retreats"] == 1 and control["homing_trajectories"] == 1, control
    assert control["homing_residual_rad"] <= 0.15
