"""Episodes as a LeRobotDataset (format v3.0): `embodied-eval export lerobot --out DIR`.

Every exported episode needs its per-step frames:

- a sim episode: the `.npz` artifact (kind "trajectory") a sim run writes with `--record`: `time`
  and each observation array `obs.<key>` as the policy saw it before each action, and `action`;
- a real episode: its MCAP recording (kind "mcap"), read by the robot side's frame reader
  (`embodied_eval.plugins.STEP_READERS`; for ROS 2 recordings `real_bridge.recording_steps`):
  one frame per control-loop step, `obs.joint_pos` / `obs.joint_vel` (arm then gripper joints)
  and `obs.wrench` from the latest samples received when the step's command went out,
  `obs.image` from the latest recorded camera frame, `action` = the joint targets sent (arm,
  then gripper).

Episodes without frames (no artifact, or ended before their first step) are skipped and counted.

Where our fields go (LeRobotDataset v3.0 layout):

- `data/chunk-000/file-000.parquet`, one row per step (frame):
  `observation.state` = the non-image observation arrays, flattened and concatenated in key order
  (float32; `names` in info.json say which entry is which, e.g. "joint_pos.0"); `action`
  (float32); `timestamp` = simulated time of the observation, s (float32, = frame_index / fps);
  `frame_index` (step within the episode), `episode_index`, `index` (global frame), `task_index`.
- `videos/observation.images.<camera>/chunk-CCC/file-FFF.mp4`: every uint8 (H, W, 3) observation
  array is a camera; one H.264 file per episode (file index = episode index within its chunk),
  frame i at i / fps seconds, so `from_timestamp` = 0 and `to_timestamp` = length / fps.
- `meta/tasks.parquet`: indexed by the task text (our `task_id`), one column `task_index`.
- `meta/episodes/chunk-000/file-000.parquet`: LeRobot's columns (`episode_index`, `tasks`,
  `length`, data and video file indices, `dataset_from_index`, `dataset_to_index`, video
  from/to timestamps) plus ours, unchanged: `episode_id`, `pair_id`, `side`, `engine`, `policy`,
  `family`, `task_id`, `seed`, `attempt`, `window`, `protocol_hash`, the outcome (`status`,
  `status_reason`, `quality`, `target_quality`, `success`) and the judge's verdict
  (`audited_success`, empty when no judge looked; `judge_kind`, `judge_name`, `judge_version` of
  the judge that decided a real episode — oracle, detector or technician — empty for sim).
- `meta/info.json` (features, counts, fps, path templates) and `meta/stats.json`.

All episodes of one export must share the observation and action layout (sim and real frames
differ): export one side at a time (`--side sim` / `--side real`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import STEP_READERS, resolve
from embodied_eval.records import Episode
from embodied_eval.store.artifacts import artifact_file

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"


@dataclass
class Trajectory:
    """One episode's frames: flat state (T, S), action (T, D), time (T,), camera frames."""

    episode: Episode
    state: np.ndarray
    state_names: list[str]
    action: np.ndarray
    time: np.ndarray
    cameras: dict[str, np.ndarray]


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: episodes, frames, fps, cameras, and episodes skipped (no trajectory)."""

    out_dir: str
    episodes: int
    frames: int
    fps: int
    cameras: tuple[str, ...]
    skipped: int


def trajectory_file(episode: Episode, store_path: Path | None) -> tuple[Path, str] | None:
    """The episode's per-step artifact on disk and its kind: its `.npz` trajectory, else a
    recording that a frame reader understands (`plugins.STEP_READERS`). `store_path`: the store
    the episode was read from (artifact paths are relative to its folder)."""
    for art in episode.artifacts:
        if art.kind == "trajectory" and art.path.endswith(".npz"):
            found = artifact_file(art.path, store_path)
            if found is not None:
                return found, art.kind
    for art in episode.artifacts:
        if art.kind in STEP_READERS:
            found = artifact_file(art.path, store_path)
            if found is not None:
                return found, art.kind
    return None


def load_trajectory(episode: Episode, path: Path, kind: str) -> Trajectory | None:
    """Read a per-step artifact of `kind`; None when it predates per-step observations."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    else:
        try:
            reader = resolve(STEP_READERS[kind])
        except EvalError as exc:
            raise EvalError(
                f"episode {episode.episode_id}: cannot read its {kind} recording ({exc}); "
                "install the 'ros' extra"
            ) from None
        arrays = reader(episode, path)
    if "time" not in arrays or "action" not in arrays or len(arrays["time"]) == 0:
        return None
    return trajectory_from_arrays(episode, arrays)


def trajectory_from_arrays(episode: Episode, arrays: dict[str, np.ndarray]) -> Trajectory:
    """A Trajectory from `time`, `action` and `obs.<key>` arrays (uint8 (T, H, W, 3): cameras)."""
    steps = len(arrays["time"])
    state_parts: list[np.ndarray] = []
    names: list[str] = []
    cameras: dict[str, np.ndarray] = {}
    for name in sorted(k for k in arrays if k.startswith("obs.")):
        key, value = name[len("obs.") :], arrays[name]
        if len(value) != steps:
            raise EvalError(
                f"episode {episode.episode_id}: {name} has {len(value)} rows, not {steps}"
            )
        if value.dtype == np.uint8 and value.ndim == 4 and value.shape[-1] == 3:
            cameras[key] = value
            continue
        flat = value.reshape(steps, -1).astype(np.float32)
        state_parts.append(flat)
        names += [f"{key}.{i}" for i in range(flat.shape[1])] if flat.shape[1] > 1 else [key]
    state = np.concatenate(state_parts, axis=1) if state_parts else np.zeros((steps, 0), np.float32)
    action = arrays["action"].reshape(steps, -1).astype(np.float32)
    return Trajectory(episode, state, names, action, arrays["time"].astype(np.float64), cameras)


def frame_rate(trajectories: Sequence[Trajectory]) -> int:
    """The integer fps all trajectories step at (from their time columns)."""
    rates = set()
    for traj in trajectories:
        if len(traj.time) >= 2:
            dt = float(np.median(np.diff(traj.time)))
            fps = round(1.0 / dt)
            if fps <= 0 or abs(fps * dt - 1.0) > 1e-6:
                raise EvalError(
                    f"episode {traj.episode.episode_id} steps every {dt:g} s, which is not a whole "
                    "number of frames per second; LeRobot datasets need an integer fps"
                )
            rates.add(fps)
    if len(rates) > 1:
        raise EvalError(
            f"episodes step at different rates ({sorted(rates)} fps); export them apart"
        )
    return rates.pop() if rates else 1


def _check_layout(trajectories: Sequence[Trajectory]) -> None:
    first = trajectories[0]
    for traj in trajectories[1:]:
        same = (
            traj.state_names == first.state_names
            and traj.action.shape[1] == first.action.shape[1]
            and {k: v.shape[1:] for k, v in traj.cameras.items()}
            == {k: v.shape[1:] for k, v in first.cameras.items()}
        )
        if not same:
            raise EvalError(
                f"episodes {first.episode.episode_id} and {traj.episode.episode_id} have different "
                "observation/action layouts; export one side at a time (--side sim / --side real)"
            )


def encode_video(frames: np.ndarray, fps: int, path: Path) -> None:
    """Write (T, H, W, 3) uint8 frames as H.264 (yuv420p), frame i at i / fps seconds."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = int(frames.shape[1]), int(frames.shape[2])
    # yuv420p needs even sizes: pad the last row/column by repetition when odd.
    pad_h, pad_w = height % 2, width % 2
    if pad_h or pad_w:
        frames = np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = int(frames.shape[2]), int(frames.shape[1])
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "18", "g": "2"}
        for image in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _stats(values: np.ndarray) -> dict[str, Any]:
    values = values.reshape(len(values), -1).astype(np.float64)
    return {
        "min": values.min(axis=0).tolist(),
        "max": values.max(axis=0).tolist(),
        "mean": values.mean(axis=0).tolist(),
        "std": values.std(axis=0).tolist(),
        "count": [len(values)],
    }


def export_lerobot(
    episodes: Sequence[Episode],
    out_dir: str | Path,
    *,
    robot_type: str = "",
    store_path: Path | None = None,
) -> ExportResult:
    """Write `episodes` as a LeRobotDataset v3.0 folder at `out_dir` (must not exist or be empty).
    `store_path`: the store the episodes were read from (their artifact paths are relative to it).

    The folder is built beside `out_dir` and renamed into place, so a failed export leaves nothing.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise EvalError(f"--out {out}: the folder exists and is not empty", key="out")
    trajectories: list[Trajectory] = []
    skipped = 0
    for ep in episodes:
        found = trajectory_file(ep, store_path)
        traj = load_trajectory(ep, *found) if found is not None else None
        if traj is None or len(traj.time) == 0:
            skipped += 1
        else:
            trajectories.append(traj)
    if not trajectories:
        raise EvalError(
            f"none of the {len(episodes)} episode(s) has per-step frames; run the sim side "
            "with --record to write them (real episodes need their recording)",
            key="window",
        )
    _check_layout(trajectories)
    fps = frame_rate(trajectories)
    first = trajectories[0]
    cameras = tuple(sorted(first.cameras))
    tasks = list(dict.fromkeys(t.episode.task_id for t in trajectories))
    task_index = {task: i for i, task in enumerate(tasks)}

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        rows: dict[str, list[Any]] = {
            k: []
            for k in ("observation.state", "action", "timestamp", "frame_index", "episode_index")
        }
        episode_rows: list[dict[str, Any]] = []
        start = 0
        for index, traj in enumerate(trajectories):
            length = len(traj.time)
            frame_index = np.arange(length, dtype=np.int64)
            rows["observation.state"].append(traj.state)
            rows["action"].append(traj.action)
            rows["timestamp"].append((frame_index / fps).astype(np.float32))
            rows["frame_index"].append(frame_index)
            rows["episode_index"].append(np.full(length, index, dtype=np.int64))
            ep = traj.episode
            row: dict[str, Any] = {
                "episode_index": index,
                "tasks": [ep.task_id],
                "length": length,
                "data/chunk_index": 0,
                "data/file_index": 0,
                "dataset_from_index": start,
                "dataset_to_index": start + length,
                "meta/episodes/chunk_index": 0,
                "meta/episodes/file_index": 0,
            }
            chunk, file = divmod(index, CHUNKS_SIZE)
            for cam in cameras:
                key = f"observation.images.{cam}"
                encode_video(
                    traj.cameras[cam],
                    fps,
                    work / VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file),
                )
                row[f"videos/{key}/chunk_index"] = chunk
                row[f"videos/{key}/file_index"] = file
                row[f"videos/{key}/from_timestamp"] = 0.0
                row[f"videos/{key}/to_timestamp"] = length / fps
            row.update(
                episode_id=ep.episode_id,
                pair_id=ep.pair_id,
                side=ep.side,
                engine=ep.engine,
                policy=ep.policy,
                family=ep.family,
                task_id=ep.task_id,
                seed=ep.seed,
                attempt=ep.attempt,
                window=ep.window,
                protocol_hash=ep.protocol_hash,
                status=ep.status,
                status_reason=ep.status_reason,
                quality=ep.quality,
                target_quality=ep.target_quality,
                success=ep.success,
                audited_success=ep.audited_success,
                judge_kind=str(ep.judge.get("kind", "")),
                judge_name=str(ep.judge.get("name", "")),
                judge_version=str(ep.judge.get("version", "")),
            )
            episode_rows.append(row)
            start += length
        total = start
        state = np.concatenate(rows["observation.state"])
        action = np.concatenate(rows["action"])
        episode_index = np.concatenate(rows["episode_index"])
        columns = {
            "observation.state": _fixed_list(pa, state),
            "action": _fixed_list(pa, action),
            "timestamp": pa.array(np.concatenate(rows["timestamp"]), pa.float32()),
            "frame_index": pa.array(np.concatenate(rows["frame_index"]), pa.int64()),
            "episode_index": pa.array(episode_index, pa.int64()),
            "index": pa.array(np.arange(total, dtype=np.int64), pa.int64()),
            "task_index": pa.array(
                np.array([task_index[trajectories[i].episode.task_id] for i in episode_index]),
                pa.int64(),
            ),
        }
        data_file = work / DATA_PATH.format(chunk_index=0, file_index=0)
        data_file.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), data_file)

        meta = work / "meta"
        (meta / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {"task_index": list(range(len(tasks)))}, index=pd.Index(tasks, name="task")
        ).to_parquet(meta / "tasks.parquet")
        pd.DataFrame(episode_rows).to_parquet(work / EPISODES_PATH, index=False)

        features: dict[str, Any] = {
            "observation.state": {
                "dtype": "float32",
                "shape": [state.shape[1]],
                "names": first.state_names,
            },
            "action": {
                "dtype": "float32",
                "shape": [action.shape[1]],
                "names": [f"action.{i}" for i in range(action.shape[1])],
            },
        }
        for cam in cameras:
            h, w = (int(x) for x in first.cameras[cam].shape[1:3])
            features[f"observation.images.{cam}"] = {
                "dtype": "video",
                "shape": [h, w, 3],
                "names": ["height", "width", "channels"],
                "info": {
                    "video.height": h,
                    "video.width": w,
                    "video.codec": "h264",
                    "video.pix_fmt": "yuv420p",
                    "video.is_depth_map": False,
                    "video.fps": fps,
                    "video.channels": 3,
                    "has_audio": False,
                },
            }
        for name in ("timestamp",):
            features[name] = {"dtype": "float32", "shape": [1], "names": None}
        for name in ("frame_index", "episode_index", "index", "task_index"):
            features[name] = {"dtype": "int64", "shape": [1], "names": None}
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": robot_type or first.episode.engine,
            "total_episodes": len(trajectories),
            "total_frames": total,
            "total_tasks": len(tasks),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 500,
            "fps": fps,
            "splits": {"train": f"0:{len(trajectories)}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if cameras else None,
            "features": features,
        }
        (meta / "info.json").write_text(json.dumps(info, indent=2))
        stats: dict[str, Any] = {
            "observation.state": _stats(state),
            "action": _stats(action),
            "timestamp": _stats(columns["timestamp"].to_numpy()),
            "frame_index": _stats(columns["frame_index"].to_numpy()),
            "episode_index": _stats(episode_index),
            "index": _stats(columns["index"].to_numpy()),
            "task_index": _stats(columns["task_index"].to_numpy()),
        }
        (meta / "stats.json").write_text(json.dumps(stats))
        if out.exists():
            out.rmdir()
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return ExportResult(str(out), len(trajectories), total, fps, cameras, skipped)


def _fixed_list(pa: Any, values: np.ndarray) -> Any:
    """A (N, K) float32 array as a parquet fixed-size list column."""
    flat = pa.array(values.astype(np.float32).reshape(-1), pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, int(values.shape[1]))
