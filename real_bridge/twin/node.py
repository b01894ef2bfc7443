"""The twin robot's ROS 2 node: a plain ros2_control-like robot served from its own physics.

What it offers is what franka_ros2 or ur_robot_driver offer (names from the twin profile):

- publishes `sensor_msgs/JointState` (joint_state_broadcaster) and `geometry_msgs/WrenchStamped`
  (force/torque broadcaster) every tick (default 500 Hz); a camera (`sensor_msgs/Image` rgb8 +
  `CameraInfo`, default 30 Hz) rendered from its own MuJoCo scene; an object tracker
  (`geometry_msgs/PoseStamped`, at the camera's rate); `diagnostic_msgs/DiagnosticArray`
  (safety events when they happen, `robot/state` and latched safety statuses at 2 Hz); an echo
  of every applied command;
- follows `trajectory_msgs/JointTrajectory` on its arm and gripper controllers' topics, refusing
  what a joint_trajectory_controller refuses (`real_bridge.interface.trajectory_problem`);
- serves the optional scene-reset service (the automated reset station);
- answers the harness's "ended" episode event with the oracle's verdict (its ground truth,
  labelled "oracle"): the harness records it beside the episode to measure its own detector,
  which judges from the recorded camera and tracker streams (`real_bridge.detector`).

The tracker is a sensor (`real_bridge.twin.tracker`): noisy, late by the gap's
`tracker_latency_s` (stamped when the pose was true) and blind while the hand hides the object.

Deadman: once a harness has sent a heartbeat, the twin follows commands only while heartbeats
keep arriving; when none came for `deadlines.deadman_s` of the robot's own (simulated) time it
holds its posture at once (checked every tick) and reports `mode = hold` with the time it did so
and the time of the last heartbeat, both on its stamp clock: a load that holds the control loop up
holds the simulated robot with it, so neither the robot nor its deadman moves meanwhile. A latched protective stop also holds
until the scene is reset. `robot/state` also names the last arm command received and when it
arrived (`last_arm_command`, `last_arm_command_ns`, wall clock). The twin runs no policy.

Clock: states are stamped with the simulation clock anchored to wall time when the node starts:
tick k is stamped start + k / rate. Ticks are never skipped, so a gap in the stamps the harness
receives is a lost message.

Simulated time (`TwinSettings.sim_time`): see `real_bridge.twin.lockstep`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec, SafetyEvent
from real_bridge.interface import (
    LEVEL_ERROR,
    LEVEL_OK,
    LEVEL_WARN,
    STOP_KINDS,
    JudgeVerdict,
    manifest_sha256,
    parse_episode_event,
    parse_manifest,
    safety_key_values,
    safety_status_name,
    trajectory_problem,
)
from real_bridge.ros_node import RosSession, message_class, qos_profile, stamp_to_ns
from real_bridge.safety_state import ROBOT_STATE_STATUS
from real_bridge.twin.handoff import Handoff
from real_bridge.twin.lockstep import IDLE_PERIOD_S, Lockstep, WallPacer
from real_bridge.twin.monitors import monitor_event
from real_bridge.twin.outputs import TwinOutputs
from real_bridge.twin.plant import Plant
from real_bridge.twin.settings import TwinSettings
from real_bridge.twin.tracker import TrackerSensor

if TYPE_CHECKING:
    from sim_suites.robot_core import CommandQueue

#: Seconds between periodic diagnostics (robot/state and latched safety statuses).
DIAGNOSTICS_PERIOD_S = 0.5
#: Name and version the twin's oracle publishes under (its ground truth: for measuring the
#: harness's detector, never for judging a counted episode).
ORACLE_NAME, ORACLE_VERSION = "twin-oracle", "1"


class TwinNode:
    """The twin robot: ROS interface + control loop over a `Plant`.

    Args:
        settings: interface names, reality gap, monitors, rate.
        plant: the physics (already built; the node closes it on shutdown).
    """

    def __init__(self, settings: TwinSettings, plant: Plant) -> None:
        self.settings = settings
        self.plant = plant
        cfg = settings.bridge
        # Callbacks take the message alone, so the twin can use the EventsExecutor.
        self.session = RosSession("twin_robot", cfg.domain_id, cfg.namespace, events_executor=True)
        node = self.session.node
        t, q = cfg.topics, cfg.qos
        events_qos = qos_profile(q.events)
        mc = message_class

        self.out = TwinOutputs(node, settings, plant.joint_names)
        node.create_subscription(mc("std_msgs/msg/String"), t.manifest, self._on_manifest, events_qos)
        node.create_subscription(mc("std_msgs/msg/String"), t.episode, self._on_episode, events_qos)
        node.create_subscription(
            mc("std_msgs/msg/Header"), t.heartbeat, self._on_heartbeat, qos_profile(q.heartbeat)
        )
        node.create_subscription(
            mc("trajectory_msgs/msg/JointTrajectory"),
            t.command,
            self._on_command,
            qos_profile(q.command),
        )
        if t.gripper_command:
            node.create_subscription(
                mc("trajectory_msgs/msg/JointTrajectory"),
                t.gripper_command,
                self._on_gripper,
                qos_profile(q.command),
            )
        if cfg.services.scene_reset:
            from std_srvs.srv import Trigger

            node.create_service(Trigger, cfg.services.scene_reset, self._srv_scene_reset)

        self.lock = threading.RLock()
        self.rng = np.random.default_rng(settings.seed)
        self.manifest_text: str | None = None
        self.spec: EpisodeSpec | None = None
        self.episode_id = ""
        self.episode_started_sim_s: float | None = None
        self.mode = "follow"  # follow | hold (deadman) | stopped (latched protective stop)
        # The deadman runs on the robot's own clock (its simulated time, the clock of its state
        # stamps): a machine load that holds the control loop up holds the simulated robot too.
        self.last_heartbeat_s: float | None = None  # sim time of the last heartbeat received
        self.last_heartbeat_ns = 0  # the same on the robot's stamp clock (the robot's log)
        self.held_at_ns = 0  # robot stamp clock of the deadman hold
        self.sim_time = settings.sim_time
        self.lockstep = Lockstep(settings.sim_grace_s)
        self._wake = threading.Condition(self.lock)
        self.arm_received: tuple[str, int] = ("", 0)  # last arm command: id, arrival (wall ns)
        self.latched: dict[str, tuple[str, list[tuple[str, str]], str]] = {}
        # (apply at, kind, command id, positions, duration, arrived at), sim seconds.
        from sim_suites.robot_core import CommandQueue

        self.pending: CommandQueue[tuple[str, str, np.ndarray, float, float]] = CommandQueue()
        self.applied_now: list[tuple[str, tuple[str, ...], np.ndarray, float]] = []
        self.sim_s = 0.0
        self.stats = {
            "states_published": 0,
            "commands_applied": 0,
            "commands_ignored": 0,
            "commands_rejected": 0,
            "deadman_holds": 0,
            "images_published": 0,
            "poses_published": 0,
            "pose_dropouts": 0,
            "late_ticks": 0,
            "max_tick_lag_us": 0,
            "sim_waits": 0,
            "sim_grace_advances": 0,
        }
        self.last_rejection = ""
        self.tracker = TrackerSensor(settings.gap)
        self._reset = Handoff()
        self._epoch_ns = 0 if settings.sim_time else time.time_ns()
        self._pacer = WallPacer(1.0 / (settings.state_rate_hz * settings.time_scale))
        self._stop = threading.Event()

    # ------------------------------------------------------------------ subscriptions

    def _on_manifest(self, msg: Any) -> None:
        with self.lock:
            self.manifest_text = str(msg.data)
            self._reset.manifests += 1

    def _on_heartbeat(self, msg: Any) -> None:
        with self.lock:
            self.last_heartbeat_s = self._sim_time_now()
            self.last_heartbeat_ns = self._robot_clock_ns(self.last_heartbeat_s)
            if self.sim_time:
                self.lockstep.heard(stamp_to_ns(msg.stamp), str(msg.frame_id), self.sim_s)
                self._wake.notify_all()
            if self.mode == "hold" and not self.latched:
                self.mode = "follow"

    def _clock_ns(self) -> int:
        """Now on the robot's clock, ns: the simulated clock in simulated-time mode, else wall."""
        return round(self.sim_s * 1e9) if self.sim_time else time.time_ns()

    def _supervised(self) -> bool:
        last = self.last_heartbeat_s
        if self.sim_time:
            return self.lockstep.supervised(self.sim_s, self.settings.bridge.deadlines.deadman_s)
        return last is not None and self.sim_s - last <= self.settings.bridge.deadlines.deadman_s

    def _robot_clock_ns(self, sim_s: float) -> int:
        """The robot's stamp clock at simulated time `sim_s` (what its joint states carry: from
        0 in simulated-time mode, else from the wall clock when the node started)."""
        return self._epoch_ns + round(sim_s * 1e9)

    def _check_trajectory(self, msg: Any, joints: tuple[str, ...]) -> str:
        return trajectory_problem(
            list(msg.joint_names),
            joints,
            stamp_to_ns(msg.header.stamp),
            [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points],
            [len(p.positions) for p in msg.points],
            self._clock_ns(),
        )

    def _accept(self, msg: Any, joints: tuple[str, ...], kind: str) -> None:
        problem = self._check_trajectory(msg, joints)
        with self.lock:
            if problem:
                self.stats["commands_rejected"] += 1
                self.last_rejection = problem
                self._publish_statuses(
                    [("controller/trajectory_rejected", LEVEL_WARN, problem, [("topic", kind)])]
                )
                return
            if self.mode != "follow" or not self._supervised():
                self.stats["commands_ignored"] += 1
                return
            last = msg.points[-1]
            order = [list(msg.joint_names).index(j) for j in joints if j in msg.joint_names]
            positions = np.asarray(last.positions, dtype=float)[order]
            duration = last.time_from_start.sec + last.time_from_start.nanosec * 1e-9
            # The gap's actuator delay plus the drift's and firmware's command latency.
            delay_s = self.settings.gap.actuator_delay_s + self.plant.command_latency_s
            now = self._sim_time_now()
            self.pending.push(
                now + delay_s, (kind, str(msg.header.frame_id), positions, duration, now)
            )

    def _sim_time_now(self) -> float:
        """The simulation time corresponding to now on the wall clock (≥ the simulated time, which
        lags when the control loop was held up): a command is applied at the sim time it arrived
        at, so commands that arrive while the loop catches up keep their spacing."""
        wall = self._pacer.elapsed_s() * self.settings.time_scale
        if self.sim_time:
            return self.sim_s  # the clock stands still while the harness decides
        return max(self.sim_s, wall)

    def _received(self) -> None:
        """Count a trajectory message in (simulated time: the lockstep waits for them)."""
        with self.lock:
            self.lockstep.received += 1
            self._wake.notify_all()

    def _on_command(self, msg: Any) -> None:
        self.arm_received = (str(msg.header.frame_id), self._clock_ns())
        self._accept(msg, self.plant.arm_joints, "arm")
        self._received()

    def _on_gripper(self, msg: Any) -> None:
        self._accept(msg, self.plant.finger_joints, "gripper")
        self._received()

    def _on_episode(self, msg: Any) -> None:
        event = parse_episode_event(str(msg.data))
        if event is None:
            return
        with self.lock:
            if event["phase"] == "started":
                self.episode_id = event["episode_id"]
                self.episode_started_sim_s = self.sim_s
                return
            self.episode_started_sim_s = None
            target = float(event.get("target_quality", 0.8))
            quality, success, detail = self.plant.oracle(target)
            verdict = JudgeVerdict(
                event["episode_id"], "oracle", ORACLE_NAME, ORACLE_VERSION, quality, success,
                f"the twin's ground truth: {detail}",
            )
        self.out.verdict_json(verdict.to_json())

    # ------------------------------------------------------------------ services

    def _srv_scene_reset(self, request: Any, response: Any) -> Any:
        # The reset runs on the control loop's thread (`real_bridge.twin.handoff`).
        response.success, response.message = self._reset.ask(self.lock, 30.0)
        return response

    def _scene_reset(self) -> tuple[bool, str]:
        """Reset the scene to the last manifest (control thread, lock held)."""
        if self.manifest_text is None:
            return False, "no manifest received yet"
        try:
            spec, manifest = parse_manifest(self.manifest_text)
            self.plant.reset_scene(spec, manifest)
        except EvalError as exc:
            return False, f"reset failed: {exc}"
        if self.out.image is not None:
            self.plant.render(self.settings.camera_size)  # warm the new scene's renderer up
        self.spec = spec
        self.pending.clear()
        self.tracker.reset()
        self._clear_latched()
        self.mode = "follow"
        self.rng = np.random.default_rng([self.settings.seed, spec.seed & 0xFFFFFFFF])
        return True, json.dumps(
            {"episode_id": spec.episode_id, "manifest_sha256": manifest_sha256(manifest)}
        )

    # ------------------------------------------------------------------ safety

    def _raise_event(self, event: SafetyEvent) -> None:
        """Publish one safety event; a stop kind latches and holds the arm."""
        name = safety_status_name(event.kind)
        event_id = uuid.uuid4().hex[:12]
        values = safety_key_values(event, episode_id=self.episode_id, event_id=event_id)
        stop = event.kind in STOP_KINDS
        message = event.detail or event.kind
        self._publish_statuses([(name, LEVEL_ERROR if stop else LEVEL_WARN, message, values)])
        if stop:
            self.latched[name] = (event_id, values, message)
            self.mode = "stopped"
            self.pending.clear()
            self.plant.hold_here()

    def _clear_latched(self) -> None:
        if self.latched:
            self._publish_statuses(
                [(name, LEVEL_OK, "cleared by reset", []) for name in self.latched]
            )
        self.latched.clear()

    def _check_monitors(self) -> None:
        """The twin's safety controller: contact force, TCP speed and the scheduled stop drill."""
        event = monitor_event(
            self.settings.monitors, self.plant, self.episode_started_sim_s, self.sim_s
        )
        if event is not None:
            self._raise_event(event)

    # ------------------------------------------------------------------ publishing

    def _publish_statuses(
        self, statuses: list[tuple[str, int, str, list[tuple[str, str]]]]
    ) -> None:
        self.out.statuses(statuses, self._clock_ns())

    def robot_state_values(self) -> list[tuple[str, str]]:
        return [
            ("mode", self.mode),
            ("supervised", "true" if self._supervised() else "false"),
            ("held_at_ns", str(self.held_at_ns)),
            ("last_heartbeat_ns", str(self.last_heartbeat_ns)),
            *(
                [("supervised_until_ns", str(round((self.lockstep.allowed_until_s or 0) * 1e9)))]
                if self.sim_time
                else []
            ),
            ("last_arm_command", self.arm_received[0]),
            ("last_arm_command_ns", str(self.arm_received[1])),
            ("episode_id", self.episode_id),
            ("last_rejection", self.last_rejection),
            *((k, str(v)) for k, v in sorted(self.stats.items())),
        ]

    def _publish_periodic_diagnostics(self) -> None:
        statuses = [(ROBOT_STATE_STATUS, LEVEL_OK, self.mode, self.robot_state_values())]
        statuses += [(n, LEVEL_ERROR, msg, vals) for n, (_, vals, msg) in self.latched.items()]
        self._publish_statuses(statuses)

    def _publish_tick(self, stamp_ns: int) -> None:
        q, qd, tau = self.plant.joint_state()
        noise = self.settings.gap.sensor_noise_std
        if noise > 0:
            q = q + self.rng.normal(0.0, noise, size=q.shape)
        wrench = self.plant.wrench() if self.out.wrench is not None else None
        self.out.tick(stamp_ns, q, qd, tau, wrench, self.applied_now)
        self.applied_now = []
        self.stats["states_published"] += 1

    def _publish_camera(self, stamp_ns: int) -> None:
        rgb = self.plant.render(self.settings.camera_size) if self.out.image is not None else None
        if self.out.camera(stamp_ns, rgb, self.rng):
            self.stats["images_published"] += 1
        if self.out.pose is not None:
            reading = self.tracker.reading(self.sim_s, self.rng)
            if reading is not None:
                self.out.object_pose(reading)
                self.stats["poses_published"] += 1
            self.stats["pose_dropouts"] = self.tracker.dropouts

    # ------------------------------------------------------------------ control loop

    def _deadman(self) -> None:
        """Hold at once when the supervising harness's heartbeat stopped."""
        if self.mode == "follow" and self.last_heartbeat_s is not None and not self._supervised():
            self.mode = "hold"
            self.pending.clear()
            self.plant.hold_here()
            self.held_at_ns = self._robot_clock_ns(self.sim_s)
            self.stats["deadman_holds"] += 1
            self._publish_statuses(
                [(ROBOT_STATE_STATUS, LEVEL_WARN, "hold: heartbeat lost", self.robot_state_values())]
            )

    def _advance(self, target_s: float) -> None:
        """Advance the simulation to `target_s` (whole physics steps): commands due, physics,
        monitors."""
        dt = self.plant.physics_dt_s
        while self.sim_s + 0.5 * dt < target_s:
            for kind, command_id, positions, duration, arrived in self.pending.due(self.sim_s):
                if kind == "arm":
                    applied = self.plant.set_arm_target(positions, duration)
                    names = self.plant.arm_joints
                else:
                    value = self.plant.set_finger_target(float(positions[0]))
                    applied = np.full(len(self.plant.finger_joints), value)
                    names = self.plant.finger_joints
                self.applied_now.append((command_id, names, applied, self.sim_s - arrived))
                self.stats["commands_applied"] += 1
            self.plant.step_physics()
            self.sim_s += dt
        for event in self.plant.take_events():
            self._raise_event(event)
        if not self.latched:
            self._check_monitors()

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        """Run the control loop until `shutdown()` (or SIGTERM/SIGINT in the caller)."""
        period_sim = 1.0 / self.settings.state_rate_hz
        period_wall = period_sim / self.settings.time_scale
        period_ns = round(period_sim * 1e9)
        camera_period = 1.0 / self.settings.camera_hz if self.settings.camera_hz > 0 else 0.0
        next_camera = 0.0
        # Simulated time stamps from 0; otherwise from the wall clock at the start.
        epoch_ns = self._epoch_ns = 0 if self.sim_time else time.time_ns()
        pacer = self._pacer
        pacer.restart()
        next_diag = 0.0 if self.sim_time else pacer.start
        k = 0
        if on_ready is not None:
            on_ready()
        while not self._stop.is_set() and self.session.alive:
            if self.sim_time:
                if not self._await_tick(period_wall):
                    continue
            else:
                pacer.wait()
                self.stats["late_ticks"] = pacer.late_ticks
                self.stats["max_tick_lag_us"] = pacer.max_lag_us
            with self.lock:
                self._reset.serve(self._scene_reset)
                self._deadman()
                self._advance((k + 1) * period_sim)
                stamp = epoch_ns + (k + 1) * period_ns
                self._publish_tick(stamp)
                if self.out.pose is not None and camera_period:
                    tcp, holding = self.plant.hand()
                    self.tracker.observe(self.sim_s, stamp, self.plant.object_pose(), tcp, holding)
                if camera_period and self.sim_s >= next_camera:
                    self._publish_camera(stamp)
                    next_camera += camera_period
                    if next_camera < self.sim_s:
                        next_camera = self.sim_s + camera_period
                clock_now = self.sim_s if self.sim_time else time.monotonic()
                if clock_now >= next_diag:
                    self._publish_periodic_diagnostics()
                    next_diag += DIAGNOSTICS_PERIOD_S
                self.out.clock_at(stamp)  # after the tick's states: they are in
            k += 1

    def _await_tick(self, period_wall: float) -> bool:
        """Simulated time: whether the next tick may run now (a free-running one paced on the
        wall clock); False after waiting a little for the harness (the caller asks again)."""
        with self._wake:
            self._reset.serve(self._scene_reset)
            permission = self.lockstep.permission(self.sim_s)
            self.stats["sim_grace_advances"] = self.lockstep.grace_advances
            if permission == "free" and self.mode != "follow":
                permission = "idle"  # the harness is gone and the robot holds: its clock stands
            if permission == "idle":  # the harness finds the robot's state and clock
                stamp = round(self.sim_s * 1e9)
                if self.stats["states_published"] == 0:
                    self._publish_tick(stamp)
                else:  # the same reading again: how long the harness took draws no noise
                    self.out.repeat_state()
                self.out.clock_at(stamp)
                self._wake.wait(IDLE_PERIOD_S)
                return False
            if not permission:
                self.stats["sim_waits"] += 1
                self._wake.wait(0.05)
                return False
        self.lockstep.pace(permission, period_wall)
        return True

    def shutdown(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        try:
            self.session.close()
        finally:
            self.plant.close()
