"""Supervising one real episode over ROS 2: start it, watch it, and build its record.

`EpisodeRun` is what `Ros2Backend.run_episode` does between opening and closing the recording:
check the robot is alive, reset it to the manifest, enable and start it, then poll (every POLL_S)
for the verdict while watching the safety diagnostics, the state stream's freshness and the
episode deadline. Whatever happens on the robot ends up in the episode's status and reason:

- verdict received → its status (a protective/emergency stop event makes it `safety_stop`);
- stop event but no verdict within `verdict_after_stop_s` → `safety_stop`, quality 0;
- no joint state for `state_stale_s`, a service deadline, the episode deadline → `aborted`, after
  a safe stop (hold position, stop, disable — each bounded by `safe_stop_s`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from embodied_eval.errors import EvalError
from embodied_eval.protocol import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec, SafetyEvent
from real_bridge.interface import Verdict, parse_verdict

if TYPE_CHECKING:
    from real_bridge.ros2_backend import Ros2Backend

#: How often the supervision loop looks at the robot, s.
POLL_S = 0.005


class EpisodeRun:
    """One supervised episode on a connected `Ros2Backend`: start it, watch it, build its record."""

    def __init__(self, backend: Ros2Backend, spec: EpisodeSpec) -> None:
        self.backend = backend
        self.spec = spec
        self.status = "aborted"
        self.reason = ""
        self.verdict: Verdict | None = None
        self.started_s: float | None = None
        self.start_sent_s = 0.0
        self.ended_s: float | None = None
        self.state_count_start = 0
        self.state_count_end: int | None = None
        self.recorded: dict[str, int] = {}

    def execute(self, protocol: Protocol | None) -> None:
        backend, spec = self.backend, self.spec
        link = backend.require_link()
        deadlines = backend.config.deadlines
        try:
            if link.state_age_s() > deadlines.state_stale_s and not link.wait_until(
                lambda: link.state_age_s() <= deadlines.state_stale_s, deadlines.discovery_s
            ):
                raise EvalError(
                    f"robot not answering before the episode: no joint state on "
                    f"{backend.config.topics.joint_state} for {link.state_age_s():.1f} s",
                    key="robot",
                )
            backend.reset(spec, protocol)
            ok, message = link.set_enabled(True, deadlines.service_s)
            if not ok:
                raise EvalError(f"robot refused to enable: {message}", key="enable")
            self.state_count_start = link.state_count
            link.reset_peaks()
            self.start_sent_s = time.monotonic()
            ok, message = link.trigger("start", deadlines.service_s)
            if not ok:
                raise EvalError(f"robot refused to start: {message}", key="start")
            self.started_s = time.monotonic()
            backend.tracker.started_s = self.started_s
            self._supervise()
        except EvalError as exc:
            self._abort(str(exc))
        except BaseException as exc:  # Ctrl-C or a bug: stop the robot first, then re-raise
            self._abort(f"interrupted: {type(exc).__name__}: {exc}")
            raise
        finally:
            if self.ended_s is None:
                self.ended_s = time.monotonic()

    def _supervise(self) -> None:
        backend, spec = self.backend, self.spec
        link = backend.require_link()
        deadlines = backend.config.deadlines
        tracker = backend.tracker
        assert self.started_s is not None
        while True:
            now = time.monotonic()
            backend.consume_diagnostics()
            found = link.verdict_for(spec.episode_id)
            if found is not None and found[1] >= self.start_sent_s:
                self._take_verdict(*found)
                return
            if tracker.stop_received_s is not None and (
                now - tracker.stop_received_s > deadlines.verdict_after_stop_s
            ):
                self.ended_s = tracker.stop_received_s
                self.state_count_end = link.state_count
                self.status = "safety_stop"
                self.reason = (
                    f"{_describe_stop(tracker.stop_event)}; no verdict within "
                    f"{deadlines.verdict_after_stop_s:.1f} s of the stop"
                )
                return
            age = link.state_age_s()
            if age > deadlines.state_stale_s:
                self._abort(
                    f"robot stopped answering: no joint state on {backend.config.topics.joint_state}"
                    f" for {age:.2f} s (deadline {deadlines.state_stale_s:.2f} s)"
                )
                return
            if not link.session.alive:
                self._abort(f"ROS session failed: {link.session.spin_error!r}")
                return
            if now - self.started_s > deadlines.episode_s:
                self._abort(
                    f"no verdict within the episode deadline of {deadlines.episode_s:.0f} s"
                )
                return
            time.sleep(POLL_S)

    def _take_verdict(self, text: str, received_s: float) -> None:
        backend = self.backend
        tracker = backend.tracker
        self.ended_s = received_s
        self.state_count_end = backend.require_link().state_count
        try:
            verdict = parse_verdict(text)
        except EvalError as exc:
            self.status = "error"
            self.reason = f"robot sent a malformed verdict: {exc}"
            return
        self.verdict = verdict
        # Diagnostics and the verdict travel on different topics with no order between them:
        # collect the events the robot raised just before its verdict (and, for a safety-stop
        # verdict, wait for the stop event itself, up to verdict_after_stop_s).
        deadlines = backend.config.deadlines
        settle_until = time.monotonic() + deadlines.event_settle_s
        stop_until = time.monotonic() + deadlines.verdict_after_stop_s
        while True:
            backend.consume_diagnostics()
            now = time.monotonic()
            waiting_for_stop = verdict.status == "safety_stop" and tracker.stop_event is None
            if now >= (stop_until if waiting_for_stop else settle_until):
                break
            time.sleep(POLL_S)
        if tracker.stop_event is not None:
            self.status = "safety_stop"
            self.reason = _describe_stop(tracker.stop_event)
        else:
            self.status = verdict.status
            self.reason = verdict.reason

    def _abort(self, reason: str) -> None:
        if self.ended_s is None:  # the episode ended when the problem was seen, not after cleanup
            self.ended_s = time.monotonic()
        link = self.backend.link
        if self.state_count_end is None and link is not None:
            self.state_count_end = link.state_count
        note = self.backend.safe_stop()
        self.status = "aborted"
        self.reason = reason + (f"; safe stop: {note}" if note else "")

    def outcome(
        self,
        spec: EpisodeSpec,
        protocol: Protocol | None,
        started_at: str,
        artifacts: tuple[Artifact, ...],
    ) -> EpisodeOutcome:
        backend = self.backend
        link = backend.link
        verdict = self.verdict
        duration_s = 0.0
        if self.started_s is not None and self.ended_s is not None:
            duration_s = max(0.0, self.ended_s - self.started_s)
        control: dict[str, Any] = dict(verdict.control) if verdict is not None else {}
        if link is not None:
            end = link.state_count if self.state_count_end is None else self.state_count_end
            states = end - self.state_count_start
            control["bridge_state_messages"] = int(states)
            if duration_s > 0:
                control["bridge_state_rate_hz"] = round(states / duration_s, 3)
            control["bridge_peak_force_n"] = round(float(link.peak_force_n), 6)
        if self.recorded:
            control["bridge_recorded_messages"] = dict(sorted(self.recorded.items()))
        # The bridge records a real-side episode run over ROS 2, whatever engine the row named.
        episode = spec.to_episode(
            verdict.quality if verdict is not None else 0.0,
            side="real",
            engine="ros2",
            status=self.status,
            duration_s=duration_s,
            randomization=dict(verdict.randomization) if verdict is not None else {},
            actions=verdict.actions if verdict is not None else 0,
            plan_depth=verdict.plan_depth if verdict is not None else 0,
            interventions=verdict.interventions if verdict is not None else 0,
            faults=verdict.faults if verdict is not None else (),
            control=control,
            qc=verdict.qc if verdict is not None else None,
            energy_wh=verdict.energy_wh if verdict is not None else 0.0,
            started_at=started_at,
            artifacts=artifacts,
            status_reason=self.reason,
            window=spec.window or (protocol.window_id if protocol is not None else ""),
            protocol_hash=spec.protocol_hash or (protocol.protocol_hash if protocol else ""),
        )
        return EpisodeOutcome(episode=episode, safety_events=tuple(backend.tracker.events))


def _describe_stop(event: SafetyEvent | None) -> str:
    if event is None:
        return "safety stop"
    text = f"{event.kind} at t={event.t_s:.3f} s"
    return f"{text}: {event.detail}" if event.detail else text
