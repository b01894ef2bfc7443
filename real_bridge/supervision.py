"""One real episode the harness owns: setup, policy loop, judge, record.

`EpisodeRun.execute` does, with a deadline on every step:

1. check the robot answers (fresh joint state) — otherwise the episode is aborted as
   `robot_lost` (the runner waits for the robot; that attempt does not use a policy retry);
2. homing (`real_bridge.homing`): open the gripper, lift the hand when it is low, a trajectory
   to the profile's home posture, waiting until the arm has settled there;
3. setup: the scene-reset service (publishing the manifest first) or, without one, a technician
   confirmation listing the manifest's object placement for the seed;
4. the policy loop (`real_bridge.policy_loop`) at the protocol's rate, recording every command;
5. the "ended" episode event and the judge's verdict (`real_bridge.judges`; with the detector,
   `real_bridge.detector` on the messages recorded for it — on the twin the oracle's verdict is
   kept beside it in `control["oracle"]`, for measuring the detector only).

Whatever happens on the robot ends up in the episode's status and reason: a protective stop from
the robot or a refused command → `safety_stop` (the refused command is a protective-stop event
for the incident log); a lost robot, a deadline, a failed judge or a remote policy server that
stops answering (timeout, closed connection, an error it reports) → `aborted`. Every
early end sends the robot's hold (`Robot.hold`: on ROS 2 stamp 0, the current posture of the
controller's joints, time_from_start 0.1 s — a trajectory a real joint_trajectory_controller
accepts).

The episode drives only the `real_bridge.robot.Robot` interface, and times everything on the
robot's clock (`Robot.now_s`), so it runs alike on a robot over ROS 2 and on the in-process MuJoCo
robot.

An operator's stop (the run's console or its API; checked every control tick, while homing and
while the arm settles) ends the episode `aborted` with cause `operator_stop`, after the hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.live_channel import POLICY_SERVER, ROBOT_LOST, OperatorStop
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec, SafetyEvent
from embodied_eval.remote.client import RemotePolicyError
from real_bridge.detector import DetectorVerdict, JudgeContext, JudgeLog
from real_bridge.entry import Prompter, parse_yes_no
from real_bridge.episode_record import episode_outcome
from real_bridge.homing import Homing, HomingReport
from real_bridge.interface import episode_event, episode_manifest, manifest_sha256
from real_bridge.judges import (
    Judgement,
    check_oracle,
    detector_judgement,
    technician_judgement,
    topic_judgement,
)
from real_bridge.policy_loop import (
    CommandRefused,
    LoopStats,
    RobotLost,
    no_operator_check,
    run_policy_loop,
)
from real_bridge.robot import (
    Observation,
    Robot,
    StreamCounts,
    TrackerPose,
    observation_age_s,
    wait_until,
)
from real_bridge.safety_state import SafetyTracker

#: After a scene reset, the joint states must come from this long after it reported done, s.
RESET_FRESH_S = 0.05
#: Pause between the setup and the first observation, s.
SETTLE_S = 0.3


class EpisodeRun:
    """One episode on a connected robot (see the module docstring).

    Args:
        robot: a connected `real_bridge.robot.Robot` (its profile: `robot.config`).
        spec: the manifest row; protocol: the frozen protocol (or None).
        prompter: the console for the technician (setup confirmation, technician judge).
    """

    def __init__(
        self,
        robot: Robot,
        spec: EpisodeSpec,
        protocol: Protocol | None,
        prompter: Prompter | None = None,
    ) -> None:
        self.robot = robot
        self.config = robot.config
        self.spec = spec
        self.protocol = protocol
        self.prompter = prompter
        self.status = "aborted"
        self.reason = ""
        self.abort_cause = ""
        self.judgement: Judgement | None = None
        self.started_s: float | None = None
        self.ended_s: float | None = None
        self.stats = LoopStats()
        #: Raises `OperatorStop` once an operator asked the run to stop (set by the backend).
        self.check_operator: Callable[[], None] = no_operator_check
        #: The hold's command id when one was sent (`Robot.last_hold_id`).
        self.safe_stop_command = ""
        self.tracker = SafetyTracker(spec.episode_id, robot.now_s())
        _, self._diag_index = robot.safety_readings(0)
        self.counts_start = robot.stream_counts()
        self.counts_end: StreamCounts | None = None
        self.recorded: dict[str, int] = {}
        self.setup_lines: list[str] = []
        self.homing: HomingReport | None = None
        self.policy: Any = None
        # The first tracker reading received after the "started" event.
        self.start_pose: TrackerPose | None = None
        #: The detector's inputs besides sensor data, and the messages it judges from (the
        #: recorded ones); set by the backend when the judge is the detector.
        self.judge_context: JudgeContext | None = None
        self.judge_log: JudgeLog | None = None
        self.detector_verdict: DetectorVerdict | None = None
        #: The twin's oracle verdict on a detector-judged episode: measurement only.
        self.oracle: dict[str, Any] | None = None

    # ------------------------------------------------------------------ safety

    def consume_diagnostics(self) -> list[SafetyEvent]:
        readings, self._diag_index = self.robot.safety_readings(self._diag_index)
        return [e for r in readings if (e := self.tracker.feed(r)) is not None]

    def _robot_stop(self) -> str:
        self.consume_diagnostics()
        event = self.tracker.stop_event
        if event is None:
            return ""
        text = f"{event.kind} at t={event.t_s:.3f} s"
        return f"{text}: {event.detail}" if event.detail else text

    def safe_stop(self) -> str:
        """Hold the robot (`Robot.hold`). Returns a note ("" when the hold was sent); a robot
        whose joint state is stale (a lost robot) is not sent one."""
        note = self.robot.hold()
        if not note:
            self.safe_stop_command = self.robot.last_hold_id
        return note

    # ------------------------------------------------------------------ steps

    def _await_fresh_state(self, after_s: float) -> None:
        """After the reset station reported done: wait (deadlines.discovery_s) until joint states
        received from `after_s` + RESET_FRESH_S on show the robot — a station (or a twin
        rebuilding its scene) may hold the robot's stream up while it works, and states queued
        before it finished describe the scene before the reset."""
        fresh = after_s + RESET_FRESH_S
        stale = self.config.deadlines.state_stale_s
        robot = self.robot

        def current() -> bool:
            obs = robot.get_observation()
            return (
                obs is not None
                and obs.received_s >= fresh
                and robot.now_s() - obs.received_s <= stale
            )

        robot.sleep(RESET_FRESH_S)
        if not wait_until(robot, current, self.config.deadlines.discovery_s):
            raise RobotLost(
                f"robot not answering after the scene reset: no joint state on "
                f"{self.config.topics.joint_state} for {observation_age_s(robot):.1f} s"
            )

    def _require_robot(self) -> None:
        stale, robot = self.config.deadlines.state_stale_s, self.robot
        if observation_age_s(robot) > stale and not wait_until(
            robot, lambda: observation_age_s(robot) <= stale, self.config.deadlines.discovery_s
        ):
            raise RobotLost(
                f"robot not answering before the episode: no joint state on "
                f"{self.config.topics.joint_state} for {observation_age_s(robot):.1f} s"
            )

    def home(self) -> None:
        """Staged homing (`real_bridge.homing`): gripper open, retreat upward when low, a
        joint-space trajectory home, done when the arm has settled near home."""
        if not self.config.robot.home:
            return
        homing = Homing(self.robot, self.check_operator)
        self.homing = homing.report
        homing.run()

    def latched_stop(self) -> str:
        """The robot's protective/emergency stop still latched from before, or ""."""
        tracker = SafetyTracker()
        readings, _ = self.robot.safety_readings(0)
        for reading in readings:
            tracker.feed(reading)
        return ", ".join(sorted(n for n in tracker.active if n.endswith("_stop")))

    def clear_latched_stop(self, manifest: dict[str, Any]) -> None:
        """A robot in a latched stop moves nothing: the reset station (or the technician, who
        unlocks it on the robot) clears it before homing."""
        stop = self.latched_stop()
        if not stop:
            return
        if self.config.services.scene_reset:
            self.setup(manifest)  # the reset station clears the latch with the scene
        elif self.prompter is not None:
            self.prompter.say(f"the robot reports {stop}: clear it on the robot's controller")
            if not self.prompter.ask("Is the stop cleared? (y/n)", parse_yes_no):
                raise EvalError(f"the robot is still in {stop}", key="reset")
        else:
            raise EvalError(f"the robot is in {stop} and nobody can clear it", key="reset")

    def setup(self, manifest: dict[str, Any]) -> None:
        """The reset service, or a technician confirming the manifest's placement."""
        if self.config.services.scene_reset:
            expected = manifest_sha256(manifest)
            robot = self.robot
            deadline = robot.now_s() + self.config.deadlines.service_s
            last = ""
            while True:
                remaining = max(0.05, deadline - robot.now_s())
                ok, message = robot.reset_scene(manifest, remaining)
                if ok and _echoed_hash(message) == expected:
                    self._await_fresh_state(robot.now_s())
                    break
                last = message
                if robot.now_s() >= deadline:
                    raise EvalError(
                        f"scene reset to episode {self.spec.episode_id} was not confirmed within "
                        f"{self.config.deadlines.service_s:.1f} s (last answer: {last!r})",
                        key="reset",
                    )
                robot.sleep(0.02)
            return
        if self.prompter is None:
            raise EvalError(
                "this robot has no scene-reset service and no technician console is attached",
                key="reset",
            )
        self.prompter.say(f"set up episode {self.spec.episode_id}:")
        for line in self.setup_lines:
            self.prompter.say(f"  {line}")
        if not self.prompter.ask("Is the scene set up as listed? (y/n)", parse_yes_no):
            raise EvalError("the technician did not confirm the setup", key="reset")

    def judge(self, ended_s: float) -> Judgement:
        loop = self.config.loop
        self.robot.announce(
            episode_event(
                self.spec.episode_id, "ended", self.spec.target_quality, self.spec.task_id
            )
        )
        if loop.judge == "technician":
            if self.prompter is None:
                raise EvalError("the technician judge needs a console", key="judge")
            return technician_judgement(
                self.spec,
                self.prompter,
                key_path=loop.technician_key,
                technician=loop.technician,
                lines=self.setup_lines,
            )
        if loop.judge == "detector":
            return self._detector_judgement(ended_s)
        if loop.judge == "oracle":
            check_oracle(self.config.robot.kind)
        return topic_judgement(
            self.spec,
            loop.judge,
            lambda: self.robot.verdicts_for(self.spec.episode_id),
            after_s=ended_s,
            timeout_s=self.config.deadlines.judge_s,
            detector=loop.detector if loop.judge == "detector" else "",
        )

    def _detector_judgement(self, ended_s: float) -> Judgement:
        if self.judge_context is None or self.judge_log is None:
            raise EvalError("the detector judge has no judge context for this episode", key="judge")
        oracle = None
        if self.config.robot.kind == "twin":  # the twin's ground truth: measurement only

            def oracle() -> list[tuple[str, float]]:
                return self.robot.verdicts_for(self.spec.episode_id)

        judgement, verdict, self.oracle = detector_judgement(
            self.spec, self.judge_context, self.judge_log, ended_s, oracle
        )
        self.detector_verdict = verdict
        if judgement is None:  # never a success: the episode is aborted with the reason
            raise EvalError(
                f"the detector {verdict.name} {verdict.version}: {verdict.detail}",
                key="verdict",
            )
        return judgement

    def supervise(self, obs: Observation) -> str:
        """Each tick of the loop: keep the first tracker pose received after the episode started
        (the episode's `scene`) and return the robot's protective stop, if one came ("")."""
        pose, started = obs.object_pose, self.started_s
        first = self.start_pose is None and started is not None
        if first and pose is not None and pose.received_s >= (started or 0.0):
            self.start_pose = pose
        return self._robot_stop()

    def start_scene(self) -> dict[str, Any]:
        """The episode's `scene` as the robot's own tracker saw it at the start ({} unseen)."""
        from sim_suites.robot_core import scene_record

        if self.start_pose is None or self.started_s is None:
            return {}
        pose = self.start_pose
        return scene_record(
            "tracker",
            pose.position,
            pose.quaternion,
            seen_after_start_s=round(pose.received_s - self.started_s, 4),
        )

    # ------------------------------------------------------------------ the episode

    def execute(self, policy_factory: Callable[[], Any], adapter: Any, setup: Any) -> None:
        spec, cfg, robot = self.spec, self.config, self.robot
        try:
            self._require_robot()
            if cfg.loop.judge == "oracle":
                check_oracle(cfg.robot.kind)
            manifest = episode_manifest(spec, self.protocol)
            self.setup_lines = setup.lines() if setup is not None else []
            self.clear_latched_stop(manifest)
            self.home()
            self.check_operator()
            self.setup(manifest)
            for _ in range(round(SETTLE_S / 0.01)):  # the arm and scene settle before the 1st obs.
                self.check_operator()
                robot.sleep(0.01)
            policy = self.policy = policy_factory()
            from embodied_eval.seeds import episode_seeds

            policy.reset(episode_seeds(spec.seed).policy)  # the sim half's policy seed
            obs = robot.get_observation()
            if obs is None:
                raise RobotLost("robot stopped answering: no joint state before the episode")
            q = np.asarray(obs.position, dtype=float)
            n = len(cfg.robot.arm_joints)
            fingers = q[n : n + 2] if q.size >= n + 2 else q[:0]
            adapter.reset(obs.joints(cfg.robot.arm_joints, cfg.topics.joint_state), fingers, setup)
            robot.reset_peak_force()
            self.tracker = SafetyTracker(spec.episode_id, robot.now_s())
            _, self._diag_index = robot.safety_readings(0)
            self.counts_start = robot.stream_counts()
            robot.announce(
                episode_event(spec.episode_id, "started", spec.target_quality, spec.task_id)
            )
            self.started_s = robot.now_s()
            self.tracker.started_s = self.started_s
            max_steps = cfg.loop.max_steps or int(manifest["max_steps"])
            self.stats, ended = run_policy_loop(
                policy,
                adapter,
                robot,
                supervise=self.supervise,
                max_steps=max_steps,
                stats=self.stats,
                check_operator=self.check_operator,
            )
            self.ended_s = robot.now_s()
            self.counts_end = robot.stream_counts()
            if ended == "robot_stop":
                self.status, self.reason = "safety_stop", self._robot_stop()
                return
            self._settle_events()
            self.judgement = self.judge(self.ended_s)
            if self.tracker.stop_event is not None:
                self.status, self.reason = "safety_stop", self._robot_stop()
            else:
                self.status, self.reason = "ok", f"ended after {self.stats.steps} steps ({ended})"
        except CommandRefused as exc:
            self._refused(str(exc))
        except RobotLost as exc:
            self._abort(str(exc), ROBOT_LOST)
        except RemotePolicyError as exc:  # the policy lives elsewhere and stopped answering
            self._abort(str(exc), POLICY_SERVER)
        except OperatorStop as exc:
            self._abort(str(exc), exc.abort_cause)
        except EvalError as exc:
            self._abort(str(exc), "")
        except BaseException as exc:  # Ctrl-C or a bug: hold the robot first, then re-raise
            self._abort(f"interrupted: {type(exc).__name__}: {exc}", "")
            raise
        finally:
            if self.ended_s is None:
                self.ended_s = robot.now_s()
            if self.counts_end is None:
                self.counts_end = robot.stream_counts()

    def _settle_events(self) -> None:
        until = self.robot.now_s() + self.config.deadlines.event_settle_s
        while self.robot.now_s() < until:
            self.consume_diagnostics()
            self.robot.sleep(0.01)

    def _refused(self, reason: str) -> None:
        self.ended_s = self.robot.now_s()
        note = self.safe_stop()
        t_s = self.ended_s - (self.started_s or self.ended_s)
        event = SafetyEvent(
            kind="protective_stop",
            t_s=t_s,
            step=self.stats.steps,
            stop_category=2,
            detail=reason,
            source_rule="harness.command_check",
        )
        self.tracker.events.append(event)
        self.status = "safety_stop"
        self.reason = reason + (f"; safe stop: {note}" if note else "")

    def _abort(self, reason: str, cause: str) -> None:
        if self.ended_s is None:
            self.ended_s = self.robot.now_s()
        note = self.safe_stop()
        self.status = "aborted"
        self.abort_cause = cause
        self.reason = reason + (f"; safe stop: {note}" if note else "")

    # ------------------------------------------------------------------ the record

    def outcome(self, started_at: str, artifacts: tuple[Artifact, ...]) -> EpisodeOutcome:
        """The episode's record (`real_bridge.episode_record`)."""
        return episode_outcome(self, started_at, artifacts)


def _echoed_hash(message: str) -> str:
    try:
        data = json.loads(message)
    except ValueError:
        return ""
    return str(data.get("manifest_sha256", "")) if isinstance(data, dict) else ""
