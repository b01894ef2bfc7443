"""Hand-computed checks of the sim suite's formulas: scoring, QC, energy, separation, DR."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from sim_suites.control_quality import (
    energy_wh,
    overshoot_and_settling,
    quality_of_control,
    rms_jerk,
)
from sim_suites.faults import FaultInjector, FaultRequest, FaultView
from sim_suites.human import HumanProxy
from sim_suites.panda_kinematics import panda_kinematics
from sim_suites.robot import tcp_linear_velocity
from sim_suites.safety_monitors import SafetyLimits, SafetyMonitor, protective_separation
from sim_suites.tasks import graded_quality
from sim_suites.variations import (
    PlanarOffset,
    RealityGap,
    UniformInteger,
    episode_params,
    sample_randomization,
    variations_from_ranges,
)


def test_graded_quality_anchor_points() -> None:
    # q = 0.8^((e/tol)^2): e = 0 -> 1; e = tol -> 0.8; e = 2 tol -> 0.8^4 = 0.4096.
    assert graded_quality(0.0, 0.02) == 1.0
    assert graded_quality(0.02, 0.02) == pytest.approx(0.8, abs=1e-12)
    assert graded_quality(0.04, 0.02) == pytest.approx(0.4096, abs=1e-12)
    # e = tol/2 -> 0.8^0.25 = 0.945741609...
    assert graded_quality(0.01, 0.02) == pytest.approx(0.8**0.25, abs=1e-12)


def test_qc_functional_example() -> None:
    # RMS = tol, F_peak = 30 N (10 N over F_ok = 20 N), RMS jerk = J_ref = 50 m/s^3:
    # QC = exp(-0.5*1 - 0.3*0.5 - 0.2*1) = exp(-0.85) = 0.427414931...
    qc, terms = quality_of_control(0.01, 0.01, 30.0, 50.0)
    assert qc == pytest.approx(math.exp(-0.85), abs=1e-12)
    assert terms["s_contact"] == pytest.approx(math.exp(-0.5), abs=1e-12)
    # A perfect episode scores 1; contact below F_ok is not penalized.
    assert quality_of_control(0.0, 0.01, 15.0, 0.0)[0] == 1.0


def test_energy_in_watt_hours() -> None:
    # 3600 steps of 10 W at dt = 0.02 s: 10 W * 72 s = 720 J = 0.2 Wh.
    assert energy_wh(np.full(3600, 10.0), 0.02) == pytest.approx(0.2, abs=1e-12)


def test_rms_jerk_of_a_cubic() -> None:
    # x(t) = t^3 has constant jerk 6 m/s^3; the third difference of a cubic is exact.
    dt = 0.1
    t = np.arange(10) * dt
    pos = np.stack([t**3, np.zeros_like(t), np.zeros_like(t)], axis=1)
    assert rms_jerk(pos, dt) == pytest.approx(6.0, rel=1e-9)
    assert rms_jerk(pos[:3], dt) == 0.0


def test_overshoot_and_settling() -> None:
    # Start 0, goal 1 (along x); the point reaches 1.2 (overshoot 0.2) then settles.
    xs = np.array([0.0, 0.5, 1.2, 1.05, 1.0, 1.0])
    points = np.stack([xs, np.zeros(6), np.zeros(6)], axis=1)
    errors = np.abs(xs - 1.0)
    over, settle = overshoot_and_settling(
        points, errors, np.zeros(3), np.array([1.0, 0.0, 0.0]), 0.1, 0.5
    )
    assert over == pytest.approx(0.2)
    # Last step outside tol 0.1 is index 2 (error 0.2): settled from step 3 -> 3 * 0.5 s.
    assert settle == pytest.approx(1.5)
    _, never = overshoot_and_settling(
        points[:3], errors[:3], np.zeros(3), np.array([1.0, 0, 0]), 0.1, 0.5
    )
    assert never is None


def test_protective_separation_formula() -> None:
    # Defaults: v_h 1.6, T_r 0.05, T_s 0.1, Z 0.02. With v_r = 0.4:
    # 1.6*0.15 + 0.4*0.05 + 0.4*0.1/2 + 0.02 = 0.24 + 0.02 + 0.02 + 0.02 = 0.30 m.
    assert protective_separation(0.4, SafetyLimits()) == pytest.approx(0.30, abs=1e-12)


def test_safety_limits_from_protocol_thresholds() -> None:
    limits = SafetyLimits.from_thresholds({"tcp_speed_stop_mps": 0.3, "minor_force_n": 5})
    assert limits.tcp_speed_stop_mps == 0.3
    with pytest.raises(EvalError, match="tcp_speed_stop_mps"):
        SafetyLimits.from_thresholds({"tcp_speed_stop_mps": "fast"})


def test_variations_sample_within_ranges_with_explicit_rng() -> None:
    ranges = {
        "friction_scale": (0.5, 1.5),
        "object_xy_offset_m": (0.01, 0.02),
        "action_latency_steps": (0.0, 2.0),
    }
    variations = variations_from_ranges(ranges)
    assert [v.knob for v in variations] == [
        "friction_scale",
        "object_xy_offset_m",
        "action_latency_steps",
    ]
    draws = [sample_randomization(variations, np.random.default_rng(s)) for s in range(200)]
    assert all(0.5 <= d["friction_scale"] <= 1.5 for d in draws)
    radii = [math.hypot(*d["object_xy_offset_m"]) for d in draws]
    assert min(radii) >= 0.01 - 1e-12 and max(radii) <= 0.02 + 1e-12
    assert {d["action_latency_steps"] for d in draws} == {0, 1, 2}
    # Same generator seed, same draw; the global numpy RNG is never used.
    assert sample_randomization(variations, np.random.default_rng(3)) == draws[3]
    assert isinstance(variations[1], PlanarOffset) and isinstance(variations[2], UniformInteger)


def test_unknown_knob_is_a_user_error() -> None:
    with pytest.raises(EvalError, match="unknown knob"):
        variations_from_ranges({"gravity_scale": (0.9, 1.1)})


def test_episode_params_fold_dr_drift_and_reality_gap() -> None:
    sampled = {"friction_scale": 1.2, "actuator_gain_scale": 0.9, "action_latency_steps": 1}
    drift = {
        "friction_scale": 0.5,
        "controller_gain_scale": 0.8,
        "latency_steps": 2,
        "payload_kg": 0.3,
        "firmware": "5.0.0",
    }
    gap = RealityGap(
        friction_scale=1.1,
        actuator_delay_s=0.02,
        actuator_bandwidth_hz=8.0,
        contact_timeconst_s=0.04,
        payload_kg=0.2,
        sensor_noise_std=0.003,
    )
    params = episode_params(
        {**sampled, "sensor_noise_std": 0.004, "actuator_delay_s": 0.01}, drift, gap
    )
    # friction 1.2 * 0.5 * 1.1 = 0.66; gain 0.9 * 0.8 * 0.7 (firmware 5.0.0) = 0.504;
    # latency 1 + 2 + 1 (firmware) = 4 steps; actuator delay 0.01 (DR) + 0.02 (gap) = 0.03 s;
    # the gap's bandwidth and contact softness replace the (nominal) DR values;
    # payload 0.3 + 0.2 = 0.5 kg; noise sqrt(0.004^2 + 0.003^2) = 0.005.
    assert params.physics.friction_scale == pytest.approx(0.66)
    assert params.physics.actuator_gain_scale == pytest.approx(0.504)
    assert params.action_latency_steps == 4
    assert params.actuator_delay_s == pytest.approx(0.03)
    assert params.actuator_bandwidth_hz == 8.0
    assert params.physics.contact_timeconst_s == 0.04
    assert params.physics.payload_kg == pytest.approx(0.5)
    assert params.sensor_noise_std == pytest.approx(0.005)
    assert params.firmware == "5.0.0"
    # Firmware 5.1.0-lowrate runs the command interface at 25 Hz: 20 substeps of 2 ms.
    assert episode_params({}, {"firmware": "5.1.0-lowrate"}).substeps == 20
    with pytest.raises(EvalError, match=r"drift\.firmware: unknown firmware 'fw-9'"):
        episode_params({}, {"firmware": "fw-9"})
    # 50 Hz at 2 ms physics: 10 substeps; 30 Hz rounds to 17 substeps (29.4 Hz actually run).
    assert params.substeps == 10
    assert episode_params({"control_rate_hz": 30.0}).substeps == 17
    with pytest.raises(EvalError, match=r"drift\.humidity"):
        episode_params({}, {"humidity": 0.5})


def _view(step: int, attached: bool = False, attached_steps: int = 0) -> FaultView:
    zero = np.zeros(3)
    return FaultView(
        step=step,
        t_s=step * 0.02,
        attached=attached,
        attached_steps=attached_steps,
        object_pos=zero,
        object_start=zero,
        goal=np.array([0.2, 0.0, 0.0]),
        tcp=zero,
        tcp_target=zero,
        obstacle_contact_n=0.0,
        obstacle_contact_warn_n=120.0,
    )


def test_fault_injector_timing_and_records() -> None:
    requests = (
        FaultRequest("perception_dropout", step=3, duration_steps=4),
        FaultRequest("grasp_slip", probability=1.0),
        FaultRequest("actuator_stall", probability=0.0),
    )
    injector = FaultInjector(requests, np.random.default_rng(0))
    assert injector.due(_view(2)) == []
    assert [r.kind for r in injector.due(_view(3))] == ["perception_dropout"]
    dropout = injector.start(requests[0], _view(3), "frozen")
    assert injector.running("perception_dropout", 6) is dropout
    assert injector.running("perception_dropout", 7) is None
    # A slip needs a part held for 10 steps; with probability 1 it fires at the first such step.
    assert injector.due(_view(8, attached=True, attached_steps=9)) == []
    assert [r.kind for r in injector.due(_view(9, attached=True, attached_steps=10))] == [
        "grasp_slip"
    ]
    injector.start(requests[1], _view(9), "dropped")
    # Dropout clears when it ends (step 7); the slip when the part is held again (step 20).
    injector.update_clearing(_view(7))
    injector.update_clearing(_view(20, attached=True, attached_steps=1))
    assert [r.kind for r in injector.due(_view(50))] == []  # probability 0 never fires
    done = injector.records(end_t=2.0, task_done=True)
    # repair_s: dropout 7·0.02 − 3·0.02 = 0.08 s; slip 20·0.02 − 9·0.02 = 0.22 s.
    assert [(f.kind, f.recovered_autonomously, f.repair_s) for f in done] == [
        ("perception_dropout", True, pytest.approx(0.08)),
        ("grasp_slip", True, pytest.approx(0.22)),
    ]
    # Task not finished: cleared faults do not count as recovered; repair runs to the end.
    failed = injector.records(end_t=2.0, task_done=False)
    assert [(f.recovered_autonomously, f.repair_s) for f in failed] == [
        (False, pytest.approx(1.94)),
        (False, pytest.approx(1.82)),
    ]


def test_tcp_linear_velocity_by_hand() -> None:
    # Every joint axis along +z, joint i at (0, 0, 0.1·i), TCP at (0.5, 0, 0):
    # z × (tcp − o_i) = (0, 0, 1) × (0.5, 0, −0.1·i) = (0·(−0.1i) − 1·0, 1·0.5 − 0·(−0.1i), 0)
    # = (0, 0.5, 0) for every i, so v = (0, 0.5·Σ q̇_arm, 0) = (0, 0.5·(1 + 2), 0) = (0, 1.5, 0);
    # the finger velocities (9, 9) are not arm joints and do not count.
    rots = np.repeat(np.eye(3)[None], 7, axis=0)
    origins = np.array([[0.0, 0.0, 0.1 * i] for i in range(7)])
    qd = np.array([1.0, 0, 0, 0, 0, 0, 2.0, 9.0, 9.0])
    v = tcp_linear_velocity(rots, origins, np.array([0.5, 0.0, 0.0]), qd)
    np.testing.assert_allclose(v, [0.0, 1.5, 0.0], atol=1e-15)


def test_tcp_linear_velocity_is_bitwise_the_jacobian_product() -> None:
    # Episodes must not change by a bit when the harness skips the angular Jacobian rows.
    kin = panda_kinematics()
    rng = np.random.default_rng(3)
    for _ in range(200):
        q, qd = rng.uniform(-2.5, 2.5, 7), rng.normal(0.0, 1.0, 9)
        rots, origins = kin.link_frames(q)
        tcp = kin.tcp_from_frames(rots[6], origins[6])[0]
        expected = kin.jacobian_from_frames(rots, origins, tcp)[:3] @ qd[:7]
        assert tcp_linear_velocity(rots, origins, tcp, qd).tobytes() == expected.tobytes()


def test_monitor_uses_the_separation_it_is_given() -> None:
    # The backend measures separation from geometry; the monitor keeps the minimum, caps the
    # speed inside reduced zone 0.5 + margin 0.1 m, and refuses to run blind with a person.
    kin = panda_kinematics()
    human = HumanProxy((1.0, 0.0))

    def monitor(person: HumanProxy | None = human) -> SafetyMonitor:
        return SafetyMonitor(SafetyLimits(), kin.lower, kin.upper, kin.vel_limit, person, ())

    assert monitor().reduced_speed_required(0.59) is True
    assert monitor().reduced_speed_required(0.61) is False
    assert monitor(None).reduced_speed_required(0.1) is False
    tcp, obj = np.array([0.5, 0.0, 0.3]), np.array([0.5, 0.0, 0.03])
    given = monitor()
    given.update(1, 0.02, np.zeros(7), np.zeros(7), tcp, 0.0, {}, obj, 0.25)
    given.update(2, 0.04, np.zeros(7), np.zeros(7), tcp, 0.0, {}, obj, 0.4)
    assert given.min_separation_m == 0.25
    with pytest.raises(EvalError, match="human proxy"):
        monitor().update(1, 0.02, np.zeros(7), np.zeros(7), tcp, 0.0, {}, obj)
