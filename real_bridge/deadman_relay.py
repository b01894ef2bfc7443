"""The reference robot-side deadman for a real ros2_control robot: hold when the harness is gone.

A joint_trajectory_controller keeps executing its last trajectory when the process that sent it
dies. Run this node next to the robot's driver (`embodied-eval robot deadman --config
PROFILE.toml`): once it has seen the harness's heartbeat, it checks every DEADMAN_CHECK_S that one
arrived within `deadlines.deadman_s`; when none did, it sends the hold on the controller's topic —
header stamp 0, one point at the current posture of the controller's joints (from
`/joint_states`), time_from_start 0.1 s — which a joint_trajectory_controller accepts and which
replaces whatever it was executing. It holds once per heartbeat loss.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from real_bridge.bridge_config import BridgeConfig
from real_bridge.interface import HOLD_TIME_FROM_START_S
from real_bridge.ros_node import RosSession, message_class, qos_profile

#: How often the relay looks at the heartbeat, s.
DEADMAN_CHECK_S = 0.005


class DeadmanRelay:
    """Watches the heartbeat and sends the hold when it stops (see the module docstring)."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        # Callbacks take the message alone: the EventsExecutor's lower cost per callback keeps
        # the heartbeat's arrival time honest.
        self.session = RosSession(
            "embodied_eval_deadman", config.domain_id, config.namespace, events_executor=True
        )
        node, t, q = self.session.node, config.topics, config.qos
        self._lock = threading.Lock()
        self.last_heartbeat_s: float | None = None
        self.positions: dict[str, float] = {}
        self.holds: list[int] = []  # wall time (ns) of every hold sent
        #: Per hold: wall time (ns) of the last heartbeat before it (the relay's own log).
        self.last_beat_before_hold: list[int] = []
        self._last_beat_ns = 0
        self.pub = node.create_publisher(
            message_class("trajectory_msgs/msg/JointTrajectory"), t.command, qos_profile(q.command)
        )
        node.create_subscription(
            message_class("std_msgs/msg/Header"), t.heartbeat, self._beat, qos_profile(q.heartbeat)
        )
        node.create_subscription(
            message_class("sensor_msgs/msg/JointState"),
            t.joint_state,
            self._state,
            qos_profile(dataclasses.replace(q.joint_state, depth=1)),  # the latest posture only
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="deadman", daemon=True)
        self._thread.start()

    @property
    def armed(self) -> bool:
        """Whether a heartbeat loss would be held now: the relay has seen the harness's heartbeat
        and knows the posture of every controller joint (without one it cannot build the hold;
        after a start, the first joint states can take a discovery round to arrive)."""
        with self._lock:
            if self.last_heartbeat_s is None:
                return False
            return all(j in self.positions for j in self.config.robot.arm_joints)

    def _beat(self, msg: Any) -> None:
        with self._lock:
            self.last_heartbeat_s = time.monotonic()
            self._last_beat_ns = time.time_ns()

    def _state(self, msg: Any) -> None:
        with self._lock:
            self.positions = dict(zip(msg.name, msg.position, strict=False))

    def hold_message(self) -> Any | None:
        """The hold trajectory at the current posture (None before the first joint state)."""
        from trajectory_msgs.msg import JointTrajectoryPoint

        joints = self.config.robot.arm_joints
        with self._lock:
            if any(j not in self.positions for j in joints):
                return None
            hold = [float(self.positions[j]) for j in joints]
        msg = message_class("trajectory_msgs/msg/JointTrajectory")()
        msg.joint_names = list(joints)  # header stamp stays 0: start now
        point = JointTrajectoryPoint()
        point.positions = hold
        point.time_from_start.sec = int(HOLD_TIME_FROM_START_S)
        point.time_from_start.nanosec = round(HOLD_TIME_FROM_START_S % 1 * 1e9)
        msg.points = [point]
        return msg

    def _watch(self) -> None:
        limit = self.config.deadlines.deadman_s
        while not self._stop.wait(DEADMAN_CHECK_S):
            with self._lock:
                last = self.last_heartbeat_s
            if last is None or time.monotonic() - last <= limit:
                continue
            msg = self.hold_message()
            if msg is None:
                continue
            self.pub.publish(msg)
            self.holds.append(time.time_ns())
            self.last_beat_before_hold.append(self._last_beat_ns)
            with self._lock:
                if self.last_heartbeat_s == last:
                    self.last_heartbeat_s = None  # hold once; re-armed by the next heartbeat

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self.session.close()
