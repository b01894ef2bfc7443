"""Turning what happened to an episode into a record: errors, tracebacks, checked outcomes.

Nothing that happens to an episode is dropped: an exception inside it becomes an `error` episode
with the traceback as a checksummed artifact; a worker that dies or an episode that runs past its
time limit becomes an `error` episode saying so.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from embodied_eval.canonical import atomic_write_text, sha256_hex
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec, utc_now_iso

#: Longest `status_reason` kept on the record (the full text is in the artifact).
MAX_REASON_CHARS = 500


def artifact_dir(out_dir: str | Path, episode_id: str) -> Path:
    """The folder for one episode's artifacts: `<out>/artifacts/<safe id>-<hash8>/`.

    Episode ids contain ':' and '/', so the folder name is a filesystem-safe form plus eight hex
    digits of the id's SHA-256 (two ids never share a folder).
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", episode_id).strip("_")[:120]
    return Path(out_dir) / "artifacts" / f"{safe}-{sha256_hex(episode_id)[:8]}"


def write_text_artifact(folder: Path, stem: str, text: str, kind: str) -> Artifact:
    """Write `text` atomically as `<folder>/<stem>-<sha12>.txt` and describe it as an Artifact.

    The name carries the content hash, so a replay that writes a different text never overwrites
    the file an already-stored record points to.
    """
    data = text.encode("utf-8")
    digest = sha256_hex(data)
    path = folder / f"{stem}-{digest[:12]}.txt"
    atomic_write_text(path, text)
    return Artifact(path=str(path.resolve()), sha256=digest, kind=kind, size_bytes=len(data))


def error_outcome(
    spec: EpisodeSpec,
    reason: str,
    *,
    traceback_text: str | None = None,
    out_dir: str | Path | None = None,
    started_at: str | None = None,
    duration_s: float = 0.0,
    status: str = "error",
) -> EpisodeOutcome:
    """An `error` episode for `spec` (quality 0, not scored), with the traceback as an artifact.

    `status="aborted"` records an episode that could not finish for a reason outside the harness
    (e.g. the remote policy server stopped answering).

    Args:
        spec: the manifest row that failed.
        reason: one line saying what went wrong (kept to MAX_REASON_CHARS on the record).
        traceback_text: the full traceback; written under `out_dir` when both are given.
        started_at / duration_s: when the attempt started and how long it ran, s.
    """
    artifacts: tuple[Artifact, ...] = ()
    if traceback_text and out_dir is not None:
        folder = artifact_dir(out_dir, spec.episode_id)
        artifacts = (write_text_artifact(folder, "traceback", traceback_text, "traceback"),)
    line = " ".join(reason.split())
    episode = spec.to_episode(
        0.0,
        status=status,
        duration_s=max(0.0, duration_s),
        started_at=started_at or utc_now_iso(),
        artifacts=artifacts,
        status_reason=line[:MAX_REASON_CHARS],
    )
    return EpisodeOutcome(episode=episode)


def checked_outcome(spec: EpisodeSpec, outcome: object) -> EpisodeOutcome:
    """Check that an engine or backend returned the episode `spec` asked for.

    Fills `window` and `protocol_hash` from the spec when the engine left them empty. Raises
    ValueError when the outcome is not an EpisodeOutcome or names another episode (the caller
    records that as an error: an engine that mislabels episodes must not be trusted silently).
    """
    if not isinstance(outcome, EpisodeOutcome):
        raise ValueError(f"expected an EpisodeOutcome, got {type(outcome).__name__}")
    ep = outcome.episode
    for name in ("episode_id", "pair_id", "side", "task_id", "seed", "attempt"):
        if getattr(ep, name) != getattr(spec, name):
            raise ValueError(
                f"the episode returned has {name}={getattr(ep, name)!r} but the manifest row "
                f"asked for {getattr(spec, name)!r}"
            )
    fill = {}
    if not ep.window:
        fill["window"] = spec.window
    if not ep.protocol_hash:
        fill["protocol_hash"] = spec.protocol_hash
    if fill:
        outcome = EpisodeOutcome(episode=ep.replace(**fill), safety_events=outcome.safety_events)
    return outcome


class Stopwatch:
    """Wall-clock start time (ISO UTC) and elapsed seconds of one attempt."""

    def __init__(self) -> None:
        self.started_at = utc_now_iso()
        self._t0 = time.monotonic()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._t0
