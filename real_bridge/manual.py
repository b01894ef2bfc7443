"""Manual (technician) entry of real episodes: `embodied-eval trial record` and `ManualBackend`.

A technician runs the robot by hand (or watches it) and reports the outcome: status and quality,
human interventions, faults (recovered autonomously or not, repair minutes), safety incidents and
the duration. The entry becomes an ordinary real-side `Episode` (engine "manual") stored with
`Store.write_episode` (idempotent by episode id); incidents become `SafetyEvent`s stored with it,
which the incident log ingests and classifies like any other safety event. The answers themselves
are kept as a checksummed JSON artifact (who entered what, when).

`ManualBackend` ("manual" in `embodied_eval.plugins.ROBOT_BACKENDS`) asks the same questions
inside `embodied-eval run`, timing the episode between "started" and "finished".
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from embodied_eval.canonical import atomic_write_text, canonical_json, sha256_hex
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import (
    Artifact,
    EpisodeOutcome,
    EpisodeSpec,
    iso_utc,
    parse_utc,
    utc_now_iso,
)
from embodied_eval.store.core import Store
from real_bridge.entry import ManualAnswers, Prompter, collect_answers

ENGINE = "manual"


def record_window(
    header: Mapping[str, Any] | None, protocol: Protocol | None
) -> tuple[str, date, date] | None:
    """(window id, first day, last day) of the reporting window an entry must fall in: from the
    escrowed manifest's header, else the protocol; None when neither says."""
    if header and header.get("window_start") and header.get("window_end"):
        return (
            str(header.get("window", "")),
            date.fromisoformat(str(header["window_start"])),
            date.fromisoformat(str(header["window_end"])),
        )
    if protocol is not None:
        return protocol.window_id, protocol.window_start, protocol.window_end
    return None


def check_in_window(started_at: str, window: tuple[str, date, date] | None) -> None:
    """Refuse a start time outside the window's days (UTC, first and last day included)."""
    if window is None:
        return
    name, first, last = window
    moment = parse_utc(started_at, key="started_at")
    low = datetime.combine(first, datetime.min.time(), UTC)
    high = datetime.combine(last, datetime.min.time(), UTC) + timedelta(days=1)
    if not low <= moment < high:
        raise EvalError(
            f"--started-at: {started_at} is outside the reporting window {name} ({first} to "
            f"{last}, UTC); give the time the episode really started (--started-at, ISO 8601), "
            "within the window; nothing was stored",
            key="started_at",
        )


def episode_from_answers(
    spec: EpisodeSpec,
    answers: ManualAnswers,
    *,
    protocol: Protocol | None = None,
    artifacts: tuple[Artifact, ...] = (),
    window: tuple[str, date, date] | None = None,
) -> EpisodeOutcome:
    """The real-side episode (and its safety events) a technician's answers describe.

    The episode keeps the manifest row's engine (so it fills that row for the runner's resume
    logic) and says in `control.entry` that it was entered by hand. `started_at` defaults to
    "now minus the duration" (the entry is made right after the run). A start time outside the
    reporting window (`window`, default: the protocol's) is refused.
    """
    started_at = answers.started_at or iso_utc(
        datetime.now(UTC) - timedelta(seconds=answers.duration_s)
    )
    check_in_window(started_at, window or record_window(None, protocol))
    faults = tuple(f.replace(episode_id=spec.episode_id) for f in answers.faults)
    reason = ""
    if answers.status != "ok":
        reason = f"reported by {answers.technician}" + (
            f": {answers.notes}" if answers.notes else ""
        )
    # A hand entry is always a real-side record; window and hash fall back to the protocol's.
    episode = spec.to_episode(
        answers.quality,
        side="real",
        status=answers.status,
        duration_s=answers.duration_s,
        actions=answers.actions,
        interventions=answers.interventions,
        faults=faults,
        control={"entry": "manual", "entered_by": answers.technician, "notes": answers.notes},
        started_at=started_at,
        artifacts=artifacts,
        status_reason=reason,
        audited_success=answers.audited_success,
        window=spec.window or (protocol.window_id if protocol is not None else ""),
        protocol_hash=spec.protocol_hash or (protocol.protocol_hash if protocol else ""),
    )
    return EpisodeOutcome(episode=episode, safety_events=answers.incidents)


def write_entry_artifact(
    record_dir: str | Path, spec: EpisodeSpec, answers: ManualAnswers
) -> Artifact:
    """Keep the technician's answers as `<dir>/manual-entry-<sha12>.json` (atomic, checksummed)."""
    body = canonical_json(
        {"episode_id": spec.episode_id, "entered_at": utc_now_iso(), "answers": answers.to_dict()}
    )
    digest = sha256_hex(body)
    path = Path(record_dir) / f"manual-entry-{digest[:12]}.json"
    atomic_write_text(path, body)
    return Artifact(
        path=str(path.resolve()),
        sha256=digest,
        kind="manual_entry",
        size_bytes=len(body.encode("utf-8")),
    )


@dataclass(frozen=True)
class StoredEntry:
    """What `store_entry` did: the outcome, whether it was new, and the incident-log note."""

    outcome: EpisodeOutcome
    stored: bool
    incident_note: str


def store_entry(
    db_path: str | Path, outcome: EpisodeOutcome, protocol: Protocol | None
) -> StoredEntry:
    """Store the episode with its safety events (one transaction), then let the incident log
    classify them (when it is installed and the protocol is known)."""
    episode = outcome.episode
    if outcome.safety_events:
        _check_events(outcome, protocol)
    with Store(db_path) as store:
        stored = store.write_episode(episode, [ev.to_dict() for ev in outcome.safety_events])
    note = ""
    if outcome.safety_events:
        note = ingest_incidents(db_path, protocol)
    return StoredEntry(outcome, stored, note)


def _check_events(outcome: EpisodeOutcome, protocol: Protocol | None) -> None:
    """Refuse events the incident log's classifier would refuse (e.g. a contact partner that is
    neither a person word nor a declared fixture) before anything is stored."""
    from embodied_eval.plugins import INCIDENT_LOG, resolve

    try:
        check = resolve(INCIDENT_LOG["check_safety_events"])
    except EvalError:
        return  # the incident log is not installed: nothing classifies the events here
    check(outcome.safety_events, protocol)


def ingest_incidents(db_path: str | Path, protocol: Protocol | None) -> str:
    """Hand stored safety events to the incident log; returns a one-line note."""
    from embodied_eval.plugins import INCIDENT_LOG, resolve

    if protocol is None:
        return "safety events stored with the episode; ingest them with the protocol later"
    try:
        ingest = resolve(INCIDENT_LOG["ingest_safety_events"])
    except EvalError:
        return "safety events stored with the episode (incident log not installed)"
    new = ingest(db_path, protocol)
    return f"incident log: {new} new incident(s) classified"


# --------------------------------------------------------------------------- choosing the episode


def load_manifest_specs(
    store: Store, manifest_path: str | Path | None, manifest_hash: str | None
) -> tuple[dict[str, Any], tuple[EpisodeSpec, ...]]:
    """The manifest (header, specs) from a file, or from the store by hash (prefix) or as the
    only/latest one escrowed there."""
    from embodied_eval.manifest import verify_manifest_file

    if manifest_path is not None:
        manifest = verify_manifest_file(manifest_path)
        return dict(manifest.header), manifest.specs
    known = store.manifests()
    if manifest_hash:
        known = [m for m in known if str(m["manifest_hash"]).startswith(manifest_hash)]
        if len(known) != 1:
            raise EvalError(
                f"manifest hash {manifest_hash!r} matches {len(known)} escrowed manifests "
                "(give more digits, or --manifest FILE)",
                key="manifest",
            )
    if not known:
        raise EvalError(
            "no manifest escrowed in the store: plan one with `embodied-eval run --dry-run` or "
            "pass --manifest FILE",
            key="manifest",
        )
    data = store.manifest(str(known[-1]["manifest_hash"]))
    if not isinstance(data, dict):
        raise EvalError("the escrowed manifest is unreadable", key="manifest")
    episodes = data.pop("episodes", [])
    return data, tuple(EpisodeSpec.from_dict(e) for e in episodes)


def choose_spec(
    store: Store,
    header: Mapping[str, Any],
    specs: tuple[EpisodeSpec, ...],
    episode_id: str | None,
    *,
    max_retries: int = 1,
) -> EpisodeSpec:
    """The real spec to enter: the one named by `episode_id` (a later attempt id is accepted),
    else the next real row of the manifest that is not settled, in run order."""
    from embodied_eval.manifest import (
        Manifest,
        settle,
        spec_for_attempt,
        spec_slot,
        stored_attempts,
    )

    real = [s for s in specs if s.side == "real"]
    if not real:
        raise EvalError("the manifest has no real-side episodes", key="manifest")
    if episode_id:
        for spec in real:
            if spec.episode_id == episode_id:
                return spec
            prefix = f"{spec.pair_id}-real-{spec.engine}-a"
            if episode_id.startswith(prefix) and episode_id[len(prefix) :].isdigit():
                return spec_for_attempt(spec, int(episode_id[len(prefix) :]))
        raise EvalError(
            f"episode {episode_id!r} is not a real-side episode of this manifest", key="episode_id"
        )
    attempts = stored_attempts(store, Manifest(header=header, specs=specs))
    for spec in real:
        final, attempt = settle(attempts.get(spec_slot(spec), []), max_retries)
        if final is None and attempt is not None:
            return spec if attempt == spec.attempt else spec_for_attempt(spec, attempt)
    raise EvalError("every real-side episode of this manifest is already recorded", key="manifest")


def describe_spec(spec: EpisodeSpec) -> list[str]:
    """Lines telling the technician which episode to run."""
    drift = ", ".join(f"{k}={v}" for k, v in sorted(spec.drift.items())) or "none"
    return [
        f"Episode {spec.episode_id} (attempt {spec.attempt})",
        f"  task {spec.task_id} ({spec.family}), seed {spec.seed}, drift {spec.drift_name} "
        f"[{drift}]",
        f"  policy {spec.policy}; success means q ≥ {spec.target_quality:g}",
    ]


def summary_lines(spec: EpisodeSpec, answers: ManualAnswers) -> list[str]:
    """Everything a technician entered, as shown before asking to store it."""
    success = answers.status == "ok" and answers.quality >= spec.target_quality
    faults = [
        f"{f.kind} (recovered {'autonomously' if f.recovered_autonomously else 'by a person'}, "
        f"repair {f.repair_s / 60.0:g} min{', ' + f.detail if f.detail else ''})"
        for f in answers.faults
    ]
    incidents = [
        f"{e.kind} at {e.t_s:g} s{', ' + e.detail if e.detail else ''}" for e in answers.incidents
    ]
    return [
        f"Summary of episode {spec.episode_id}:",
        f"  technician     {answers.technician}",
        f"  started at     {answers.started_at} (UTC)",
        f"  outcome        {answers.status}",
        f"  quality q      {answers.quality:g} (q* = {spec.target_quality:g}; success z = "
        f"{int(success)})",
        f"  succeeded      {'yes' if answers.audited_success else 'no'} (your judgment)",
        f"  duration       {answers.duration_s:g} s",
        f"  interventions  {answers.interventions}",
        f"  actions        {answers.actions}",
        f"  faults         {'; '.join(faults) or 'none'}",
        f"  incidents      {'; '.join(incidents) or 'none'}",
        f"  notes          {answers.notes or '(none)'}",
    ]


# --------------------------------------------------------------------------- the backend


class ManualBackend:
    """Real side by hand: the technician runs each episode and answers the entry questions.

    Args:
        protocol: the frozen protocol (window, hash, ingest thresholds).
        prompter: the console session (default: stdin/stdout).
        technician: name to record (asked once when not given).
        timed: ask the technician to press Enter at start and end, and offer the measured
            duration as the default answer.
    """

    engine = ENGINE

    def __init__(
        self,
        protocol: Protocol | None = None,
        *,
        prompter: Prompter | None = None,
        technician: str | None = None,
        timed: bool = True,
    ) -> None:
        self.protocol = protocol
        self.prompter = prompter or Prompter()
        self.technician = technician
        self.timed = timed
        self._connected = False
        self.live: LiveState | None = None

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        if not self._connected and self.technician is None:
            self.technician = self.prompter.ask("Technician", _non_empty)
        self._connected = True

    def disconnect(self) -> None:
        self._connected = False

    def attach_live(self, live: LiveState | None) -> None:
        """Show the episode the technician is entering on the run's console (its phase: "entry",
        then "ended"); None detaches. A stop from the console ends the run between episodes."""
        self.live = live

    def __enter__(self) -> ManualBackend:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def run_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome:
        """Walk the technician through one real episode; returns its record."""
        if spec.side != "real":
            raise EvalError(f"episode {spec.episode_id}: the manual backend runs side 'real' only")
        self.connect()
        p = self.prompter
        if self.live is not None:
            self.live.clear_real(episode_id=spec.episode_id, task_id=spec.task_id, phase="entry")
        for line in describe_spec(spec):
            p.say(line)
        measured = None
        started_at = ""
        if self.timed:
            p.ask("Press Enter when the robot starts the episode", str, "")
            started_at = utc_now_iso()
            t0 = time.monotonic()
            p.ask("Press Enter when the episode has ended", str, "")
            measured = time.monotonic() - t0
        answers = collect_answers(
            p,
            {"technician": self.technician, "started_at": started_at or None},
            target_quality=spec.target_quality,
            measured_duration_s=measured,
        )
        artifacts: tuple[Artifact, ...] = ()
        if record_dir is not None:
            artifacts = (write_entry_artifact(record_dir, spec, answers),)
        if self.live is not None:
            self.live.update_real(phase="ended")
        return episode_from_answers(
            spec, answers, protocol=protocol or self.protocol, artifacts=artifacts
        )


def _non_empty(text: str) -> str:
    if not text.strip():
        raise EvalError("must not be empty")
    return text.strip()
