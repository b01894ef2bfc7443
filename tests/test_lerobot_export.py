"""`embodied-eval export lerobot`: LeRobotDataset v3.0 read back with pandas/pyarrow and PyAV.

Two recorded runs: the built-in MuJoCo push tasks (state only) and Gymnasium's Pusher-v5 rendered
to 64×64 frames (two episodes of 8 steps; a camera stream, rendered headless with MUJOCO_GL=egl in a subprocess).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from embodied_eval.cli.main import main
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[1]
PUSH = [f"push/block_{n}" for n in ("forward", "left", "right", "long", "diagonal")]


def test_a_recorded_sim_run_exports_frames_episodes_and_tasks(tmp_path: Path):
    proto = protocol_from_mapping(
        {
            "protocol": {"name": "export", "version": "1", "base_seed": 8},
            "window": {"id": "w-export", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "sim": {"engines": ["mujoco"], "max_steps": 30},
        }
    )
    db = tmp_path / "s.db"
    run_trials(
        proto,
        RunOptions(sides=("sim",), executor="sequential", record=True),
        db_path=db,
        out_dir=tmp_path / "run",
        show_progress=False,
    )
    with Store(db) as store:
        episodes = store.episodes()
    out = tmp_path / "dataset"
    assert main(["export", "lerobot", "--out", str(out), "--db", str(db)]) == 0

    info = json.loads((out / "meta" / "info.json").read_text())
    total = sum(e.actions for e in episodes)
    assert info["codebase_version"] == "v3.0" and info["fps"] == 50  # control at 50 Hz
    assert (
        info["total_episodes"] == 5 and info["total_frames"] == total and info["total_tasks"] == 5
    )
    state_names = info["features"]["observation.state"]["names"]
    assert "joint_pos.0" in state_names and "tcp_pos.2" in state_names
    for name in ("frame_index", "episode_index", "index", "task_index"):
        assert info["features"][name] == {"dtype": "int64", "shape": [1], "names": None}

    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet").to_pandas()
    assert len(data) == total and data["index"].tolist() == list(range(total))
    tasks = pd.read_parquet(out / "meta" / "tasks.parquet")
    assert tasks.index.name == "task" and list(tasks.columns) == ["task_index"]
    meta = pd.read_parquet(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    assert meta["episode_index"].tolist() == [0, 1, 2, 3, 4]
    by_id = {e.episode_id: e for e in episodes}
    for row in meta.itertuples(index=False):
        ep = by_id[row.episode_id]
        rows = data[data["episode_index"] == row.episode_index]
        assert row.length == len(rows) == ep.actions
        assert (row.dataset_from_index, row.dataset_to_index) == (
            rows["index"].iloc[0],
            rows["index"].iloc[-1] + 1,
        )
        assert list(row.tasks) == [ep.task_id]
        assert rows["task_index"].iloc[0] == tasks.loc[ep.task_id, "task_index"]
        assert row.pair_id == ep.pair_id and row.quality == ep.quality
        assert row.success == ep.success and row.status == ep.status
        assert pd.isna(row.audited_success)  # no judge looked at these
        # Frame i: timestamp i / 50 s; the action and state the trajectory recorded.
        assert np.allclose(rows["timestamp"], np.arange(ep.actions) / 50.0)
        [art] = [a for a in ep.artifacts if a.kind == "trajectory"]
        with np.load(tmp_path / art.path) as trace:  # relative to the store's folder
            assert np.allclose(np.stack(rows["action"]), trace["action"].astype(np.float32))
            joint0 = state_names.index("joint_pos.0")
            assert np.allclose(
                np.stack(rows["observation.state"])[:, joint0], trace["obs.joint_pos"][:, 0]
            )
            # The state the policy saw at frame i+1 is the one the step after frame i produced.
            assert np.allclose(trace["obs.tcp_pos"][1:], trace["tcp"][:-1])


GYM_PROTOCOL = """
[protocol]
name = "export-video"
version = "1"
base_seed = 9
m_min = 2

[window]
id = "w-video"
start = "2026-11-01"
end = "2026-11-30"

[battery.push]
target_quality = 0.5
instances = [{instances}]

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 1
real_fraction = 0.0

[sim]
max_steps = 8
"""


def test_rendered_frames_become_videos_that_decode_to_one_frame_per_step(tmp_path: Path):
    import av

    instances = ", ".join(
        f'{{ task_id = "{t}", env_id = "Pusher-v5", make_kwargs = '
        '{ render_mode = "rgb_array", width = 64, height = 64 } }'
        for t in PUSH[:2]
    )
    proto = tmp_path / "p.toml"
    proto.write_text(GYM_PROTOCOL.format(instances=instances))
    db = tmp_path / "s.db"
    command = [sys.executable, "-m", "embodied_eval", "run", str(proto), "--side", "sim"]
    command += ["--engine", "gymnasium", "--quality", "tests.test_gym_envs:steps_quality"]
    command += ["--policy", "embodied_eval.runner.gym_side:random_policy"]
    command += ["--record", "--executor", "sequential", "--db", str(db)]
    run = subprocess.run(
        [*command, "--out", str(tmp_path / "run"), "--no-progress"],
        cwd=ROOT,
        env={**os.environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    out = tmp_path / "dataset"
    assert main(["export", "lerobot", "--out", str(out), "--db", str(db)]) == 0

    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["fps"] == 20  # Pusher-v5: dt = 5 x 0.01 s = 0.05 s
    camera = info["features"]["observation.images.camera"]
    assert camera["dtype"] == "video" and camera["shape"] == [64, 64, 3]
    assert camera["names"] == ["height", "width", "channels"]
    meta = pd.read_parquet(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    assert len(meta) == 2
    for row in meta.to_dict("records"):
        assert row["length"] == 8
        assert row["videos/observation.images.camera/from_timestamp"] == 0.0
        assert row["videos/observation.images.camera/to_timestamp"] == pytest.approx(8 / 20)
        path = out / info["video_path"].format(
            video_key="observation.images.camera",
            chunk_index=row["videos/observation.images.camera/chunk_index"],
            file_index=row["videos/observation.images.camera/file_index"],
        )
        with av.open(str(path)) as container:
            frames = list(container.decode(video=0))
        assert len(frames) == row["length"] == 8
        # Frame i is shown at i / fps: every data timestamp lands on a frame (within 1e-4 s).
        times = [float(f.pts * f.time_base) for f in frames]
        assert np.allclose(times, np.arange(8) / 20, atol=1e-4)
        assert frames[0].to_ndarray(format="rgb24").shape == (64, 64, 3)


def test_an_export_needs_trajectories_and_an_empty_folder(tmp_path: Path, capsys):
    db = tmp_path / "s.db"
    proto = protocol_from_mapping(
        {
            "protocol": {"name": "export", "version": "1", "base_seed": 8},
            "window": {"id": "w-export", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "sim": {"engines": ["mujoco"], "max_steps": 5},
        }
    )
    run_trials(
        proto,
        RunOptions(sides=("sim",), executor="sequential"),
        db_path=db,
        out_dir=tmp_path / "run",
        show_progress=False,
    )
    assert main(["export", "lerobot", "--out", str(tmp_path / "d"), "--db", str(db)]) == 2
    assert "run the sim side with --record" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
