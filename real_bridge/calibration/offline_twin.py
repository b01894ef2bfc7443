"""Recordings of the twin robot made without ROS: the twin's own plant, driven the way its node
drives it, for calibration tests and benchmarks.

`SimSuitesPlant` (the twin's physics, with its reality gap) is stepped one physics step at a time
as the twin node does (`real_bridge.twin.node`): a command arriving at time t takes effect at the
first physics step at or after t + the gap's actuator delay + the drift's command latency; the
joint state (with the gap's sensor noise on positions) is sampled after every physics step and the
object tracker (with its noise) at `tracker_hz`. The result is the `RecordedEpisode` the MCAP
reader would make of the same episode recorded through the bridge with the robot's echo.

The commands are a joint-space excitation around the home posture (sums of sines per joint with
small steps on top, a gripper that closes and opens), sent at the loop rate with the arrival jitter of a real network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embodied_eval.records import EpisodeSpec
from real_bridge.calibration.recorded import Command, RecordedEpisode
from real_bridge.twin.settings import SAME_INSTANT_S

#: The loop's command rate, Hz (one command per period, reached over one period).
LOOP_RATE_HZ = 50.0
#: First command this long after the scene reset, s.
FIRST_COMMAND_S = 0.4
#: Joint-space excitation amplitudes around home, rad (joints 1–7).
AMPLITUDE_RAD = np.array([0.25, 0.15, 0.2, 0.2, 0.3, 0.25, 0.3])
#: Size of the joint-space steps (uniform in ±STEP_RAD per joint), rad, held STEP_HOLD_S each.
STEP_RAD = np.array([0.04, 0.04, 0.04, 0.04, 0.06, 0.06, 0.08])
STEP_HOLD_S = 0.3
STEP_RISE_S = 0.08


def excitation_commands(
    steps: int,
    rng: np.random.Generator,
    start_s: float = FIRST_COMMAND_S,
    jitter_s: float = 0.0015,
) -> list[Command]:
    """Arm and gripper commands of one excitation episode (see the module docstring).

    Args:
        steps: loop steps (one arm command each, at LOOP_RATE_HZ).
        rng: draws the sine frequencies and phases and the arrival jitter.
        start_s: arrival of the first command, s after the scene reset.
        jitter_s: arrival jitter, uniform on [0, jitter_s), s.
    """
    from sim_suites.robot_core import arm_model

    panda = arm_model("panda")  # the offline twin is the Panda twin
    home_q, finger_max_m = panda.home_q, panda.finger_max_m

    period = 1.0 / LOOP_RATE_HZ
    # The harness's loop runs on its own clock: its first command falls anywhere in the robot's
    # control period.
    start_s += float(rng.uniform(0.0, period))
    freq = rng.uniform(0.2, 0.6, size=(2, 7))
    phase = rng.uniform(0.0, 2 * np.pi, size=(2, 7))
    # Steps every STEP_HOLD_S (their rise separates a delay from a slow actuator).
    hold = round(STEP_HOLD_S / period)
    steps_rad = rng.uniform(-1.0, 1.0, size=(steps // hold + 1, 7)) * STEP_RAD
    steps_rad[0] = 0.0
    out = []
    for i in range(steps):
        t = i * period
        wave = 0.6 * np.sin(2 * np.pi * freq[0] * t + phase[0]) + 0.4 * np.sin(
            2 * np.pi * freq[1] * t + phase[1]
        )
        ramp = min(1.0, t / 0.5)  # start from home without a jump
        target = home_q + ramp * AMPLITUDE_RAD * (wave - (0.6 * np.sin(phase[0]) + 0.4 * np.sin(
            phase[1])))  # fmt: skip
        # Each step rises over STEP_RISE_S (a 20 ms jump would trip the TCP speed limit).
        k, into = divmod(i, hold)
        rise = min(1.0, into * period / STEP_RISE_S)
        target = (
            target + steps_rad[k - 1] + rise * (steps_rad[k] - steps_rad[k - 1]) if k else target
        )
        arrival = start_s + t + float(rng.uniform(0.0, jitter_s))
        out.append(Command(arrival, "arm", target, period))
        if i % 100 == 50:
            finger = 0.0 if (i // 100) % 2 == 0 else finger_max_m
            out.append(Command(arrival + 1e-4, "gripper", np.array([finger]), period))
    return out


def record_offline(
    gap: Any,
    task_id: str,
    seed: int,
    randomization: Mapping[str, Any],
    commands: list[Command],
    rng: np.random.Generator,
    *,
    drift: Mapping[str, Any] | None = None,
    tracker_hz: float = 30.0,
    tail_s: float = 0.5,
    episode_id: str | None = None,
    robot_id: str = "twin",
    holds: Sequence[tuple[float, float]] = (),
) -> RecordedEpisode:
    """Run the twin's plant with `gap` (a `real_bridge.twin.settings.TwinGap`) through
    `commands` and return what the recording would hold (see the module docstring).

    Args:
        rng: the sensor and tracker noise.
        drift: the episode's drift (its payload, friction, gains and latency act on the twin).
        tail_s: how long the recording goes on after the last command, s.
        holds: (from, until) stretches where the robot holds on its own, as the twin's node does
            when the heartbeat is late: at `from` the set-point freezes and the commands not yet
            applied are dropped; commands arriving before `until` are ignored. The recording
            leaves out the commands never applied (the reader does: no echo) and lists the holds.
    """
    from real_bridge.interface import STOP_KINDS
    from real_bridge.twin.settings import TwinSettings
    from real_bridge.twin.sim_plant import SimSuitesPlant

    settings = TwinSettings(gap=gap, camera_hz=0.0)
    plant = SimSuitesPlant(settings)
    family = task_id.split("/")[0]
    spec = EpisodeSpec(
        episode_id=episode_id or f"cal-{seed}-real-ros2-a1", pair_id=f"cal-{seed}", side="real",
        family=family, task_id=task_id, seed=seed, drift_name="offline", drift=dict(drift or {}),
        engine="ros2",
    )  # fmt: skip
    try:
        plant.reset_scene(spec, {"randomization": dict(randomization)})
        dt = plant.physics_dt_s
        delay = gap.actuator_delay_s + plant.command_latency_s
        pending = sorted(commands, key=lambda c: c.arrival_s)
        end = pending[-1].arrival_s + delay + tail_s
        n = round(end / dt)
        q_out = np.empty((n, len(plant.joint_names)))
        tau_out = np.empty_like(q_out)
        obj_t: list[float] = []
        obj_p: list[np.ndarray] = []
        nxt, next_track, sim_s, stopped = 0, 0.0, 0.0, float("inf")
        applied: list[Command] = []
        held = sorted(holds)
        for k in range(n):
            for start, until in held:
                if abs(sim_s - start) < 0.5 * dt:  # the node's deadman: hold at once
                    plant.hold_here()
                    while nxt < len(pending) and pending[nxt].arrival_s < until:
                        nxt += 1  # dropped (pending) or ignored (arriving while held)
            while nxt < len(pending) and pending[nxt].arrival_s + delay <= sim_s + SAME_INSTANT_S:
                c = pending[nxt]
                if c.kind == "arm":
                    plant.set_arm_target(c.positions, c.duration_s)
                else:
                    plant.set_finger_target(float(c.positions[0]))
                applied.append(c)
                nxt += 1
            plant.step_physics()
            sim_s = (k + 1) * dt
            if stopped == float("inf") and any(e.kind in STOP_KINDS for e in plant.take_events()):
                stopped = sim_s
            q, _, tau = plant.joint_state()
            q_out[k] = q + rng.normal(0.0, gap.sensor_noise_std, q.shape)
            tau_out[k] = tau
            if tracker_hz > 0 and sim_s >= next_track:
                pose = plant.object_pose()
                if pose is not None:
                    obj_t.append(sim_s)
                    obj_p.append(pose[0] + rng.normal(0.0, gap.object_pose_noise_m, 3))
                next_track += 1.0 / tracker_hz
    finally:
        plant.close()
    return RecordedEpisode(
        episode_id=spec.episode_id,
        task_id=task_id,
        seed=seed,
        randomization=dict(randomization),
        robot_id=robot_id,
        commands=applied + pending[nxt:],
        state_t=dt * np.arange(1, n + 1),
        state_q=q_out,
        state_effort=tau_out,
        object_t=np.array(obj_t),
        object_pos=np.array(obj_p).reshape(-1, 3),
        started_s=pending[0].arrival_s - 0.05,
        stopped_s=stopped,
        holds_s=tuple(start for start, _ in held),
        not_applied=len(pending) - len(applied) - len(pending[nxt:]),
    )
