"""`Ros2Backend`: the real side of paired trials on a robot reached over ROS 2.

The robot runs the episode (its controller executes the protocol's policy, named in the manifest)
while the bridge supervises: it publishes the manifest, calls reset / enable / start, watches the
joint-state stream, the wrench and the safety diagnostics, records everything to MCAP, and waits
for the robot's verdict. Deadlines bound every step. When the robot dies or stops answering, the
episode is recorded `aborted` with the reason, the bridge commands a safe stop where it can (stop
service, disable, hold position) and the recording made so far is kept.

Registered as the "ros2" robot backend (`embodied_eval.plugins.ROBOT_BACKENDS`); the runner builds
it as `Ros2Backend(protocol, **options)`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.protocol import Protocol
from embodied_eval.records import (
    Artifact,
    EpisodeOutcome,
    EpisodeSpec,
    SafetyEvent,
    utc_now_iso,
)
from real_bridge.bridge_config import BridgeConfig, load_bridge_config
from real_bridge.discovery import configure_process
from real_bridge.interface import episode_manifest, manifest_sha256
from real_bridge.recording import McapRecorder
from real_bridge.robot import AppliedAction, Observation, Robot, SafetyState
from real_bridge.safety import SafetyTracker
from real_bridge.supervision import EpisodeRun


def bridge_config_from_options(options: Mapping[str, Any]) -> BridgeConfig:
    """Build a BridgeConfig from backend options (as the runner passes them).

    Recognised options: `config` (a BridgeConfig), `config_path` (a TOML file), and top-level
    overrides `domain_id`, `discovery`, `robot_id`, `record`, `node_name` (strings are converted).
    """
    unknown = sorted(
        set(options)
        - {"config", "config_path", "domain_id", "discovery", "robot_id", "record", "node_name"}
    )
    if unknown:
        raise EvalError(
            f"ros2 backend: unknown option {unknown[0]!r} (known: config_path, domain_id, "
            "discovery, robot_id, record, node_name)",
            key=unknown[0],
        )
    config = options.get("config")
    if config is None:
        path = options.get("config_path")
        config = load_bridge_config(path) if path else BridgeConfig()
    if not isinstance(config, BridgeConfig):
        raise EvalError("ros2 backend: `config` must be a BridgeConfig", key="config")
    changes: dict[str, Any] = {}
    if options.get("domain_id") is not None:
        try:
            changes["domain_id"] = int(options["domain_id"])
        except (TypeError, ValueError):
            raise EvalError(
                f"domain_id: {options['domain_id']!r} is not a whole number", key="domain_id"
            ) from None
    for name in ("discovery", "robot_id", "node_name"):
        if options.get(name) is not None:
            changes[name] = str(options[name])
    if options.get("record") is not None:
        record = options["record"]
        changes["record"] = record if isinstance(record, bool) else str(record).lower() == "true"
    return config.replace(**changes) if changes else config


class Ros2Backend(Robot):
    """A robot over ROS 2 (rclpy), configured by a `BridgeConfig`.

    Args:
        protocol: the frozen protocol (max steps, randomization, robot id); may be None.
        **options: see `bridge_config_from_options`.
    """

    engine = "ros2"

    def __init__(self, protocol: Protocol | None = None, **options: Any) -> None:
        self.protocol = protocol
        self.config = bridge_config_from_options(options)
        self.link: Any = None
        self.tracker = SafetyTracker()
        self._diag_index = 0

    # ------------------------------------------------------------------ connection

    @property
    def is_connected(self) -> bool:
        return self.link is not None

    def connect(self) -> None:
        """Open the ROS session and wait (up to `deadlines.discovery_s`) for the robot."""
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
        self._diag_index = 0

    def disconnect(self) -> None:
        link, self.link = self.link, None
        if link is not None:
            link.close()

    def require_link(self) -> Any:
        if self.link is None:
            raise EvalError("ros2 backend: not connected (call connect() first)", key="backend")
        return self.link

    # ------------------------------------------------------------------ robot interface

    def reset(self, spec: EpisodeSpec, protocol: Protocol | None = None) -> Observation | None:
        """Publish the manifest and reset the robot to it (retrying until the robot echoes it)."""
        link = self.require_link()
        manifest = episode_manifest(spec, protocol or self.protocol)
        expected = manifest_sha256(manifest)
        text = canonical_json(manifest)
        deadline = time.monotonic() + self.config.deadlines.service_s
        self.tracker = SafetyTracker(spec.episode_id, time.monotonic())
        link.forget_verdict(spec.episode_id)  # a re-run must not take an earlier run's verdict
        last = ""
        while True:
            link.publish_manifest(text)
            remaining = max(0.05, deadline - time.monotonic())
            ok, message = link.trigger("reset", remaining)
            echoed = _echoed_hash(message)
            if ok and echoed == expected:
                break
            last = message
            if time.monotonic() >= deadline:
                raise EvalError(
                    f"reset to episode {spec.episode_id} was not confirmed by the robot within "
                    f"{self.config.deadlines.service_s:.1f} s (last answer: {last!r})",
                    key="reset",
                )
            time.sleep(0.02)  # the robot has not seen the new manifest yet
        self.consume_diagnostics()
        state = link.latest_state()
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

    def enable(self, on: bool = True) -> None:
        """Enable (or disable) the robot's drives; EvalError if it refuses or does not answer."""
        link = self.require_link()
        ok, message = link.set_enabled(on, self.config.deadlines.service_s)
        if not ok:
            raise EvalError(f"robot refused to {'enable' if on else 'disable'}: {message}")

    def send_action(self, positions: Sequence[float], *, duration_s: float = 0.0) -> AppliedAction:
        """Command joint position targets (first n joints of the state stream).

        The robot must be enabled (`enable()`) and not running an episode; otherwise it ignores
        the command and the result comes back unconfirmed.

        Returns what the robot applied when it echoes commands on the `applied` topic (within
        `deadlines.service_s`), else the command as sent with `confirmed=False`.
        """
        link = self.require_link()
        state = link.latest_state()
        if state is None:
            raise EvalError("send_action: no joint state yet, so joint names are unknown")
        targets = np.asarray(positions, dtype=float)
        if targets.ndim != 1 or not 0 < targets.size <= len(state.names):
            raise EvalError(
                f"send_action: expected 1..{len(state.names)} joint positions, got shape "
                f"{targets.shape}",
                key="positions",
            )
        if not np.all(np.isfinite(targets)):
            raise EvalError("send_action: positions must be finite", key="positions")
        names = state.names[: targets.size]
        command_id = link.publish_command(names, targets, duration_s)
        if not self.config.topics.applied:
            return AppliedAction(names, targets, confirmed=False)
        echo: Any = None

        def echoed() -> bool:
            nonlocal echo
            echo = link.applied_echo(command_id)
            return echo is not None

        if link.wait_until(echoed, self.config.deadlines.service_s):
            stamp_ns, echo_names, applied = echo
            return AppliedAction(tuple(echo_names), applied, True, stamp_ns / 1e9)
        return AppliedAction(names, targets, confirmed=False)

    def consume_diagnostics(self) -> list[SafetyEvent]:
        """Feed newly received diagnostics to the safety tracker; returns the new events."""
        link = self.require_link()
        readings, self._diag_index = link.diagnostics_since(self._diag_index)
        new = []
        for reading in readings:
            event = self.tracker.feed(reading)
            if event is not None:
                new.append(event)
        return new

    def safety_state(self) -> SafetyState:
        self.consume_diagnostics()
        t = self.tracker
        return SafetyState(
            enabled=t.enabled,
            protective_stop=t.protective_stop,
            emergency_stop=t.emergency_stop,
            active=tuple(sorted(t.active)),
            events=tuple(t.events),
        )

    # ------------------------------------------------------------------ episodes

    def run_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome:
        """Run one real episode on the robot; see the module docstring for what happens."""
        if spec.side != "real":
            raise EvalError(f"episode {spec.episode_id}: the ros2 backend runs side 'real' only")
        protocol = protocol or self.protocol
        started_at = utc_now_iso()
        self.connect()
        link = self.require_link()
        recorder = None
        if self.config.record and record_dir is not None:
            recorder = McapRecorder(
                Path(record_dir) / f"{_safe_name(spec.episode_id)}.mcap",
                {
                    "episode_id": spec.episode_id,
                    "pair_id": spec.pair_id,
                    "task_id": spec.task_id,
                    "seed": str(spec.seed),
                    "attempt": str(spec.attempt),
                    "protocol_hash": spec.protocol_hash,
                    "robot_id": self.config.robot_id
                    or (protocol.robot_id if protocol is not None else ""),
                    "domain_id": str(self.config.domain_id),
                    "bridge_config": canonical_json(dataclasses.asdict(self.config)),
                },
            )
            link.attach_recorder(recorder)
        run = EpisodeRun(self, spec)
        try:
            run.execute(protocol)
        finally:
            link.attach_recorder(None)
            artifacts: tuple[Artifact, ...] = ()
            if recorder is not None:
                artifacts = (recorder.close(),)
                run.recorded = dict(recorder.counts)
        return run.outcome(spec, protocol, started_at, artifacts)

    def safe_stop(self) -> str:
        """Stop, disable and hold position, each bounded by `deadlines.safe_stop_s`.

        Returns a note of what could not be confirmed ("" when everything was).
        """
        link = self.link
        if link is None:
            return "not connected"
        budget = self.config.deadlines.safe_stop_s
        notes = []
        state = link.latest_state()
        if state is not None and state.position.size:
            link.publish_command(state.names, state.position, 0.0)  # hold where it is
        for label, call in (
            ("stop", lambda: link.trigger("stop", budget)),
            ("disable", lambda: link.set_enabled(False, budget)),
        ):
            try:
                ok, message = call()
                if not ok:
                    notes.append(f"{label} refused: {message}")
            except EvalError as exc:
                notes.append(f"{label} not confirmed: {exc}")
        return "; ".join(notes)


def _echoed_hash(message: str) -> str:
    try:
        data = json.loads(message)
    except ValueError:
        return ""
    return str(data.get("manifest_sha256", "")) if isinstance(data, dict) else ""


def _safe_name(episode_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in episode_id)
