"""`Ros2Backend`: the real side of paired trials on a robot reached over ROS 2 (the harness side).

The harness owns the episode: it runs the policy in its own control loop and talks to the robot
only through ros2_control conventions named by a robot profile (`real_bridge/profiles/*.toml`:
the twin, franka_ros2, ur_robot_driver) — see `real_bridge.supervision` for the steps and
`real_bridge.judges` for who decides the outcome. Everything is recorded to MCAP (flushed at least
every 0.5 s); a recording left `.partial` by a harness that was killed is kept, linked to its
episode, and that episode is marked as having run unsupervised — its re-run is a new attempt.

Registered as the "ros2" robot backend (`embodied_eval.plugins.ROBOT_BACKENDS`); the runner builds
it as `Ros2Backend(protocol, **options)`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.canonical import canonical_json, file_sha256
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec, utc_now_iso
from real_bridge.bridge_config import BridgeConfig, load_bridge_config, profile_path
from real_bridge.detector import CONTEXT_KEY, JudgeContext, JudgeLog, judge_context
from real_bridge.discovery import configure_process
from real_bridge.entry import Prompter
from real_bridge.interface import episode_manifest
from real_bridge.recording import PARTIAL_SUFFIX, McapRecorder, recover_partial
from real_bridge.robot import AppliedAction, Observation, Robot, SafetyState
from real_bridge.supervision import EpisodeRun

#: `control["abort_cause"]` of an episode found to have run while the harness was dead.
UNSUPERVISED = "unsupervised"
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


class Ros2Backend(Robot):
    """A robot over ROS 2 (rclpy), configured by a robot profile (`BridgeConfig`).

    Args:
        protocol: the frozen protocol (max steps, randomization, robot id); may be None.
        **options: see `bridge_config_from_options`.
    """

    engine = "ros2"

    def __init__(self, protocol: Protocol | None = None, **options: Any) -> None:
        self.protocol = protocol
        prompter = options.pop("prompter", None) if "prompter" in options else None
        self.config = bridge_config_from_options(options)
        self.prompter: Prompter | None = prompter
        self.link: Any = None
        self.last_run: EpisodeRun | None = None
        self._adapters: dict[str, Any] = {}

    # ------------------------------------------------------------------ connection

    @property
    def is_connected(self) -> bool:
        return self.link is not None

    def connect(self) -> None:
        """Open the ROS session, start the heartbeat and wait (up to `deadlines.discovery_s`)
        for the robot."""
        if self.link is not None:
            return
        try:
            from real_bridge.bridge_link import BridgeLink
        except ImportError as exc:
            raise EvalError(
                f"the ros2 backend needs ROS 2 for Python (rclpy): {exc}; install the "
                "'ros' extra (pip install 'embodied-eval[ros]')",
                key="backend",
            ) from None
        configure_process(self.config.domain_id, self.config.discovery)
        link = BridgeLink(self.config)
        try:
            link.wait_ready(self.config.deadlines.discovery_s)
        except BaseException:
            link.close()
            raise
        self.link = link

    def disconnect(self) -> None:
        link, self.link = self.link, None
        if link is not None:
            link.close()

    def require_link(self) -> Any:
        if self.link is None:
            raise EvalError("ros2 backend: not connected (call connect() first)", key="backend")
        return self.link

    def wait_for_robot(self, timeout_s: float | None = None) -> bool:
        """After the robot was lost: wait (up to `deadlines.robot_return_s`) for its joint states
        to come back; True when they did."""
        link = self.require_link()
        timeout = self.config.deadlines.robot_return_s if timeout_s is None else timeout_s
        stale = self.config.deadlines.state_stale_s
        return bool(link.wait_until(lambda: link.state_age_s() <= stale, timeout))

    # ------------------------------------------------------------------ robot interface

    def reset(self, spec: EpisodeSpec, protocol: Protocol | None = None) -> Observation | None:
        """Reset the scene to a manifest row (the scene-reset service) and return the state."""
        run = EpisodeRun(self.require_link(), self.config, spec, protocol or self.protocol)
        run.setup(episode_manifest(spec, protocol or self.protocol))
        state = self.link.latest_state()
        return None if state is None else self._observation(state)

    def get_observation(self) -> Observation:
        link = self.require_link()
        state = link.latest_state()
        age = link.state_age_s()
        if state is None or age > self.config.deadlines.state_stale_s:
            raise EvalError(
                f"no fresh joint state on {self.config.topics.joint_state} "
                f"(last {age:.2f} s ago; the robot stopped answering)",
                key="joint_state",
            )
        return self._observation(state)

    def _observation(self, state: Any) -> Observation:
        wrench = self.link.wrench if self.link is not None else None
        return Observation(
            stamp_s=state.stamp_ns / 1e9,
            received_s=state.received_s,
            joint_names=state.names,
            position=state.position.copy(),
            velocity=state.velocity.copy(),
            effort=state.effort.copy(),
            wrench=None if wrench is None else np.array(wrench, copy=True),
        )

    def send_action(self, positions: Sequence[float], *, duration_s: float = 0.1) -> AppliedAction:
        """Command arm joint targets on the joint_trajectory_controller's topic (checked against
        the profile's position limits first).

        Returns what the robot applied when it echoes commands (within `deadlines.service_s`),
        else the command as sent with `confirmed=False`.
        """
        link = self.require_link()
        robot = self.config.robot
        targets = np.asarray(positions, dtype=float)
        if targets.shape != (len(robot.arm_joints),) or not np.all(np.isfinite(targets)):
            raise EvalError(
                f"send_action: expected {len(robot.arm_joints)} finite joint positions, got "
                f"shape {targets.shape}",
                key="positions",
            )
        low, high = np.asarray(robot.position_lower), np.asarray(robot.position_upper)
        outside = np.flatnonzero((targets < low) | (targets > high))
        if outside.size:
            i = int(outside[0])
            raise EvalError(
                f"send_action: {robot.arm_joints[i]} target {targets[i]:.4f} rad is outside "
                f"[{low[i]:.4f}, {high[i]:.4f}]; nothing was sent",
                key="positions",
            )
        if duration_s <= 0:
            raise EvalError("send_action: duration_s must be positive", key="duration_s")
        command_id, _ = link.publish_command(robot.arm_joints, targets, duration_s)
        if not self.config.topics.applied:
            return AppliedAction(robot.arm_joints, targets, confirmed=False)
        echo: Any = None

        def echoed() -> bool:
            nonlocal echo
            echo = link.applied_echo(command_id)
            return echo is not None

        if link.wait_until(echoed, self.config.deadlines.service_s):
            stamp_ns, echo_names, applied = echo
            return AppliedAction(tuple(echo_names), applied, True, stamp_ns / 1e9)
        return AppliedAction(robot.arm_joints, targets, confirmed=False)

    def safety_state(self) -> SafetyState:
        link = self.require_link()
        from real_bridge.safety_state import SafetyTracker

        tracker = SafetyTracker()
        readings, _ = link.diagnostics_since(0)
        for reading in readings:
            tracker.feed(reading)
        return SafetyState(
            enabled=tracker.enabled,
            protective_stop=tracker.protective_stop,
            emergency_stop=tracker.emergency_stop,
            active=tuple(sorted(tracker.active)),
            events=tuple(tracker.events),
        )

    # ------------------------------------------------------------------ episodes

    def _adapter(self) -> Any:
        from real_bridge.observation import PandaAdapter

        key = "panda"
        if key not in self._adapters:
            self._adapters[key] = PandaAdapter(self.config.robot, 1.0 / self.config.loop.rate_hz)
        return self._adapters[key]

    def run_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome:
        """Run one real episode (see `real_bridge.supervision`) and return its record."""
        if spec.side != "real":
            raise EvalError(f"episode {spec.episode_id}: the ros2 backend runs side 'real' only")
        protocol = protocol or self.protocol
        started_at = utc_now_iso()
        path = Path(record_dir) / f"{_safe_name(spec.episode_id)}.mcap" if record_dir else None
        if path is not None:
            leftover = path.with_name(path.name + PARTIAL_SUFFIX)
            if leftover.is_file():
                return self._unsupervised(spec, protocol, leftover)
        self.connect()
        link = self.require_link()
        from real_bridge.observation import scene_setup
        from sim_suites.policies import load_policy

        setup = None
        adapter = self._adapter()
        manifest = episode_manifest(spec, protocol)
        if self.config.robot.kinematics == "panda" or self.config.loop.judge == "detector":
            setup = scene_setup(spec, manifest)
        context_json = ""
        if self.config.loop.judge == "detector" and setup is not None:
            # The detector's context: the goal of the scene the manifest sets up, topic names,
            # the camera's declared pose. Recorded with the episode, so a replay judges alike.
            context_json = judge_context(spec, setup.goal_pos, self.config).to_json()
        if self.config.robot.kinematics != "panda":
            setup = None
        recorder = None
        if self.config.record and path is not None:
            recorder = McapRecorder(
                path,
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
            link.attach_recorder(recorder)
        run = EpisodeRun(link, self.config, spec, protocol, self.prompter)
        if context_json:
            run.judge_context = JudgeContext.from_json(context_json)
            run.judge_log = JudgeLog(run.judge_context.topics)
            link.attach_judge_log(run.judge_log)
        self.last_run = run
        try:
            run.execute(lambda: load_policy(spec.policy, spec.task_id), adapter, setup)
            if run.judgement is not None and recorder is not None:
                recorder.write(
                    self.config.topics.verdict,
                    _string_cdr(canonical_json({"episode_id": spec.episode_id,
                                                "quality": run.judgement.quality,
                                                "success": run.judgement.success,
                                                **run.judgement.record})),
                    time.time_ns(),
                )
        finally:
            link.attach_recorder(None)
            link.attach_judge_log(None)
            artifacts: tuple[Artifact, ...] = ()
            if recorder is not None:
                artifacts = (recorder.close(),)
                run.recorded = dict(recorder.counts)
        return run.outcome(started_at, artifacts)

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
