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
early end sends the safe-stop hold (stamp 0, the current posture of the controller's joints,
time_from_start 0.1 s) — a trajectory a real joint_trajectory_controller accepts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec, SafetyEvent
from embodied_eval.remote.client import RemotePolicyError
from real_bridge.bridge_config import BridgeConfig
from real_bridge.detector import DetectorVerdict, JudgeContext, JudgeLog
from real_bridge.entry import Prompter, parse_yes_no
from real_bridge.episode_record import episode_outcome
from real_bridge.homing import Homing, HomingReport
from real_bridge.interface import (
    HOLD_TIME_FROM_START_S,
    episode_event,
    episode_manifest,
    manifest_sha256,
)
from real_bridge.judges import (
    Judgement,
    check_oracle,
    detector_judgement,
    technician_judgement,
    topic_judgement,
)
from real_bridge.policy_loop import CommandRefused, LoopIO, LoopStats, RobotLost, run_policy_loop
from real_bridge.safety_state import SafetyTracker

#: After a scene reset, the joint states must come from this long after it reported done, s.
RESET_FRESH_S = 0.05
#: Pause between the setup and the first observation, s.
SETTLE_S = 0.3
#: Why an abort happened, stored as `control["abort_cause"]` (the runner reads it).
ROBOT_LOST = "robot_lost"
#: `control["abort_cause"]` when the remote policy server failed (the robot was held).
POLICY_SERVER = "policy_server"


class EpisodeRun:
    """One episode on a connected link (see the module docstring).

    Args:
        link: a connected `BridgeLink`.
        config: the robot profile / bridge config.
        spec: the manifest row; protocol: the frozen protocol (or None).
        prompter: the console for the technician (setup confirmation, technician judge).
    """

    def __init__(
        self,
        link: Any,
        config: BridgeConfig,
        spec: EpisodeSpec,
        protocol: Protocol | None,
        prompter: Prompter | None = None,
    ) -> None:
        self.link = link
        self.config = config
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
        self.tracker = SafetyTracker(spec.episode_id, time.monotonic())
        self._diag_index = link.diagnostics_total
        self.state_count_start = link.state_count
        self.state_count_end: int | None = None
        self.safe_stop_message: Any = None
        self.recorded: dict[str, int] = {}
        self.setup_lines: list[str] = []
        self.homing: HomingReport | None = None
        self.policy: Any = None
        # The first tracker reading received after the "started" event: (received_s, pos, quat).
        self.start_pose: tuple[float, np.ndarray, np.ndarray] | None = None
        #: The detector's inputs besides sensor data, and the messages it judges from (the
        #: recorded ones); set by the backend when the judge is the detector.
        self.judge_context: JudgeContext | None = None
        self.judge_log: JudgeLog | None = None
        self.detector_verdict: DetectorVerdict | None = None
        #: The twin's oracle verdict on a detector-judged episode: measurement only.
        self.oracle: dict[str, Any] | None = None

    # ------------------------------------------------------------------ safety

    def consume_diagnostics(self) -> list[SafetyEvent]:
        readings, self._diag_index = self.link.diagnostics_since(self._diag_index)
        return [e for r in readings if (e := self.tracker.feed(r)) is not None]

    def _robot_stop(self) -> str:
        self.consume_diagnostics()
        event = self.tracker.stop_event
        if event is None:
            return ""
        text = f"{event.kind} at t={event.t_s:.3f} s"
        return f"{text}: {event.detail}" if event.detail else text

    def safe_stop(self) -> str:
        """Send the hold: stamp 0, the current posture of the arm controller's joints only,
        time_from_start HOLD_TIME_FROM_START_S. Returns a note ("" when sent); not sent from a
        stale joint state (a lost robot)."""
        state = self.link.latest_state()
        joints = self.config.robot.arm_joints
        if state is None:
            return "no joint state: hold not sent"
        age = self.link.state_age_s()
        if age > self.config.deadlines.state_stale_s:
            # A posture this old is not where the arm is: holding "there" would move it. The
            # robot's own deadman holds it when the harness stops supervising.
            return f"the last joint state is {age:.1f} s old: hold not sent"
        index = {n: i for i, n in enumerate(state.names)}
        if any(j not in index for j in joints):
            return "the joint states do not name the controller's joints: hold not sent"
        hold = [float(state.position[index[j]]) for j in joints]
        _, self.safe_stop_message = self.link.publish_command(joints, hold, HOLD_TIME_FROM_START_S)
        return ""

    # ------------------------------------------------------------------ steps

    def _arm_positions(self, state: Any) -> np.ndarray:
        index = {n: i for i, n in enumerate(state.names)}
        missing = [j for j in self.config.robot.arm_joints if j not in index]
        if missing:
            raise EvalError(
                f"{self.config.topics.joint_state} does not name joint {missing[0]!r} of the "
                "profile's robot.arm_joints",
                key="robot.arm_joints",
            )
        return np.array([state.position[index[j]] for j in self.config.robot.arm_joints])

    def _await_fresh_state(self, after_s: float) -> None:
        """After the reset station reported done: wait (deadlines.discovery_s) until joint states
        received from `after_s` + RESET_FRESH_S on show the robot — a station (or a twin
        rebuilding its scene) may hold the robot's stream up while it works, and states queued
        before it finished describe the scene before the reset."""
        fresh = after_s + RESET_FRESH_S
        stale = self.config.deadlines.state_stale_s

        def current() -> bool:
            state = self.link.state
            return (
                state is not None
                and state.received_s >= fresh
                and (self.link.state_age_s() <= stale)
            )

        time.sleep(RESET_FRESH_S)
        if not self.link.wait_until(current, self.config.deadlines.discovery_s):
            raise RobotLost(
                f"robot not answering after the scene reset: no joint state on "
                f"{self.config.topics.joint_state} for {self.link.state_age_s():.1f} s"
            )

    def _require_robot(self) -> None:
        stale = self.config.deadlines.state_stale_s
        if self.link.state_age_s() > stale and not self.link.wait_until(
            lambda: self.link.state_age_s() <= stale, self.config.deadlines.discovery_s
        ):
            raise RobotLost(
                f"robot not answering before the episode: no joint state on "
                f"{self.config.topics.joint_state} for {self.link.state_age_s():.1f} s"
            )

    def home(self) -> None:
        """Staged homing (`real_bridge.homing`): gripper open, retreat upward when low, a
        joint-space trajectory home, done when the arm has settled near home."""
        if not self.config.robot.home:
            return
        homing = Homing(self.link, self.config, self._arm_positions)
        self.homing = homing.report
        homing.run()

    def latched_stop(self) -> str:
        """The robot's protective/emergency stop still latched from before, or ""."""
        tracker = SafetyTracker()
        readings, _ = self.link.diagnostics_since(0)
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
            text = canonical_json(manifest)
            expected = manifest_sha256(manifest)
            deadline = time.monotonic() + self.config.deadlines.service_s
            last = ""
            while True:
                self.link.publish_text("manifest", text)
                remaining = max(0.05, deadline - time.monotonic())
                ok, message = self.link.scene_reset(remaining)
                if ok and _echoed_hash(message) == expected:
                    self._await_fresh_state(time.monotonic())
                    break
                last = message
                if time.monotonic() >= deadline:
                    raise EvalError(
                        f"scene reset to episode {self.spec.episode_id} was not confirmed within "
                        f"{self.config.deadlines.service_s:.1f} s (last answer: {last!r})",
                        key="reset",
                    )
                time.sleep(0.02)
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
        self.link.publish_text(
            "episode",
            episode_event(
                self.spec.episode_id, "ended", self.spec.target_quality, self.spec.task_id
            ),
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
            lambda: self.link.verdicts_for(self.spec.episode_id),
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
                return self.link.verdicts_for(self.spec.episode_id)

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

    def _object_pose(self) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The tracker's latest pose; keeps the first one received after the episode started."""
        pose = self.link.object_pose
        started = self.started_s
        if (
            self.start_pose is None
            and pose is not None
            and started is not None
            and pose[0] >= started
        ):
            self.start_pose = pose
        return pose

    def start_scene(self) -> dict[str, Any]:
        """The episode's `scene` as the robot's own tracker saw it at the start ({} unseen)."""
        from sim_suites.scenes import scene_record

        if self.start_pose is None or self.started_s is None:
            return {}
        received_s, pos, quat = self.start_pose
        return scene_record(
            "tracker", pos, quat, seen_after_start_s=round(received_s - self.started_s, 4)
        )

    # ------------------------------------------------------------------ the episode

    def execute(self, policy_factory: Callable[[], Any], adapter: Any, setup: Any) -> None:
        spec, cfg = self.spec, self.config
        try:
            self._require_robot()
            if cfg.loop.judge == "oracle":
                check_oracle(cfg.robot.kind)
            manifest = episode_manifest(spec, self.protocol)
            self.setup_lines = setup.lines() if setup is not None else []
            self.clear_latched_stop(manifest)
            self.home()
            self.setup(manifest)
            time.sleep(SETTLE_S)  # let the arm and scene settle before the first observation
            policy = self.policy = policy_factory()
            from sim_suites.scenes import episode_seeds

            policy.reset(episode_seeds(spec.seed).policy)  # the sim half's policy seed
            state = self.link.latest_state()
            q = np.asarray(state.position, dtype=float)
            adapter.reset(self._arm_positions(state), q[7:9] if q.size >= 9 else q[:0], setup)
            self.link.reset_peaks()
            self.tracker = SafetyTracker(spec.episode_id, time.monotonic())
            self._diag_index = self.link.diagnostics_total
            self.state_count_start = self.link.state_count
            self.link.publish_text(
                "episode",
                episode_event(spec.episode_id, "started", spec.target_quality, spec.task_id),
            )
            self.started_s = time.monotonic()
            self.tracker.started_s = self.started_s
            max_steps = cfg.loop.max_steps or int(manifest["max_steps"])
            gripper = cfg.topics.gripper_command and cfg.robot.gripper_joints
            io = LoopIO(
                state=self.link.latest_state,
                state_age_s=self.link.state_age_s,
                object_pose=self._object_pose,
                send_arm=lambda target: self.link.publish_command(
                    cfg.robot.arm_joints, target, 1.0 / cfg.loop.rate_hz
                ),
                send_gripper=(
                    (
                        lambda width: self.link.publish_command(
                            cfg.robot.gripper_joints,
                            [width] * len(cfg.robot.gripper_joints),
                            1.0 / cfg.loop.rate_hz,
                            stream="gripper_command",
                        )
                    )
                    if gripper
                    else None
                ),
                stopped=self._robot_stop,
                extras=self._extras,
            )
            self.stats, ended = run_policy_loop(
                policy,
                adapter,
                io,
                robot=cfg.robot,
                rate_hz=cfg.loop.rate_hz,
                max_steps=max_steps,
                stale_s=cfg.deadlines.state_stale_s,
                has_tracker=bool(cfg.topics.object_pose),
                deadline_s=cfg.deadlines.episode_s,
                stats=self.stats,
            )
            self.ended_s = time.monotonic()
            self.state_count_end = self.link.state_count
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
        except EvalError as exc:
            self._abort(str(exc), "")
        except BaseException as exc:  # Ctrl-C or a bug: hold the robot first, then re-raise
            self._abort(f"interrupted: {type(exc).__name__}: {exc}", "")
            raise
        finally:
            if self.ended_s is None:
                self.ended_s = time.monotonic()
            if self.state_count_end is None:
                self.state_count_end = self.link.state_count

    def _extras(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        wrench, pixels = self.link.wrench, self.link.pixels
        if wrench is not None:
            out["wrench"] = wrench
        if pixels is not None:
            out["image"] = pixels
        return out

    def _settle_events(self) -> None:
        until = time.monotonic() + self.config.deadlines.event_settle_s
        while time.monotonic() < until:
            self.consume_diagnostics()
            time.sleep(0.01)

    def _refused(self, reason: str) -> None:
        self.ended_s = time.monotonic()
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
            self.ended_s = time.monotonic()
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
