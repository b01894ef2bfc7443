"""The twin's physics: the sim_suites arm and scenes (`PandaTaskEnv`) with the twin's reality gap,
following joint trajectories like a ros2_control robot. The arm is the one its profile's
`[robot] kinematics` names (`sim_suites.robot.arm_model`: the Panda, the UR5e, ...), and the twin
publishes that arm's joint names.

The environment keeps what a physical scene does by itself — contacts, the grasp model, the
safety monitor, the task's ground truth — and runs only the robot side of the one command path
(`sim_suites.command_path.JointFollower` through `PandaTaskEnv.robot_step`, the sim episode's
own): the arm's servos track the joint targets the harness sends (interpolated over each
command's duration, then through the actuator's first-order bandwidth), with a gravity
feed-forward from the *nominal* model (the gap's payload and link masses are unknown to it, as on
a real robot); the fingers move toward the wanted opening at the gripper's rated speed. The twin
runs no policy; the harness side of the path runs in the harness (`real_bridge.observation`).

The twin publishes at the physics rate while the environment steps one control period at a time,
so its physics backend is wrapped: every physics sub-step is recorded (joint state, efforts,
contact force) and the twin's ticks play those samples out one per physics step.

Wrench: the net external force on the robot at each physics step (`robot_external_force`, what
a wrist force/torque sensor or the robot's external-wrench estimate reads and what the scene's
safety monitor stops on), world frame, N; torques are 0 (no moment model).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.records import EpisodeSpec, SafetyEvent
from real_bridge.twin.settings import TwinSettings

#: The scene the twin shows before the first reset.
IDLE_TASK = "pick_place/cube_center"
#: The twin's scene never ends by itself: its environment's step limit is this large.
NEVER_ENDS_STEPS = 10**9


@dataclass
class Sample:
    """The robot's state after one physics step (what one state message carries)."""

    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    #: (3,) the net external force on the robot, N (what its force/torque sensor reads).
    force: np.ndarray


class _RecordingBackend:
    """Wraps a sim_suites physics backend: runs `step(..., substeps)` one physics step at a time,
    records a `Sample` after each, and keeps the contact peaks over the whole control step (what
    the scene's safety monitor reads, as in a sim episode)."""

    def __init__(self, inner: Any, sink: deque[Sample]) -> None:
        self._inner = inner
        self._sink = sink
        self._peak: dict[tuple[str, str], float] = {}
        self._net_peak = np.zeros(3)

    def step(self, arm_cmd: np.ndarray, finger_cmd: float, substeps: int) -> None:
        peak: dict[tuple[str, str], float] = {}
        net_peak = np.zeros(3)
        for _ in range(substeps):
            self._inner.step(arm_cmd, finger_cmd, 1)
            sample = sample_of(self._inner)
            self._sink.append(sample)
            for key, force in self._inner.contact_forces().items():
                if force > peak.get(key, 0.0):
                    peak[key] = force
            if sample.force @ sample.force > net_peak @ net_peak:
                net_peak = sample.force
        self._peak, self._net_peak = peak, net_peak

    def contact_forces(self) -> dict[tuple[str, str], float]:
        return dict(self._peak)

    def robot_external_force(self) -> np.ndarray:
        return self._net_peak.copy()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def sample_of(backend: Any) -> Sample:
    """The current state of a physics backend as a Sample (after a one-physics-step `step`)."""
    q, qd = backend.joint_state()
    return Sample(
        q=q, qd=qd, tau=backend.applied_torque(), force=backend.robot_external_force()
    )


def safety_limits(settings: TwinSettings) -> Any:
    """The scene's safety-monitor limits on the twin: the sim's (`SafetyLimits`) with the twin's
    contact-force limit and, when set, its TCP speed limit."""
    from sim_suites.robot_core import SafetyLimits

    mon = settings.monitors
    limits = SafetyLimits(fixture_contact_limit_n=mon.force_limit_n)
    if mon.speed_limit_mps > 0:
        limits = dataclasses.replace(limits, tcp_speed_stop_mps=mon.speed_limit_mps)
    return limits


def sim_reality_gap(settings: TwinSettings) -> Any:
    """The sim_suites RealityGap of the twin's environment (delay and noise are applied by the
    robot's host — the node or the in-process robot — on the wire, so they are 0 here)."""
    from sim_suites.robot_core import RealityGap

    gap = settings.gap
    return RealityGap(
        friction_scale=gap.friction_scale,
        object_mass_scale=gap.object_mass_scale,
        link_mass_scale=gap.link_mass_scale,
        actuator_gain_scale=gap.actuator_gain_scale,
        joint_damping_scale=gap.joint_damping_scale,
        payload_kg=gap.payload_kg,
        actuator_bandwidth_hz=gap.actuator_bandwidth_hz,
        contact_timeconst_s=gap.contact_timeconst_s,
    )


class SimSuitesPlant:
    """A `Plant` on `sim_suites.env.PandaTaskEnv` (see the module docstring).

    Args:
        settings: the twin's settings (engine, reality gap, injected faults).
    """

    def __init__(self, settings: TwinSettings) -> None:
        from sim_suites.robot_core import NOMINAL_CONTROL_RATE_HZ, PHYSICS_DT, arm_model

        self.settings = settings
        self.physics_dt_s = float(PHYSICS_DT)
        self.control_dt_s = 1.0 / NOMINAL_CONTROL_RATE_HZ
        self.robot = settings.bridge.robot.kinematics or "panda"
        arm = arm_model(self.robot)
        self.arm_joints = tuple(arm.arm_joints)
        self.finger_joints = tuple(arm.finger_joints)
        self.joint_names = self.arm_joints + self.finger_joints
        self.env: Any = None
        self.contact_model: dict[str, Any] = {}
        self.command_latency_s = 0.0
        self._envs: dict[str, Any] = {}
        self._inner_backends: dict[str, Any] = {}
        self._buffer: deque[Sample] = deque()
        self._events: list[SafetyEvent] = []
        self._live = False
        # One renderer per scene, made and used on the control loop's thread (an EGL context is
        # bound to the thread that made it).
        self._renderers: dict[str, Any] = {}
        self._camera: Any = None
        self._task_id = IDLE_TASK
        self._build(IDLE_TASK, {"randomization": {}}, None)
        self._reset_env(settings.seed)

    # ------------------------------------------------------------------ scene

    def _build(self, task_id: str, manifest: Mapping[str, Any], spec: EpisodeSpec | None) -> None:
        from sim_suites.robot_core import PandaTaskEnv, scene_ranges

        faults = []
        if spec is not None:
            from sim_suites.robot_core import make_task

            applicable = make_task(task_id).faults
            faults = [f for f in self.settings.faults if f in applicable]
        kwargs: dict[str, Any] = {
            # A real table takes the pair's scene (placement, yaw, size), never the sim-only
            # physics draws: the twin's physics is its own (the reality gap and the drift).
            "randomization": scene_ranges(manifest.get("randomization", {})),
            "drift": dict(spec.drift) if spec is not None else {},
            "reality_gap": sim_reality_gap(self.settings),
            "safety": safety_limits(self.settings),
            "faults": faults,
            "max_steps": NEVER_ENDS_STEPS,
            "target_quality": spec.target_quality if spec is not None else None,
        }
        env = self._envs.get(task_id)
        if env is None:  # one simulator per scene, kept: switching scenes must not stall the twin
            env = PandaTaskEnv(task_id, self.settings.engine, robot=self.robot, **kwargs)
            self._inner_backends[task_id] = env.backend
            env.backend = _RecordingBackend(env.backend, self._buffer)
            self._envs[task_id] = env
        else:
            env.configure(**kwargs)
        self.env = env
        self._task_id = task_id
        self._inner_backend = self._inner_backends[task_id]
        self.follower = env.follower

    def _reset_env(self, seed: int, scene_seed: int | None = None) -> None:
        self._buffer.clear()
        self._events.clear()
        self.env.reset(seed=seed, options=None if scene_seed is None else {"scene_seed": scene_seed})
        self._buffer.clear()
        from sim_suites.robot_core import set_contact_softness

        # The softness the reset applied (`PhysicsParams.contact_timeconst_s`), as a record.
        self.contact_model = set_contact_softness(
            self._inner_backend, self.env.params.physics.contact_timeconst_s
        )
        # The command interface's period and latency of this episode's drift and firmware
        # profile (the servo set-point moves once per period; commands take effect late).
        params = self.env.params
        self.control_dt_s = float(params.control_dt)
        self.command_latency_s = params.action_latency_steps * self.control_dt_s
        self._current = sample_of(self._inner_backend)
        self._live = True

    def reset_scene(self, spec: EpisodeSpec, manifest: Mapping[str, Any]) -> None:
        from embodied_eval.seeds import episode_seeds

        self._build(spec.task_id, manifest, spec)
        # The scene from the pair's scene stream: the sim half of the pair started from it too.
        self._reset_env(spec.seed, episode_seeds(spec.seed).scene)

    # ------------------------------------------------------------------ commands

    def set_arm_target(self, positions: np.ndarray, duration_s: float) -> np.ndarray:
        kin = self.env.kin
        applied = np.clip(np.asarray(positions[: kin.n], dtype=float), kin.lower, kin.upper)
        self.follower.set_target(applied, duration_s)
        return applied

    def set_finger_target(self, per_finger_m: float) -> float:
        return self.follower.set_finger(per_finger_m)

    def hold_here(self) -> None:
        """Freeze the servo set-point where it is now (a stop, not a new target).

        Holding the *measured* posture would move the set-point down by the sag under the
        unknown tool at every hold, so repeated holds would press a worn arm into the table;
        a real arm's controller keeps its present set-point instead.
        """
        self.follower.hold_here()

    # ------------------------------------------------------------------ stepping

    def step_physics(self) -> None:
        if not self._buffer:
            self._control_step()
        self._current = self._buffer.popleft()

    def _control_step(self) -> None:
        """One control period of the robot: the scene's robot side of the command path
        (`PandaTaskEnv.robot_step`: follower, servos, physics, monitors). After the scene's own
        monitor ended it (a stop, the hand out of the workspace), the robot's controller still
        follows its trajectories — a hold is the host's decision (deadman, latched stop), never
        the scene's — so the follower keeps stepping the physics directly."""
        env = self.env
        if self._live:
            if hasattr(env, "_complete_steps"):
                env._complete_steps = 0  # a robot's scene does not end when the task is done
            _, _, terminated, truncated, info = env.robot_step()
            self._events.extend(info.get("safety_events", ()))
            if terminated or truncated:  # a safety stop or a physics failure ended the scene
                self._live = False
        else:
            q = self._current.q
            rots, origins = env.kin.link_frames(q[: env.kin.n])
            command = self.follower.command(self.control_dt_s, rots, origins)
            env.backend.step(
                command.arm_cmd,
                command.finger,
                round(self.control_dt_s / self.physics_dt_s),
            )
        if not self._buffer:
            self._buffer.append(sample_of(self._inner_backend))

    # ------------------------------------------------------------------ readings

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self._current
        return s.q.copy(), s.qd.copy(), s.tau.copy()

    def wrench(self) -> np.ndarray:
        return np.concatenate([self._current.force, np.zeros(3)])

    def tcp_speed_mps(self) -> float:
        v = getattr(self.env, "_tcp_vel", None)  # measured by the scene once per control step
        return 0.0 if v is None else float(np.linalg.norm(v))

    def object_pose(self) -> tuple[np.ndarray, np.ndarray] | None:
        point = getattr(self.env, "_point", None)
        quat = getattr(self.env, "_obj_quat", None)
        if point is None or quat is None:
            return None
        return np.array(point, dtype=float), np.array(quat, dtype=float)

    def take_events(self) -> list[SafetyEvent]:
        events, self._events = self._events, []
        return events

    def oracle(self, target_quality: float) -> tuple[float, bool, str]:
        quality = float(min(1.0, max(0.0, getattr(self.env, "_quality", 0.0))))
        error = float(getattr(self.env, "_error", float("nan")))
        return quality, quality >= target_quality, f"goal error {error * 1000:.1f} mm"

    def hand(self) -> tuple[np.ndarray, bool]:
        """The TCP and whether the hand holds the *tracked* object enclosed in its fingers: a
        held tool (tool use) is not the tracked object, and a drawer's handle is part of a
        drawer whose body stays in the tracker's view while the hand pulls it."""
        tcp = getattr(self.env, "_tcp", None)
        task, scene = getattr(self.env, "task", None), getattr(self.env, "_scene", None)
        held = bool(getattr(self.env, "_held", False))
        if held and task is not None and scene is not None:
            held = not task.tool_name and scene.body(task.object_name).joint == "free"
        return (np.zeros(3) if tcp is None else np.array(tcp, dtype=float)), held

    def render(self, size: int) -> np.ndarray | None:
        backend = self._inner_backend
        if getattr(backend, "engine", "") != "mujoco":
            return None
        import mujoco

        renderer = self._renderers.get(self._task_id)
        if renderer is None:
            renderer = mujoco.Renderer(backend.model, size, size)
            self._renderers[self._task_id] = renderer
        if self._camera is None:
            cam = mujoco.MjvCamera()
            cam.lookat[:] = (0.5, 0.0, 0.1)
            cam.distance, cam.azimuth, cam.elevation = 1.3, 180.0, -35.0
            self._camera = cam
        renderer.update_scene(backend.data, camera=self._camera)
        return np.asarray(renderer.render())

    def close(self) -> None:
        # The renderers' EGL contexts belong to the control thread, which has ended: they are
        # released with the process.
        self._renderers.clear()
        for task_id, env in self._envs.items():
            env.backend = self._inner_backends[task_id]
            env.close()
        self._envs.clear()
        self.env = None
