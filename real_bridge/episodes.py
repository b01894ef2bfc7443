"""`EpisodeBackend`: the runner's per-episode robot backend (`embodied_eval.runner.backend.
RobotBackend`) as the harness's episode loop over any step-level `real_bridge.robot.Robot`.

Each `run_episode` connects the robot (once), builds the episode's scene setup from the manifest
(placement, goal; for the observation the policy sees) and runs `real_bridge.supervision.
EpisodeRun`: homing, setup, the policy loop, the safe stop, the judge. `Ros2Backend`
(`real_bridge.ros2_backend`) adds the MCAP recording and the success detector; the in-process
MuJoCo robot's backend (`real_bridge.mujoco_robot.mujoco_backend`) is this class as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec, utc_now_iso
from real_bridge.entry import Prompter
from real_bridge.interface import episode_manifest
from real_bridge.robot import Robot, observation_age_s, wait_until
from real_bridge.supervision import EpisodeRun


class EpisodeBackend:
    """Real episodes on one robot (see the module docstring).

    Args:
        make_robot: builds the (not yet connected) robot, called on the first `connect`.
        protocol: the frozen protocol (max steps, randomization); may be None.
        prompter: the technician's console (setup confirmation, technician judge).
    """

    def __init__(
        self,
        make_robot: Callable[[], Robot],
        protocol: Protocol | None = None,
        prompter: Prompter | None = None,
    ) -> None:
        self.protocol = protocol
        self.prompter = prompter
        self._make_robot = make_robot
        self.robot: Robot | None = None
        self.last_run: EpisodeRun | None = None
        self._adapter_cache: Any = None
        self.live_feed: Any = None

    def attach_live(self, live: LiveState | None) -> None:
        """Publish into the run's live view (console, Foxglove) and obey its operator stop
        (`real_bridge.live_feed`); None detaches."""
        from real_bridge.live_feed import LiveFeed, force_limit_of

        if live is None:
            if self.live_feed is not None:
                self.live_feed.detach()
            self.live_feed = None
            return
        self.live_feed = LiveFeed(live, force_limit_of(self.protocol))
        if self.robot is not None and self.robot.is_connected:
            self.live_feed.attach(self.robot)

    # ------------------------------------------------------------------ connection

    @property
    def is_connected(self) -> bool:
        return self.robot is not None and self.robot.is_connected

    def connect(self) -> None:
        """Connect the robot (idempotent); EvalError when it is not there."""
        if self.robot is None:
            self.robot = self._make_robot()
        self.robot.connect()
        if self.live_feed is not None and self.live_feed.robot is not self.robot:
            self.live_feed.attach(self.robot)

    def disconnect(self) -> None:
        if self.live_feed is not None:
            self.live_feed.detach()
        if self.robot is not None:
            self.robot.disconnect()

    def __enter__(self) -> EpisodeBackend:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def require_robot(self) -> Robot:
        if self.robot is None or not self.robot.is_connected:
            raise EvalError("robot backend: not connected (call connect() first)", key="backend")
        return self.robot

    def wait_for_robot(self, timeout_s: float | None = None) -> bool:
        """After the robot was lost: wait (up to `deadlines.robot_return_s`) for its joint states
        to come back; True when they did."""
        robot = self.require_robot()
        deadlines = robot.config.deadlines
        timeout = deadlines.robot_return_s if timeout_s is None else timeout_s
        fresh = deadlines.state_stale_s
        return wait_until(robot, lambda: observation_age_s(robot) <= fresh, timeout, 0.01)

    def safety_settings(self) -> dict[str, Any]:
        """The connected robot's profile's safety settings (`BridgeConfig.safety_settings`)."""
        return self.require_robot().config.safety_settings()

    def adapter(self) -> Any:
        """The observation/action adapter of the robot's profile: its arm is the one the
        profile's `[robot] kinematics` names (`real_bridge.observation.adapter_for`)."""
        if self._adapter_cache is None:
            from real_bridge.observation import adapter_for

            config = self.require_robot().config
            self._adapter_cache = adapter_for(config.robot, 1.0 / config.loop.rate_hz)
        return self._adapter_cache

    # ------------------------------------------------------------------ episodes

    def run_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome:
        """Run one real episode (see `real_bridge.supervision`) and return its record."""
        if spec.side != "real":
            raise EvalError(f"episode {spec.episode_id}: a robot backend runs side 'real' only")
        protocol = protocol or self.protocol
        started_at = utc_now_iso()
        early = self.before_episode(spec, protocol, record_dir)
        if early is not None:
            return early
        self.connect()
        robot = self.require_robot()
        from real_bridge.observation import scene_setup
        from sim_suites.robot_core import load_policy

        setup = None
        if robot.config.robot.kinematics or robot.config.loop.judge == "detector":
            arm = robot.config.robot.kinematics or "panda"
            setup = scene_setup(spec, episode_manifest(spec, protocol), arm)
        run = EpisodeRun(robot, spec, protocol, self.prompter)
        self.last_run = run
        feed = self.live_feed
        if feed is not None:
            run.check_operator = feed.check_operator
            feed.episode_started(run)
        artifacts: tuple[Artifact, ...] = ()
        self.start_recording(run, setup, record_dir)
        try:
            run.execute(
                lambda: load_policy(spec.policy, spec.task_id),
                self.adapter(),
                setup if robot.config.robot.kinematics else None,
            )
        finally:
            artifacts = self.finish_recording(run)
        outcome = run.outcome(started_at, artifacts)
        if feed is not None:
            feed.episode_ended(run, outcome.episode)
        return outcome

    # Hooks of a backend that records (`Ros2Backend`); this one records nothing.

    def before_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome | None:
        """An outcome that replaces running the episode (e.g. a killed earlier attempt), or None."""
        return None

    def start_recording(self, run: EpisodeRun, setup: Any, record_dir: str | Path | None) -> None:
        """Start what records the episode (nothing here)."""

    def finish_recording(self, run: EpisodeRun) -> tuple[Artifact, ...]:
        """Stop recording; the episode's artifacts (none here)."""
        return ()
