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

RELIABILITIES = ("reliable", "best_effort")
DURABILITIES = ("volatile", "transient_local")
#: ROS_DOMAIN_ID range that works with the default port mapping (higher ids overflow the ports).
DOMAIN_ID_RANGE = (0, 101)
#: The streams the bridge can record, by their key in `TopicNames`.
STREAMS = ("joint_state", "command", "applied", "wrench", "diagnostics", "manifest", "verdict")

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
    """Topic names of the robot interface. An empty `applied`/`wrench` means the robot has none."""

    joint_state: str = "/joint_states"
    command: str = "/joint_trajectory"
    applied: str = "/joint_trajectory/applied"
    wrench: str = "/wrench"
    diagnostics: str = "/diagnostics"
    manifest: str = "/episode/manifest"
    verdict: str = "/episode/verdict"

    def __post_init__(self) -> None:
        optional = ("applied", "wrench")
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
    """Service names of the episode lifecycle (std_srvs/Trigger) and enable (std_srvs/SetBool)."""

    reset: str = "/episode/reset"
    start: str = "/episode/start"
    stop: str = "/episode/stop"
    enable: str = "/robot/enable"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not valid_ros_name(value):
                raise EvalError(
                    f"services.{f.name}: {value!r} is not a valid ROS 2 service name",
                    key=f"services.{f.name}",
                )


@dataclass(frozen=True)
class QosProfiles:
    """QoS per stream. Events (manifest, verdict) are TRANSIENT_LOCAL so late joiners get them."""

    # 1000 samples = 2 s of a 500 Hz stream: a reader that stalls briefly loses nothing.
    joint_state: QosSpec = field(default_factory=lambda: QosSpec(depth=1000))
    command: QosSpec = field(default_factory=lambda: QosSpec(depth=10))
    wrench: QosSpec = field(default_factory=lambda: QosSpec(depth=1000))
    diagnostics: QosSpec = field(default_factory=lambda: QosSpec(depth=100))
    events: QosSpec = field(default_factory=lambda: QosSpec(durability="transient_local", depth=10))


@dataclass(frozen=True)
class Deadlines:
    """Deadlines in seconds. Every call the bridge makes is bounded by one of these.

    Attributes:
        discovery_s: connect: the robot's state publisher and services must appear within this.
        service_s: one service call (request to response).
        state_stale_s: no joint state for this long means the robot stopped answering.
        episode_s: start → verdict; past it the episode is aborted.
        verdict_after_stop_s: after a protective/emergency stop, wait this long for a verdict.
        safe_stop_s: the safe-stop commands sent when an episode is aborted.
        resend_s: an idempotent request (reset, stop, enable) without an answer is sent again
            after this long, until its deadline.
        event_settle_s: after the verdict, keep reading diagnostics this long (events and the
            verdict travel on different topics, so an event may arrive just after it).
    """

    discovery_s: float = 5.0
    service_s: float = 3.0
    state_stale_s: float = 0.5
    episode_s: float = 600.0
    verdict_after_stop_s: float = 3.0
    safe_stop_s: float = 1.0
    resend_s: float = 0.5
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
        for stream in self.record_streams:
            if stream not in STREAMS:
                raise EvalError(
                    f"record_streams: {stream!r} is not one of {', '.join(STREAMS)}",
                    key="record_streams",
                )

    def replace(self, **changes: Any) -> BridgeConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


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
