"""A recorded real episode as the calibration needs it: on the robot's clock.

From the episode's MCAP recording (see `real_bridge.recording`):

- the arm and gripper commands sent after the episode's "started" event, each with its arrival
  time on the robot's clock — from the robot's echo of each applied command (its stamp minus how
  long it waited) when the robot echoes, else from the send time mapped onto the robot's clock by
  the joint states' stamps (median of receive time − stamp). A robot that echoes applied commands
  did not apply a command it did not echo (it ignored it while holding, or dropped it when it
  held): such commands are left out and counted;
- with the echo, how much longer each command waited than the episode's shortest wait
  (`Command.late_s`): the robot takes a command at one of its physics steps, so its waits differ
  by up to a step — and by a whole control period where that step falls after a controller
  update. The replay adds it to the fitted delay, so the fitted delay is the robot's shortest
  wait plus any delay after its servo took the command (`real_bridge.calibration.replay`);
- the times the robot held its set-point on its own (its `robot/state` status turning to mode
  "hold", e.g. when the harness's heartbeat was late): a hold freezes the set-point where it is;
  and when its safety controller stopped it. Both come from the robot's diagnostics, which need
  not be stamped on its joint states' clock (the twin stamps them with wall time and its states
  with its simulation clock, which falls behind wall time whenever its loop is held up): they are
  put on the joint states' clock by when they were received — the joint states received at the
  same moment say what the robot's clock read then (`_on_state_clock`);
- the joint states (positions and efforts) with their stamps;
- the object tracker's positions with their stamps, and the wrench, when recorded;
- the randomization ranges of the manifest the robot's reset station was given (the scene knobs
  rebuild the pair's scene), else the protocol's.

Times are seconds on the robot's clock relative to the first joint state of the recording.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from real_bridge.recording_steps import episode_event_fields


@dataclass(frozen=True)
class Command:
    """One command as the robot received it: arrival (s, robot clock), targets, duration (s),
    and how much longer than the episode's shortest wait it waited before it took effect (s, from
    the robot's echo; 0 without one)."""

    arrival_s: float
    kind: str  # "arm" or "gripper"
    positions: np.ndarray
    duration_s: float
    late_s: float = 0.0


@dataclass
class RecordedEpisode:
    """Everything the calibration reads from one real episode (see the module docstring).

    Attributes:
        episode_id, task_id, seed: the episode record's.
        randomization: the protocol's `[randomization]` ranges (the scene knobs rebuild the
            pair's scene).
        robot_id: the robot the episode ran on.
        drift: the episode record's drift (name and parameters, as recorded).
        reset_s: when the harness handed the robot's reset station this episode's manifest,
            mapped onto the robot clock (the scene reset follows at once); None when the
            manifest was not recorded.
        commands: arm and gripper commands, in the order the robot took them (see the module
            docstring).
        state_t / state_q / state_effort: joint-state stamps (s), positions (n, 9), efforts (n, 9).
        object_t / object_pos: tracker stamps (s) and positions (m, (k, 3)); empty when absent.
        wrench_t / wrench: force/torque stamps and readings ((k, 6)); empty when absent.
        started_s: the "started" event mapped onto the robot clock.
        holds_s: when the robot held its set-point on its own (robot clock, s).
        not_applied: commands sent that the robot never applied (not echoed), left out.
        stopped_s: when the robot's safety controller stopped it (it holds from then on, which
            the replay does not model), s; inf when it never stopped.
    """

    episode_id: str
    task_id: str
    seed: int
    randomization: Mapping[str, Any]
    robot_id: str
    commands: list[Command]
    state_t: np.ndarray
    state_q: np.ndarray
    state_effort: np.ndarray
    object_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    object_pos: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    wrench_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    wrench: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    started_s: float = 0.0
    stopped_s: float = float("inf")
    drift: Mapping[str, Any] = field(default_factory=dict)
    reset_s: float | None = None
    holds_s: tuple[float, ...] = ()
    not_applied: int = 0

    @property
    def has_object_track(self) -> bool:
        return len(self.object_t) > 0

    @property
    def arm_commands(self) -> list[Command]:
        return [c for c in self.commands if c.kind == "arm"]


def _stamp_s(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _duration_ns(point: Any) -> int:
    return int(point.time_from_start.sec) * 1_000_000_000 + int(point.time_from_start.nanosec)


def _ordered(names: Any, values: Any, wanted: list[str], path: Path, what: str) -> list[float]:
    index = {n: i for i, n in enumerate(names)}
    missing = [w for w in wanted if w not in index]
    if missing:
        raise EvalError(f"recording {path}: {what} does not name joint {missing[0]!r}")
    return [float(values[index[w]]) for w in wanted]


def recording_path(episode: Episode) -> Path:
    """The episode's MCAP recording.

    Raises:
        EvalError: the episode has none on disk (record real episodes with recording on).
    """
    for art in episode.artifacts:
        if art.kind == "mcap" and Path(art.path).is_file():
            return Path(art.path)
    raise EvalError(
        f"episode {episode.episode_id}: no MCAP recording on disk; record real episodes "
        "(the robot profile's `record = true`) to calibrate from them"
    )


def read_recorded_episode(
    episode: Episode, randomization: Mapping[str, Any], path: str | Path | None = None
) -> RecordedEpisode:
    """Read one real episode's recording for calibration.

    Args:
        episode: the episode record (its seed rebuilds the scene).
        randomization: the protocol's `[randomization]` ranges.
        path: the recording (default: the episode's MCAP artifact).

    Raises:
        EvalError: the file is not a harness recording or lacks a needed stream (joint states
            with efforts, the arm commands, the "started" event).
    """
    from mcap_ros2.decoder import DecoderFactory

    from real_bridge.recording import read_partial

    path = recording_path(episode) if path is None else Path(path)
    metadata: list[Any] = []
    schemas, channels, messages = read_partial(path, metadata)
    meta = next((m.metadata for m in metadata if m.name == "episode"), None)
    if meta is None or "bridge_config" not in meta:
        raise EvalError(f"recording {path}: no episode metadata (not a harness recording)")
    config = json.loads(meta["bridge_config"])
    topics, robot = config["topics"], config["robot"]
    arm, gripper = list(robot["arm_joints"]), list(robot["gripper_joints"])
    roles = {
        topics["joint_state"]: "state",
        topics["command"]: "arm",
        topics.get("gripper_command", ""): "gripper",
        topics.get("applied", ""): "applied",
        topics.get("wrench", ""): "wrench",
        topics.get("object_pose", ""): "object",
        topics.get("episode", ""): "event",
        topics.get("diagnostics", ""): "diagnostics",
        topics.get("manifest", ""): "manifest",
    }
    roles.pop("", None)
    factory = DecoderFactory()
    decoders: dict[int, Any] = {}
    for cid, channel in channels.items():
        if channel.topic in roles:
            decoder = factory.decoder_for(channel.message_encoding, schemas.get(channel.schema_id))
            if decoder is not None:
                decoders[cid] = decoder
    streams: dict[str, list[tuple[int, Any]]] = {}
    for message in sorted(messages, key=lambda m: m.log_time):
        if message.channel_id in decoders:
            role = roles[channels[message.channel_id].topic]
            streams.setdefault(role, []).append(
                (int(message.log_time), decoders[message.channel_id](message.data))
            )
    states = streams.get("state", [])
    if len(states) < 2:
        raise EvalError(
            f"recording {path}: no joint states recorded; record the `joint_state` stream"
        )
    joints = arm + gripper
    stamps = np.array([_stamp_s(m.header) for _, m in states], dtype=np.int64)
    if np.any(np.diff(stamps) <= 0):
        order = np.argsort(stamps, kind="stable")
        states = [states[i] for i in order]
        stamps = stamps[order]
    t0 = int(stamps[0])
    q = np.array([_ordered(m.name, m.position, joints, path, "a joint state") for _, m in states])
    if any(len(m.effort) != len(m.name) for _, m in states):
        raise EvalError(
            f"recording {path}: the joint states carry no efforts; the calibration needs them "
            "to find the controller's update times (publish effort in joint_states)"
        )
    effort = np.array(
        [_ordered(m.name, m.effort, joints, path, "a joint state") for _, m in states]
    )
    # Receive time − stamp: maps the harness's clock onto the robot's.
    offset = int(np.median([log - int(s) for (log, _), s in zip(states, stamps, strict=True)]))
    received_ns = np.array([log for log, _ in states], dtype=np.int64)
    on_state_clock = _on_state_clock(received_ns, stamps)
    started = [
        log for log, msg in streams.get("event", []) if episode_event_fields(msg.data) == (
            episode.episode_id, "started")
    ]  # fmt: skip
    if not started:
        raise EvalError(f"recording {path}: the episode never started (no 'started' event)")
    sent = [
        (log, kind, msg)
        for kind in ("arm", "gripper")
        for log, msg in streams.get(kind, [])
        if log >= started[0] and msg.points
    ]
    if not any(kind == "arm" for _, kind, _ in sent):
        raise EvalError(
            f"recording {path}: no arm commands recorded after the episode started; record the "
            "`command` stream"
        )
    echoes = {str(m.header.frame_id): (log, m) for log, m in streams.get("applied", [])}
    period_ns = int(np.median(np.diff(stamps)))
    received = []
    not_applied = 0
    for log, kind, msg in sent:
        names = arm if kind == "arm" else gripper
        echoed = echoes.get(str(msg.header.frame_id)) if msg.header.frame_id else None
        if echoed is None and echoes:
            not_applied += 1  # the robot echoes what it applies: this one it never did
            continue
        waited_ns, told = 0, log
        if echoed is not None:
            told, echo = echoed
            # Applied at the physics step before the echo's state tick, after waiting this long.
            waited_ns = _duration_ns(echo.points[0])
            arrival_ns = _stamp_s(echo.header) - period_ns - waited_ns
            positions = _ordered(echo.joint_names, echo.points[0].positions, names, path, "an echo")
        else:
            arrival_ns = log - offset
            positions = _ordered(
                msg.joint_names, msg.points[-1].positions, names, path, "a command"
            )
        received.append(
            (arrival_ns + waited_ns, told, arrival_ns, waited_ns, kind, positions,
             _duration_ns(msg.points[-1]))
        )  # fmt: skip
    # In the order the robot took them (its echoes' order where several took effect at once):
    # the last one taken is the set-point. That is their arrival order unless the robot's clock
    # stepped back between two arrivals (the twin's does when its loop gives up catching up).
    received.sort(key=lambda r: r[:2])
    shortest_ns = min((r[3] for r in received), default=0)
    commands = [
        Command(
            arrival_s=(arrival_ns - t0) * 1e-9,
            kind=kind,
            positions=np.array(positions, dtype=float),
            duration_s=duration_ns * 1e-9,
            late_s=(waited_ns - shortest_ns) * 1e-9,
        )
        for _, _, arrival_ns, waited_ns, kind, positions, duration_ns in received
    ]
    recorded = RecordedEpisode(
        episode_id=episode.episode_id,
        task_id=episode.task_id,
        seed=int(episode.seed),
        randomization=_told_randomization(streams.get("manifest", []), episode, randomization),
        reset_s=_told_at(streams.get("manifest", []), episode, offset + t0),
        robot_id=str(meta.get("robot_id", "") or config.get("robot_id", "")),
        commands=commands,
        state_t=(stamps - t0) * 1e-9,
        state_q=q,
        state_effort=effort,
        started_s=(started[0] - offset - t0) * 1e-9,
        drift=dict(episode.drift),
        holds_s=tuple(
            (on_state_clock(h) - t0) * 1e-9
            for h in _holds(streams.get("diagnostics", []), started[0])
        ),
        not_applied=not_applied,
    )
    from real_bridge.interface import LEVEL_ERROR

    stops = [
        on_state_clock(log)
        for log, m in streams.get("diagnostics", [])
        if log >= started[0]
        and any(
            _level(st.level) == LEVEL_ERROR and st.name.startswith("safety/") for st in m.status
        )
    ]
    if stops:
        recorded.stopped_s = (min(stops) - t0) * 1e-9
    poses = streams.get("object", [])
    if poses:
        recorded.object_t = np.array([(_stamp_s(m.header) - t0) * 1e-9 for _, m in poses])
        recorded.object_pos = np.array(
            [[m.pose.position.x, m.pose.position.y, m.pose.position.z] for _, m in poses]
        )
    wrenches = streams.get("wrench", [])
    if wrenches:
        recorded.wrench_t = np.array([(_stamp_s(m.header) - t0) * 1e-9 for _, m in wrenches])
        recorded.wrench = np.array(
            [
                [w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z]
                for w in (m.wrench for _, m in wrenches)
            ]
        )
    return recorded


def _told_randomization(
    manifests: list[tuple[int, Any]], episode: Episode, protocol_ranges: Mapping[str, Any]
) -> dict[str, Any]:
    """The ranges the robot's reset station was given for this episode (its recorded manifest),
    else the protocol's."""
    for _, msg in reversed(manifests):
        try:
            data = json.loads(msg.data)
        except ValueError:
            continue
        if (
            isinstance(data, dict)
            and (data.get("episode") or {}).get("episode_id") == episode.episode_id
            and isinstance(data.get("randomization"), dict)
        ):
            return dict(data["randomization"])
    return dict(protocol_ranges)


def _told_at(manifests: list[tuple[int, Any]], episode: Episode, zero_ns: int) -> float | None:
    """When this episode's manifest went to the robot (robot clock, s), or None."""
    for log, msg in reversed(manifests):
        try:
            data = json.loads(msg.data)
        except ValueError:
            continue
        if (
            isinstance(data, dict)
            and (data.get("episode") or {}).get("episode_id") == episode.episode_id
        ):
            return (log - zero_ns) * 1e-9
    return None


def _on_state_clock(received_ns: np.ndarray, stamps_ns: np.ndarray) -> Callable[[int], int]:
    """Maps when a message of the robot's was received (ns, harness clock) onto its joint states'
    clock: linearly between the stamps of the joint states received just before and after it
    (the robot's messages travel together; its clock may slip against the harness's)."""
    order = np.argsort(received_ns, kind="stable")
    base_log, base_stamp = int(received_ns[order[0]]), int(stamps_ns[0])
    logs = (received_ns[order] - base_log).astype(np.float64)
    stamps = (stamps_ns[order] - base_stamp).astype(np.float64)

    def convert(log_ns: int) -> int:
        return base_stamp + round(float(np.interp(log_ns - base_log, logs, stamps)))

    return convert


def _holds(diagnostics: list[tuple[int, Any]], started_log: int) -> list[int]:
    """Receive times (ns, harness clock) where the robot's `robot/state` mode turned to "hold"
    after the episode started."""
    from real_bridge.safety_state import ROBOT_STATE_STATUS

    out, mode = [], ""
    for log, msg in diagnostics:
        for st in msg.status:
            if st.name != ROBOT_STATE_STATUS:
                continue
            now = next((str(kv.value) for kv in st.values if kv.key == "mode"), mode)
            if now == "hold" and mode != "hold" and log >= started_log:
                out.append(log)
            mode = now
    return out


def _level(level: Any) -> int:
    return level[0] if isinstance(level, (bytes, bytearray)) else int(level)
