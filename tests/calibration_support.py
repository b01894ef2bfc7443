"""Write a `RecordedEpisode` (from the offline twin) as the MCAP the bridge records, so the
calibration's reader and CLI can be tested without ROS."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from embodied_eval.canonical import canonical_json
from embodied_eval.records import Episode
from real_bridge.bridge_config import BridgeConfig
from real_bridge.calibration.recorded import Command, RecordedEpisode
from real_bridge.interface import LEVEL_ERROR, safety_status_name
from real_bridge.recording import McapRecorder

EPOCH_NS = 1_700_000_000_000_000_000
LATENCY_NS = 1_000_000


def write_recording(
    rec: RecordedEpisode,
    path: Path,
    delay_s: float,
    robot_id: str,
    unapplied: Sequence[Command] = (),
    waited_longer: Mapping[int, float] | None = None,
    diagnostics_ahead_s: float = 0.0,
) -> Episode:
    """Write `rec` as a bridge recording at `path`; returns the episode record pointing at it.

    The robot's echo of each command is stamped at the state tick after it was applied (the first
    2 ms physics step at or after arrival + `delay_s`, plus `waited_longer[i]` for command
    `rec.commands[i]`) and says how long it waited. `unapplied` commands were sent but never
    applied: recorded, not echoed. Each of `rec.holds_s` is a `robot/state` status turning to
    mode "hold" (and back to "follow" 50 ms later). The robot stamps its diagnostics on a clock
    `diagnostics_ahead_s` ahead of its joint states' (they are received when they happen).
    """
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    t = store.types
    config = BridgeConfig(robot_id=robot_id)
    topics = config.topics
    arm = list(config.robot.arm_joints)
    gripper = list(config.robot.gripper_joints)
    recorder = McapRecorder(
        path,
        {
            "episode_id": rec.episode_id,
            "robot_id": robot_id,
            "bridge_config": canonical_json(dataclasses.asdict(config)),
        },
    )
    kinds = {
        topics.joint_state: "sensor_msgs/msg/JointState",
        topics.command: "trajectory_msgs/msg/JointTrajectory",
        topics.gripper_command: "trajectory_msgs/msg/JointTrajectory",
        topics.applied: "trajectory_msgs/msg/JointTrajectory",
        topics.object_pose: "geometry_msgs/msg/PoseStamped",
        topics.episode: "std_msgs/msg/String",
        topics.diagnostics: "diagnostic_msgs/msg/DiagnosticArray",
        topics.manifest: "std_msgs/msg/String",
    }
    for topic, kind in kinds.items():
        recorder.add_stream(topic, kind)

    def stamp(ns: int):
        return t["builtin_interfaces/msg/Time"](sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

    def header(ns: int, frame: str = ""):
        return t["std_msgs/msg/Header"](stamp=stamp(ns), frame_id=frame)

    def duration(s: float):
        ns = round(s * 1e9)
        return t["builtin_interfaces/msg/Duration"](
            sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000
        )

    def trajectory(ns: int, frame: str, names: list[str], positions, after_s: float):
        point = t["trajectory_msgs/msg/JointTrajectoryPoint"](
            positions=np.asarray(positions, dtype=float), velocities=np.zeros(0),
            accelerations=np.zeros(0), effort=np.zeros(0), time_from_start=duration(after_s),
        )  # fmt: skip
        return t["trajectory_msgs/msg/JointTrajectory"](
            header=header(ns, frame), joint_names=names, points=[point]
        )

    def write(topic: str, msg, log_ns: int) -> None:
        recorder.write(topic, bytes(store.serialize_cdr(msg, kinds[topic])), log_ns)

    def ns_of(s: float) -> int:
        return EPOCH_NS + round(s * 1e9)

    # The manifest the reset station was given (its scene ranges rebuild the pair's scene).
    told = {"episode": {"episode_id": rec.episode_id},
            "randomization": {k: list(v) for k, v in rec.randomization.items()}}  # fmt: skip
    write(topics.manifest, t["std_msgs/msg/String"](data=json.dumps(told)), ns_of(0.0))
    event = json.dumps({"episode_id": rec.episode_id, "phase": "started"})
    write(topics.episode, t["std_msgs/msg/String"](data=event), ns_of(rec.started_s) + LATENCY_NS)
    names = arm + gripper
    for ts, q, tau in zip(rec.state_t, rec.state_q, rec.state_effort, strict=True):
        msg = t["sensor_msgs/msg/JointState"](
            header=header(ns_of(ts)), name=names, position=q, velocity=np.zeros(len(names)),
            effort=tau,
        )  # fmt: skip
        write(topics.joint_state, msg, ns_of(ts) + LATENCY_NS)
    echoed = {id(c): (waited_longer or {}).get(i, 0.0) for i, c in enumerate(rec.commands)}
    for i, c in enumerate(sorted([*rec.commands, *unapplied], key=lambda c: c.arrival_s)):
        joints = arm if c.kind == "arm" else gripper
        positions = c.positions if c.kind == "arm" else np.full(len(gripper), c.positions[0])
        topic = topics.command if c.kind == "arm" else topics.gripper_command
        cid = f"{rec.episode_id}:{i}"
        write(topic, trajectory(0, cid, joints, positions, c.duration_s),
              ns_of(c.arrival_s) - LATENCY_NS)  # fmt: skip
        if id(c) not in echoed:
            continue
        applied = float(np.ceil(round((c.arrival_s + delay_s) / 0.002, 6)) * 0.002)
        applied += echoed[id(c)]
        echo = trajectory(ns_of(applied + 0.002), cid, joints, positions, applied - c.arrival_s)
        write(topics.applied, echo, ns_of(applied + 0.002) + LATENCY_NS)
    for ts, p in zip(rec.object_t, rec.object_pos, strict=True):
        pose = t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=p[0], y=p[1], z=p[2]),
            orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        )
        write(topics.object_pose, t["geometry_msgs/msg/PoseStamped"](header=header(ns_of(ts)),
              pose=pose), ns_of(ts) + LATENCY_NS)  # fmt: skip
    for hold in rec.holds_s:
        for at, mode in ((hold, "hold"), (hold + 0.05, "follow")):
            status = t["diagnostic_msgs/msg/DiagnosticStatus"](
                level=1, name="robot/state", message=mode, hardware_id="twin",
                values=[t["diagnostic_msgs/msg/KeyValue"](key="mode", value=mode)],
            )  # fmt: skip
            array = t["diagnostic_msgs/msg/DiagnosticArray"](
                header=header(ns_of(at + diagnostics_ahead_s)), status=[status]
            )
            write(topics.diagnostics, array, ns_of(at) + LATENCY_NS)
    if np.isfinite(rec.stopped_s):  # the robot's safety controller stopped it: a latched status
        status = t["diagnostic_msgs/msg/DiagnosticStatus"](
            level=LEVEL_ERROR, name=safety_status_name("protective_stop"), message="stop",
            hardware_id="twin", values=[],
        )  # fmt: skip
        array = t["diagnostic_msgs/msg/DiagnosticArray"](
            header=header(ns_of(rec.stopped_s + diagnostics_ahead_s)), status=[status]
        )
        write(topics.diagnostics, array, ns_of(rec.stopped_s) + LATENCY_NS)
    artifact = recorder.close()
    family, _ = rec.task_id.split("/")
    return Episode(
        episode_id=rec.episode_id, pair_id=rec.episode_id.split("-real")[0], side="real",
        family=family, task_id=rec.task_id, seed=rec.seed, policy="excitation", engine="ros2",
        quality=0.0, target_quality=0.8, artifacts=(artifact,),
    )  # fmt: skip
