"""`embodied-eval export lerobot --out DIR [--window W] [--side S]`: episodes as a LeRobotDataset
v3.0."""

from __future__ import annotations

from pathlib import Path

from embodied_eval.cli.common import console, open_store
from embodied_eval.interchange.lerobot import export_lerobot


def export_lerobot_command(
    out: Path, db: Path | None, window: str | None, side: str | None = None
) -> None:
    """Export the window's episodes (of one side) that have per-step frames (see
    `lerobot_export`)."""
    with open_store(db, create=False) as store:
        episodes = store.episodes(window=window, side=side)
        store_path = store.path
    result = export_lerobot(episodes, out, store_path=store_path)
    cams = f", cameras {', '.join(result.cameras)}" if result.cameras else ""
    skipped = f"; {result.skipped} without per-step frames skipped" if result.skipped else ""
    console.print(
        f"exported {result.episodes} episode(s), {result.frames} frame(s) at {result.fps} fps"
        f"{cams} to {result.out_dir}{skipped}"
    )
