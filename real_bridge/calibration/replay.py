"""Replay a recorded real episode's commands in the MuJoCo model of the pair's scene.

The model is the simulator's own scene of the pair (`sim_suites.env.PandaTaskEnv`, reset with the
episode's scene seed and the protocol's scene ranges only, as the robot's reset station does),
with candidate physical parameters (`real_bridge.calibration.params`). The commands drive it the
way a ros2_control robot follows them — the one command path's robot side
(`sim_suites.command_path.JointFollower`, the sim episode's and the twin's own): a command takes effect
`actuator_delay` after it arrived (plus how much longer than its shortest wait the robot's echo
says it waited, `Command.late_s`), at the controller's next update; its target is reached by
linear interpolation over the command's duration, then passes the actuator's first-order
low-pass; the servos get a gravity feed-forward from the nominal model. The controller updates
once per control period, at the times found in the recording (`controller_phase_s`). Where the
robot held on its own (`RecordedEpisode.holds_s`), its set-point freezes as the robot's did.

The replay starts from the scene reset (the arm at home, the object where the scene puts it): at
the controller update after the recorded manifest went to the robot's reset station, else
`SETTLE_S` before the first command. It reports the joint positions after every controller
update and the object's tracked point at those times.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from embodied_eval.errors import EvalError
from real_bridge.calibration.params import bandwidth_hz
from real_bridge.calibration.recorded import RecordedEpisode

#: The scene is reset this long before the first command (the arm and the object settle), s.
SETTLE_S = 0.3


@dataclass(frozen=True)
class ReplayTrace:
    """What the replay produced: times (s, robot clock) after each controller update, joint
    positions there ((K, 9)) and the object's tracked point ((K, 3), m)."""

    t: np.ndarray
    q: np.ndarray
    object_pos: np.ndarray


def controller_phase_s(recorded: RecordedEpisode, control_dt_s: float) -> float:
    """When the robot's controller updates, modulo its control period (s, robot clock).

    The servo set-point changes only at controller updates, so the joint efforts jump between
    the sample just before an update and the one after it. The recorded effort changes are
    folded modulo the control period; the phase with the largest mean change is the update time.

    Args:
        recorded: the episode (joint states with efforts, stamps on the robot clock).
        control_dt_s: the robot's control period, s.
    """
    t, effort = recorded.state_t, recorded.state_effort[:, :7]
    if len(t) < 3:
        return 0.0
    period = float(np.median(np.diff(t)))
    slots = max(1, round(control_dt_s / period))
    if slots == 1:
        return 0.0
    jumps = np.abs(np.diff(effort, axis=0)).sum(axis=1)
    before = t[:-1]
    index = np.round(before / period).astype(np.int64) % slots
    score = np.bincount(index, weights=jumps, minlength=slots) / np.maximum(
        np.bincount(index, minlength=slots), 1
    )
    return float(int(np.argmax(score)) * period)


class EpisodeReplay:
    """The replay model of one task's scene (built once, reset per replay).

    Args:
        task_id: the scene's task.
        engine: physics engine of the model ("mujoco").
    """

    def __init__(self, task_id: str, engine: str = "mujoco") -> None:
        from sim_suites.robot_core import PandaTaskEnv

        try:
            self.env = PandaTaskEnv(task_id, engine, max_steps=10**9)
        except EvalError as exc:
            raise EvalError(f"cannot build the scene of {task_id!r} to replay in: {exc}") from None
        self.task_id = task_id

    def reset(self, recorded: RecordedEpisode, values: Mapping[str, float]) -> None:
        """Reset the pair's scene with the parameter values."""
        from embodied_eval.seeds import episode_seeds
        from sim_suites.robot_core import RealityGap, scene_ranges

        gap = RealityGap(
            friction_scale=float(values["friction"]),
            object_mass_scale=float(values["object_mass"]),
            link_mass_scale=float(values["link_mass"]),
            actuator_gain_scale=float(values["actuator_gain"]),
            joint_damping_scale=float(values["joint_damping"]),
            payload_kg=float(values["payload"]),
            contact_timeconst_s=float(values.get("contact_softness", 0.0)),
        )
        env = self.env
        env.configure(
            randomization=scene_ranges(recorded.randomization),
            reality_gap=gap,
            max_steps=10**9,
        )
        env.reset(seed=recorded.seed, options={"scene_seed": episode_seeds(recorded.seed).scene})

    def run(self, recorded: RecordedEpisode, values: Mapping[str, float]) -> ReplayTrace:
        """Replay the episode's commands with the parameter values (see the module docstring)."""
        self.reset(recorded, values)
        env = self.env
        backend, kin, task = env.backend, env.kin, env.task
        dt = float(env.params.control_dt)
        substeps = int(env.params.substeps)
        # The robot side of the one command path (`sim_suites.command_path`).
        follower = env.follower
        follower.bandwidth_hz = bandwidth_hz(float(values["actuator_bandwidth"]))  # ∞: no filter
        q, _ = backend.joint_state()
        follower.reset(q, finger=float(q[7]))
        commands = recorded.commands
        first = commands[0].arrival_s
        phase = controller_phase_s(recorded, dt)
        if recorded.reset_s is not None and recorded.reset_s < first:
            # The reset station resets the scene at the controller update after it was asked.
            t0 = phase + dt * np.ceil((recorded.reset_s - phase) / dt)
        else:
            t0 = phase + dt * np.floor((first - SETTLE_S - phase) / dt)
        end = min(
            float(recorded.state_t[-1]), commands[-1].arrival_s + 1.0, recorded.stopped_s + dt
        )
        ticks = int(np.ceil((end - t0) / dt))
        delay = float(values["actuator_delay"])
        # Commands take effect `delay` after they arrived (and `late_s` later where the robot's
        # echo says it waited longer than its shortest wait); a hold of the robot's, at once.
        # Times are whole nanoseconds (the recording's resolution), so commands the robot took
        # at the same instant stay in their order of arrival: the last one is the set-point.
        events = sorted(
            [(round(c.arrival_s + c.late_s + delay, 9), i) for i, c in enumerate(commands)]
            + [(round(h, 9), -1) for h in recorded.holds_s]
        )
        lower, upper = kin.lower[:7], kin.upper[:7]
        out_q = np.empty((ticks, q.shape[0]))
        out_obj = np.empty((ticks, 3))
        nxt = 0
        for k in range(ticks):
            now = t0 + k * dt
            while nxt < len(events) and events[nxt][0] <= now + 1e-9:
                index = events[nxt][1]
                if index < 0:  # the robot held: its set-point stays where it is
                    follower.hold_here()
                elif (c := commands[index]).kind == "arm":
                    follower.set_target(np.clip(c.positions[:7], lower, upper), c.duration_s)
                else:
                    follower.set_finger(float(c.positions[0]))
                nxt += 1
            rots, origins = kin.link_frames(q[:7])
            command = follower.command(dt, rots, origins)
            backend.step(command.arm_cmd, command.finger, substeps)
            q, _ = backend.joint_state()
            out_q[k] = q
            pos, _ = backend.body_pose(task.object_name)
            out_obj[k] = task.tracked_point(pos)
        times = t0 + dt * np.arange(1, ticks + 1)
        return ReplayTrace(t=times, q=out_q, object_pos=out_obj)

    def close(self) -> None:
        self.env.close()
