"""What the calibration's intervals rest on: stretches the replay does not follow are set aside
(by hand), a response that jumps is told from one that slopes (by hand), the actuator time
constant's finite-difference step, and an unfiltered actuator recovered with its truth inside
every interval."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from real_bridge.calibration.fit import calibrate_episodes
from real_bridge.calibration.offline_twin import excitation_commands, record_offline
from real_bridge.calibration.replay import ReplayTrace
from real_bridge.calibration.residuals import EpisodeResidual, stretches_not_followed
from real_bridge.calibration.solve import _Point, fd_step, smooth_rows
from real_bridge.twin.settings import TwinGap

TASK = "pick_place/cube_center"
NO_TRACE = ReplayTrace(t=np.zeros(0), q=np.zeros((0, 9)), object_pos=np.zeros((0, 3)))


def _residual(joint_rad: np.ndarray) -> EpisodeResidual:
    """Joint residual (K, 7) at the controller updates 0, 20, 40 ms …"""
    t = 0.02 * np.arange(joint_rad.shape[0])
    return EpisodeResidual(joint=joint_rad, object=np.zeros((0, 3)), trace=NO_TRACE, joint_t=t)


def test_stretches_the_replay_does_not_follow_by_hand():
    # Episode A: 2 s (stretches of 0.5 s: 0–0.5, 0.5–1, 1–1.5, 1.5–2), every joint 0.5 mrad
    # off, except 3 mrad from 1.0 s to 1.5 s. Episode B: 1 s at 0.5 mrad. Stretch RMS (in the
    # residual's 1 mrad unit): 0.5, 0.5, 3, 0.5 and 0.5, 0.5; the median is 0.5, so with a factor
    # 4 the limit is 2: only A's 1.0–1.5 s stands out.
    a = np.full((100, 7), 0.5e-3)
    a[50:75] = 3e-3
    b = np.full((50, 7), 0.5e-3)
    found = stretches_not_followed([_residual(a), _residual(b)], 4.0)
    assert found == [[(1.0, 1.5)], []]
    kept = _residual(a).without(found[0])
    assert kept.joint.shape == (75, 7) and not np.any((kept.joint_t >= 1.0) & (kept.joint_t < 1.5))
    assert np.all(kept.joint == 0.5e-3)
    # When half the stretches or more are far off, nothing stands out: nothing is set aside.
    assert stretches_not_followed([_residual(np.full((50, 7), 3e-3)), _residual(b)], 4.0) == [
        [], []
    ]


class _Backwards:
    """Stands in for the replayer: one backward step's residuals, and what was left out."""

    def __init__(self, residuals: list[EpisodeResidual]) -> None:
        self.residuals = residuals
        self.left: dict[int, list[tuple[float, float]]] = {}

    def run_many(self, candidates, subset):
        assert [c["payload"] for c in candidates] == [pytest.approx(0.395)]
        return [self.residuals]

    def leave_out(self, episode, stretches):
        self.left.setdefault(episode, []).extend(stretches)


def test_a_response_that_jumps_is_told_from_one_that_slopes_by_hand():
    # One episode of 1 s at the fit (residual 0), payload 0.4 kg, step 0.005 kg. Forwards, the
    # first stretch (0–0.5 s) moves by +0.005 (residual units) per entry, the second by +0.5.
    # Backwards, the first moves by −0.005 (a slope: bend 0) and the second not at all (a jump:
    # bend = |+0.5| = slope). Per stretch of 175 entries: bend/slope = 0/0.132 and 6.61/6.61;
    # the median slope is 3.37, so only the second is a jump: its rows are dropped from the
    # intervals and the stretch 0.5–1.0 s is left out from then on.
    at = _residual(np.zeros((50, 7)))
    jac = np.concatenate([np.full(175, 1.0), np.full(175, 100.0)])[:, None]
    behind = np.zeros((50, 7))
    behind[:25] = -0.005e-3
    replayer = _Backwards([_residual(behind)])
    keep = smooth_rows(replayer, [7], ["payload"], _Point({"payload": 0.4}, [at]), jac)
    assert keep[:175].all() and not keep[175:].any()
    assert replayer.left == {7: [(0.5, 1.0)]}


def test_time_constant_step_is_a_quarter_of_it():
    assert fd_step("actuator_bandwidth", 0.00283) == pytest.approx(0.0007075)
    assert fd_step("actuator_bandwidth", 0.0) == pytest.approx(1e-4)  # never a zero step
    assert fd_step("actuator_bandwidth", 0.05) == pytest.approx(0.004)  # at most its FD_STEP
    assert fd_step("payload", 0.4) == pytest.approx(0.005)


def test_an_unfiltered_actuator_is_recovered_with_every_truth_inside():
    # The twin's actuator has no filter (τ = 0): the fit puts τ at 0, where its Jacobian column is
    # 0 and says nothing (an infinite interval: not identified). Its profile upwards from 0 bounds
    # it: τ's interval reaches 0 and is finite, and every truth lies inside its interval.
    rng = np.random.default_rng(3)
    gap = dataclasses.replace(
        TwinGap.none(), payload_kg=0.4, actuator_gain_scale=0.9, actuator_delay_s=0.04,
        sensor_noise_std=0.0005,
    )  # fmt: skip
    episodes = [
        record_offline(gap, TASK, seed, {}, excitation_commands(300, rng), rng)
        for seed in range(3)
    ]
    names = ["payload", "actuator_delay", "actuator_gain", "actuator_bandwidth"]
    est = calibrate_episodes(episodes, names, workers=2).estimates
    truth = {"payload": 0.4, "actuator_delay": 0.04, "actuator_gain": 0.9,
             "actuator_bandwidth": 0.0}  # fmt: skip
    for name, value in truth.items():
        assert est[name].identified, est[name]
        assert est[name].low <= value <= est[name].high, est[name]
    assert est["actuator_bandwidth"].value == 0.0 and est["actuator_bandwidth"].low == 0.0
    assert 0.0 < est["actuator_bandwidth"].high <= 0.02  # an interval, within the resolution


def test_a_stretch_left_out_twice_is_listed_once():
    from real_bridge.calibration.residuals import Replayer

    replayer = Replayer([], workers=1)
    replayer.leave_out(3, [(8.19, 8.69), (8.19, 8.69), (8.69, 9.19)])
    replayer.leave_out(3, [(8.69, 9.19), (1.0, 1.5)])
    assert replayer.left_out == {3: [(8.19, 8.69), (8.69, 9.19), (1.0, 1.5)]}
