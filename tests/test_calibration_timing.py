"""The calibration reads a recording's timing the way the robot lived it: a command takes effect
when the robot's echo says it did (some wait longer than others), commands the robot took at one
instant keep the robot's order, and the robot's holds and stops are put on its joint states'
clock even when its diagnostics carry another clock's stamps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from real_bridge.calibration.offline_twin import excitation_commands, record_offline
from real_bridge.calibration.params import nominal_values
from real_bridge.calibration.recorded import Command, RecordedEpisode, read_recorded_episode
from real_bridge.calibration.replay import EpisodeReplay
from real_bridge.calibration.residuals import episode_residual
from real_bridge.twin.settings import TwinGap
from tests.calibration_support import write_recording

TASK = "pick_place/cube_center"
QUIET = dataclasses.replace(
    TwinGap.none(), payload_kg=0.4, joint_damping_scale=1.3, actuator_delay_s=0.04
)


def _arm(arrival_s: float, value: float) -> Command:
    return Command(arrival_s, "arm", np.full(7, value), 0.02)


def test_reader_takes_waits_order_holds_and_stop_from_the_robot(tmp_path):
    # Joint states every 2 ms from 0.002 s to 1.0 s (the reader's zero is the first of them).
    # Four arm commands arrive on the 2 ms grid at 0.100, 0.120, 0.140 and 0.160 s; the robot
    # waits its 40 ms delay, but took the second one 2 ms later still and the third 30 ms later:
    #   applied at 0.140, 0.162, 0.210, 0.200 s; waited 40, 42, 70, 40 ms.
    # The shortest wait is 40 ms, so late_s = 0, 2, 30, 0 ms, and the robot took them in the
    # order 1st, 2nd, 4th, 3rd. Its diagnostics are stamped 0.75 s ahead of its joint states
    # (the twin's wall clock against its simulation clock): the hold at 0.5 s and the stop at
    # 0.8 s are read on the joint states' clock, 0.498 s and 0.798 s after the first state.
    t = 0.002 * np.arange(1, 501)
    sent = [_arm(0.100, 0.1), _arm(0.120, 0.2), _arm(0.140, 0.3), _arm(0.160, 0.4)]
    rec = RecordedEpisode(
        episode_id="timing-1-real-ros2-a1", task_id=TASK, seed=1, randomization={},
        robot_id="twin", commands=sent, state_t=t, state_q=np.zeros((t.size, 9)),
        state_effort=np.zeros((t.size, 9)), started_s=0.05, stopped_s=0.8, holds_s=(0.5,),
    )  # fmt: skip
    episode = write_recording(
        rec, tmp_path / "timing.mcap", 0.04, "twin", waited_longer={1: 0.002, 2: 0.030},
        diagnostics_ahead_s=0.75,
    )  # fmt: skip
    read = read_recorded_episode(episode, {})
    assert [c.positions[0] for c in read.commands] == [0.1, 0.2, 0.4, 0.3]
    np.testing.assert_allclose([c.arrival_s for c in read.commands],
                               [0.098, 0.118, 0.158, 0.138], atol=1e-12)  # fmt: skip
    np.testing.assert_allclose([c.late_s for c in read.commands], [0.0, 0.002, 0.0, 0.030],
                               atol=1e-12)  # fmt: skip
    assert read.holds_s == pytest.approx((0.498,), abs=1e-9)
    assert read.stopped_s == pytest.approx(0.798, abs=1e-9)


def test_commands_the_robot_took_late_are_replayed_late(tmp_path):
    # Commands arrive on the 20 ms grid, so arrival + 40 ms falls on a controller update (the
    # twin's updates are at 0, 20, 40 ms … of its clock). The robot took every third of them one
    # 2 ms physics step late (as the twin did when its clock's rounding put the apply time a hair
    # past the step): each of those waited for the next update, 20 ms later. Its echo says so
    # (42 ms instead of 40). Replayed with the echoed waits, the twin's positions come back to
    # < 0.1 mrad (quiet sensors); replayed with the delay alone, off by > 1 mrad somewhere.
    rng = np.random.default_rng(9)
    arrivals = [
        dataclasses.replace(c, arrival_s=round(c.arrival_s / 0.02) * 0.02)
        for c in excitation_commands(100, rng, jitter_s=0.0)
        if c.kind == "arm"
    ]
    late = {i: 0.002 for i in range(0, len(arrivals), 3)}
    taken = [dataclasses.replace(c, arrival_s=c.arrival_s + late.get(i, 0.0))
             for i, c in enumerate(arrivals)]  # fmt: skip
    lived = record_offline(QUIET, TASK, 21, {}, taken, rng)
    assert len(lived.commands) == len(arrivals) and lived.not_applied == 0
    told = dataclasses.replace(lived, commands=arrivals)
    episode = write_recording(told, tmp_path / "late.mcap", 0.04, "twin", waited_longer=late)
    read = read_recorded_episode(episode, {})
    assert [i for i, c in enumerate(read.commands) if c.late_s > 0] == sorted(late)
    np.testing.assert_allclose([c.late_s for c in read.commands if c.late_s > 0], 0.002,
                               atol=1e-12)  # fmt: skip
    values = nominal_values({"payload": 0.4, "joint_damping": 1.3, "actuator_delay": 0.04})
    on_time = dataclasses.replace(
        read, commands=[dataclasses.replace(c, late_s=0.0) for c in read.commands]
    )
    replay = EpisodeReplay(TASK)
    try:
        followed = episode_residual(read, replay.run(read, values))
        missed = episode_residual(on_time, replay.run(on_time, values))
    finally:
        replay.close()
    assert np.abs(followed.joint).max() < 1e-4
    assert np.abs(missed.joint).max() > 1e-3
