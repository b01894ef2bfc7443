"""Without ROS: the homing retreat path (a straight lift of the TCP, checked before it is sent)
and the interpreter settings of the policy loop."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

pytest.importorskip("sim_suites.robot", exc_type=ImportError)

from embodied_eval.errors import EvalError
from real_bridge.command_check import command_problem
from real_bridge.homing import HomingReport, retreat_path
from real_bridge.robot_profile import RobotSpec
from sim_suites.panda_kinematics import panda_kinematics

#: The hand low over the table: TCP at z = 0.131 m.
LOW_Q = np.array([0.0, 0.5, 0.0, -1.9, 0.0, 2.4, 0.785398])


def test_the_retreat_lifts_the_tcp_straight_up_within_the_limits():
    kin, robot = panda_kinematics(), RobotSpec()
    start, rot = kin.forward(LOW_Q)
    path, problem = retreat_path(LOW_Q, robot, kin, 0.10)
    assert problem == ""
    # Cosine profile, peak speed π/2 · 0.10 m / T ≤ 0.1 m/s at 20 ms per target:
    # T ≥ π/2 s → ceil(π/2 / 0.02) = 79 targets.
    assert path.shape == (79, 7) and math.ceil(math.pi / 2 / 0.02) == 79
    tcps = np.array([kin.forward(q)[0] for q in path])
    np.testing.assert_allclose(tcps[-1], start + np.array([0.0, 0.0, 0.10]), atol=1e-3)
    np.testing.assert_allclose(tcps[:, :2], np.repeat(start[None, :2], 79, axis=0), atol=1e-3)
    assert np.all(np.diff(tcps[:, 2]) > -1e-6)  # only up
    np.testing.assert_allclose(kin.forward(path[-1])[1], rot, atol=1e-2)  # the hand keeps its angle
    speeds = np.linalg.norm(np.diff(tcps, axis=0), axis=1) / 0.02
    assert speeds.max() <= 0.1 + 1e-3
    assert command_problem(path, LOW_Q, np.zeros(7), 0.02, robot, lambda q: kin.forward(q)[0]) == ""


def test_the_retreat_stops_below_the_workspace_ceiling_and_is_refused_outside_the_limits():
    kin = panda_kinematics()
    # Ceiling 0.2 m: the lift stops 2 cm below it, at 0.18 m (from 0.131 m).
    low_ceiling = RobotSpec(workspace_max=(0.9, 0.6, 0.2))
    path, problem = retreat_path(LOW_Q, low_ceiling, kin, 0.10)
    assert problem == "" and kin.forward(path[-1])[0][2] == pytest.approx(0.18, abs=1e-3)
    # Joint 4's range ends at -0.9 rad here: unfolding the elbow to lift leaves it; nothing sent.
    tight = RobotSpec(position_upper=(2.8973, 1.7628, 2.8973, -1.9, 2.8973, 3.7525, 2.8973))
    path, problem = retreat_path(LOW_Q, tight, kin, 0.10)
    assert path.shape == (0, 7) and "panda_joint4" in problem and "position limits" in problem


def test_homing_settings_are_checked_and_reported():
    with pytest.raises(EvalError, match="home_tolerance_rad"):
        RobotSpec(home_tolerance_rad=0.0)
    with pytest.raises(EvalError, match="retreat_m"):
        RobotSpec(retreat_m=-0.1)
    report = HomingReport(retreats=1, trajectories=1, residual_rad=0.10184, seconds=3.6012)
    assert report.summary() == {
        "homing_retreats": 1,
        "homing_trajectories": 1,
        "homing_s": 3.601,
        "homing_residual_rad": 0.1018,
    }


def test_the_policy_loop_runs_without_garbage_collection_and_restores_it():
    import gc
    import sys

    from real_bridge.policy_loop import LOOP_SWITCH_INTERVAL_S, quiet_interpreter

    assert gc.isenabled()
    switch = sys.getswitchinterval()
    with quiet_interpreter():
        assert not gc.isenabled() and sys.getswitchinterval() == pytest.approx(0.0005)
        assert gc.get_freeze_count() > 0  # what existed before the loop is not scanned again
        garbage = [[] for _ in range(3000)]  # allocations far past gen 0's threshold of 700
        assert gc.get_count()[0] > 700  # ... and still no collection ran
        del garbage
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert sys.getswitchinterval() == switch and LOOP_SWITCH_INTERVAL_S == 0.0005


def test_homing_is_timed_by_the_joint_speed_share_and_the_tcp_speed():
    from real_bridge.homing import homing_duration

    robot, kin = RobotSpec(), panda_kinematics()
    home = np.asarray(robot.home)
    # Joint 2 0.57 rad away: 0.57 / (0.3 · 2.175 rad/s) = 0.8736 s; joint 6 0.485 rad away:
    # 0.485 / (0.3 · 2.61) = 0.6194 s. Without kinematics the slower joint decides.
    q = home + np.array([0.0, 0.57, 0.0, 0.0, 0.0, 0.485, 0.0])
    assert homing_duration(q, home, robot) == pytest.approx(0.57 / (0.3 * 2.175))
    # Near home the shortest trajectory, 0.5 s.
    assert homing_duration(home + 0.01, home, robot) == 0.5
    # With kinematics the TCP's mean speed is at most 0.25 m/s: the path is at least as long as
    # the straight line between its ends.
    chord = np.linalg.norm(kin.forward(q)[0] - kin.forward(home)[0])
    timed = homing_duration(q, home, robot, kin)
    assert timed >= chord / 0.25 > 0.57 / (0.3 * 2.175)


class DroppingRobot:
    """A robot that drops the first homing trajectory (it was holding for a moment) and jumps to
    each applied target: what homing sees of a robot that confirms applied commands. A test
    double of the `Robot` interface on the wall clock."""

    engine = "test"
    is_connected = True

    def __init__(self, config, q0, drop_first=1):
        import time as _time

        self.config = config
        self._time = _time
        self.q = np.array(q0, dtype=float)
        self.sent: list[str] = []
        self.confirmed: set[str] = set()
        self.drop = drop_first
        self.arm_command = None

    def now_s(self):
        return self._time.monotonic()

    def sleep(self, seconds):
        self._time.sleep(max(0.0, seconds))

    def send_action(self, command):
        command_id = f"c{len(self.sent)}"
        self.sent.append(command_id)
        if command.positions is not None:
            if self.drop > 0:
                self.drop -= 1
            else:
                self.confirmed.add(command_id)
                self.q = np.array(command.positions, dtype=float)
                self.arm_command = self.q.copy()
        return command_id

    def applied(self, command_id):
        from real_bridge.robot import AppliedAction

        if command_id not in self.confirmed:
            return None
        return AppliedAction(self.config.robot.arm_joints, self.q, self.now_s())

    def commanded(self):
        return self.arm_command

    def get_observation(self):
        from real_bridge.robot import Observation

        now = self.now_s()
        names = self.config.robot.arm_joints
        return Observation(now, now, names, self.q.copy(), np.zeros(7), np.zeros(7))

    def safety_readings(self, since):
        return [], 0


def _homing_config(applied_topic):
    from real_bridge.bridge_config import load_bridge_config, profile_path

    config = load_bridge_config(profile_path("twin"))
    return config.replace(
        topics=dataclasses.replace(config.topics, applied=applied_topic, gripper_command=""),
        deadlines=dataclasses.replace(config.deadlines, resend_s=0.1, homing_s=10.0),
    )


@pytest.mark.timeout(30)
def test_a_dropped_homing_trajectory_is_sent_again_when_the_robot_echoes_commands():
    from real_bridge.homing import Homing

    config = _homing_config("/joint_trajectory_controller/applied")
    home = np.asarray(config.robot.home, dtype=float)
    robot = DroppingRobot(config, home + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3]))
    report = Homing(robot).run()
    # The first trajectory was dropped: no echo within resend_s = 0.1 s, so it went out again.
    assert robot.sent == ["c0", "c1"] and robot.confirmed == {"c1"}
    assert report.trajectories == 1 and report.resent == 1
    assert report.summary()["homing_resent"] == 1 and report.residual_rad == 0.0
