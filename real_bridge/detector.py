"""The harness's success detector: judges a real episode from its recorded sensor streams only.

What a lab has after an episode is a recording: the scene camera's frames and `CameraInfo`, the
object tracker's poses (where the robot profile declares a tracker) and the harness's own episode
events. `judge_recording` decides from exactly those messages — the same function, on the same
bytes, in the live run (the link keeps the messages it records, `JudgeLog`) and in
`embodied-eval trial rejudge` (read back from the MCAP) — so a stored verdict can be reproduced
bit for bit. It never reads the robot's or the simulator's state.

Procedure (name `DETECTOR_NAME`, version `DETECTOR_VERSION`; a change to it is a new version):

1. The evidence window is [end − `BEFORE_END_S`, end + `AFTER_END_S`] around the harness's
   "ended" event of the episode (message log times).
2. Tracker: with at least `MIN_TRACKER_POSES` poses in the window, the tracked point is their
   per-axis median (the drawer's tracked point is its handle).
3. Otherwise the camera, when the profile declares its pose (`[camera]`) and the object has a
   distinctive colour: the median of the positions located in the last `CAMERA_FRAMES` frames of
   the window (`real_bridge.detector_camera`).
4. Neither: "cannot judge" — a null verdict and the reason, never a success.
5. The goal error is the task family's error of the tracked point (`Task.point_error`: the 3-D
   distance for pick_place, planar for push, the pull still missing for drawer_open, lateral
   offset and missing depth for peg_insert) against the goal of the episode's scene; quality
   q = 0.8^((e/tol)²) (the suite's scoring rule) and success = q ≥ q*.

The judge's inputs that are not sensor data — the episode, its task, q*, the goal of the scene
the manifest set up, the topic names and the camera's declared pose — are the *judge context*,
written into the recording's metadata at the start of the episode (`CONTEXT_KEY`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from real_bridge.detector_camera import (
    CameraModel,
    colour_is_distinct,
    intrinsics,
    locate_in_image,
)

DETECTOR_NAME = "scene-detector"
DETECTOR_VERSION = "1.0.0"
#: Metadata key (in the recording's "episode" metadata) of the judge context.
CONTEXT_KEY = "judge_context"
#: The evidence window around the "ended" event, s.
BEFORE_END_S = 0.5
AFTER_END_S = 0.3
#: Fewest tracker poses in the window for the tracker to decide.
MIN_TRACKER_POSES = 3
#: Camera frames (the last ones of the window) the camera decides from.
CAMERA_FRAMES = 5

POSE = "geometry_msgs/msg/PoseStamped"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
STRING = "std_msgs/msg/String"

#: One recorded message: topic, log time (ns), CDR bytes (or a function returning them).
RecordedMessage = tuple[str, int, "bytes | Callable[[], bytes]"]


@dataclass(frozen=True)
class JudgeContext:
    """What the detector knows besides the sensor data (see the module docstring).

    Attributes:
        episode_id / task_id: the episode judged and its task instance.
        target_quality: q*.
        goal_pos_m: the goal of the tracked point in the scene the manifest set up (base frame).
        pose_topic: the tracker's topic ("" none); camera_topic: the recorded (compressed)
            camera topic ("" none); camera_info_topic; episode_topic: the harness's events.
        camera_position_m / camera_look_at_m: the camera's declared pose ((): not declared).
    """

    episode_id: str
    task_id: str
    target_quality: float
    goal_pos_m: tuple[float, ...]
    pose_topic: str = ""
    camera_topic: str = ""
    camera_info_topic: str = ""
    episode_topic: str = "/embodied_eval/episode"
    camera_position_m: tuple[float, ...] = ()
    camera_look_at_m: tuple[float, ...] = ()

    def to_json(self) -> str:
        return canonical_json(
            {
                "episode_id": self.episode_id,
                "task_id": self.task_id,
                "target_quality": self.target_quality,
                "goal_pos_m": list(self.goal_pos_m),
                "pose_topic": self.pose_topic,
                "camera_topic": self.camera_topic,
                "camera_info_topic": self.camera_info_topic,
                "episode_topic": self.episode_topic,
                "camera_position_m": list(self.camera_position_m),
                "camera_look_at_m": list(self.camera_look_at_m),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> JudgeContext:
        """Parse a context written by `to_json`; EvalError when it is not one."""
        try:
            data = json.loads(text)
            return cls(
                episode_id=str(data["episode_id"]),
                task_id=str(data["task_id"]),
                target_quality=float(data["target_quality"]),
                goal_pos_m=tuple(float(v) for v in data["goal_pos_m"]),
                pose_topic=str(data["pose_topic"]),
                camera_topic=str(data["camera_topic"]),
                camera_info_topic=str(data["camera_info_topic"]),
                episode_topic=str(data["episode_topic"]),
                camera_position_m=tuple(float(v) for v in data["camera_position_m"]),
                camera_look_at_m=tuple(float(v) for v in data["camera_look_at_m"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise EvalError(f"judge context: not readable ({exc})", key=CONTEXT_KEY) from None

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics the detector reads."""
        named = (self.pose_topic, self.camera_topic, self.camera_info_topic, self.episode_topic)
        return tuple(t for t in named if t)


@dataclass(frozen=True)
class DetectorVerdict:
    """The detector's verdict on one episode; `success` None means it cannot judge (`detail`
    says why)."""

    success: bool | None
    quality: float | None
    goal_error_m: float | None
    source: str
    detail: str
    evidence: dict[str, int] = field(default_factory=dict)
    name: str = DETECTOR_NAME
    version: str = DETECTOR_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "success": self.success,
            "quality": self.quality,
            "goal_error_m": self.goal_error_m,
            "source": self.source,
            "detail": self.detail,
            "evidence": dict(self.evidence),
        }


class JudgeLog:
    """The messages of the detector's topics as the link records them (live runs): the same
    (topic, log time, bytes) the recorder is given. Thread-safe enough for one writer thread
    (list appends)."""

    def __init__(self, topics: Iterable[str]) -> None:
        self.topics = frozenset(topics)
        self._messages: list[RecordedMessage] = []

    def write(
        self, topic: str, data: bytes | Callable[[], bytes], log_time_ns: int, _: int = 0
    ) -> None:
        if topic in self.topics:
            self._messages.append((topic, int(log_time_ns), data))

    def messages(self) -> list[RecordedMessage]:
        return list(self._messages)


def _store() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _bytes(data: bytes | Callable[[], bytes]) -> bytes:
    return data if isinstance(data, bytes) else data()


def _events(store: Any, messages: Sequence[RecordedMessage], ctx: JudgeContext) -> list[int]:
    """Log times of the episode's "ended" events."""
    out = []
    for topic, log_ns, data in messages:
        if topic != ctx.episode_topic:
            continue
        try:
            event = json.loads(store.deserialize_cdr(_bytes(data), STRING).data)
        except (ValueError, AttributeError, TypeError):
            continue
        if (
            isinstance(event, dict)
            and event.get("episode_id") == ctx.episode_id
            and event.get("phase") == "ended"
        ):
            out.append(log_ns)
    return out


def _tracker_point(
    store: Any, messages: Sequence[RecordedMessage], ctx: JudgeContext, low: int, high: int
) -> tuple[np.ndarray | None, int]:
    points = []
    for topic, log_ns, data in messages:
        if topic == ctx.pose_topic and low <= log_ns <= high:
            p = store.deserialize_cdr(_bytes(data), POSE).pose.position
            points.append((p.x, p.y, p.z))
    if len(points) < MIN_TRACKER_POSES:
        return None, len(points)
    return np.median(np.array(points, dtype=float), axis=0), len(points)


def _decode_image(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8)


def _camera_point(
    store: Any,
    messages: Sequence[RecordedMessage],
    ctx: JudgeContext,
    low: int,
    high: int,
    object_rgb: Sequence[float] | None,
) -> tuple[np.ndarray | None, int, str]:
    """The camera's estimate, the frames it located the object in, and why not (if None)."""
    if not ctx.camera_topic:
        return None, 0, "the profile declares no camera"
    if len(ctx.camera_position_m) != 3 or len(ctx.camera_look_at_m) != 3:
        return None, 0, "the camera's pose is not declared in the robot profile ([camera])"
    if object_rgb is None or not colour_is_distinct(object_rgb):
        return None, 0, "the object has no distinctive colour for the camera"
    k = None
    for topic, log_ns, data in messages:
        if topic == ctx.camera_info_topic and log_ns <= high:
            k = intrinsics(store.deserialize_cdr(_bytes(data), CAMERA_INFO).k)
    if k is None:
        return None, 0, "no camera intrinsics (CameraInfo) recorded"
    camera = CameraModel(k, np.array(ctx.camera_position_m), np.array(ctx.camera_look_at_m))
    frames = [m for m in messages if m[0] == ctx.camera_topic and low <= m[1] <= high]
    if not frames:
        return None, 0, "no camera frame in the window"
    height = float(ctx.goal_pos_m[2])
    located = []
    for _, _, data in frames[-CAMERA_FRAMES:]:
        image = _decode_image(bytes(store.deserialize_cdr(_bytes(data), COMPRESSED_IMAGE).data))
        point, _ = locate_in_image(image, object_rgb, camera, height)
        if point is not None:
            located.append(point)
    if not located:
        tried = len(frames[-CAMERA_FRAMES:])
        return None, 0, f"the object was not found in the last {tried} frames"
    return np.median(np.array(located), axis=0), len(located), ""


def _object_colour(task: Any) -> tuple[float, ...] | None:
    """The declared colour of the part whose centre is the tracked point (the object itself, or
    the drawer's handle); None when no geometry of the object sits there."""
    offset = np.asarray(task.tracked_point(np.zeros(3)), dtype=float)
    for body in task.bodies():
        if body.name != task.object_name:
            continue
        for geom in body.geoms:
            if np.allclose(np.asarray(geom.pos, dtype=float), offset):
                return tuple(float(v) for v in geom.rgba[:3])
    return None


def evidence_complete(messages: Sequence[RecordedMessage], ctx: JudgeContext) -> bool:
    """Whether every sensor stream that has spoken has delivered a message logged after the
    evidence window closed (streams arrive in order, so the window's messages are all in): the
    live run waits for this before judging, so it judges what the recording will hold."""
    ended = _events(_store(), messages, ctx)
    if not ended:
        return True
    high = ended[0] + round(AFTER_END_S * 1e9)
    last: dict[str, int] = {}
    for topic, log_ns, _ in messages:
        if topic in (ctx.pose_topic, ctx.camera_topic, ctx.camera_info_topic) and topic:
            last[topic] = max(log_ns, last.get(topic, log_ns))
    return all(t > high for t in last.values())


def judge_recording(messages: Sequence[RecordedMessage], ctx: JudgeContext) -> DetectorVerdict:
    """The detector's verdict from recorded messages (see the module docstring).

    Args:
        messages: (topic, log time ns, CDR bytes) of the recording, in recording order; topics
            other than the context's are ignored.
        ctx: the judge context of the episode.
    Returns:
        The verdict (success None: cannot judge, with the reason).
    """
    from sim_suites.robot_core import graded_quality, make_task

    store = _store()
    ended = _events(store, messages, ctx)
    if not ended:
        return DetectorVerdict(
            None, None, None, "", f"cannot judge: no 'ended' event of {ctx.episode_id} recorded"
        )
    end = ended[0]
    low, high = end - round(BEFORE_END_S * 1e9), end + round(AFTER_END_S * 1e9)
    task = make_task(ctx.task_id)
    evidence: dict[str, int] = {}
    point: np.ndarray | None = None
    source = ""
    if ctx.pose_topic:
        point, evidence["tracker_poses"] = _tracker_point(store, messages, ctx, low, high)
        source = "tracker" if point is not None else ""
        why_not_tracker = f"{evidence['tracker_poses']} tracker pose(s) in the window"
    else:
        why_not_tracker = "the profile declares no tracker"
    why_not_camera = ""
    if point is None:
        point, evidence["camera_frames"], why_not_camera = _camera_point(
            store, messages, ctx, low, high, _object_colour(task)
        )
        source = "camera" if point is not None else ""
    if point is None:
        return DetectorVerdict(
            None,
            None,
            None,
            "",
            f"cannot judge: {why_not_tracker} (at least {MIN_TRACKER_POSES} needed); "
            f"camera: {why_not_camera}",
            evidence,
        )
    goal = np.array(ctx.goal_pos_m, dtype=float)
    error = float(task.point_error(point, goal))
    quality = float(graded_quality(error, task.spec.tolerance_m))
    success = quality >= ctx.target_quality
    seen = ", ".join(f"{round(float(v), 4):g}" for v in point)
    return DetectorVerdict(
        success,
        quality,
        error,
        source,
        f"{source}: object at ({seen}) m, goal error {error * 1000:.1f} mm",
        evidence,
    )


def judge_context(spec: Any, goal_pos: Sequence[float] | np.ndarray, config: Any) -> JudgeContext:
    """The judge context of an episode on a robot (a `BridgeConfig`): its topics (only those it
    records), the camera's declared pose, and the goal of the scene set up for `spec`."""
    from real_bridge.recording import compressed_topic

    topics, streams = config.topics, set(config.record_streams)
    camera = ""
    if topics.camera_compressed and "camera_compressed" in streams:
        camera = topics.camera_compressed
    elif topics.camera_image and "camera_image" in streams:
        camera = compressed_topic(topics.camera_image)
    return JudgeContext(
        episode_id=spec.episode_id,
        task_id=spec.task_id,
        target_quality=float(spec.target_quality),
        goal_pos_m=tuple(round(float(v), 9) for v in goal_pos),
        pose_topic=topics.object_pose if "object_pose" in streams else "",
        camera_topic=camera,
        camera_info_topic=topics.camera_info if "camera_info" in streams else "",
        episode_topic=topics.episode if "episode" in streams else "",
        camera_position_m=tuple(config.camera.position_m),
        camera_look_at_m=tuple(config.camera.look_at_m),
    )


def context_of_metadata(metadata: Mapping[str, str]) -> JudgeContext | None:
    """The judge context stored in a recording's "episode" metadata (None when absent)."""
    text = metadata.get(CONTEXT_KEY)
    return None if text is None else JudgeContext.from_json(text)


def code_hash(name: str = DETECTOR_NAME, version: str = DETECTOR_VERSION) -> str:
    """SHA-256 of this detector's source (this module and its camera tracker), named in the
    window's audit records; "" for another detector."""
    import hashlib
    from pathlib import Path

    if (name, version) != (DETECTOR_NAME, DETECTOR_VERSION):
        return ""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for module in ("detector.py", "detector_camera.py"):
        digest.update((here / module).read_bytes())
    return digest.hexdigest()
