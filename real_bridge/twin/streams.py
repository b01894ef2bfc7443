"""What the twin robot publishes (names and QoS from the robot profile, `BridgeConfig`): joint
states and the wrench every tick, the camera, its info and the object tracker at the camera's
rate, diagnostics, the echo of every applied command, the oracle's verdicts and — in simulated
time — its clock. The messages themselves are built in `real_bridge.twin.sensors`; the tick's
state and wrench messages are reused (building messages costs more than filling them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from real_bridge.bridge_config import BridgeConfig
from real_bridge.ros_node import message_class, ns_to_stamp, qos_profile
from real_bridge.twin.sensors import (
    applied_echo,
    camera_info_message,
    diagnostic_array,
    image_message,
    pose_message,
)
from real_bridge.twin.settings import TwinGap
from real_bridge.twin.tracker import TrackerReading

#: A diagnostic status: (name, level, message, key-values).
Status = tuple[str, int, str, list[tuple[str, str]]]


class TwinStreams:
    """The twin's publishers on `node` (a topic named "" in the profile is not published).

    Args:
        node: the twin's rclpy node.
        config: the robot profile (topic names, QoS, robot id).
        joint_names: the joint states' names, in order.
        clock: publish the simulated clock on `topics.clock` (simulated-time mode).
    """

    def __init__(
        self, node: Any, config: BridgeConfig, joint_names: Sequence[str], *, clock: bool
    ) -> None:
        t, q = config.topics, config.qos
        mc = message_class

        def pub(msgtype: str, topic: str, spec: Any) -> Any:
            return node.create_publisher(mc(msgtype), topic, qos_profile(spec)) if topic else None

        self.hardware_id = config.robot_id or "twin"
        self.state = pub("sensor_msgs/msg/JointState", t.joint_state, q.joint_state)
        self.wrench = pub("geometry_msgs/msg/WrenchStamped", t.wrench, q.wrench)
        self.applied = pub("trajectory_msgs/msg/JointTrajectory", t.applied, q.command)
        self.image = pub("sensor_msgs/msg/Image", t.camera_image, q.camera)
        self.info = pub("sensor_msgs/msg/CameraInfo", t.camera_info, q.camera)
        self.pose = pub("geometry_msgs/msg/PoseStamped", t.object_pose, q.object_pose)
        # Diagnostics are offered TRANSIENT_LOCAL: compatible with volatile subscribers too.
        diag_qos = dataclasses.replace(q.diagnostics, durability="transient_local")
        self.diagnostics = pub("diagnostic_msgs/msg/DiagnosticArray", t.diagnostics, diag_qos)
        self.verdict = pub("std_msgs/msg/String", t.verdict, q.events)
        self.clock = pub("rosgraph_msgs/msg/Clock", t.clock, q.clock) if clock else None
        self._state_msg = mc("sensor_msgs/msg/JointState")()
        self._state_msg.name = list(joint_names)
        self._wrench_msg = mc("geometry_msgs/msg/WrenchStamped")()
        self._wrench_msg.header.frame_id = "tool0"

    def publish_state(
        self, stamp_ns: int, q: np.ndarray, qd: np.ndarray, tau: np.ndarray, wrench: np.ndarray
    ) -> None:
        """One tick's joint state and wrench, stamped `stamp_ns`."""
        state = self._state_msg
        ns_to_stamp(stamp_ns, state.header.stamp)
        state.position = q.tolist()
        state.velocity = qd.tolist()
        state.effort = tau.tolist()
        self.state.publish(state)
        if self.wrench is not None:
            msg = self._wrench_msg
            ns_to_stamp(stamp_ns, msg.header.stamp)
            f, t = msg.wrench.force, msg.wrench.torque
            f.x, f.y, f.z, t.x, t.y, t.z = (float(v) for v in wrench)
            self.wrench.publish(msg)

    def republish_state(self) -> None:
        """The latest joint state again, as it was (simulated time, while the clock stands)."""
        self.state.publish(self._state_msg)

    def publish_applied(
        self, stamp_ns: int, applied: Sequence[tuple[str, tuple[str, ...], np.ndarray, float]]
    ) -> None:
        """Echo the commands applied in a tick: (command id, joints, positions, waited s)."""
        if self.applied is not None:
            for command_id, names, positions, waited_s in applied:
                self.applied.publish(applied_echo(stamp_ns, command_id, names, positions, waited_s))

    def publish_statuses(self, statuses: Sequence[Status], log_ns: int) -> None:
        """One DiagnosticArray of `statuses`, stamped `log_ns` (the robot's log clock)."""
        self.diagnostics.publish(diagnostic_array(list(statuses), self.hardware_id, log_ns))

    def publish_image(
        self, rgb: np.ndarray, gap: TwinGap, rng: np.random.Generator, stamp_ns: int
    ) -> bool:
        """A rendered frame after the camera's exposure and noise (`rng`); whether it went."""
        if self.image is None:
            return False
        self.image.publish(image_message(rgb, gap, rng, stamp_ns))
        return True

    def publish_camera_info(self, size: int, stamp_ns: int) -> None:
        if self.info is not None:
            self.info.publish(camera_info_message(size, stamp_ns))

    def publish_pose(self, reading: TrackerReading) -> None:
        if self.pose is not None:
            self.pose.publish(pose_message(reading))

    def publish_verdict(self, text: str) -> None:
        if self.verdict is None:
            return
        msg = message_class("std_msgs/msg/String")()
        msg.data = text
        self.verdict.publish(msg)

    def publish_clock(self, stamp_ns: int) -> None:
        """The simulated clock (after a tick's states: they are in)."""
        if self.clock is not None:
            clock = message_class("rosgraph_msgs/msg/Clock")()
            ns_to_stamp(stamp_ns, clock.clock)
            self.clock.publish(clock)
