"""The wire protocol between the bridge and a robot, independent of ROS: JSON payloads and safety
diagnostics.

Standard ROS 2 messages carry everything (no custom message types):

- commands: trajectory_msgs/JointTrajectory on the joint_trajectory_controller's topic;
  `trajectory_problem` states what such a controller refuses (the safe-stop hold obeys it).
- manifest: `std_msgs/String` (TRANSIENT_LOCAL) holding `episode_manifest(...)` as JSON, for an
  optional scene-reset service (std_srvs/Trigger has no request payload, so the harness publishes
  the manifest first; the reset station answers `{"episode_id", "manifest_sha256"}` so the harness
  knows which manifest it reset to, and retries until it has seen the new one).
- episode events: `std_msgs/String` (TRANSIENT_LOCAL), `episode_event(...)` — "started" and
  "ended"; the twin's oracle answers "ended" with its verdict (the harness's own detector,
  `real_bridge.detector`, judges from the recorded streams and publishes nothing).
- verdict: `std_msgs/String` (TRANSIENT_LOCAL) holding a `JudgeVerdict` as JSON from a named,
  versioned judge on the robot side (the twin's oracle, labelled "oracle").
- safety: `diagnostic_msgs/DiagnosticArray`; a status named `safety/<kind>` (kind from
  `embodied_eval.records.SAFETY_EVENT_KINDS`) at level WARN or ERROR is one safety event, its
  measurements as KeyValues named like the `SafetyEvent` fields, plus `episode_id` and `event_id`.
  Level OK for the same name clears it. Robots that republish a latched status periodically are
  handled: one event per `event_id`, or per rising edge when the robot sends no `event_id`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from embodied_eval.canonical import canonical_hash
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import SAFETY_EVENT_KINDS, EpisodeSpec, SafetyEvent

MANIFEST_SCHEMA = "embodied-eval/episode-manifest/1"
VERDICT_SCHEMA = "embodied-eval/judge-verdict/1"
SAFETY_PREFIX = "safety/"
#: diagnostic_msgs/DiagnosticStatus levels.
LEVEL_OK, LEVEL_WARN, LEVEL_ERROR, LEVEL_STALE = 0, 1, 2, 3
#: Safety events that stop the robot: an episode with one of these ends `safety_stop` (z = 0).
STOP_KINDS = ("protective_stop", "emergency_stop")
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
    from sim_suites.robot_core import DEFAULT_RANDOMIZATION

    # Without a protocol the sim half uses the default ranges: the scene must come from them too.
    randomization = {k: [float(lo), float(hi)] for k, (lo, hi) in DEFAULT_RANDOMIZATION.items()}
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
class JudgeVerdict:
    """A detector's (or the twin's oracle's) verdict on one episode, as published on the
    verdict topic.

    Attributes:
        episode_id: the episode judged.
        judge: "detector" or "oracle".
        name / version: which detector (e.g. "cube-on-target", "1.2.0") — required.
        quality: task score q in [0, 1]; success: whether the task succeeded.
        detail: free text (what the detector saw).
    """

    episode_id: str
    judge: str
    name: str
    version: str
    quality: float
    success: bool
    detail: str = ""

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["schema"] = VERDICT_SCHEMA
        return json.dumps(data, sort_keys=True, allow_nan=False)


def parse_judge_verdict(text: str) -> JudgeVerdict:
    """Parse a verdict message. Raises EvalError naming the bad field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalError(f"verdict: not valid JSON ({exc})", key="verdict") from None
    if not isinstance(data, dict) or data.get("schema") != VERDICT_SCHEMA:
        raise EvalError(f"verdict: expected schema {VERDICT_SCHEMA!r}", key="verdict")
    for name in ("episode_id", "name", "version"):
        value = data.get(name)
        if not isinstance(value, str) or not value:
            raise EvalError(f"verdict.{name}: missing (a judge must name itself)", key=name)
    if data.get("judge") not in ("detector", "oracle"):
        raise EvalError("verdict.judge: expected 'detector' or 'oracle'", key="judge")
    quality = data.get("quality")
    if (
        isinstance(quality, bool)
        or not isinstance(quality, (int, float))
        or not math.isfinite(quality)
        or not 0.0 <= quality <= 1.0
    ):
        raise EvalError(f"verdict.quality: {quality!r} is not a number in [0, 1]", key="quality")
    success = data.get("success")
    if not isinstance(success, bool):
        raise EvalError("verdict.success: expected true/false", key="success")
    return JudgeVerdict(
        episode_id=data["episode_id"],
        judge=data["judge"],
        name=data["name"],
        version=data["version"],
        quality=float(quality),
        success=success,
        detail=str(data.get("detail", "")),
    )


def contradiction(quality: float, success: bool, target_quality: float) -> str:
    """Why (quality, success) contradict each other under the success threshold q*, or "".

    Success means q ≥ q*: a quality at or above q* that "did not succeed", or a success below
    q*, is refused.
    """
    if success and quality < target_quality:
        return (
            f"quality {quality:g} is below the success threshold q* = {target_quality:g} but the "
            "outcome says it succeeded; correct the quality or the outcome"
        )
    if not success and quality >= target_quality:
        return (
            f"quality {quality:g} reaches the success threshold q* = {target_quality:g} but the "
            "outcome says it did not succeed; correct the quality or the outcome"
        )
    return ""


# --------------------------------------------------------------------------- episode events

EVENT_SCHEMA = "embodied-eval/episode-event/1"
#: Phases of the episode events the harness publishes (a judge answers "ended").
EVENT_PHASES = ("started", "ended")


def episode_event(episode_id: str, phase: str, target_quality: float, task_id: str) -> str:
    """JSON of one episode event (std_msgs/String on the episode topic, TRANSIENT_LOCAL)."""
    if phase not in EVENT_PHASES:
        raise EvalError(f"episode event: unknown phase {phase!r}", key="phase")
    return json.dumps(
        {
            "schema": EVENT_SCHEMA,
            "episode_id": episode_id,
            "phase": phase,
            "target_quality": float(target_quality),
            "task_id": task_id,
        },
        sort_keys=True,
    )


def parse_episode_event(text: str) -> dict[str, Any] | None:
    """The event as a dict, or None when it is not one of ours."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("schema") != EVENT_SCHEMA:
        return None
    if data.get("phase") not in EVENT_PHASES or not isinstance(data.get("episode_id"), str):
        return None
    return data


# --------------------------------------------------------------------------- trajectories

#: time_from_start of the safe-stop hold, s (what a joint_trajectory_controller accepts).
HOLD_TIME_FROM_START_S = 0.1


def trajectory_problem(
    joint_names: Sequence[str],
    controller_joints: Sequence[str],
    stamp_ns: int,
    times_from_start_s: Sequence[float],
    point_sizes: Sequence[int],
    now_ns: int,
) -> str:
    """Why a joint_trajectory_controller would reject a JointTrajectory, or "" if it accepts it.

    The rules of ros2_controllers' joint_trajectory_controller: every joint must be one of the
    controller's joints (no duplicates); there is at least one point and each point has one
    position per joint; times from start increase strictly; the last point ends in the future
    (header stamp 0 means "start now"; otherwise stamp + time_from_start must be after now); a
    single point at time_from_start 0 with stamp 0 would be an instantaneous jump and is refused.
    """
    names = list(joint_names)
    unknown = [n for n in names if n not in controller_joints]
    if unknown:
        return f"joint {unknown[0]!r} is not controlled by this controller"
    if len(set(names)) != len(names):
        return "a joint is named twice"
    if not times_from_start_s:
        return "the trajectory has no points"
    if any(size != len(names) for size in point_sizes):
        return "a point does not have one position per joint"
    if any(b <= a for a, b in itertools.pairwise(times_from_start_s)):
        return "time_from_start must increase from point to point"
    last = times_from_start_s[-1]
    if stamp_ns == 0:
        if last <= 0.0:
            return "time_from_start of the last point must be positive"
    elif stamp_ns + round(last * 1e9) <= now_ns:
        return "the trajectory ends in the past (header stamp + time_from_start before now)"
    return ""


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
