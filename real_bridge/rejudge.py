"""Replay the harness's success detector on an episode's recording (`embodied-eval trial rejudge`).

The detector judged the live episode from the messages the harness recorded (`real_bridge.
detector`); here the same function runs on the same messages read back from the MCAP, with the
judge context stored in the recording's metadata, and the verdict is compared with the one
stored for the episode. A recording that lacks the detector's streams (camera and tracker) or its
context gives "cannot judge" — a null verdict and the reason — never a success.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from embodied_eval.store.artifacts import artifact_file
from real_bridge.detector import (
    CONTEXT_KEY,
    DetectorVerdict,
    RecordedMessage,
    context_of_metadata,
    judge_recording,
)
from real_bridge.recording import read_partial

#: `trial rejudge` exit codes: the replayed verdict equals the stored one (or none is stored),
#: it differs, or the detector cannot judge the recording.
EXIT_REPRODUCED, EXIT_DIFFERS, EXIT_CANNOT_JUDGE = 0, 1, 3


def recorded_messages(
    path: str | os.PathLike[str],
) -> tuple[list[RecordedMessage], dict[str, str]]:
    """The messages of a recording in file order (topic, log time ns, CDR bytes) and its
    "episode" metadata ({} when absent)."""
    metadata: list[Any] = []
    try:
        _, channels, messages = read_partial(path, metadata)
    except OSError as exc:
        raise EvalError(f"recording {str(path)!r}: cannot read it ({exc})", key="recording") from None
    meta: dict[str, str] = next(
        (dict(m.metadata) for m in metadata if m.name == "episode"), {}
    )
    out: list[RecordedMessage] = [
        (str(channels[m.channel_id].topic), int(m.log_time), bytes(m.data))
        for m in messages
        if m.channel_id in channels
    ]
    return out, meta


def rejudge_recording(path: str | os.PathLike[str]) -> DetectorVerdict:
    """The detector's verdict on a recording (cannot judge without its judge context)."""
    messages, meta = recorded_messages(path)
    context = context_of_metadata(meta)
    if context is None:
        return DetectorVerdict(
            None,
            None,
            None,
            "",
            f"cannot judge: the recording holds no judge context ({CONTEXT_KEY}): the episode "
            "was not recorded for the detector",
        )
    return judge_recording(messages, context)


@dataclass(frozen=True)
class Rejudged:
    """A replayed verdict beside the stored one."""

    episode_id: str
    recording: str
    verdict: DetectorVerdict
    stored: dict[str, Any]
    reproduced: bool | None

    @property
    def exit_code(self) -> int:
        if self.verdict.success is None:
            return EXIT_CANNOT_JUDGE
        return EXIT_DIFFERS if self.reproduced is False else EXIT_REPRODUCED

    def to_json(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "recording": self.recording,
            "verdict": self.verdict.to_json(),
            "stored": self.stored,
            "reproduced": self.reproduced,
        }


def stored_verdict(episode: Episode) -> dict[str, Any]:
    """What the store says the detector decided ({} when the detector did not judge it)."""
    detector = episode.control.get("detector")
    if not isinstance(detector, dict):
        return {}
    return {
        "name": detector.get("name"),
        "version": detector.get("version"),
        "success": detector.get("success"),
        "quality": detector.get("quality"),
        "goal_error_m": detector.get("goal_error_m"),
        "status": episode.status,
        "judge": dict(episode.judge),
        "episode_success": episode.success,
    }


def _recording_of(episode: Episode, db: str | os.PathLike[str]) -> Path:
    for artifact in episode.artifacts:
        if artifact.kind == "mcap":
            return artifact_file(artifact.path, db) or Path(artifact.path)
    raise EvalError(
        f"episode {episode.episode_id} has no MCAP recording; pass --recording FILE",
        key="recording",
    )


def rejudge_episode(
    db: str | os.PathLike[str], episode_id: str, recording: str | os.PathLike[str] | None = None
) -> Rejudged:
    """Replay the detector on `episode_id`'s recording (or `recording`) and compare.

    `reproduced` is True when the stored detector verdict (success, quality and goal error, or
    "cannot judge") is reproduced exactly, False when not, None when the store holds no detector
    verdict for the episode.
    """
    from embodied_eval.store.core import Store

    with Store(db, create=False) as store:
        episode = store.get_episode(episode_id)
    if episode is None:
        raise EvalError(f"episode {episode_id!r} is not in the store {str(db)!r}", key="episode")
    path = Path(recording) if recording is not None else _recording_of(episode, db)
    if not path.is_file():
        raise EvalError(
            f"recording {str(path)!r} not found; pass --recording FILE", key="recording"
        )
    verdict = rejudge_recording(path)
    stored = stored_verdict(episode)
    reproduced: bool | None = None
    if stored:
        reproduced = (
            stored["name"] == verdict.name
            and stored["version"] == verdict.version
            and stored["success"] == verdict.success
            and stored["quality"] == verdict.quality
            and stored["goal_error_m"] == verdict.goal_error_m
        )
    return Rejudged(episode_id, str(path), verdict, stored, reproduced)
