"""The record of one real episode the harness ran: its `Episode` (status, judge, scene, the loop's
and the bridge's measurements in `control`) and its safety events."""

from __future__ import annotations

from typing import Any

from embodied_eval.records import Artifact, EpisodeOutcome


def episode_outcome(run: Any, started_at: str, artifacts: tuple[Artifact, ...]) -> EpisodeOutcome:
    """The `EpisodeOutcome` of a finished `real_bridge.supervision.EpisodeRun` (`run`).

    `control` holds the loop's latency summary, the bridge's message counts, the homing summary,
    the abort cause, a remote policy's round trips, the recorded message counts and, for a
    detector-judged episode, the detector's verdict (`control["detector"]`) and on the twin the
    oracle's (`control["oracle"]`, for measuring the detector only).
    """
    spec, protocol = run.spec, run.protocol
    duration_s = 0.0
    if run.started_s is not None and run.ended_s is not None:
        duration_s = max(0.0, run.ended_s - run.started_s)
    control: dict[str, Any] = dict(run.stats.summary())
    control["loop_rate_hz"] = run.config.loop.rate_hz
    end = run.robot.stream_counts() if run.counts_end is None else run.counts_end
    control["bridge_state_messages"] = int(end.states - run.counts_start.states)
    control["bridge_peak_force_n"] = round(float(end.peak_force_n), 6)
    control["bridge_images"] = int(end.images)
    if run.homing is not None:
        control.update(run.homing.summary())
    if run.abort_cause:
        control["abort_cause"] = run.abort_cause
    if run.safe_stop_command:  # the hold's command id (robots that log it name it)
        control["safe_stop_command"] = run.safe_stop_command
    latency = getattr(run.policy, "latency_summary", None)
    if latency is not None:  # a remote policy: its inference round trips
        control["policy_latency_ms"] = latency()
    if run.recorded:
        control["bridge_recorded_messages"] = dict(sorted(run.recorded.items()))
    if run.detector_verdict is not None:
        control["detector"] = run.detector_verdict.to_json()
    if run.oracle is not None:
        control["oracle"] = dict(run.oracle)
    j = run.judgement
    quality = j.quality if j is not None and run.status == "ok" else 0.0
    episode = spec.to_episode(
        quality,
        side="real",
        engine=run.robot.engine,
        status=run.status,
        duration_s=duration_s,
        actions=run.stats.policy_calls,
        control=control,
        started_at=started_at,
        artifacts=artifacts,
        status_reason=run.reason,
        audited_success=j.success
        if j is not None and j.record.get("kind") == "technician"
        else None,
        judge=dict(j.record) if j is not None else {},
        scene=run.start_scene(),
        window=spec.window or (protocol.window_id if protocol is not None else ""),
        protocol_hash=spec.protocol_hash or (protocol.protocol_hash if protocol else ""),
    )
    return EpisodeOutcome(episode=episode, safety_events=tuple(run.tracker.events))
