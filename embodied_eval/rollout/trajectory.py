"""The one trajectory writer: a sim episode's per-step arrays as an `.npz` archive.

Every sim episode recorded with `--record` (the project's own sims, a Gymnasium environment, a
standard suite) is written here as `<folder>/<episode id>.npz`: `time` (s, simulated), `action`,
the observation as `obs.<key>` (`obs.observation` for an array observation) and camera frames as
`obs.<camera>` uint8 arrays — what `interchange.lerobot` exports and the report's episode strips
read. The archive is byte-reproducible (fixed zip timestamps, members in name order) and stored
uncompressed, so writing does not slow the episode loop down.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.canonical import atomic_write_bytes
from embodied_eval.records import Artifact


def record_observation(trace: dict[str, list[Any]], obs: Mapping[str, Any], time_s: float) -> None:
    """Append an observation (every array as `obs.<key>`) and its simulated time to a trace."""
    trace.setdefault("time", []).append(np.asarray(time_s, dtype=np.float64))
    for key, value in obs.items():
        trace.setdefault(f"obs.{key}", []).append(np.asarray(value))


def trace_bytes(trace: Mapping[str, Sequence[Any]]) -> bytes:
    """An .npz archive of the per-step arrays (one member per key, stacked along axis 0)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(trace):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(trace[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def trajectory_path(folder: Path, episode_id: str) -> Path:
    """`<folder>/<episode id>.npz`, the id's characters other than letters, digits, `-_.`
    replaced by `_`."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in episode_id)
    return folder / f"{safe}.npz"


def write_trajectory(
    folder: Path, episode_id: str, trace: Mapping[str, Sequence[Any]]
) -> Artifact:
    """Write an episode's trace (atomic) and describe it as its `trajectory` artifact.

    Args:
        folder: the episode's artifact folder (created when missing).
        episode_id: names the file.
        trace: key -> per-step values (each key stacked to one array).

    Returns:
        The artifact: its path as given under `folder` (the store records it relative to its
        own folder), SHA-256 and size.
    """
    data = trace_bytes(trace)
    path = trajectory_path(folder, episode_id)
    folder.mkdir(parents=True, exist_ok=True)
    digest = atomic_write_bytes(path, data)
    return Artifact(path=str(path), sha256=digest, kind="trajectory", size_bytes=len(data))
