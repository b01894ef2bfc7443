"""Links from the report to episode recordings, and thumbnail strips of their camera frames.

Links are relative to the report's folder (the bundle), so they resolve when the report is
opened from disk where it was written; a recording that is not on disk is named, not linked.

Thumbnails come from what was recorded:

- real episodes' MCAP files: the camera's `sensor_msgs/CompressedImage` messages, read by the
  real-robot package's reader (registered in `plugins.RECORDING_FRAMES`);
- sim trajectories (`.npz`, written with `--record`): any `…camera` array of RGB frames.

Each frame is scaled to THUMB_HEIGHT pixels high and embedded as a JPEG `data:` URI.
"""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import RECORDING_FRAMES, resolve
from embodied_eval.records import Artifact
from embodied_eval.store.artifacts import artifact_file

THUMB_HEIGHT = 90
FRAMES_PER_STRIP = 4
JPEG_QUALITY = 70
#: Artifact kinds a reader can open as a recording, and the file suffixes of each.
RECORDING_KINDS = ("mcap", "trajectory")


class MediaPlaces(NamedTuple):
    """Where a report's media come from and go: the report's folder (links are relative to it;
    None: recordings are named, not linked) and the store file (artifact paths are relative to
    its folder; see `artifact_files`)."""

    report_dir: Path | None
    store_path: Path | None


def artifact_href(artifact: Artifact, places: MediaPlaces) -> str | None:
    """The URL of an artifact relative to the report's folder, percent-encoded; None when the
    file is not on disk (or there is no report folder)."""
    report_dir = places.report_dir
    if report_dir is None:
        return None
    path = artifact_file(artifact.path, places.store_path)
    if path is None:
        return None
    rel = os.path.relpath(path.resolve(), report_dir.resolve())
    return quote(Path(rel).as_posix())


def _thumbnail(image: np.ndarray | bytes) -> bytes:
    """A JPEG THUMB_HEIGHT pixels high of an RGB array or an encoded image."""
    from PIL import Image

    if isinstance(image, bytes):
        picture = Image.open(io.BytesIO(image)).convert("RGB")
    else:
        picture = Image.fromarray(np.ascontiguousarray(image[..., :3]).astype(np.uint8), "RGB")
    width = max(1, round(picture.width * THUMB_HEIGHT / max(1, picture.height)))
    picture = picture.resize((width, THUMB_HEIGHT))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def _trajectory_frames(path: Path, count: int) -> list[tuple[float, np.ndarray]]:
    """Evenly spread frames of the first `…camera` array of a trajectory archive."""
    with np.load(path, allow_pickle=False) as archive:
        names = sorted(n for n in archive.files if n.endswith("camera"))
        if not names:
            return []
        frames = archive[names[0]]
        times = archive["time"] if "time" in archive.files else None
    if frames.ndim != 4 or frames.shape[-1] < 3 or len(frames) == 0:
        return []
    picks = sorted({round(k * (len(frames) - 1) / max(1, count - 1)) for k in range(count)})
    return [
        (float(times[i]) if times is not None and len(times) > i else float(i), frames[i])
        for i in picks
    ]


def camera_strip(
    artifacts: Sequence[Artifact], store_path: Path | None
) -> tuple[list[tuple[float, str]], str]:
    """Thumbnails of the first artifact with camera frames, as (seconds, data URI), and a note
    saying where they came from or why there are none. `store_path`: the store the artifacts'
    paths are relative to."""
    tried = []
    for artifact in artifacts:
        if artifact.kind not in RECORDING_KINDS:
            continue
        found = artifact_file(artifact.path, store_path)
        if found is None:
            tried.append(f"{Path(artifact.path).name} is not on disk")
            continue
        path = found
        try:
            if artifact.kind == "mcap":
                reader = resolve(RECORDING_FRAMES["mcap"])
                raw: list[tuple[float, np.ndarray | bytes]] = list(reader(path, FRAMES_PER_STRIP))
            else:
                raw = list(_trajectory_frames(path, FRAMES_PER_STRIP))
        except (EvalError, ImportError, OSError, ValueError) as exc:
            tried.append(f"{path.name} could not be read ({exc})")
            continue
        if not raw:
            tried.append(f"{path.name} has no camera frames")
            continue
        try:
            strip = [
                (t, "data:image/jpeg;base64," + base64.b64encode(_thumbnail(img)).decode("ascii"))
                for t, img in raw
            ]
        except (OSError, ValueError) as exc:
            tried.append(f"{path.name}: frames could not be decoded ({exc})")
            continue
        times = ", ".join(f"{t:.1f}" for t, _ in strip)
        return strip, f"camera at {times} s"
    if not tried:
        return [], "no recording with a camera (sim episodes record frames only with --record)"
    return [], "; ".join(tried)
