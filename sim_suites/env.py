"""`PandaTaskEnv`: the Gymnasium environment for one task instance on one engine.

Composition, not inheritance: a physics backend (MuJoCo or PyBullet, `sim_suites.engines`) holds the
arm (`robot`: `sim_suites.robot.arm_model`, "panda" by default) and the arena; a `Task` scores the
physics state; `ArmController` turns actions into joint set-points; `GraspTracker`
(`sim_suites.grasping`) says whether the part is held; `SafetyMonitor`, `FaultEffects`
(`sim_suites.fault_effects`) and `ControlRecorder` watch every control step; `Perception`
(`sim_suites.perception`) turns a physics reading into what the policy sees; the per-episode
settings live in `EnvConfig` (`sim_suites.env_config`).

Spaces:

- action: Box(−1, 1, (4,), float32) = [vx, vy, vz, g], a TCP velocity command (full scale
  0.4 m/s, capped in norm) and the gripper set-point (−1 closed … +1 open); see
  `sim_suites.controller`. Out-of-range actions are clipped and counted (`actions_clipped`).
- observation: a Dict: state (`sim_suites.observations`), or in the camera modes `rgb` / `rgbd`
  proprioception and images without the object pose (`sim_suites.rendering.feed`).

Reward: the current graded quality q (see `sim_suites.tasks.base`). An episode terminates when
the task is complete (within tolerance, released, at rest for 5 steps), on a protective stop or a
workspace breach; it is truncated after `max_steps` control steps at the nominal 50 Hz (the time
budget is kept when the control rate is randomized). `info` carries `quality`, `is_success`,
`status`, `safety_events` (new `SafetyEvent`s), `faults_injected` and more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from sim_suites.command_path import ArmCommandPath, JointLimits, RobotController
from sim_suites.control_quality import ControlRecorder, unintended_contact
from sim_suites.controller import V_MAX_MPS
from sim_suites.engines.base import DIVERGED_REASON, physics_diverged
from sim_suites.engines.factory import ENGINES, check_engine, make_backend
from sim_suites.env_config import EnvConfig, env_config, with_reset_options
from sim_suites.fault_effects import FaultEffects, obstacle_contact_n, obstacle_warn_n
from sim_suites.faults import FaultInjector, FaultRequest, FaultView
from sim_suites.grasping import GraspTracker
from sim_suites.instances import draw_instance
from sim_suites.observations import StateReading
from sim_suites.perception import Perception
from sim_suites.rendering.cameras import DEFAULT_IMAGE_SIZE
from sim_suites.rendering.feed import CAMERA_RATE_HZ
from sim_suites.robot import arm_model, tcp_linear_velocity
from sim_suites.safety_monitors import (
    SEPARATION_RANGE_M,
    SSM_SPEED_FRACTION,
    SafetyLimits,
    SafetyMonitor,
    StopDecision,
)
from sim_suites.scenes import check_scene_seed, scene_record
from sim_suites.tasks import TaskState, family_task_ids, graded_quality, make_task
from sim_suites.tasks.base import COMPLETION_HOLD_STEPS
from sim_suites.variations import (
    NOMINAL_CONTROL_RATE_HZ,
    EpisodeParams,
    RealityGap,
)

__all__ = ["ENGINES", "EnvConfig", "PandaTaskEnv"]
#: What `step` returns: observation, reward, terminated, truncated, info.
StepResult = tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]

class PandaTaskEnv(gym.Env[dict[str, Any], np.ndarray]):
    """One task instance of one family on one engine (see the module docstring)."""

    metadata = {"render_modes": [], "render_fps": int(NOMINAL_CONTROL_RATE_HZ)}  # noqa: RUF012

    def __init__(
        self,
        task_id: str | None = None,
        engine: str = "mujoco",
        *,
        robot: str = "panda",
        family: str | None = None,
        randomization: Mapping[str, Sequence[float]] | None = None,
        drift: Mapping[str, Any] | None = None,
        reality_gap: RealityGap | None = None,
        safety: SafetyLimits | None = None,
        faults: Iterable[str | FaultRequest] = (),
        max_steps: int = 400,
        target_quality: float | None = None,
        qc_tolerance_m: float | None = None,
        grasp: str = "contact",
        render_mode: str | None = None,
        observation_mode: str = "state",
        image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE,
        camera_rate_hz: float = CAMERA_RATE_HZ,
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
        check_engine(engine)
        if render_mode is not None:
            raise EvalError("render_mode: rendering is not supported", key="render_mode")
        self.render_mode = render_mode
        self.engine = engine
        self.kin = kin = arm_model(robot)
        self._scene = self.task.scene()
        self._object_slides = self._scene.body(self.task.object_name).joint == "slide"
        self.perception = Perception(
            observation_mode, image_size, camera_rate_hz, bool(self.task.tool_name), kin.n + 2
        )
        self.observation_mode = observation_mode
        self.backend = make_backend(engine, self._scene, self.perception.image_size, kin)
        # The command path, as on the robot: the harness side (controller, cap, limiter) and
        # the robot side (the actuator delay's queue and the follower), `sim_suites.command_path`.
        self.command_path = ArmCommandPath(
            kin, JointLimits.of_arm(kin), 1.0 / NOMINAL_CONTROL_RATE_HZ
        )
        self.robot = RobotController(self.kin)
        self.follower = self.robot.follower
        self.grasp = GraspTracker(self.task)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.observation_space = self.perception.space
        self.configure(
            randomization=randomization,
            drift=drift,
            reality_gap=reality_gap,
            safety=safety,
            faults=faults,
            max_steps=max_steps,
            target_quality=target_quality,
            qc_tolerance_m=qc_tolerance_m,
            grasp=grasp,
        )
        self.params = EpisodeParams()
        self.sampled: dict[str, Any] = {}
        self._episode_ready = False

    # ------------------------------------------------------------------ configuration

    def configure(self, **settings: Any) -> None:
        """Set the configuration used from the next `reset`: the constructor's randomization,
        drift, reality_gap, safety, faults, max_steps, target_quality, qc_tolerance_m and
        grasp ("contact", the default: friction holds the part, or "assisted": a weld holds
        it; `sim_suites.grasping`), checked by `sim_suites.env_config.env_config`."""
        self.config = env_config(self.task, **settings)

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
        options = dict(options or {})
        scene_seed = options.pop("scene_seed", None)
        if options:
            self.config = with_reset_options(self.config, self.task, options)
        cfg = self.config
        streams = np.random.SeedSequence(int(self.np_random.integers(2**63))).spawn(5)
        dr_rng, noise_rng, fault_rng, look_rng, scene_rng = (
            np.random.default_rng(s) for s in streams
        )
        if scene_seed is not None:
            # The pair's scene stream (`embodied_eval.seeds.episode_seeds`): shared with the twin
            # robot and the technician's setup, so both halves of a pair start from one scene.
            scene_rng = np.random.default_rng(check_scene_seed(scene_seed))
        draw = draw_instance(self.backend, self.task, self._scene, cfg, dr_rng, scene_rng)
        self.sampled, self.params, self.invalid_draws = draw.sampled, draw.params, draw.invalid
        task = self.task
        scene = self._scene
        offset = np.array(self.params.object_xy_offset)
        self.grasp.reset(cfg.grasp)
        self.perception.reset(self.backend, scene, self.params, noise_rng, look_rng)
        self.goal = task.goal_pos(offset)
        self._human = task.human()
        self._monitor = SafetyMonitor(
            cfg.safety,
            self.kin.lower,
            self.kin.upper,
            self.kin.vel_limit,
            self._human,
            (
                *scene.names("fixture"),
                *scene.names("drawer"),
                "obstacle",
                *scene.names("distractor"),
            ),
        )
        self._faults = FaultEffects(FaultInjector(cfg.faults, fault_rng))
        self._recorder = ControlRecorder(self.params.control_dt)
        # Per-episode constants, read every step.
        self._dt = self.params.control_dt
        self._substeps = self.params.substeps
        # The separation from the proxy is needed only with a person in the cell; `_read_state`
        # measures it once per step for both the speed cap and the monitor.
        self._watch_human = self._human is not None
        self._separation: float | None = None
        self._step = 0
        self._step_limit = self.step_limit
        self._clipped = 0
        self._peak_external_n = 0.0
        self._complete_steps = 0
        self._held = False
        self._status = "ok"
        self._status_reason = ""
        self._events_seen = 0
        self._episode_ready = True
        self._read_state()
        self.command_path.reset(self._q, dt_s=self._dt)
        # Commands reach the servos after the actuator delay plus the command latency (the
        # drift's and firmware's latency steps), as on the robot.
        delay = self.params.action_latency_steps * self._dt + self.params.actuator_delay_s
        self.robot.reset(self._q, delay, self.params.actuator_bandwidth_hz)
        self._tcp_target = self.command_path.tcp_target.copy()
        self.object_start = self._point.copy()
        standing = (
            {"distractors_xy": [list(xy) for xy in draw.distractors]} if draw.distractors else {}
        )
        self.start_scene = scene_record(
            "setup",
            self._point,
            self._obj_quat,
            object_xy_offset_m=[round(float(v), 6) for v in offset],
            object_size_scale=round(float(self.params.physics.object_size_scale), 6),
            **standing,
        )
        self._quality = task.quality(self._task_state(), self.goal)
        self._error = task.goal_error(self._task_state(), self.goal)
        obs = self._observation()
        info = {
            "randomization": dict(self.sampled),
            "scene": dict(self.start_scene),
            "invalid_draws": [dict(d) for d in self.invalid_draws],
            "not_applied": dict(draw.not_applied),
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
        rots, origins = self.kin.link_frames(q[: self.kin.n])
        self._rots, self._origins = rots, origins
        tcp, _ = self.kin.tcp_from_frames(rots[-1], origins[-1])
        self._tcp = tcp
        self._tcp_vel = tcp_linear_velocity(rots, origins, tcp, qd)
        if self._human is not None:
            gaps = b.separation(self._human.part_names, SEPARATION_RANGE_M)
            self._separation = min(gaps.values())
        name = self.task.object_name
        pos, quat = b.body_pose(name)
        self._obj_pos, self._obj_quat = pos, quat
        self._point = self.task.tracked_point(pos)
        vel = b.body_velocity(name)
        self._obj_speed = math.sqrt(float(vel @ vel))
        self._slide = b.slide_q(name) if self._object_slides else 0.0
        # The grasped part: the tool's grasp point when the task has a tool, else the object.
        tool = self.task.tool_name
        self._tool = b.body_pose(tool)[0] if tool else None
        self._grasp_point = self._point if self._tool is None else self._tool

    @property
    def object_point(self) -> np.ndarray:
        """True position (3,) of the task's tracked point now, m (a copy; for records)."""
        return self._point.copy()

    def _task_state(self) -> TaskState:
        return TaskState(
            object_pos=self._point,
            object_speed=self._obj_speed,
            slide_q=self._slide,
            attached=self._held,
        )

    def _observation(self) -> dict[str, np.ndarray]:
        """What the policy sees now (state, or proprioception and camera images)."""
        reading = StateReading(
            q=self._q,
            qd=self._qd,
            tcp=self._tcp,
            tcp_target=self._tcp_target,
            point=self._point,
            quat=self._obj_quat,
            goal=self.goal,
            grasped=self._held,
            obstacle=self._faults.obstacle,
            frozen=self._faults.frozen,
            tool=self._tool,
        )
        return self.perception.observe(self.backend, reading, self._step)

    # ------------------------------------------------------------------ step

    def step(self, action: np.ndarray) -> StepResult:
        if not self._episode_ready:
            raise EvalError("call reset() before step()", key="reset")
        act = np.array(action, dtype=np.float64).reshape(4)
        if np.abs(act).max() > 1.0:
            np.clip(act, -1.0, 1.0, out=act)
            self._clipped += 1
        cap = V_MAX_MPS  # speed-and-separation monitoring: slower with a person near
        if self._watch_human and self._monitor.reduced_speed_required(self._separation):
            cap = min(cap, SSM_SPEED_FRACTION * self.config.safety.reduced_speed_mps)
        slip = self._faults.injector.running("grasp_slip", self._step)
        if slip is not None:
            act[3] = (self.grasp.width / 2 + 0.01) / self.kin.finger_max_m * 2.0 - 1.0
        sent = self.command_path.step(act, self._q, cap, (self._rots, self._origins))
        self.send_joint_command(sent.target, sent.duration_s, sent.finger)
        return self.robot_step(sent.tcp_target)

    def send_joint_command(self, target: np.ndarray, duration_s: float, finger: float) -> None:
        """A one-point joint trajectory (n,) rad over `duration_s` and the gripper's wanted
        opening (m per finger), as the robot's controllers take them: they reach the follower
        after the command delay (`command_delay_s`)."""
        if not self._episode_ready:
            raise EvalError("call reset() before step()", key="reset")
        self.robot.send(self._step * self._dt, target, duration_s, finger)

    @property
    def command_delay_s(self) -> float:
        """This episode's delay from a joint command to the follower, s."""
        return self.robot.delay_s

    def robot_step(self, tcp_target: np.ndarray | None = None) -> StepResult:
        """Advance one control period on the robot's side of the command path: the commands due
        reach the follower, the servos follow it, the physics steps, the monitors watch.

        Args:
            tcp_target: (3,) the harness's TCP set-point this period, m (for the tracking error;
                default: the TCP of the follower's set-point).
        """
        if not self._episode_ready:
            raise EvalError("call reset() before step()", key="reset")
        task, cfg, dt = self.task, self.config, self._dt
        step = self._step
        injector = self._faults.injector
        command = self.robot.update(step * dt, dt, self._rots, self._origins)
        self._tcp_target = command.tcp_target if tcp_target is None else tcp_target
        slip = injector.running("grasp_slip", step)
        stall = injector.running("actuator_stall", step)
        if stall is not None:
            command.arm_cmd[stall.request.joint] = stall.data["hold"]
        if self._human is not None and self._human.moves:
            for part, pos in self._human.moving_parts(step * dt).items():
                self.backend.move_body(part, pos)
        self.backend.step(command.arm_cmd, command.finger, self._substeps)
        self._step += 1
        t = self._step * dt
        self._read_state()
        self._held = self.grasp.update(
            self.backend,
            command.finger,
            float(self._q[-2] + self._q[-1]),
            self._grasp_point - self._tcp,
            slip is not None,
        )
        contacts = self.backend.contact_forces()
        injected: list[str] = []
        if not self._faults.idle:
            # Skipped when no fault was requested or fired: then nothing can fire or clear.
            view = FaultView(
                step=self._step,
                t_s=t,
                attached=self._held,
                attached_steps=self.grasp.held_steps,
                object_pos=self._point,
                object_start=self.object_start,
                goal=self.goal,
                tcp=self._tcp,
                tcp_target=self._tcp_target,
                obstacle_contact_n=obstacle_contact_n(contacts),
                obstacle_contact_warn_n=obstacle_warn_n(cfg.safety),
            )
            injected = self._faults.step(self.backend, task, view, self._q, self._obj_quat)
            if "grasp_slip" in injected:
                self._held = self.grasp.holding(self.backend)

        tcp_speed = math.sqrt(float(self._tcp_vel @ self._tcp_vel))
        external = self.backend.robot_external_force()
        self._peak_external_n = max(self._peak_external_n, math.sqrt(float(external @ external)))
        decision: StopDecision | None = self._monitor.update(
            self._step,
            t,
            self._q[: self.kin.n],
            self._qd[: self.kin.n],
            self._tcp,
            tcp_speed,
            contacts,
            self._point,
            self._separation,
            external,
        )
        if physics_diverged(float(self._q.sum()), self._obj_speed, self.backend.diverged()):
            decision = StopDecision("error", DIVERGED_REASON)
        state = self._task_state()
        self._error = task.goal_error(state, self.goal)
        self._quality = graded_quality(self._error, task.spec.tolerance_m)
        power = float(np.abs(self.backend.applied_torque() * self._qd).sum())
        self._recorder.add(
            self._tcp_target,
            self._tcp,
            unintended_contact(contacts, task.object_name, task.tool_name),
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
            "grasped": self._held,
            "safety_events": list(new_events),
            "faults_injected": injected,
        }
        return self._observation(), float(self._quality), terminated, truncated, info

    # ------------------------------------------------------------------ episode summary

    def episode_summary(self) -> dict[str, Any]:
        """Status, quality, faults, safety events, control signals, QC and energy so far."""
        task = self.task
        control, qc, energy = self._recorder.summary(
            self.config.qc_tolerance_m, task.spec.tolerance_m, self.object_start, self.goal
        )
        monitor = self._monitor
        control["peak_tcp_speed_mps"] = round(monitor.peak_tcp_speed_mps, 6)
        control["min_separation_m"] = (
            None if monitor.min_separation_m is None else round(monitor.min_separation_m, 6)
        )
        control["actions_clipped"] = self._clipped
        # What a wrist force/torque sensor read at its peak (the monitor's contact-stop force).
        control["peak_external_force_n"] = round(self._peak_external_n, 6)
        control["goal_error_m"] = round(float(self._error), 9)
        control["grasp_mode"] = self.config.grasp
        t_end = self._step * self.params.control_dt
        done = self._status == "ok" and self._quality >= self.config.target_quality
        return {
            "status": self._status,
            "status_reason": self._status_reason,
            "quality": float(self._quality),
            "steps": self._step,
            "duration_s": t_end,
            "faults": self._faults.injector.records(t_end, done),
            "safety_events": tuple(monitor.events),
            "control": control,
            "qc": qc,
            "energy_wh": energy,
        }

    def close(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
        super().close()
