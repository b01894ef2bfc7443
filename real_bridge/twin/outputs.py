"""What the twin robot publishes (`real_bridge.twin.node.TwinNode`'s outputs).

Joint states and the wrench every tick (messages reused: building them costs more than filling
them), the echo of each applied command, the camera image and its camera info, the object
tracker's pose, diagnostics (TRANSIENT_LOCAL), the oracle's verdicts and, in simulated-time mode,
the clock (`rosgraph_msgs/Clock`). A topic the profile leaves empty has no publisher.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from real_bridge.ros_node import message_class, ns_to_stamp, qos_profile
from real_bridge.twin.sensors import (
    applied_echo,
    camera_info_message,
    diagnostic_array,
    image_message,
    pose_message,
)
from real_bridge.twin.settings import TwinSettings


class TwinOutputs:
    """The twin's publishers on `node` (names and QoS from `settings.bridge`).

    Args:
        node: the rclpy node. settings: the twin's settings. joint_names: the joint states'
            names, in the plant's order.
    """

    def __init__(self, node: Any, settings: TwinSettings, joint_names: tuple[str, ...]) -> None:
        self.settings = settings
        t, q = settings.bridge.topics, settings.bridge.qos
        mc = message_class

        def pub(msgtype: str, topic: str, spec: Any) -> Any:
            return node.create_publisher(mc(msgtype), topic, qos_profile(spec)) if topic else None

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
        self.clock = pub("rosgraph_msgs/msg/Clock", t.clock, q.clock) if settings.sim_time else None
        self._state_msg = mc("sensor_msgs/msg/JointState")()
        self._state_msg.name = list(joint_names)
        self._wrench_msg = mc("geometry_msgs/msg/WrenchStamped")()
        self._wrench_msg.header.frame_id = "tool0"

    def tick(
        self,
        stamp_ns: int,
        q: np.ndarray,
        qd: np.ndarray,
        tau: np.ndarray,
        wrench: np.ndarray | None,
        applied: list[tuple[str, tuple[str, ...], np.ndarray, float]],
    ) -> None:
        """One tick's joint state (and wrench), after the echoes of the commands applied in it."""
        if self.applied is not None:
            for command_id, names, positions, waited_s in applied:
                self.applied.publish(applied_echo(stamp_ns, command_id, names, positions, waited_s))
        state = self._state_msg
        ns_to_stamp(stamp_ns, state.header.stamp)
        state.position = q.tolist()
        state.velocity = qd.tolist()
        state.effort = tau.tolist()
        self.state.publish(state)
        if self.wrench is not None and wrench is not None:
            msg = self._wrench_msg
            ns_to_stamp(stamp_ns, msg.header.stamp)
            f, t = msg.wrench.force, msg.wrench.torque
            f.x, f.y, f.z, t.x, t.y, t.z = (float(v) for v in wrench)
            self.wrench.publish(msg)

    def repeat_state(self) -> None:
        """The last joint state again, as it was (a standing robot's reading)."""
        self.state.publish(self._state_msg)

    def camera(
        self, stamp_ns: int, rgb: np.ndarray | None, rng: np.random.Generator
    ) -> bool:
        """The camera's image (when rendered; with the gap's image noise) and its info; whether
        an image was published."""
        size = self.settings.camera_size
        sent = False
        if self.image is not None and rgb is not None:
            self.image.publish(image_message(rgb, self.settings.gap, rng, stamp_ns))
            sent = True
        if self.info is not None:
            self.info.publish(camera_info_message(size, stamp_ns))
        return sent

    def object_pose(self, reading: Any) -> None:
        if self.pose is not None:
            self.pose.publish(pose_message(reading))

    def statuses(
        self, statuses: list[tuple[str, int, str, list[tuple[str, str]]]], stamp_ns: int
    ) -> None:
        hardware_id = self.settings.bridge.robot_id or "twin"
        self.diagnostics.publish(diagnostic_array(statuses, hardware_id, stamp_ns))

    def verdict_json(self, text: str) -> None:
        out = message_class("std_msgs/msg/String")()
        out.data = text
        self.verdict.publish(out)

    def clock_at(self, stamp_ns: int) -> None:
        if self.clock is not None:
            clock = message_class("rosgraph_msgs/msg/Clock")()
            ns_to_stamp(stamp_ns, clock.clock)
            self.clock.publish(clock)
