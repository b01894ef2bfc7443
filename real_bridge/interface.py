"""The wire protocol between the bridge and a robot, independent of ROS: JSON payloads and safety
diagnostics.

Standard ROS 2 messages carry everything (no custom message types):

- manifest: `std_msgs/String` (TRANSIENT_LOCAL) holding `episode_manifest(...)` as JSON. The
  std_srvs/Trigger used for reset has no request payload, so the bridge publishes the manifest
  first and then calls reset; the robot answers reset with `{"episode_id", "manifest_sha256"}` so
  the bridge knows which manifest it reset to (and retries until the robot has seen the new one).
- verdict: `std_msgs/String` (TRANSIENT_LOCAL) holding `{"schema", "episode_id", "status",
  "quality", "success", "faults", ...}` as JSON, published when the episode ends on the robot.
- safety: `diagnostic_msgs/DiagnosticArray`; a status named `safety/<kind>` (kind from
  `embodied_eval.records.SAFETY_EVENT_KINDS`) at level WARN or ERROR is one safety event, its
  measurements as KeyValues named like the `SafetyEvent` fields, plus `episode_id` and `event_id`.
  Level OK for the same name clears it. Robots that republish a latched status periodically are
  handled: one event per `event_id`, or per rising edge when the robot sends no `event_id`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from embodied_eval.canonical import canonical_hash
from embodied_eval.errors import EvalError
from embodied_eval.protocol import Protocol
from embodied_eval.records import SAFETY_EVENT_KINDS, EpisodeSpec, Fault, SafetyEvent

MANIFEST_SCHEMA = "embodied-eval/episode-manifest/1"
VERDICT_SCHEMA = "embodied-eval/episode-verdict/1"
SAFETY_PREFIX = "safety/"
#: diagnostic_msgs/DiagnosticStatus levels.
LEVEL_OK, LEVEL_WARN, LEVEL_ERROR, LEVEL_STALE = 0, 1, 2, 3
#: Safety events that stop the robot: an episode with one of these ends `safety_stop` (z = 0).
STOP_KINDS = ("protective_stop", "emergency_stop")
#: Statuses a robot may report in a verdict.
VERDICT_STATUSES = ("ok", "safety_stop", "out_of_bounds", "error")
DEFAULT_MAX_STEPS = 400


# --------------------------------------------------------------------------- manifest


def episode_manifest(
    spec: EpisodeSpec, protocol: Protocol | None = None, *, max_steps: int | None = None
) -> dict[str, Any]:
    """The manifest the robot resets to: the episode spec plus what the protocol fixes for it.

    Args:
        spec: the manifest row (task, seed, drift, policy path).
        protocol: the frozen protocol, for max_steps, randomization ranges, robot id and the
            instance's QC tolerance; None for ad-hoc runs (defaults apply).
        max_steps: overrides the protocol's `[sim] max_steps`.
    Returns:
        A JSON-ready dict; `manifest_sha256(...)` of it is what the robot echoes on reset.
    """
    randomization: dict[str, list[float]] = {}
    qc_tolerance = None
    robot_id = ""
    steps = DEFAULT_MAX_STEPS
    if protocol is not None:
        randomization = {
            k: [float(lo), float(hi)] for k, (lo, hi) in protocol.randomization.items()
        }
        robot_id = protocol.robot_id
        steps = protocol.max_steps
        try:
            qc_tolerance = protocol.instance(spec.task_id).qc_tolerance
        except EvalError:
            qc_tolerance = None
    if max_steps is not None:
        steps = max_steps
    return {
        "schema": MANIFEST_SCHEMA,
        "episode": spec.to_dict(),
        "max_steps": int(steps),
        "randomization": randomization,
        "qc_tolerance": qc_tolerance,
        "robot_id": robot_id,
    }


def manifest_sha256(manifest: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a manifest (what reset echoes back)."""
    return canonical_hash(dict(manifest))


def parse_manifest(text: str) -> tuple[EpisodeSpec, dict[str, Any]]:
    """Parse a manifest message (robot side). Raises EvalError on anything malformed.

    Returns:
        (the EpisodeSpec, the whole manifest dict).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalError(f"manifest: not valid JSON ({exc})", key="manifest") from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        raise EvalError(f"manifest: expected schema {MANIFEST_SCHEMA!r}", key="manifest")
    spec = EpisodeSpec.from_dict(data.get("episode", {}))
    steps = data.get("max_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise EvalError("manifest.max_steps: expected a positive whole number", key="max_steps")
    return spec, data


# --------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Verdict:
    """The robot's account of one episode, as published on the verdict topic.

    Units: energy_wh watt-hours, robot_duration_s seconds on the robot's clock.
    """

    episode_id: str
    status: str
    quality: float
    success: bool
    reason: str = ""
    faults: tuple[Fault, ...] = ()
    actions: int = 0
    plan_depth: int = 0
    interventions: int = 0
    energy_wh: float = 0.0
    qc: float | None = None
    steps: int = 0
    robot_duration_s: float = 0.0
    control: Mapping[str, Any] = field(default_factory=dict)
    randomization: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["faults"] = [f.to_dict() for f in self.faults]
        data["control"] = dict(self.control)
        data["randomization"] = dict(self.randomization)
        data["schema"] = VERDICT_SCHEMA
        return json.dumps(data, sort_keys=True, allow_nan=False)


def _number(data: Mapping[str, Any], name: str, default: float, *, low: float = 0.0) -> float:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise EvalError(f"verdict.{name}: expected a finite number, got {value!r}", key=name)
    if value < low:
        raise EvalError(f"verdict.{name}: {value!r} is below {low}", key=name)
    return float(value)


def parse_verdict(text: str) -> Verdict:
    """Parse a verdict message (bridge side). Raises EvalError naming the bad field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalError(f"verdict: not valid JSON ({exc})", key="verdict") from None
    if not isinstance(data, dict) or data.get("schema") != VERDICT_SCHEMA:
        raise EvalError(f"verdict: expected schema {VERDICT_SCHEMA!r}", key="verdict")
    episode_id = data.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        raise EvalError("verdict.episode_id: missing", key="episode_id")
    status = data.get("status")
    if status not in VERDICT_STATUSES:
        raise EvalError(
            f"verdict.status: {status!r} is not one of {', '.join(VERDICT_STATUSES)}", key="status"
        )
    quality = _number(data, "quality", -1.0, low=0.0)
    if quality > 1.0:
        raise EvalError(f"verdict.quality: {quality} is above 1", key="quality")
    success = data.get("success")
    if not isinstance(success, bool):
        raise EvalError("verdict.success: expected true/false", key="success")
    raw_faults = data.get("faults", [])
    if not isinstance(raw_faults, list):
        raise EvalError("verdict.faults: expected a list", key="faults")
    faults = tuple(Fault.from_dict({**f, "episode_id": episode_id}) for f in raw_faults)
    qc = data.get("qc")
    if qc is not None:
        qc = _number(data, "qc", 0.0)
    control = data.get("control", {})
    randomization = data.get("randomization", {})
    if not isinstance(control, dict) or not isinstance(randomization, dict):
        raise EvalError("verdict.control/randomization: expected JSON objects", key="control")
    return Verdict(
        episode_id=episode_id,
        status=status,
        quality=quality,
        success=success,
        reason=str(data.get("reason", "")),
        faults=faults,
        actions=int(_number(data, "actions", 0)),
        plan_depth=int(_number(data, "plan_depth", 0)),
        interventions=int(_number(data, "interventions", 0)),
        energy_wh=_number(data, "energy_wh", 0.0),
        qc=qc,
        steps=int(_number(data, "steps", 0)),
        robot_duration_s=_number(data, "robot_duration_s", 0.0),
        control=control,
        randomization=randomization,
    )


# --------------------------------------------------------------------------- safety diagnostics

_EVENT_FIELDS = {f.name: f for f in dataclasses.fields(SafetyEvent)}
_EVENT_HINTS = get_type_hints(SafetyEvent)


def safety_status_name(kind: str) -> str:
    """Diagnostic status name of a safety event kind: `safety/<kind>`."""
    if kind not in SAFETY_EVENT_KINDS:
        raise EvalError(f"kind: {kind!r} is not a safety event kind", key="kind")
    return SAFETY_PREFIX + kind


def safety_key_values(
    event: SafetyEvent, *, episode_id: str, event_id: str
) -> list[tuple[str, str]]:
    """The KeyValues a robot publishes for `event` (only fields that are set), in field order."""
    pairs = [("episode_id", episode_id), ("event_id", event_id)]
    for name, f in _EVENT_FIELDS.items():
        if name == "kind":
            continue
        value = getattr(event, name)
        if value is None or (value == f.default and name not in ("t_s",)):
            continue
        if isinstance(value, bool):
            pairs.append((name, "true" if value else "false"))
        else:
            pairs.append((name, repr(value) if isinstance(value, float) else str(value)))
    return pairs


def _parse_value(name: str, text: str) -> Any:
    hint = _EVENT_HINTS[name]
    target = str(hint)
    if "bool" in target:
        if text.lower() not in ("true", "false", "1", "0"):
            raise EvalError(f"safety {name}: expected true/false, got {text!r}", key=name)
        return text.lower() in ("true", "1")
    if "int" in target:
        try:
            return int(float(text))
        except ValueError:
            raise EvalError(
                f"safety {name}: expected a whole number, got {text!r}", key=name
            ) from None
    if "float" in target:
        try:
            value = float(text)
        except ValueError:
            raise EvalError(f"safety {name}: expected a number, got {text!r}", key=name) from None
        if not math.isfinite(value):
            raise EvalError(f"safety {name}: must be finite, got {text!r}", key=name)
        return value
    return text


@dataclass(frozen=True)
class SafetyReading:
    """One safety status as read off the diagnostics topic (bridge side)."""

    kind: str
    level: int
    event_id: str
    episode_id: str
    event: SafetyEvent | None


def read_safety_status(
    name: str, level: int, message: str, values: Sequence[tuple[str, str]], *, t_s: float
) -> SafetyReading | None:
    """Interpret one DiagnosticStatus; None when it is not a safety status.

    Args:
        name / level / message / values: the DiagnosticStatus fields (values as (key, value)).
        t_s: seconds since the episode started on the bridge's clock, used when the robot does
            not send `t_s` itself.
    Returns:
        A SafetyReading; its `event` is None for level OK/STALE (a clear). A detail that does not
        parse as its field's type is kept as text in `detail`, never dropped.
    """
    if not name.startswith(SAFETY_PREFIX):
        return None
    kind = name[len(SAFETY_PREFIX) :]
    if kind not in SAFETY_EVENT_KINDS:
        return None
    details = {str(k): str(v) for k, v in values}
    event_id = details.pop("event_id", "")
    episode_id = details.pop("episode_id", "")
    if level not in (LEVEL_WARN, LEVEL_ERROR):
        return SafetyReading(kind, level, event_id, episode_id, None)
    kwargs: dict[str, Any] = {"kind": kind, "t_s": max(0.0, t_s)}
    extra = []
    for key, text in details.items():
        if key in _EVENT_FIELDS and key not in ("kind", "detail"):
            try:
                kwargs[key] = _parse_value(key, text)
            except EvalError:
                extra.append(f"{key}={text} (unparsed)")
        elif key != "detail":
            extra.append(f"{key}={text}")
    parts = [message, details.get("detail", ""), *extra]
    detail = "; ".join(p for i, p in enumerate(parts) if p and p not in parts[:i])
    kwargs["detail"] = detail
    kwargs.setdefault("source_rule", name)
    try:
        event = SafetyEvent(**kwargs)
    except EvalError as exc:
        # A measurement out of its field's range is evidence too: keep the event and say why.
        event = SafetyEvent(
            kind=kind,
            t_s=kwargs["t_s"],
            detail=f"{detail}; invalid measurement: {exc}",
            source_rule=str(kwargs["source_rule"]),
        )
    return SafetyReading(kind, level, event_id, episode_id, event)
