"""`PandaTaskEnv`: the Gymnasium environment for one task instance on one engine.

Composition, not inheritance: a physics backend (MuJoCo or PyBullet) holds the robot and the
arena; a `Task` scores the physics state; `ArmController` turns actions into joint set-points;
`SafetyMonitor`, `FaultInjector` and `ControlRecorder` watch every control step.

Spaces:

- action: Box(−1, 1, (4,), float32) = [vx, vy, vz, g], a TCP velocity command (full scale
  0.4 m/s, capped in norm) and the gripper set-point (−1 closed … +1 open); see
  `sim_suites.controller`. Out-of-range actions are clipped and counted (`actions_clipped`).
- observation: Dict of float64 arrays, each a fresh copy: `joint_pos` (9,) rad/m, `joint_vel`
  (9,), `gripper_width` (1,) m, `tcp_pos` (3,) m, `tcp_target` (3,) m (the controller's
  set-point), `object_pos` (3,) m (the tracked point: object centre, or the drawer handle),
  `object_quat` (4,) (w, x, y, z), `object_visible` (1,) 0/1, `goal_pos` (3,) m, `grasped`
  (1,) 0/1, `obstacle` (4,) = [x, y, top_z, active].

Reward: the current graded quality q (see `sim_suites.tasks.base`). An episode terminates when
the task is complete (within tolerance, released, at rest for 5 steps), on a protective stop or a
workspace breach; it is truncated after `max_steps` control steps at the nominal 50 Hz (the time
budget is kept when the control rate is randomized). `info` carries `quality`, `is_success`,
`status`, `safety_events` (new `SafetyEvent`s), `faults_injected` and more.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from sim_suites.control_quality import ControlRecorder
from sim_suites.controller import (
    V_MAX_MPS,
    ArmController,
    capped_velocity,
    grasp_closes,
    grasp_releases,
)
from sim_suites.engines.base import ROBOT, TABLE, InitialState, PhysicsBackend
from sim_suites.faults import (
    OBSTACLE_TOP_M,
    FaultInjector,
    FaultRequest,
    FaultView,
    fault_requests,
)
from sim_suites.robot import FINGER_MAX_M, HOME_Q, panda_kinematics, tcp_linear_velocity
from sim_suites.safety import SSM_SPEED_FRACTION, SafetyLimits, SafetyMonitor, StopDecision
from sim_suites.tasks import Task, TaskState, family_task_ids, graded_quality, make_task
from sim_suites.tasks.base import COMPLETION_HOLD_STEPS
from sim_suites.variations import (
    DEFAULT_RANDOMIZATION,
    NOMINAL_CONTROL_RATE_HZ,
    EpisodeParams,
    RealityGap,
    check_drift,
    episode_params,
    sample_randomization,
    variations_from_ranges,
)

ENGINES = ("mujoco", "pybullet")


def make_backend(engine: str, task: Task) -> PhysicsBackend:
    """Build the physics backend of `engine` for the task's scene."""
    if engine == "mujoco":
        from sim_suites.engines.mujoco_backend import MujocoBackend

        return MujocoBackend(task.scene(), panda_kinematics())
    if engine == "pybullet":
        from sim_suites.engines.pybullet_backend import PybulletBackend

        return PybulletBackend(task.scene(), panda_kinematics())
    raise EvalError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}", key="engine")


#: Observation bounds. Positions are in the robot's base frame; the workspace monitor ends an
#: episode long before anything reaches them, and readings beyond are clipped to stay in-space.
POS_BOUND_M = 5.0
#: An object faster than this (m/s) means the simulation blew up: the episode is an error.
DIVERGED_SPEED_MPS = 50.0
JOINT_POS_BOUND = 4.0
JOINT_VEL_BOUND = 100.0


def _bounded(x: np.ndarray, bound: float) -> np.ndarray:
    """x (a fresh array) clipped to ±bound; the clip is rarely needed, so test first."""
    if float(np.abs(x).max()) > bound:
        np.clip(x, -bound, bound, out=x)
    return x


#: Robot points for separation when the scene has no human proxy (nothing reads them then).
_NO_POINTS = np.empty((0, 3))
_NO_POINTS.flags.writeable = False


def _box(n: int, low: float, high: float) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=(n,), dtype=np.float64)


@dataclass(frozen=True)
class EnvConfig:
    """Per-episode configuration of the environment (see `PandaTaskEnv.configure`)."""

    randomization: Mapping[str, Sequence[float]]
    drift: Mapping[str, Any]
    reality_gap: RealityGap | None
    safety: SafetyLimits
    faults: tuple[FaultRequest, ...]
    max_steps: int
    target_quality: float
    qc_tolerance_m: float


class PandaTaskEnv(gym.Env[dict[str, Any], np.ndarray]):
    """One task instance of one family on one engine (see the module docstring)."""

    metadata = {"render_modes": [], "render_fps": int(NOMINAL_CONTROL_RATE_HZ)}  # noqa: RUF012

    def __init__(
        self,
        task_id: str | None = None,
        engine: str = "mujoco",
        *,
        family: str | None = None,
        randomization: Mapping[str, Sequence[float]] | None = None,
        drift: Mapping[str, Any] | None = None,
        reality_gap: RealityGap | None = None,
        safety: SafetyLimits | None = None,
        faults: Iterable[str | FaultRequest] = (),
        max_steps: int = 400,
        target_quality: float | None = None,
        qc_tolerance_m: float | None = None,
        render_mode: str | None = None,
    ) -> None:
        if task_id is None:
            if family is None:
                raise EvalError("give a task_id (e.g. 'pick_place/cube_center')", key="task_id")
            ids = family_task_ids(family)
            if not ids:
                raise EvalError(f"family: unknown family {family!r}", key="family")
            task_id = ids[0]
        self.task = make_task(task_id)
        if family is not None and family != self.task.family:
            raise EvalError(f"task_id: {task_id!r} is not in family {family!r}", key="task_id")
        if engine not in ENGINES:
            raise EvalError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}", key="engine")
        if render_mode is not None:
            raise EvalError("render_mode: rendering is not supported", key="render_mode")
        self.render_mode = render_mode
        self.engine = engine
        self.kin = panda_kinematics()
        self._scene = self.task.scene()
        self.backend = make_backend(engine, self.task)
        self.controller = ArmController(self.kin)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                "joint_pos": _box(9, -JOINT_POS_BOUND, JOINT_POS_BOUND),
                "joint_vel": _box(9, -JOINT_VEL_BOUND, JOINT_VEL_BOUND),
                "gripper_width": _box(1, 0.0, 1.0),
                "tcp_pos": _box(3, -POS_BOUND_M, POS_BOUND_M),
                "tcp_target": _box(3, -POS_BOUND_M, POS_BOUND_M),
                "object_pos": _box(3, -POS_BOUND_M, POS_BOUND_M),
                "object_quat": _box(4, -1.0, 1.0),
                "object_visible": _box(1, 0.0, 1.0),
                "goal_pos": _box(3, -POS_BOUND_M, POS_BOUND_M),
                "grasped": _box(1, 0.0, 1.0),
                "obstacle": _box(4, -POS_BOUND_M, POS_BOUND_M),
            }
        )
        self.configure(
            randomization=randomization,
            drift=drift,
            reality_gap=reality_gap,
            safety=safety,
            faults=faults,
            max_steps=max_steps,
            target_quality=target_quality,
            qc_tolerance_m=qc_tolerance_m,
        )
        self.params = EpisodeParams()
        self.sampled: dict[str, Any] = {}
        self._episode_ready = False

    # ------------------------------------------------------------------ configuration

    def configure(
        self,
        *,
        randomization: Mapping[str, Sequence[float]] | None = None,
        drift: Mapping[str, Any] | None = None,
        reality_gap: RealityGap | None = None,
        safety: SafetyLimits | None = None,
        faults: Iterable[str | FaultRequest] = (),
        max_steps: int = 400,
        target_quality: float | None = None,
        qc_tolerance_m: float | None = None,
    ) -> None:
        """Set the configuration used from the next `reset` (same meaning as the constructor)."""
        ranges = DEFAULT_RANDOMIZATION if randomization is None else dict(randomization)
        variations_from_ranges(ranges)  # validates
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise EvalError(f"max_steps: expected a whole number ≥ 1, got {max_steps!r}")
        q_star = self.task.spec.target_quality if target_quality is None else target_quality
        if not 0.0 <= q_star <= 1.0:
            raise EvalError("target_quality: must be in [0, 1]", key="target_quality")
        tol = self.task.spec.qc_tolerance_m if qc_tolerance_m is None else qc_tolerance_m
        if tol <= 0:
            raise EvalError("qc_tolerance: must be > 0", key="qc_tolerance")
        self.config = EnvConfig(
            randomization=ranges,
            drift=check_drift(drift or {}),
            reality_gap=reality_gap,
            safety=safety or SafetyLimits(),
            faults=fault_requests(faults, self.task.faults, self.task.family),
            max_steps=max_steps,
            target_quality=float(q_star),
            qc_tolerance_m=float(tol),
        )

    @property
    def control_dt(self) -> float:
        """Control period of the current episode (s)."""
        return self.params.control_dt

    @property
    def step_limit(self) -> int:
        """Control steps allowed this episode (max_steps rescaled to the control rate)."""
        rate = 1.0 / self.params.control_dt
        return max(1, round(self.config.max_steps * rate / NOMINAL_CONTROL_RATE_HZ))

    # ------------------------------------------------------------------ reset

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if options:
            unknown = set(options) - {"faults"}
            if unknown:
                raise EvalError(f"reset options: unknown key(s) {', '.join(sorted(unknown))}")
            self.config = EnvConfig(
                **{
                    **self.config.__dict__,
                    "faults": fault_requests(options["faults"], self.task.faults, self.task.family),
                }
            )
        cfg = self.config
        streams = np.random.SeedSequence(int(self.np_random.integers(2**63))).spawn(3)
        dr_rng, self._noise_rng, fault_rng = (np.random.default_rng(s) for s in streams)
        self.sampled = sample_randomization(variations_from_ranges(cfg.randomization), dr_rng)
        self.params = episode_params(self.sampled, cfg.drift, cfg.reality_gap)
        task = self.task
        scene = self._scene
        offset = np.array(self.params.object_xy_offset)
        positions: dict[str, np.ndarray] = {}
        for name in task.placement_bodies():
            body = scene.body(name)
            positions[name] = np.array(body.pos) + np.array([offset[0], offset[1], 0.0])
        self.backend.reset(
            InitialState(arm_q=HOME_Q.copy(), finger_q=FINGER_MAX_M, body_pos=positions),
            self.params.physics,
        )
        self.controller.reset(HOME_Q)
        self.goal = task.goal_pos(offset)
        self._monitor = SafetyMonitor(
            cfg.safety,
            self.kin.lower,
            self.kin.upper,
            self.kin.vel_limit,
            task.human(),
            (*scene.names("fixture"), *scene.names("drawer"), "obstacle"),
        )
        self._injector = FaultInjector(cfg.faults, fault_rng)
        self._recorder = ControlRecorder(self.params.control_dt)
        # Per-episode constants, read every step.
        self._dt = self.params.control_dt
        self._substeps = self.params.substeps
        # Robot points and their separation from the proxy are needed only with a person in the
        # cell; `_read_state` computes the separation once for both uses per step.
        self._watch_human = self._monitor.human is not None
        self._points = _NO_POINTS
        self._separation: float | None = None
        self._queue: deque[np.ndarray] = deque(
            [np.zeros(4) for _ in range(self.params.action_latency_steps)]
        )
        self._step = 0
        self._step_limit = self.step_limit
        self._clipped = 0
        self._complete_steps = 0
        self._attached_steps = 0
        self._status = "ok"
        self._status_reason = ""
        self._obstacle = np.zeros(4)
        self._frozen: tuple[np.ndarray, np.ndarray] | None = None
        self._events_seen = 0
        self._episode_ready = True
        self._read_state()
        self.object_start = self._point.copy()
        self._quality = task.quality(self._task_state(), self.goal)
        self._error = task.goal_error(self._task_state(), self.goal)
        obs = self._observation()
        info = {
            "randomization": dict(self.sampled),
            "drift": dict(cfg.drift),
            "control_dt": self.params.control_dt,
            "quality": self._quality,
            "is_success": False,
        }
        return obs, info

    # ------------------------------------------------------------------ state

    def _read_state(self) -> None:
        b = self.backend
        q, qd = b.joint_state()
        self._q, self._qd = q, qd
        rots, origins = self.kin.link_frames(q[:7])
        self._rots, self._origins = rots, origins
        tcp, _ = self.kin.tcp_from_frames(rots[6], origins[6])
        self._tcp = tcp
        self._tcp_vel = tcp_linear_velocity(rots, origins, tcp, qd)
        if self._watch_human:
            self._points = np.concatenate((origins[2:], tcp[None]))
            self._separation = self._monitor.separation(self._points)
        name = self.task.object_name
        pos, quat = b.body_pose(name)
        self._obj_pos, self._obj_quat = pos, quat
        self._point = self.task.tracked_point(pos)
        vel = b.body_velocity(name)
        self._obj_speed = math.sqrt(float(vel @ vel))
        self._slide = b.slide_q(name) if self.task.family == "drawer_open" else 0.0

    def _task_state(self) -> TaskState:
        return TaskState(
            object_pos=self._point,
            object_speed=self._obj_speed,
            slide_q=self._slide,
            attached=self.backend_attached,
        )

    @property
    def backend_attached(self) -> bool:
        return getattr(self.backend, "attached", None) is not None

    def _observation(self) -> dict[str, np.ndarray]:
        noise = self.params.sensor_noise_std
        # One draw per step for all noisy channels: joints (9), TCP (3), object (3).
        eps = self._noise_rng.normal(0.0, noise, size=15) if noise > 0 else np.zeros(15)
        if self._frozen is not None:
            obj_pos, obj_quat, visible = self._frozen[0].copy(), self._frozen[1].copy(), 0.0
        else:
            obj_pos, obj_quat, visible = self._point + eps[12:], self._obj_quat.copy(), 1.0
        # Joint angles and the TCP stay far inside the bounds (joint limits < 3.2 rad, reach
        # < 1.2 m); velocities and the free object are clipped if physics ever flings them.
        return {
            "joint_pos": self._q + eps[:9],
            "joint_vel": _bounded(self._qd.copy(), JOINT_VEL_BOUND),
            "gripper_width": np.array([min(1.0, max(0.0, float(self._q[7] + self._q[8])))]),
            "tcp_pos": self._tcp + eps[9:12],
            "tcp_target": self.controller.tcp_target.copy(),
            "object_pos": _bounded(obj_pos, POS_BOUND_M),
            "object_quat": obj_quat,
            "object_visible": np.array([visible]),
            "goal_pos": self.goal.copy(),
            "grasped": np.array([1.0 if self.backend_attached else 0.0]),
            "obstacle": self._obstacle.copy(),
        }

    # ------------------------------------------------------------------ step

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if not self._episode_ready:
            raise EvalError("call reset() before step()", key="reset")
        act = np.array(action, dtype=np.float64).reshape(4)
        if np.abs(act).max() > 1.0:
            np.clip(act, -1.0, 1.0, out=act)
            self._clipped += 1
        self._queue.append(act)
        applied = self._queue.popleft()
        task, cfg, dt = self.task, self.config, self._dt
        step = self._step

        cap = V_MAX_MPS
        if self._watch_human and self._monitor.reduced_speed_required(
            self._points, self._separation
        ):
            cap = min(cap, SSM_SPEED_FRACTION * cfg.safety.reduced_speed_mps)
        velocity = capped_velocity(applied, cap)
        gripper = float(applied[3])
        width = task.grasp_width()
        slip = self._injector.running("grasp_slip", step)
        if slip is not None:
            gripper = (width / 2 + 0.01) / FINGER_MAX_M * 2.0 - 1.0
        command = self.controller.command(
            velocity, gripper, dt, self._q[:7], self._tcp, self._rots, self._origins
        )
        stall = self._injector.running("actuator_stall", step)
        if stall is not None:
            command.arm_cmd[stall.request.joint] = stall.data["hold"]
        self.backend.step(command.arm_cmd, command.finger, self._substeps)
        self._step += 1
        t = self._step * dt
        self._read_state()

        # Grasp model (see sim_suites.controller).
        if self.backend_attached:
            if grasp_releases(command.finger, width):
                self.backend.detach()
        elif task.graspable and slip is None:
            part = self._point - self._tcp
            if grasp_closes(command.finger, self._q[7] + self._q[8], width, part):
                self.backend.attach(task.object_name)

        self._attached_steps = self._attached_steps + 1 if self.backend_attached else 0
        contacts = self.backend.contact_forces()
        injected: list[str] = []
        if self._injector.pending or self._injector.active:
            # Skipped when no fault was requested or fired: then nothing can fire or clear.
            injected = self._fault_step(t, command.tcp_target, contacts)

        tcp_speed = math.sqrt(float(self._tcp_vel @ self._tcp_vel))
        decision: StopDecision | None = self._monitor.update(
            self._step,
            t,
            self._q[:7],
            self._qd[:7],
            self._tcp,
            tcp_speed,
            self._points,
            contacts,
            self._point,
            self._separation,
        )
        if (
            not math.isfinite(float(self._q.sum()) + self._obj_speed)
            or self._obj_speed > DIVERGED_SPEED_MPS
            or self.backend.diverged()
        ):
            decision = StopDecision("error", "physics diverged (simulator instability)")
        state = self._task_state()
        self._error = task.goal_error(state, self.goal)
        self._quality = graded_quality(self._error, task.spec.tolerance_m)
        power = float(np.abs(self.backend.applied_torque() * self._qd).sum())
        self._recorder.add(
            command.tcp_target,
            self._tcp,
            self._unintended_contact(contacts),
            power,
            self._point,
            self._error,
        )
        done = task.complete(state, self.goal, self._error)
        self._complete_steps = self._complete_steps + 1 if done else 0

        terminated = decision is not None or self._complete_steps >= COMPLETION_HOLD_STEPS
        truncated = not terminated and self._step >= self._step_limit
        if decision is not None:
            self._status, self._status_reason = decision.status, decision.reason
        if terminated or truncated:
            self._monitor.finish()
            self._episode_ready = False
        new_events = self._monitor.events[self._events_seen :]
        self._events_seen = len(self._monitor.events)
        success = self._status == "ok" and self._quality >= cfg.target_quality
        info = {
            "quality": self._quality,
            "is_success": bool(success and (terminated or truncated)),
            "goal_error_m": self._error,
            "status": self._status,
            "status_reason": self._status_reason,
            "t_s": t,
            "tcp_speed_mps": tcp_speed,
            "grasped": self.backend_attached,
            "safety_events": list(new_events),
            "faults_injected": injected,
        }
        return self._observation(), float(self._quality), terminated, truncated, info

    def _fault_step(
        self, t: float, tcp_target: np.ndarray, contacts: Mapping[tuple[str, str], float]
    ) -> list[str]:
        """Fire due faults, freeze perception during a dropout, mark cleared faults.

        Returns:
            the kinds injected this step.
        """
        safety = self.config.safety
        view = FaultView(
            step=self._step,
            t_s=t,
            attached=self.backend_attached,
            attached_steps=self._attached_steps,
            object_pos=self._point,
            object_start=self.object_start,
            goal=self.goal,
            tcp=self._tcp,
            tcp_target=tcp_target,
            obstacle_contact_n=contacts.get((ROBOT, "obstacle"), 0.0),
            obstacle_contact_warn_n=safety.contact_warn_fraction * safety.fixture_contact_limit_n,
        )
        injected = [self._inject(req, view) for req in self._injector.due(view)]
        dropout = self._injector.running("perception_dropout", self._step)
        if dropout is None:
            self._frozen = None
        elif self._frozen is None:
            self._frozen = (self._point.copy(), self._obj_quat.copy())
        self._injector.update_clearing(view)
        return injected

    def _inject(self, req: FaultRequest, view: FaultView) -> str:
        kind = req.kind
        if kind == "grasp_slip":
            self.backend.detach()
            self._injector.start(req, view, "grasp released; part dropped")
        elif kind == "perception_dropout":
            self._injector.start(req, view, f"object pose frozen for {req.duration} steps")
        elif kind == "planner_dead_end":
            xy = self.task.dead_end_xy(view.object_start, view.goal)
            half = OBSTACLE_TOP_M / 2
            self.backend.move_body("obstacle", np.array([xy[0], xy[1], half]))
            self._obstacle = np.array([xy[0], xy[1], OBSTACLE_TOP_M, 1.0])
            self._injector.start(
                req, view, "pillar blocks the transport path", x=float(xy[0]), y=float(xy[1])
            )
        else:
            joint = req.joint
            self._injector.start(
                req,
                view,
                f"joint {joint + 1} stalled for {req.duration} steps",
                hold=float(self._q[joint]),
            )
        return kind

    def _unintended_contact(self, contacts: Mapping[tuple[str, str], float]) -> float:
        """Peak contact not part of the task's intended interaction (for QC)."""
        obj = self.task.object_name
        worst = 0.0
        for (a, b), force in contacts.items():
            if a == ROBOT and b == obj:
                continue
            if obj in (a, b) and TABLE in (a, b):
                continue
            if a == ROBOT or obj in (a, b):
                worst = max(worst, force)
        return worst

    # ------------------------------------------------------------------ episode summary

    def episode_summary(self) -> dict[str, Any]:
        """Status, quality, faults, safety events, control signals, QC and energy so far."""
        task = self.task
        control, qc, energy = self._recorder.summary(
            self.config.qc_tolerance_m, task.spec.tolerance_m, self.object_start, self.goal
        )
        control["peak_tcp_speed_mps"] = round(self._monitor.peak_tcp_speed_mps, 6)
        control["min_separation_m"] = (
            None
            if self._monitor.min_separation_m is None
            else round(self._monitor.min_separation_m, 6)
        )
        control["actions_clipped"] = self._clipped
        control["goal_error_m"] = round(float(self._error), 9)
        t_end = self._step * self.params.control_dt
        done = self._status == "ok" and self._quality >= self.config.target_quality
        return {
            "status": self._status,
            "status_reason": self._status_reason,
            "quality": float(self._quality),
            "steps": self._step,
            "duration_s": t_end,
            "faults": self._injector.records(t_end, done),
            "safety_events": tuple(self._monitor.events),
            "control": control,
            "qc": qc,
            "energy_wh": energy,
        }

    def close(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
        super().close()
