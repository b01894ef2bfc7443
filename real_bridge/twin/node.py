"""The twin robot's ROS 2 node: serves the bridge interface at a fixed rate from its own physics.

Publishes `sensor_msgs/JointState` and `geometry_msgs/WrenchStamped` every tick (default 500 Hz),
`diagnostic_msgs/DiagnosticArray` (safety events when they happen, `robot/state` and latched
safety statuses at 2 Hz), the verdict (`std_msgs/String`, TRANSIENT_LOCAL) when an episode ends,
and an echo of every applied command (`trajectory_msgs/JointTrajectory`). Serves reset / start /
stop (`std_srvs/Trigger`) and enable (`std_srvs/SetBool`); reads the manifest (`std_msgs/String`,
TRANSIENT_LOCAL) and position commands (`trajectory_msgs/JointTrajectory`).

Who runs the policy: during an episode the twin runs the manifest's policy itself on its own
simulator (as a robot controller would) and the bridge supervises; commands streamed by the bridge
are then ignored (and counted). Outside episodes, when enabled, the twin follows streamed position
commands (after its actuator delay) and echoes what it applied — that is what `send_action` and
the latency benchmark use.

Clock: the twin's states are stamped with its simulation clock, anchored to wall time when the
node starts: tick k is stamped start + k / rate. Ticks are never skipped (a late tick is published
late, with its own stamp), so a gap in the stamps the bridge receives is a lost message.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec, SafetyEvent, utc_now_iso
from real_bridge.interface import (
    LEVEL_ERROR,
    LEVEL_OK,
    LEVEL_WARN,
    STOP_KINDS,
    Verdict,
    manifest_sha256,
    parse_manifest,
    safety_key_values,
    safety_status_name,
)
from real_bridge.ros_node import RosSession, ns_to_stamp, qos_profile
from real_bridge.safety import ROBOT_STATE_STATUS
from real_bridge.twin.plant import Plant, PlantResult
from real_bridge.twin.settings import TwinSettings

#: Seconds between periodic diagnostics (robot/state and latched safety statuses).
DIAGNOSTICS_PERIOD_S = 0.5
#: Behind schedule by more than this, the pacing gives up catching up (stamps stay continuous).
MAX_LAG_S = 0.25


class TwinNode:
    """The twin robot: ROS interface + control loop over a `Plant`.

    Args:
        settings: interface names, reality gap, monitors, rate.
        plant: the physics (already built; the node closes it on shutdown).
    """

    def __init__(self, settings: TwinSettings, plant: Plant) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from std_srvs.srv import SetBool, Trigger
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        self.msg = {
            "JointState": JointState,
            "WrenchStamped": WrenchStamped,
            "DiagnosticArray": DiagnosticArray,
            "DiagnosticStatus": DiagnosticStatus,
            "KeyValue": KeyValue,
            "String": String,
            "JointTrajectory": JointTrajectory,
            "JointTrajectoryPoint": JointTrajectoryPoint,
        }
        self.settings = settings
        self.plant = plant
        cfg = settings.bridge
        # The twin's callbacks take the message alone, so it can use the EventsExecutor: less
        # CPU per callback, leaving more of the machine to the fixed-rate control loop.
        self.session = RosSession("twin_robot", cfg.domain_id, cfg.namespace, events_executor=True)
        node = self.session.node
        t, q = cfg.topics, cfg.qos
        events_qos = qos_profile(q.events)
        self.state_pub = node.create_publisher(
            JointState, t.joint_state, qos_profile(q.joint_state)
        )
        self.wrench_pub = (
            node.create_publisher(WrenchStamped, t.wrench, qos_profile(q.wrench))
            if t.wrench
            else None
        )
        # Diagnostics are offered TRANSIENT_LOCAL: compatible with volatile subscribers too.
        diag_qos = qos_profile(dataclasses.replace(q.diagnostics, durability="transient_local"))
        self.diag_pub = node.create_publisher(DiagnosticArray, t.diagnostics, diag_qos)
        self.verdict_pub = node.create_publisher(String, t.verdict, events_qos)
        self.applied_pub = (
            node.create_publisher(JointTrajectory, t.applied, qos_profile(q.command))
            if t.applied
            else None
        )
        node.create_subscription(String, t.manifest, self._on_manifest, events_qos)
        node.create_subscription(
            JointTrajectory, t.command, self._on_command, qos_profile(q.command)
        )
        s = cfg.services
        node.create_service(Trigger, s.reset, self._srv_reset)
        node.create_service(Trigger, s.start, self._srv_start)
        node.create_service(Trigger, s.stop, self._srv_stop)
        node.create_service(SetBool, s.enable, self._srv_enable)

        self.lock = threading.RLock()
        self.rng = np.random.default_rng(settings.seed)
        self.manifest_text: str | None = None
        self.spec: EpisodeSpec | None = None
        self.manifest_hash = ""
        self.enabled = False
        self.phase = "idle"  # idle → ready (reset) → running → ended
        self.latched: dict[str, tuple[str, list[tuple[str, str]], str]] = {}
        self.pending: deque[tuple[float, str, np.ndarray]] = deque()
        self.applied_now: list[tuple[str, np.ndarray]] = []
        self.started_sim_s = 0.0
        self.sim_s = 0.0
        self.hung = False
        self._state_msg = JointState()
        self._state_msg.name = list(plant.joint_names)
        self._joint_names = list(plant.joint_names)
        self._echo_msg = JointTrajectory()
        self._echo_point = JointTrajectoryPoint()
        self._wrench_msg = WrenchStamped()
        self._wrench_msg.header.frame_id = "contact_monitor"
        self.stats = {
            "states_published": 0,
            "commands_applied": 0,
            "commands_ignored": 0,
            "late_ticks": 0,
            "mean_tick_lag_us": 0,
            "max_tick_lag_us": 0,
            "episodes": 0,
        }
        self._stop = threading.Event()

    # ------------------------------------------------------------------ subscriptions

    def _on_manifest(self, msg: Any) -> None:
        with self.lock:
            self.manifest_text = str(msg.data)

    def _on_command(self, msg: Any) -> None:
        if not msg.points:
            return
        positions = np.asarray(msg.points[0].positions, dtype=float)
        with self.lock:
            if self.hung:
                return
            if not self.enabled or self.phase == "running" or self.latched:
                self.stats["commands_ignored"] += 1
                return
            apply_at = self.sim_s + self.settings.gap.actuator_delay_s
            self.pending.append((apply_at, str(msg.header.frame_id), positions))

    # ------------------------------------------------------------------ services

    def _blocked(self) -> None:
        # A frozen robot never answers: block this callback until the node shuts down.
        self._stop.wait()

    def _srv_reset(self, request: Any, response: Any) -> Any:
        if self.hung:
            self._blocked()
        with self.lock:
            if self.manifest_text is None:
                response.success, response.message = False, "no manifest received yet"
                return response
            try:
                spec, manifest = parse_manifest(self.manifest_text)
                if self.phase == "running":
                    self.plant.stop("reset during an episode")
                    self._publish_verdict("error", "reset during the episode")
                self.plant.reset(spec, manifest)
            except EvalError as exc:
                response.success, response.message = False, f"reset failed: {exc}"
                return response
            self.spec = spec
            self.manifest_hash = manifest_sha256(manifest)
            self.pending.clear()
            self._clear_latched()
            self.phase = "ready"
            self.rng = np.random.default_rng([self.settings.seed, spec.seed & 0xFFFFFFFF])
            response.success = True
            response.message = json.dumps(
                {"episode_id": spec.episode_id, "manifest_sha256": self.manifest_hash}
            )
        return response

    def _srv_start(self, request: Any, response: Any) -> Any:
        if self.hung:
            self._blocked()
        with self.lock:
            problem = ""
            if self.phase != "ready" or self.spec is None:
                problem = "not reset to a manifest (call reset first)"
            elif not self.enabled:
                problem = "robot is disabled (call enable first)"
            elif self.latched:
                problem = f"safety stop latched: {', '.join(sorted(self.latched))}"
            if problem or self.spec is None:
                response.success, response.message = False, problem
                return response
            spec = self.spec
            self.plant.start()
            self.phase = "running"
            self.started_sim_s = self.sim_s
            self.stats["episodes"] += 1
            response.success = True
            response.message = json.dumps(
                {"episode_id": spec.episode_id, "started_at": utc_now_iso()}
            )
        return response

    def _srv_stop(self, request: Any, response: Any) -> Any:
        if self.hung:
            self._blocked()
        with self.lock:
            if self.phase == "running":
                self.plant.stop("stop requested")
                self._publish_verdict("error", "stopped on request before the task ended")
            self.pending.clear()
            response.success, response.message = True, "stopped"
        return response

    def _srv_enable(self, request: Any, response: Any) -> Any:
        if self.hung:
            self._blocked()
        with self.lock:
            self.enabled = bool(request.data)
            if not self.enabled:
                self.pending.clear()
                if self.phase == "running":
                    self.plant.stop("disabled")
                    self._publish_verdict("error", "robot disabled during the episode")
            response.success = True
            response.message = "enabled" if self.enabled else "disabled"
        return response

    # ------------------------------------------------------------------ safety

    def _raise_event(self, event: SafetyEvent) -> None:
        """Publish one safety event; a stop kind latches, stops the plant and ends the episode."""
        name = safety_status_name(event.kind)
        episode_id = self.spec.episode_id if self.spec is not None else ""
        event_id = uuid.uuid4().hex[:12]
        values = safety_key_values(event, episode_id=episode_id, event_id=event_id)
        stop = event.kind in STOP_KINDS
        level = LEVEL_ERROR if stop else LEVEL_WARN
        message = event.detail or event.kind
        self._publish_statuses([(name, level, message, values)])
        if stop:
            self.latched[name] = (event_id, values, message)
            if self.phase == "running":
                self.plant.stop(message)
                self._publish_verdict("safety_stop", f"{event.kind}: {message}")

    def _clear_latched(self) -> None:
        if self.latched:
            self._publish_statuses(
                [(name, LEVEL_OK, "cleared by reset", []) for name in self.latched]
            )
        self.latched.clear()

    def _check_monitors(self) -> None:
        """The twin's safety controller: force, TCP speed and the scheduled stop drill."""
        mon = self.settings.monitors
        t_s = self.sim_s - self.started_sim_s
        step = round(t_s / self.plant.physics_dt_s)
        force = float(np.linalg.norm(self.plant.wrench()[:3]))
        if force > mon.force_limit_n:
            self._raise_event(
                SafetyEvent(
                    kind="protective_stop",
                    t_s=t_s,
                    step=step,
                    stop_category=2,
                    contact_force_n=force,
                    detail=f"contact force {force:.1f} N above the {mon.force_limit_n:.1f} N limit",
                    source_rule="twin.force_limit",
                )
            )
            return
        speed = self.plant.tcp_speed_mps()
        if mon.speed_limit_mps > 0 and speed > mon.speed_limit_mps:
            self._raise_event(
                SafetyEvent(
                    kind="protective_stop",
                    t_s=t_s,
                    step=step,
                    stop_category=2,
                    tcp_speed_mps=speed,
                    speed_limit_mps=mon.speed_limit_mps,
                    detail=f"TCP speed {speed:.3f} m/s above {mon.speed_limit_mps:.3f} m/s",
                    source_rule="twin.speed_limit",
                )
            )
            return
        if mon.stop_at_s > 0 and t_s >= mon.stop_at_s:
            self._raise_event(
                SafetyEvent(
                    kind="protective_stop",
                    t_s=t_s,
                    step=step,
                    stop_category=2,
                    detail=f"protective stop drill at {mon.stop_at_s:.3f} s",
                    source_rule="twin.stop_drill",
                )
            )

    # ------------------------------------------------------------------ publishing

    def _publish_statuses(
        self, statuses: list[tuple[str, int, str, list[tuple[str, str]]]]
    ) -> None:
        m = self.msg
        array = m["DiagnosticArray"]()
        ns_to_stamp(time.time_ns(), array.header.stamp)
        for name, level, message, values in statuses:
            status = m["DiagnosticStatus"]()
            status.level = bytes([level])
            status.name = name
            status.message = message
            status.hardware_id = self.settings.bridge.robot_id or "twin"
            status.values = [m["KeyValue"](key=k, value=v) for k, v in values]
            array.status.append(status)
        self.diag_pub.publish(array)

    def _publish_periodic_diagnostics(self) -> None:
        episode_id = self.spec.episode_id if self.spec is not None else ""
        statuses = [
            (
                ROBOT_STATE_STATUS,
                LEVEL_OK,
                self.phase,
                [
                    ("enabled", "true" if self.enabled else "false"),
                    ("phase", self.phase),
                    ("episode_id", episode_id),
                    *((k, str(v)) for k, v in sorted(self.stats.items())),
                ],
            )
        ]
        statuses += [(n, LEVEL_ERROR, msg, vals) for n, (_, vals, msg) in self.latched.items()]
        self._publish_statuses(statuses)

    def _publish_verdict(self, status: str, reason: str) -> None:
        """End the running episode: publish its verdict (from the plant's result when it has one)."""
        assert self.spec is not None
        result = self.plant.result() or PlantResult(status=status, quality=0.0, success=False)
        final_status = status if status != "ok" else result.status
        duration = self.sim_s - self.started_sim_s
        control = dict(result.control)
        control["twin_gap"] = {k: float(v) for k, v in vars(self.settings.gap).items()}
        verdict = Verdict(
            episode_id=self.spec.episode_id,
            status=final_status,
            quality=float(result.quality),
            success=bool(result.success) and final_status == "ok",
            reason=reason or result.reason,
            faults=result.faults,
            actions=result.actions,
            plan_depth=result.plan_depth,
            energy_wh=result.energy_wh,
            qc=result.qc,
            steps=result.steps,
            robot_duration_s=round(duration, 6),
            control=control,
            randomization=result.randomization,
        )
        msg = self.msg["String"]()
        msg.data = verdict.to_json()
        self.verdict_pub.publish(msg)
        self.phase = "ended"

    def _publish_tick(self, stamp_ns: int) -> None:
        q, qd, tau = self.plant.joint_state()
        noise = self.settings.gap.sensor_noise_std
        if noise > 0:
            q = q + self.rng.normal(0.0, noise, size=q.shape)
        if self.applied_pub is not None:
            echo, point = self._echo_msg, self._echo_point  # reused, like the state message
            for command_id, applied in self.applied_now:
                ns_to_stamp(stamp_ns, echo.header.stamp)
                echo.header.frame_id = command_id
                echo.joint_names = self._joint_names[: applied.size]
                point.positions = applied.tolist()
                echo.points = [point]
                self.applied_pub.publish(echo)
        self.applied_now = []
        state = self._state_msg  # reused: building messages costs more than filling them
        ns_to_stamp(stamp_ns, state.header.stamp)
        state.position = q.tolist()
        state.velocity = qd.tolist()
        state.effort = tau.tolist()
        self.state_pub.publish(state)
        self.stats["states_published"] += 1
        if self.wrench_pub is not None:
            w = self.plant.wrench()
            wrench = self._wrench_msg
            ns_to_stamp(stamp_ns, wrench.header.stamp)
            f, t = wrench.wrench.force, wrench.wrench.torque
            f.x, f.y, f.z, t.x, t.y, t.z = (float(v) for v in w)
            self.wrench_pub.publish(wrench)

    # ------------------------------------------------------------------ control loop

    def _advance(self, target_s: float) -> None:
        """Advance the simulation to `target_s` (whole physics steps; a tick shorter than one
        physics step may take none): commands due, physics, monitors, episode end."""
        target = target_s
        dt = self.plant.physics_dt_s
        while self.sim_s + 0.5 * dt < target:
            while self.pending and self.pending[0][0] <= self.sim_s:
                _, command_id, positions = self.pending.popleft()
                self.applied_now.append((command_id, self.plant.hold(positions)))
                self.stats["commands_applied"] += 1
            self.plant.step_physics()
            self.sim_s += dt
        for event in self.plant.take_events():
            self._raise_event(event)
        if self.phase == "running":
            self._check_monitors()
        if self.phase == "running" and not self.plant.running:
            self._publish_verdict("ok", "")
        hang = self.settings.hang_after_s
        if self.phase == "running" and hang > 0 and self.sim_s - self.started_sim_s >= hang:
            self.hung = True

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        """Run the control loop until `shutdown()` (or SIGTERM/SIGINT in the caller)."""
        period_sim = 1.0 / self.settings.state_rate_hz
        period_wall = period_sim / self.settings.time_scale
        period_ns = round(period_sim * 1e9)
        epoch_ns = time.time_ns()
        epoch = time.monotonic()
        slip = 0.0
        lag_total_us = 0.0
        next_diag = epoch
        k = 0
        if on_ready is not None:
            on_ready()
        while not self._stop.is_set() and self.session.alive:
            due = epoch + slip + k * period_wall
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            elif now - due > MAX_LAG_S:
                slip += now - due  # stop trying to catch up; stamps stay continuous
                self.stats["late_ticks"] += 1
            lag_us = (time.monotonic() - due) * 1e6
            lag_total_us += lag_us
            self.stats["max_tick_lag_us"] = max(self.stats["max_tick_lag_us"], int(lag_us))
            self.stats["mean_tick_lag_us"] = int(lag_total_us / (k + 1))
            with self.lock:
                if self.hung:
                    k += 1
                    continue
                self._advance((k + 1) * period_sim)
                self._publish_tick(epoch_ns + (k + 1) * period_ns)  # the state at that sim time
                if time.monotonic() >= next_diag:
                    self._publish_periodic_diagnostics()
                    next_diag += DIAGNOSTICS_PERIOD_S
            k += 1

    def shutdown(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        try:
            self.session.close()
        finally:
            self.plant.close()
