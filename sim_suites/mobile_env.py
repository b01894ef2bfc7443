"""`MobileTaskEnv`: the Gymnasium environment of a mobile manipulation task on one engine.

The robot is the `mobile_panda` profile (`sim_suites.robot_profiles`): the identified Panda on
a holonomic base with a torso lift. Its arm runs the one command path of every Panda
(`sim_suites.command_path.ArmCommandPath` and `RobotController`, in the arm's mount frame), its
base the base's limiter (`BaseLimiter`: speed and acceleration limits), and one
`SafetyMonitor` watches the whole robot. The room is drawn from the pair's scene seed
(`sim_suites.room`); the task scores the physics state (`sim_suites.families.mobile_pick_place`).

Spaces:

- action: Box(−1, 1, (8,), float32) = [ax, ay, az, g, bx, by, bω, lift]: the arm's TCP
  velocity in the base frame (full scale 0.4 m/s) and the gripper, as the fixed Panda's action;
  the base's velocity in its own frame (full scale 1 m/s and 1 rad/s) and the lift's (0.1 m/s).
- observation: a Dict of float64 arrays (`sim_suites.mobile_observations`), positions in the
  map frame as the robot knows it: through its wheel odometry.

Speed and separation (the controller's side; the monitor measures): with a person within the
profile's reduced-speed zone the base drives at most its reduced speed; when the separation
falls below the protective separation distance S_p at the robot's speed and stopping time
(`sim_suites.safety_monitors.protective_separation`, ISO 13855-style) plus a margin, base and arm
are commanded to stop (a monitored stop: the episode goes on once the person has moved away).

Metrics (`sim_suites.mobile_metrics`) go into the episode summary's `control`: path length,
shortest path, SPL term, collisions per metre, time to goal, minimum separation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from sim_suites.arena import Workspace
from sim_suites.command_path import ArmCommandPath, BaseLimiter, JointLimits, RobotController
from sim_suites.control_quality import ControlRecorder, unintended_contact
from sim_suites.engines.base import DIVERGED_REASON, InitialState, physics_diverged
from sim_suites.engines.factory import check_engine, make_backend
from sim_suites.env_config import env_config
from sim_suites.families.mobile_pick_place import MobilePickPlace
from sim_suites.grasping import GraspTracker
from sim_suites.mobile_description import LIFT_RANGE_M, MOUNT_X_M, MOUNT_Z0_M
from sim_suites.mobile_metrics import navigation_record
from sim_suites.mobile_observations import (
    MobileReading,
    floor_plan_array,
    integrate_odometry,
    mobile_observation,
    mobile_space,
    rot_z,
)
from sim_suites.mobile_safety import (
    CollisionCounter,
    governing_speed,
    person_separation,
    speed_caps,
)
from sim_suites.panda_kinematics import FINGER_MAX_M, panda_kinematics
from sim_suites.robot import tcp_linear_velocity
from sim_suites.robot_profiles import MOBILE_PANDA
from sim_suites.room import ROBOT_RADIUS_M, ROOM_X, ROOM_Y, task_shortest_path
from sim_suites.safety_monitors import SafetyMonitor, StopDecision
from sim_suites.scenes import SCENE_KNOBS, check_scene_seed, scene_record
from sim_suites.tasks import TaskState, graded_quality, make_task
from sim_suites.tasks.base import COMPLETION_HOLD_STEPS
from sim_suites.variations import (
    NOMINAL_CONTROL_RATE_HZ,
    EpisodeParams,
    episode_params,
    sample_randomization,
    variations_from_ranges,
)

#: The arm's posture while driving: tucked over the base (TCP 0.31 m ahead of the mount).
CARRY_Q = np.array([0.0, -0.9, 0.0, -2.7, 0.0, 1.9, math.pi / 4])
#: The room as the workspace: TCP and cube stay inside its walls, below 2 m.
ROOM_WORKSPACE = Workspace(
    tcp_low=(0.0, -ROOM_Y / 2, -0.01),
    tcp_high=(ROOM_X, ROOM_Y / 2, 2.0),
    object_low=(0.0, -ROOM_Y / 2, -0.05),
    object_high=(ROOM_X, ROOM_Y / 2, 2.0),
)
#: Why the scene knobs do nothing here: the floor plan places the parts.
_PLAN_PLACES = "the room's floor plan places the parts (drawn from the scene seed)"


class MobileTaskEnv(gym.Env[dict[str, Any], np.ndarray]):
    """One mobile manipulation task instance on one engine (see the module docstring)."""

    metadata = {"render_modes": [], "render_fps": int(NOMINAL_CONTROL_RATE_HZ)}  # noqa: RUF012

    def __init__(
        self,
        task_id: str | None = None,
        engine: str = "mujoco",
        *,
        family: str | None = None,
        randomization: Mapping[str, Sequence[float]] | None = None,
        drift: Mapping[str, Any] | None = None,
        reality_gap: Any = None,
        safety: Any = None,
        faults: Sequence[Any] = (),
        max_steps: int = 3000,
        target_quality: float | None = None,
        qc_tolerance_m: float | None = None,
        grasp: str = "contact",
        render_mode: str | None = None,
        observation_mode: str = "state",
    ) -> None:
        task = make_task(task_id or "mobile_pick_place/cube_across")
        if not isinstance(task, MobilePickPlace) or (family and family != task.family):
            raise EvalError(f"task_id: {task_id!r} is not a mobile task", key="task_id")
        if observation_mode != "state" or render_mode is not None:
            raise EvalError(
                "observation_mode: mobile tasks observe state only (no cameras yet)",
                key="observation_mode",
            )
        self.task = task
        self.engine = check_engine(engine)
        self.render_mode = render_mode
        self.observation_mode = observation_mode
        self.profile = MOBILE_PANDA
        self.kin = panda_kinematics()
        self._scene = task.scene()
        self.backend = make_backend(engine, self._scene, profile=self.profile)
        dt = 1.0 / NOMINAL_CONTROL_RATE_HZ
        self.command_path = ArmCommandPath(self.kin, JointLimits.of_arm(self.kin), dt)
        self.robot = RobotController(self.kin)
        assert self.profile.base is not None
        self._base_limits = self.profile.base
        self.base_path = BaseLimiter(self._base_limits, dt)
        self.grasp = GraspTracker(task)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(8,), dtype=np.float32)
        self.observation_space = mobile_space()
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
        self._ready = False

    def configure(self, **settings: Any) -> None:
        """As `PandaTaskEnv.configure` (`sim_suites.env_config.env_config`); faults are not
        defined for this family."""
        self.config = env_config(self.task, **settings)
        self._limits = dataclasses.replace(self.config.safety, workspace=ROOM_WORKSPACE)

    @property
    def control_dt(self) -> float:
        return self.params.control_dt

    # ------------------------------------------------------------------ reset

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        scene_seed = options.pop("scene_seed", None)
        if options:
            raise EvalError(f"reset options: unknown key(s) {', '.join(sorted(options))}")
        cfg, task = self.config, self.task
        streams = np.random.SeedSequence(int(self.np_random.integers(2**63))).spawn(3)
        dr_rng, noise_rng, scene_rng = (np.random.default_rng(s) for s in streams)
        if scene_seed is not None:
            scene_rng = np.random.default_rng(check_scene_seed(scene_seed))
        plan, start_obj, goal, human = task.draw_scene(scene_rng)
        variations = variations_from_ranges(cfg.randomization)
        physics = [v for v in variations if v.knob not in SCENE_KNOBS]
        self.sampled = sample_randomization(physics, dr_rng)
        self.not_applied = {v.knob: _PLAN_PLACES for v in variations if v.knob in SCENE_KNOBS}
        self.params = episode_params(self.sampled, cfg.drift, cfg.reality_gap)
        self.plan, self.goal, self._human = plan, goal, human
        self._floor_plan = floor_plan_array(plan.obstacles())
        self._noise_rng, self._noise = noise_rng, self.params.sensor_noise_std
        positions = plan.body_positions()
        positions["cube"] = start_obj
        if human is not None:
            positions.update(human.moving_parts(0.0))
        # Where each of the person's parts is (rows in `part_names` order), m.
        self._part_xyz = np.array(
            [positions.get(body.name, body.pos) for body in human.bodies()]
            if human is not None
            else np.zeros((0, 3)),
            dtype=float,
        ).reshape(-1, 3)
        self._part_row = {} if human is None else {n: k for k, n in enumerate(human.part_names)}
        lift0 = start_obj[2] - MOUNT_Z0_M - 0.02
        base0 = np.array([*plan.start, float(np.clip(lift0, *LIFT_RANGE_M))])
        self.backend.reset(
            InitialState(
                arm_q=CARRY_Q.copy(), finger_q=FINGER_MAX_M, body_pos=positions, base_q=base0
            ),
            self.params.physics,
        )
        self.backend.drive_base(np.zeros(3), float(base0[3]))
        self._dt, self._substeps = self.params.control_dt, self.params.substeps
        self.command_path.reset(CARRY_Q, dt_s=self._dt)
        self.base_path.reset(self._dt)
        delay = self.params.action_latency_steps * self._dt + self.params.actuator_delay_s
        self.robot.reset(np.concatenate([CARRY_Q, [FINGER_MAX_M] * 2]), delay, 0.0)
        self.robot.follower.bandwidth_hz = self.params.actuator_bandwidth_hz
        self.grasp.reset(cfg.grasp)
        self._lift_target = float(base0[3])
        self.odometry = base0[:3].copy()
        self._wheel_body = np.zeros(3)
        self._monitor = SafetyMonitor(
            self._limits,
            self.kin.lower,
            self.kin.upper,
            self.kin.vel_limit,
            human,
            tuple(b.name for b in self._scene.bodies if b.role == "fixture"),
        )
        self._recorder = ControlRecorder(self._dt)
        self._step = 0
        self._step_limit = max(1, round(cfg.max_steps / (self._dt * NOMINAL_CONTROL_RATE_HZ)))
        self._complete_steps = 0
        self._completed_step: int | None = None
        self._held = False
        self._status, self._status_reason = "ok", ""
        self._events_seen = 0
        self._path_m = 0.0
        self._collisions = CollisionCounter("cube")
        self._stopped_steps = 0
        self._clipped = 0
        self._ssm_stop = False
        self._ready = True
        self._read_state()
        self.object_start = self._obj_pos.copy()
        self.shortest_m = task_shortest_path(plan, task.source, start_obj, task.place_counter, goal)
        self.start_scene = scene_record(
            "setup",
            self._obj_pos,
            self._obj_quat,
            **plan.record(),
            goal_pos_m=[round(float(v), 6) for v in goal],
        )
        self._error = task.goal_error(self._task_state(), goal)
        self._quality = graded_quality(self._error, task.spec.tolerance_m)
        info = {
            "randomization": dict(self.sampled),
            "scene": dict(self.start_scene),
            "invalid_draws": [],
            "not_applied": dict(self.not_applied),
            "drift": dict(cfg.drift),
            "control_dt": self._dt,
            "quality": self._quality,
            "is_success": False,
        }
        return self._observation(), info

    # ------------------------------------------------------------------ state

    def _read_state(self) -> None:
        b = self.backend
        self._q, self._qd = b.joint_state()
        self._base_q, self._base_qd = b.base_state()
        x, y, yaw, lift = (float(v) for v in self._base_q)
        self._rots, self._origins = self.kin.link_frames(self._q[:7])
        tcp_local, _ = self.kin.tcp_from_frames(self._rots[6], self._origins[6])
        self._tcp_local = tcp_local
        rot = rot_z(yaw)
        mount = np.array([x, y, 0.0]) + rot @ np.array([MOUNT_X_M, 0.0, MOUNT_Z0_M + lift])
        self._tcp = mount + rot @ tcp_local
        arm_vel = rot @ tcp_linear_velocity(self._rots, self._origins, tcp_local, self._qd)
        vx, vy, wz, vl = (float(v) for v in self._base_qd)
        lever = self._tcp - np.array([x, y, 0.0])
        self._tcp_vel = arm_vel + np.array([vx - wz * lever[1], vy + wz * lever[0], vl])
        self._base_speed = math.hypot(vx, vy)
        rim = self._base_speed + abs(wz) * ROBOT_RADIUS_M
        self._ssm_speed = governing_speed(
            rim,
            math.sqrt(float(self._tcp_vel @ self._tcp_vel)),
            self._base_limits.stopping_time_s(rim),
            self._limits,
        )
        self._separation: float | None = (
            None
            if self._human is None
            else person_separation(b, self._human.part_names, self._part_xyz, (x, y))
        )
        self._obj_pos, self._obj_quat = b.body_pose("cube")
        vel = b.body_velocity("cube")
        self._obj_speed = math.sqrt(float(vel @ vel))

    def _task_state(self) -> TaskState:
        return TaskState(self._obj_pos, self._obj_speed, 0.0, self._held)

    def _to_map(self, points: np.ndarray) -> np.ndarray:
        """World points (n, 3) as the robot places them in its map: measured relative to the
        base, then placed at the odometry's pose (so odometry error moves them with the
        robot)."""
        x, y, yaw = (float(v) for v in self._base_q[:3])
        ox, oy, oyaw = (float(v) for v in self.odometry)
        turn = rot_z(oyaw) @ rot_z(yaw).T
        return (points - np.array([x, y, 0.0])) @ turn.T + np.array([ox, oy, 0.0])

    def _observation(self) -> dict[str, np.ndarray]:
        noise = self._noise
        eps = self._noise_rng.normal(0.0, noise, size=15) if noise > 0 else np.zeros(15)
        target_local = self.command_path.tcp_target
        x, y, yaw, lift = (float(v) for v in self._base_q)
        rot = rot_z(yaw)
        mount = np.array([x, y, 0.0]) + rot @ np.array([MOUNT_X_M, 0.0, MOUNT_Z0_M + lift])
        tcp, tcp_target, point = self._to_map(
            np.stack([self._tcp, mount + rot @ target_local, self._obj_pos])
        )
        reading = MobileReading(
            q=self._q,
            qd=self._qd,
            odometry=self.odometry,
            lift=lift,
            tcp=tcp,
            tcp_target=tcp_target,
            point=point,
            goal=self.goal,
            grasped=self._held,
            floor_plan=self._floor_plan,
        )
        return mobile_observation(reading, eps)

    # ------------------------------------------------------------------ step

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        if not self._ready:
            raise EvalError("call reset() before step()", key="reset")
        act = np.array(action, dtype=np.float64).reshape(8)
        if np.abs(act).max() > 1.0:
            np.clip(act, -1.0, 1.0, out=act)
            self._clipped += 1
        profile, base = self.profile, self._base_limits
        caps = speed_caps(self._separation, self._ssm_speed, profile, self._limits, self._monitor)
        self._ssm_stop = caps.stop
        if caps.stop:
            act[[0, 1, 2, 4, 5, 6, 7]] = 0.0
            self._stopped_steps += 1
        dt = self._dt
        sent = self.command_path.step(act[:4], self._q, caps.tcp_mps, (self._rots, self._origins))
        self.robot.send(self._step * dt, sent.target, sent.duration_s, sent.finger)
        wanted = np.array(
            [act[4] * base.speed_mps, act[5] * base.speed_mps, act[6] * base.yaw_rate_rps]
        )
        body = self.base_path.step(wanted, caps.base_mps)
        self._lift_target = float(
            np.clip(self._lift_target + act[7] * base.lift_speed_mps * dt, *LIFT_RANGE_M)
        )
        self.backend.drive_base(body, self._lift_target)
        self._wheel_body = body
        return self._robot_step(sent.tcp_target)

    def _robot_step(self, tcp_target: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        task, dt, step = self.task, self._dt, self._step
        command = self.robot.update(step * dt, dt, self._rots, self._origins)
        if self._human is not None:
            row = self._part_row
            for part, pos in self._human.moving_parts(step * dt).items():
                self.backend.move_body(part, pos)
                self._part_xyz[row[part]] = pos
        before = self._base_q[:2].copy()
        self.backend.step(command.arm_cmd, command.finger, self._substeps)
        self._step += 1
        t = self._step * dt
        self._read_state()
        integrate_odometry(
            self.odometry, float(self._base_qd[2]), self._wheel_body, self.params.odometry_drift, dt
        )
        self._path_m += float(np.linalg.norm(self._base_q[:2] - before))
        part_in_tcp = rot_z(float(self._base_q[2])).T @ (self._obj_pos - self._tcp)
        self._held = self.grasp.update(
            self.backend, command.finger, float(self._q[7] + self._q[8]), part_in_tcp, False
        )
        contacts = self.backend.contact_forces()
        self._collisions.update(contacts)
        external = self.backend.robot_external_force()
        decision: StopDecision | None = self._monitor.update(
            self._step,
            t,
            self._q[:7],
            self._qd[:7],
            self._tcp,
            math.sqrt(float(self._tcp_vel @ self._tcp_vel)),
            contacts,
            self._obj_pos,
            self._separation,
            external,
            robot_speed_mps=self._ssm_speed[0],
            stopping_time_s=self._ssm_speed[1],
            base_speed_mps=self._base_speed,
        )
        state_sum = float(self._q.sum() + self._base_q.sum())
        if physics_diverged(state_sum, self._obj_speed, self.backend.diverged()):
            decision = StopDecision("error", DIVERGED_REASON)
        state = self._task_state()
        self._error = task.goal_error(state, self.goal)
        self._quality = graded_quality(self._error, task.spec.tolerance_m)
        power = float(np.abs(self.backend.applied_torque() * self._qd).sum())
        self._recorder.add(
            tcp_target, self._tcp_local, unintended_contact(contacts, "cube"), power,
            self._obj_pos, self._error,
        )  # fmt: skip
        done = task.complete(state, self.goal, self._error)
        self._complete_steps = self._complete_steps + 1 if done else 0
        if done and self._completed_step is None:
            self._completed_step = self._step
        terminated = decision is not None or self._complete_steps >= COMPLETION_HOLD_STEPS
        truncated = not terminated and self._step >= self._step_limit
        if decision is not None:
            self._status, self._status_reason = decision.status, decision.reason
        if terminated or truncated:
            self._monitor.finish()
            self._ready = False
        new_events = self._monitor.events[self._events_seen :]
        self._events_seen = len(self._monitor.events)
        success = self._status == "ok" and self._quality >= self.config.target_quality
        info = {
            "quality": self._quality,
            "is_success": bool(success and (terminated or truncated)),
            "goal_error_m": self._error,
            "status": self._status,
            "status_reason": self._status_reason,
            "t_s": t,
            "base_speed_mps": self._base_speed,
            "separation_m": self._separation,
            "monitored_stop": self._ssm_stop,
            "grasped": self._held,
            "safety_events": list(new_events),
            "faults_injected": [],
        }
        return self._observation(), float(self._quality), terminated, truncated, info

    @property
    def object_point(self) -> np.ndarray:
        """True position (3,) of the cube now, m."""
        return self._obj_pos.copy()

    # ------------------------------------------------------------------ summary

    def episode_summary(self) -> dict[str, Any]:
        """As `PandaTaskEnv.episode_summary`, with the mobile metrics in `control`."""
        control, qc, energy = self._recorder.summary(
            self.config.qc_tolerance_m, self.task.spec.tolerance_m, self.object_start, self.goal
        )
        monitor = self._monitor
        done = self._status == "ok" and self._quality >= self.config.target_quality
        control.update(
            {
                "peak_tcp_speed_mps": round(monitor.peak_tcp_speed_mps, 6),
                "min_separation_m": None
                if monitor.min_separation_m is None
                else round(monitor.min_separation_m, 6),
                "actions_clipped": self._clipped,
                "goal_error_m": round(float(self._error), 9),
                "grasp_mode": self.config.grasp,
                "monitored_stop_s": round(self._stopped_steps * self._dt, 6),
                "odometry_error_m": round(
                    float(np.linalg.norm(self.odometry[:2] - self._base_q[:2])), 6
                ),
                **navigation_record(
                    done,
                    self._path_m,
                    self.shortest_m,
                    self._collisions.count,
                    self._completed_step if done else None,
                    self._dt,
                ),
            }
        )
        t_end = self._step * self._dt
        return {
            "status": self._status,
            "status_reason": self._status_reason,
            "quality": float(self._quality),
            "steps": self._step,
            "duration_s": t_end,
            "faults": (),
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
