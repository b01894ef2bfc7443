"""A real episode's recording (MCAP) as per-step frames, for the LeRobotDataset export.

One frame per step of the harness's control loop (`control["loop_steps"]` of the episode): the
k-th arm command the loop sent after the "started" episode event is step k. At each step, taken
at the moment that command went out (its log time in the recording):

- `obs.joint_pos`, `obs.joint_vel` — the latest joint state received at or before it (the sample
  the loop's observation was built from), arm joints then gripper joints in profile order;
- `obs.wrench` — the latest force/torque reading (fx, fy, fz, tx, ty, tz), when recorded;
- `obs.image` — the latest camera frame (decoded from the recorded PNG/JPEG CompressedImage),
  when recorded; before the first one, the first one;
- `action` — the joint targets of that arm command (profile order), then the gripper targets
  sent in the same step, when the robot has a gripper controller;
- `time` — the step's tick, step / rate (s), the control rate being the profile's
  `[loop] rate_hz` (the actual send times stay in the recording).

Returned as the same arrays a sim trajectory artifact holds (`time`, `action`, `obs.<key>`), so
the export treats both alike.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from real_bridge.bridge_messages import compressed_topic
from real_bridge.recording import read_partial

#: A loop command's time_from_start is one control period; this is the tolerance, s.
PERIOD_TOLERANCE_S = 1e-6


def _decoders(schemas: Mapping[int, Any], channels: Mapping[int, Any]) -> dict[int, Any]:
    from mcap_ros2.decoder import DecoderFactory

    factory = DecoderFactory()
    out = {}
    for channel_id, channel in channels.items():
        decoder = factory.decoder_for(channel.message_encoding, schemas.get(channel.schema_id))
        if decoder is not None:
            out[channel_id] = decoder
    return out


def _time_from_start(trajectory: Any) -> float:
    t = trajectory.points[-1].time_from_start
    return float(t.sec) + float(t.nanosec) * 1e-9


def _ordered(
    names: Sequence[str], values: Sequence[float], wanted: Sequence[str], what: str
) -> Any:
    index = {n: i for i, n in enumerate(names)}
    missing = [w for w in wanted if w not in index]
    if missing:
        raise EvalError(f"recording: {what} does not name joint {missing[0]!r}")
    return [float(values[index[w]]) for w in wanted]


def _latest(times: np.ndarray, t: int) -> int:
    """Index of the last sample at or before `t` (the first sample when none is)."""
    return max(0, int(np.searchsorted(times, t, side="right")) - 1)


def _decode_image(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(bytes(data))) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8)


def recorded_steps(episode: Episode, path: str | Path) -> dict[str, np.ndarray]:
    """The per-step arrays of a real episode's MCAP recording (see the module docstring).

    Raises:
        EvalError: the file is not one of our recordings or misses what a frame needs.
    """
    steps = int(episode.control.get("loop_steps", 0))
    if steps == 0:  # ended before its first step: no frames
        return {"time": np.zeros(0), "action": np.zeros((0, 0), np.float32)}
    metadata: list[Any] = []
    schemas, channels, messages = read_partial(path, metadata)
    episode_meta = next((m.metadata for m in metadata if m.name == "episode"), None)
    if episode_meta is None or "bridge_config" not in episode_meta:
        raise EvalError(f"recording {path}: no episode metadata (not a harness recording)")
    config = json.loads(episode_meta["bridge_config"])
    topics, robot = config["topics"], config["robot"]
    rate_hz = float(config["loop"]["rate_hz"])
    arm, gripper = list(robot["arm_joints"]), list(robot["gripper_joints"])
    image_topic = topics.get("camera_compressed") or (
        compressed_topic(topics["camera_image"]) if topics.get("camera_image") else ""
    )
    decoders = _decoders(schemas, channels)
    streams: dict[str, list[tuple[int, Any]]] = {}
    wanted = {
        topics["joint_state"]: "state",
        topics["command"]: "arm",
        topics.get("gripper_command", ""): "gripper",
        topics.get("wrench", ""): "wrench",
        topics.get("episode", ""): "event",
        image_topic: "image",
    }
    wanted.pop("", None)
    for message in sorted(messages, key=lambda m: m.log_time):
        topic = channels[message.channel_id].topic
        name = wanted.get(topic)
        if name is None or message.channel_id not in decoders:
            continue
        streams.setdefault(name, []).append(
            (int(message.log_time), decoders[message.channel_id](message.data))
        )
    started = [
        t
        for t, msg in streams.get("event", [])
        if episode_event_fields(msg.data) == (episode.episode_id, "started")
    ]
    if not started:
        raise EvalError(f"recording {path}: the episode never started (no 'started' event)")
    period = 1.0 / rate_hz

    def loop_commands(name: str) -> list[tuple[int, Any]]:
        sent = [
            (t, msg)
            for t, msg in streams.get(name, [])
            if t >= started[0] and abs(_time_from_start(msg) - period) <= PERIOD_TOLERANCE_S
        ]
        return sent[:steps]

    arm_commands = loop_commands("arm")
    if len(arm_commands) < steps:
        raise EvalError(
            f"recording {path}: {len(arm_commands)} loop commands recorded, the episode says "
            f"{steps} steps"
        )
    states = streams.get("state", [])
    if not states:
        raise EvalError(f"recording {path}: no joint states recorded")
    ticks = np.array([t for t, _ in arm_commands], dtype=np.int64)
    joints = arm + gripper
    state_times = np.array([t for t, _ in states], dtype=np.int64)
    pos, vel = [], []
    for t in ticks:
        msg = states[_latest(state_times, int(t))][1]
        pos.append(_ordered(msg.name, msg.position, joints, "a joint state"))
        vel.append(
            _ordered(msg.name, msg.velocity, joints, "a joint state")
            if len(msg.velocity) == len(msg.name)
            else [0.0] * len(joints)
        )
    actions = [
        _ordered(m.joint_names, m.points[-1].positions, arm, "a command") for _, m in arm_commands
    ]
    gripper_commands = loop_commands("gripper") if gripper else []
    if gripper and len(gripper_commands) == steps:
        for row, (_, m) in zip(actions, gripper_commands, strict=True):
            row += _ordered(m.joint_names, m.points[-1].positions, gripper, "a gripper command")
    out: dict[str, np.ndarray] = {
        "time": np.arange(steps, dtype=np.float64) / rate_hz,
        "action": np.array(actions, dtype=np.float32).reshape(steps, -1),
        "obs.joint_pos": np.array(pos, dtype=np.float32).reshape(steps, len(joints)),
        "obs.joint_vel": np.array(vel, dtype=np.float32).reshape(steps, len(joints)),
    }
    wrenches = streams.get("wrench", [])
    if wrenches:
        wrench_times = np.array([t for t, _ in wrenches], dtype=np.int64)
        rows = []
        for t in ticks:
            w = wrenches[_latest(wrench_times, int(t))][1].wrench
            rows.append([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z])
        out["obs.wrench"] = np.array(rows, dtype=np.float32).reshape(steps, 6)
    images = streams.get("image", [])
    if images:
        image_times = np.array([t for t, _ in images], dtype=np.int64)
        picked = [_latest(image_times, int(t)) for t in ticks]
        decoded = {i: _decode_image(images[i][1].data) for i in sorted(set(picked))}
        out["obs.image"] = np.stack([decoded[i] for i in picked])
    return out


def episode_event_fields(text: str) -> tuple[str, str]:
    """(episode id, phase) of a recorded episode event's JSON text; ("", "") when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("episode_id", "")), str(data.get("phase", ""))
