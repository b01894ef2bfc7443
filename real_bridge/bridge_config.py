"""Typed configuration of the ROS 2 bridge: topic and service names, QoS, deadlines, discovery.

A lab points the bridge at its own robot with a TOML file::

    domain_id = 7
    discovery = "loopback"          # or "system", or a path to a Fast DDS XML profile
    robot_id = "panda-lab-2"

    [topics]
    joint_state = "/franka/joint_states"
    command = "/arm_controller/joint_trajectory"
    applied = ""                    # no applied-command echo on this robot

    [qos.joint_state]
    reliability = "best_effort"
    depth = 50

    [deadlines]
    service_s = 2.0

Every key is optional; unknown keys, wrong types and out-of-range values raise one `EvalError`
naming the key. Nothing here imports rclpy.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from embodied_eval.errors import EvalError
from embodied_eval.input_files import MAX_CONFIG_BYTES, read_user_text
from embodied_eval.validation import Key, check_value
from real_bridge.robot_profile import JUDGES as JUDGES
from real_bridge.robot_profile import ROBOT_KINDS as ROBOT_KINDS
from real_bridge.robot_profile import CameraSpec, LoopSettings, RobotSpec

RELIABILITIES = ("reliable", "best_effort")
DURABILITIES = ("volatile", "transient_local")
#: ROS_DOMAIN_ID range that works with the default port mapping (higher ids overflow the ports).
DOMAIN_ID_RANGE = (0, 101)
#: The streams the bridge can record, by their key in `TopicNames`.
STREAMS = (
    "joint_state",
    "command",
    "gripper_command",
    "applied",
    "wrench",
    "camera_image",
    "camera_compressed",
    "camera_info",
    "object_pose",
    "diagnostics",
    "episode",
    "manifest",
    "verdict",
)


_ROS_NAME = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")


def valid_ros_name(name: str) -> bool:
    """True when `name` is a valid ROS 2 topic/service name (absolute or relative, no ~ or {})."""
    return bool(_ROS_NAME.match(name))


@dataclass(frozen=True)
class QosSpec:
    """QoS of one stream: reliability, durability and history depth (KEEP_LAST)."""

    reliability: str = "reliable"
    durability: str = "volatile"
    depth: int = 100

    def __post_init__(self) -> None:
        if self.reliability not in RELIABILITIES:
            raise EvalError(
                f"reliability: {self.reliability!r} is not one of {', '.join(RELIABILITIES)}",
                key="reliability",
            )
        if self.durability not in DURABILITIES:
            raise EvalError(
                f"durability: {self.durability!r} is not one of {', '.join(DURABILITIES)}",
                key="durability",
            )
        if not 1 <= self.depth <= 100_000:
            raise EvalError(f"depth: {self.depth} is not in 1..100000", key="depth")


@dataclass(frozen=True)
class TopicNames:
    """Topic names of the robot interface (ros2_control conventions; defaults: the twin).

    An empty name means the robot has no such stream (only `joint_state`, `command`,
    `diagnostics`, `heartbeat`, `episode`, `manifest` and `verdict` are required).

    Attributes:
        joint_state: sensor_msgs/JointState from the joint_state_broadcaster.
        command: the joint_trajectory_controller's `~/joint_trajectory` topic
            (trajectory_msgs/JointTrajectory, arm joints only).
        gripper_command: a second joint_trajectory_controller for the gripper fingers ("" none).
        applied: the robot's echo of each command it applied (JointTrajectory; "" none).
        wrench: geometry_msgs/WrenchStamped from the force/torque broadcaster.
        camera_image / camera_compressed: sensor_msgs/Image or CompressedImage of one camera.
        camera_info: sensor_msgs/CameraInfo of that camera.
        object_pose: geometry_msgs/PoseStamped of the manipulated object from the lab's
            perception (tag tracker, motion capture); "" = the object stays where the manifest
            placed it as far as the policy knows.
        diagnostics: diagnostic_msgs/DiagnosticArray (safety/* statuses).
        heartbeat: std_msgs/Header the harness publishes while it supervises (the deadman).
        episode: std_msgs/String JSON episode events from the harness (TRANSIENT_LOCAL).
        manifest: std_msgs/String JSON manifest for the scene-reset service (TRANSIENT_LOCAL).
        verdict: std_msgs/String JSON verdicts from the twin's oracle; the harness also records
            the verdict it stored here.
        clock: rosgraph_msgs/Clock of a simulated robot (read only with `loop.use_sim_time`).
    """

    joint_state: str = "/joint_states"
    command: str = "/joint_trajectory_controller/joint_trajectory"
    gripper_command: str = "/gripper_controller/joint_trajectory"
    applied: str = "/joint_trajectory_controller/applied"
    wrench: str = "/force_torque_sensor_broadcaster/wrench"
    camera_image: str = "/camera/image_raw"
    camera_compressed: str = ""
    camera_info: str = "/camera/camera_info"
    object_pose: str = "/object_pose"
    diagnostics: str = "/diagnostics"
    heartbeat: str = "/embodied_eval/heartbeat"
    episode: str = "/embodied_eval/episode"
    manifest: str = "/embodied_eval/manifest"
    verdict: str = "/embodied_eval/verdict"
    clock: str = "/clock"

    def __post_init__(self) -> None:
        optional = (
            "gripper_command",
            "applied",
            "wrench",
            "camera_image",
            "camera_compressed",
            "camera_info",
            "object_pose",
        )
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in optional and value == "":
                continue
            if not valid_ros_name(value):
                raise EvalError(
                    f"topics.{f.name}: {value!r} is not a valid ROS 2 topic name "
                    "(letters, digits, _ and /, e.g. /joint_states)",
                    key=f"topics.{f.name}",
                )


@dataclass(frozen=True)
class ServiceNames:
    """Services of the robot side. `scene_reset` (std_srvs/Trigger, after the manifest is
    published; answers with the manifest's SHA-256) stands for an automated reset station;
    "" means there is none and a technician sets the scene up."""

    scene_reset: str = "/scene/reset"

    def __post_init__(self) -> None:
        if self.scene_reset and not valid_ros_name(self.scene_reset):
            raise EvalError(
                f"services.scene_reset: {self.scene_reset!r} is not a valid ROS 2 service name",
                key="services.scene_reset",
            )


@dataclass(frozen=True)
class QosProfiles:
    """QoS per stream. Events (manifest, verdict) are TRANSIENT_LOCAL so late joiners get them."""

    # 1000 samples = 2 s of a 500 Hz stream: a reader that stalls briefly loses nothing.
    joint_state: QosSpec = field(default_factory=lambda: QosSpec(depth=1000))
    command: QosSpec = field(default_factory=lambda: QosSpec(depth=10))
    wrench: QosSpec = field(default_factory=lambda: QosSpec(depth=1000))
    diagnostics: QosSpec = field(default_factory=lambda: QosSpec(depth=100))
    camera: QosSpec = field(default_factory=lambda: QosSpec(depth=5))
    object_pose: QosSpec = field(default_factory=lambda: QosSpec(depth=50))
    heartbeat: QosSpec = field(default_factory=lambda: QosSpec(depth=10))
    clock: QosSpec = field(default_factory=lambda: QosSpec(depth=10))
    events: QosSpec = field(default_factory=lambda: QosSpec(durability="transient_local", depth=10))


@dataclass(frozen=True)
class Deadlines:
    """Deadlines in seconds. Every call the bridge makes is bounded by one of these.

    Attributes:
        discovery_s: connect: the robot's joint-state stream must appear within this.
        service_s: one service call (request to response).
        state_stale_s: no joint state for this long means the robot stopped answering.
        episode_s: the policy loop of one episode; past it the episode is aborted.
        homing_s: the homing trajectory must arrive within this.
        judge_s: a detector/oracle verdict must arrive within this after the episode ends.
        safe_stop_s: the safe-stop hold sent when an episode ends early.
        resend_s: an idempotent request (scene reset) without an answer is sent again after
            this long, until its deadline.
        deadman_s: the robot side holds when no heartbeat arrived for this long (the harness
            publishes at `loop.heartbeat_hz`).
        robot_return_s: after the robot was lost, the runner waits this long for it to come back
            before retrying; past it the run halts (exit code non-zero).
        event_settle_s: after the episode, keep reading diagnostics this long (events travel on
            their own topic, so one may arrive just after the loop ended).
    """

    discovery_s: float = 5.0
    service_s: float = 3.0
    state_stale_s: float = 0.5
    episode_s: float = 600.0
    homing_s: float = 10.0
    judge_s: float = 5.0
    safe_stop_s: float = 1.0
    resend_s: float = 0.5
    deadman_s: float = 0.1
    robot_return_s: float = 60.0
    event_settle_s: float = 0.2

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not 0.0 < float(value) <= 86_400.0:
                raise EvalError(
                    f"deadlines.{f.name}: {value!r} must be a positive number of seconds",
                    key=f"deadlines.{f.name}",
                )


@dataclass(frozen=True)
class BridgeConfig:
    """Everything the ROS 2 bridge needs to find and drive one robot.

    Attributes:
        domain_id: ROS_DOMAIN_ID, 0–101.
        discovery: "loopback" (the shipped loopback-only Fast DDS profile), "system" (leave the
            environment's discovery alone) or the path of a Fast DDS XML profile.
        node_name / namespace: the bridge's ROS node.
        robot_id: recorded with episodes and incidents.
        record: write an MCAP recording of every episode.
        record_streams: which streams (keys of `TopicNames`) go into the recording.
        camera: the scene camera's calibrated pose (`[camera]`, for the success detector).
    """

    domain_id: int = 0
    discovery: str = "loopback"
    node_name: str = "embodied_eval_bridge"
    namespace: str = ""
    robot_id: str = ""
    record: bool = True
    record_streams: tuple[str, ...] = STREAMS
    topics: TopicNames = field(default_factory=TopicNames)
    services: ServiceNames = field(default_factory=ServiceNames)
    qos: QosProfiles = field(default_factory=QosProfiles)
    deadlines: Deadlines = field(default_factory=Deadlines)
    robot: RobotSpec = field(default_factory=RobotSpec)
    loop: LoopSettings = field(default_factory=LoopSettings)
    camera: CameraSpec = field(default_factory=CameraSpec)

    def __post_init__(self) -> None:
        low, high = DOMAIN_ID_RANGE
        if isinstance(self.domain_id, bool) or not low <= self.domain_id <= high:
            raise EvalError(
                f"domain_id: {self.domain_id!r} is not in {low}..{high} (higher ids overflow "
                "the DDS port range)",
                key="domain_id",
            )
        if not self.discovery:
            raise EvalError(
                "discovery: expected 'loopback', 'system' or a Fast DDS XML path", key="discovery"
            )
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.node_name):
            raise EvalError(
                f"node_name: {self.node_name!r} is not a valid ROS 2 node name", key="node_name"
            )
        if self.namespace and not valid_ros_name(self.namespace):
            raise EvalError(f"namespace: {self.namespace!r} is not valid", key="namespace")
        if self.loop.judge == "oracle" and self.robot.kind != "twin":
            raise EvalError(
                f"loop.judge: the oracle judge is the twin's own ground truth and is never "
                f"accepted for a {self.robot.kind!r} robot; use 'technician' or 'detector'",
                key="loop.judge",
            )
        if self.topics.gripper_command and not self.robot.gripper_joints:
            raise EvalError(
                "robot.gripper_joints: name the gripper joints of topics.gripper_command",
                key="robot.gripper_joints",
            )
        for stream in self.record_streams:
            if stream not in STREAMS:
                raise EvalError(
                    f"record_streams: {stream!r} is not one of {', '.join(STREAMS)}",
                    key="record_streams",
                )

    def replace(self, **changes: Any) -> BridgeConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def safety_settings(self) -> dict[str, Any]:
        """What this profile sets to keep the robot safe, by profile key: the joint limits and
        the workspace (`[robot]`), every deadline (the deadman, the safe stop, stale state, the
        episode) and the heartbeat rate — what the trial ledger records per change."""
        robot = self.robot
        settings: dict[str, Any] = {
            f"robot.{name}": list(getattr(robot, name))
            for name in (
                "arm_joints",
                "position_lower",
                "position_upper",
                "velocity_max",
                "acceleration_max",
                "workspace_min",
                "workspace_max",
            )
        }
        for f in dataclasses.fields(self.deadlines):
            settings[f"deadlines.{f.name}"] = getattr(self.deadlines, f.name)
        settings["loop.heartbeat_hz"] = self.loop.heartbeat_hz
        return settings


# --------------------------------------------------------------------------- loading

C = TypeVar("C")


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Check one TOML value against a field's type, converting ints to floats and lists to tuples."""
    if dataclasses.is_dataclass(hint):
        return config_from_mapping(hint, value, prefix=key)  # type: ignore[arg-type]
    if hint in (bool, int, float, str):
        # finite numbers, 64-bit integers, text without control characters (one rule set)
        return check_value(key, value, Key(hint))
    if hint == tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise EvalError(f"{key}: expected a list of strings", key=key)
        return tuple(value)
    if hint == tuple[float, ...]:
        if not isinstance(value, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
        ):
            raise EvalError(f"{key}: expected a list of numbers", key=key)
        return tuple(float(v) for v in value)
    raise TypeError(f"unsupported config field type {hint!r} for {key}")  # a bug, not user input


def config_from_mapping(cls: type[C], data: Any, *, prefix: str = "") -> C:
    """Build the config dataclass `cls` from a parsed TOML table, validating every key.

    Args:
        cls: a config dataclass (e.g. `BridgeConfig`).
        data: the table (dict); missing keys take their defaults.
        prefix: dotted key of this table, for error messages.
    Returns:
        The validated dataclass. Raises EvalError naming the first bad key.
    """
    where = prefix or "config"
    if not isinstance(data, Mapping):
        raise EvalError(f"{where}: expected a table, got {type(data).__name__}", key=where)
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(names))
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise EvalError(
            f"{key}: unknown key (check the spelling; known keys: {', '.join(names)})", key=key
        )
    kwargs = {
        name: _coerce(value, hints[name], f"{prefix}.{name}" if prefix else name)
        for name, value in data.items()
    }
    try:
        return cls(**kwargs)
    except EvalError as exc:
        if prefix and exc.key and not exc.key.startswith(prefix):
            raise EvalError(f"{prefix}.{exc}", key=f"{prefix}.{exc.key}") from None
        raise


#: Folder of the shipped robot profiles (bridge TOML files named after their robot stack).
PROFILES_DIR = Path(__file__).parent / "profiles"


def profile_names() -> list[str]:
    """Names of the shipped robot profiles ("twin", "franka_ros2", "ur_robot_driver")."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def profile_path(name: str) -> Path:
    """The TOML file of a shipped profile; EvalError naming the known ones otherwise."""
    path = PROFILES_DIR / f"{name}.toml"
    if not path.is_file():
        raise EvalError(
            f"profile: {name!r} is not a shipped robot profile (known: "
            f"{', '.join(profile_names())}; or give config_path = your own TOML)",
            key="profile",
        )
    return path


def load_bridge_config(path: str | Path) -> BridgeConfig:
    """Read and validate a bridge TOML file (see the module docstring for the keys)."""
    p = Path(path)
    text = read_user_text(p, "bridge config", max_bytes=MAX_CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EvalError(f"bridge config {str(p)!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise EvalError(f"bridge config {str(p)!r} is nested too deeply") from None
    return config_from_mapping(BridgeConfig, data)
