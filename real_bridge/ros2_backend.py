"""`Ros2Backend`: the real side of paired trials on a robot reached over ROS 2 (the harness side).

The harness owns the episode: it runs the policy in its own control loop (`real_bridge.episodes`,
over the `real_bridge.robot.Robot` interface) and talks to the robot only through ros2_control
conventions (`real_bridge.bridge_link.Ros2Robot`) named by a robot profile (`real_bridge/profiles/*.toml`:
the twin, franka_ros2, ur_robot_driver) — see `real_bridge.supervision` for the steps and
`real_bridge.judges` for who decides the outcome. Everything is recorded to MCAP (flushed at least
every 0.5 s); a recording left `.partial` by a harness that was killed is kept, linked to its
episode, and that episode is marked as having run unsupervised — its re-run is a new attempt.

Registered as the "ros2" robot backend (`embodied_eval.plugins.ROBOT_BACKENDS`); the runner builds
it as `Ros2Backend(protocol, **options)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_json, file_sha256
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import UNSUPERVISED
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec
from real_bridge.bridge_config import BridgeConfig, load_bridge_config, profile_path
from real_bridge.detector import CONTEXT_KEY, JudgeContext, JudgeLog, judge_context
from real_bridge.episodes import EpisodeBackend
from real_bridge.recording import PARTIAL_SUFFIX, McapRecorder, recover_partial
from real_bridge.robot import Robot
from real_bridge.supervision import EpisodeRun

OPTIONS = (
    "config",
    "config_path",
    "profile",
    "domain_id",
    "discovery",
    "robot_id",
    "record",
    "node_name",
    "judge",
    "max_steps",
    "prompter",
)


def with_protocol_profile(
    options: Mapping[str, Any], protocol: Protocol | None
) -> dict[str, Any]:
    """The backend options with the protocol's `[real] profile` (a shipped profile's name or a
    TOML path) when the run names no profile of its own."""
    out = dict(options)
    named = any(out.get(k) for k in ("config", "config_path", "profile"))
    if protocol is not None and protocol.real_profile and not named:
        where = protocol.real_profile
        out["config_path" if where.endswith(".toml") else "profile"] = where
    return out


def bridge_config_from_options(options: Mapping[str, Any]) -> BridgeConfig:
    """Build a BridgeConfig from backend options (as the runner passes them).

    Recognised options: `config` (a BridgeConfig), `config_path` (a robot profile TOML),
    `profile` (a shipped profile: twin, franka_ros2, ur_robot_driver; default twin), and
    overrides `domain_id`, `discovery`, `robot_id`, `record`, `node_name`, `judge`, `max_steps`
    (strings are converted). `prompter` (a Prompter) is the technician's console.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise EvalError(
            f"ros2 backend: unknown option {unknown[0]!r} (known: {', '.join(OPTIONS)})",
            key=unknown[0],
        )
    config = options.get("config")
    if config is None:
        path = options.get("config_path") or profile_path(str(options.get("profile") or "twin"))
        config = load_bridge_config(path)
    if not isinstance(config, BridgeConfig):
        raise EvalError("ros2 backend: `config` must be a BridgeConfig", key="config")
    changes: dict[str, Any] = {}
    for name in ("domain_id", "max_steps"):
        if options.get(name) is not None:
            try:
                value = int(options[name])
            except (TypeError, ValueError):
                raise EvalError(
                    f"{name}: {options[name]!r} is not a whole number", key=name
                ) from None
            if name == "domain_id":
                changes[name] = value
            else:
                config = config.replace(loop=dataclasses.replace(config.loop, max_steps=value))
    for name in ("discovery", "robot_id", "node_name"):
        if options.get(name) is not None:
            changes[name] = str(options[name])
    if options.get("record") is not None:
        record = options["record"]
        changes["record"] = record if isinstance(record, bool) else str(record).lower() == "true"
    if options.get("judge") is not None:
        changes["loop"] = dataclasses.replace(config.loop, judge=str(options["judge"]))
    return config.replace(**changes) if changes else config


class Ros2Backend(EpisodeBackend):
    """Real episodes on a robot over ROS 2 (`real_bridge.bridge_link.Ros2Robot`), configured by
    a robot profile (`BridgeConfig`): the episode loop over that robot, plus the MCAP recording,
    the success detector's log and the recovery of a killed attempt's partial recording.

    Args:
        protocol: the frozen protocol (max steps, randomization, robot id); may be None.
        **options: see `bridge_config_from_options`.
    """

    engine = "ros2"

    def __init__(self, protocol: Protocol | None = None, **options: Any) -> None:
        prompter = options.pop("prompter", None) if "prompter" in options else None
        self.config = bridge_config_from_options(with_protocol_profile(options, protocol))
        super().__init__(self._ros2_robot, protocol, prompter)
        self._recorder: McapRecorder | None = None
        self._path: Path | None = None

    def _ros2_robot(self) -> Robot:
        try:
            from real_bridge.bridge_link import Ros2Robot
        except ImportError as exc:
            raise EvalError(
                f"the ros2 backend needs ROS 2 for Python (rclpy): {exc}; install the "
                "'ros' extra (pip install 'embodied-eval[ros]')",
                key="backend",
            ) from None
        return Ros2Robot(self.config)

    def ros2_robot(self) -> Any:
        """The connected `Ros2Robot` (its streams, recording taps and heartbeat)."""
        return self.require_robot()

    # ------------------------------------------------------------------ recording

    def before_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome | None:
        """A recording left `.partial` by a killed harness: that attempt ran unsupervised."""
        self._path = Path(record_dir) / f"{_safe_name(spec.episode_id)}.mcap" if record_dir else None
        if self._path is not None:
            leftover = self._path.with_name(self._path.name + PARTIAL_SUFFIX)
            if leftover.is_file():
                return self._unsupervised(spec, protocol, leftover)
        return None

    def start_recording(self, run: EpisodeRun, setup: Any, record_dir: str | Path | None) -> None:
        """Open the episode's MCAP (its metadata: ids, profile, judge context) and the success
        detector's log, and tap the robot's streams into them."""
        spec, protocol, robot = run.spec, run.protocol, self.ros2_robot()
        context_json = ""
        if self.config.loop.judge == "detector" and setup is not None:
            # The detector's context: the goal of the scene the manifest sets up, topic names,
            # the camera's declared pose. Recorded with the episode, so a replay judges alike.
            context_json = judge_context(spec, setup.goal_pos, self.config).to_json()
        self._recorder = None
        if self.config.record and self._path is not None:
            self._recorder = McapRecorder(
                self._path,
                {
                    "episode_id": spec.episode_id,
                    "pair_id": spec.pair_id,
                    "task_id": spec.task_id,
                    "seed": str(spec.seed),
                    "attempt": str(spec.attempt),
                    "protocol_hash": spec.protocol_hash,
                    "robot_id": self.config.robot_id
                    or (protocol.robot_id if protocol is not None else ""),
                    "robot_kind": self.config.robot.kind,
                    "judge": self.config.loop.judge,
                    "domain_id": str(self.config.domain_id),
                    "bridge_config": canonical_json(dataclasses.asdict(self.config)),
                    **({CONTEXT_KEY: context_json} if context_json else {}),
                },
            )
            robot.taps.attach_recorder(self._recorder)
        if context_json:
            run.judge_context = JudgeContext.from_json(context_json)
            run.judge_log = JudgeLog(run.judge_context.topics)
            robot.taps.attach_judge_log(run.judge_log)

    def finish_recording(self, run: EpisodeRun) -> tuple[Artifact, ...]:
        """Write the judge's verdict into the recording and close it."""
        robot, recorder = self.ros2_robot(), self._recorder
        self._recorder = None
        if run.judgement is not None and recorder is not None:
            recorder.write(
                self.config.topics.verdict,
                _string_cdr(canonical_json({"episode_id": run.spec.episode_id,
                                            "quality": run.judgement.quality,
                                            "success": run.judgement.success,
                                            **run.judgement.record})),
                robot.taps.now_ns(),
            )
        robot.taps.attach_recorder(None)
        robot.taps.attach_judge_log(None)
        if recorder is None:
            return ()
        artifact = recorder.close()
        run.recorded = dict(recorder.counts)
        return (artifact,)

    def _unsupervised(
        self, spec: EpisodeSpec, protocol: Protocol | None, leftover: Path
    ) -> EpisodeOutcome:
        """The record of an attempt whose harness was killed mid-episode: it ran unsupervised
        (the robot held on the deadman), its partial recording is kept and linked."""
        size = leftover.stat().st_size
        artifact = Artifact(
            path=str(leftover), sha256=file_sha256(leftover), kind="mcap", size_bytes=size
        )
        recovered = recover_partial(leftover)
        episode = spec.to_episode(
            0.0,
            side="real",
            engine="ros2",
            status="aborted",
            control={"abort_cause": UNSUPERVISED, "partial_recording": True},
            artifacts=(artifact, recovered),
            status_reason=(
                "the harness stopped mid-episode (killed): the episode ran unsupervised until "
                "the robot's deadman hold; its partial recording is kept and linked (with a "
                "recovered, finished copy); re-run as a new attempt"
            ),
            window=spec.window or (protocol.window_id if protocol is not None else ""),
            protocol_hash=spec.protocol_hash or (protocol.protocol_hash if protocol else ""),
        )
        return EpisodeOutcome(episode=episode)


def _string_cdr(text: str) -> bytes:
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    return bytes(serialize_message(String(data=text)))


def _safe_name(episode_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in episode_id)
