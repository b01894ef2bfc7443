"""`export lerobot --side real`: real episodes from their MCAP recordings, read back with
pandas/pyarrow and PyAV against the recording itself (decoded independently with mcap_ros2).

Two real episodes of 30 steps run by the harness's loop against the twin robot process.
"""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from embodied_eval.cli.main import main
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store
from real_bridge.bridge_config import load_bridge_config, profile_path
from real_bridge.discovery import domain_id_for_test
from real_bridge.twin.process import TwinProcess

pytestmark = [
    pytest.mark.ros,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

STEPS = 30
TASKS = ["pick_place/cube_center", "pick_place/cube_left"]
PROTOCOL = f"""
[protocol]
name = "twin-export"
version = "1"
base_seed = 5
m_min = 1
[window]
id = "w-export-real"
start = 2026-11-01
end = 2026-11-30
[battery.pick_place]
instances = {json.dumps(TASKS)}
[sampling]
real_fraction = 1.0
[sim]
engines = ["mujoco"]
[real]
backend = "ros2"
robot_id = "twin-1"
"""
ARM_TOPIC = "/joint_trajectory_controller/joint_trajectory"
GRIPPER_TOPIC = "/gripper_controller/joint_trajectory"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]


def _tfs(msg) -> float:
    t = msg.points[-1].time_from_start
    return t.sec + t.nanosec * 1e-9


def read_recording(path: str) -> dict[str, list]:
    out: dict[str, list] = {}
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for _, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
            out.setdefault(channel.topic, []).append((message.log_time, decoded))
    return out


def test_real_episodes_export_from_their_recordings(tmp_path: Path):
    import av
    from PIL import Image

    text = profile_path("twin").read_text(encoding="utf-8")
    config = tmp_path / "twin.toml"
    config.write_text(
        text + "\n[deadlines]\nstate_stale_s = 1.0\ndiscovery_s = 20.0\nservice_s = 10.0\n"
        "judge_s = 10.0\nhoming_s = 20.0\n",
        encoding="utf-8",
    )
    load_bridge_config(config)
    db = tmp_path / "t.db"
    with TwinProcess(domain_id_for_test(650)) as twin:
        options = RunOptions(
            sides=("real",),
            max_retries=0,
            robot_options={
                "domain_id": twin.domain_id,
                "config_path": str(config),
                "max_steps": STEPS,
            },
        )
        protocol = protocol_from_mapping(tomllib.loads(PROTOCOL))
        run_trials(protocol, options, db_path=db, out_dir=tmp_path / "run", show_progress=False)
    with Store(db) as store:
        episodes = store.episodes(side="real")
    assert sorted(e.task_id for e in episodes) == TASKS
    assert all(e.status == "ok" and e.control["loop_steps"] == STEPS for e in episodes)

    out = tmp_path / "dataset"
    argv = ["export", "lerobot", "--out", str(out), "--db", str(db), "--side", "real"]
    assert main(argv) == 0
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 50  # the loop's rate
    assert info["total_episodes"] == 2 and info["total_frames"] == 2 * STEPS
    assert info["total_tasks"] == 2
    names = info["features"]["observation.state"]["names"]
    # joint positions (7 arm + 2 fingers), velocities (9), wrench (6), in key order.
    assert names[:9] == [f"joint_pos.{i}" for i in range(9)]
    assert names[9:18] == [f"joint_vel.{i}" for i in range(9)]
    assert names[18:] == [f"wrench.{i}" for i in range(6)]
    assert info["features"]["action"]["shape"] == [9]  # 7 arm targets + 2 finger targets
    camera = info["features"]["observation.images.image"]
    assert camera["dtype"] == "video" and camera["shape"] == [128, 128, 3]

    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet").to_pandas()
    assert len(data) == 2 * STEPS and data["index"].tolist() == list(range(2 * STEPS))
    tasks = pd.read_parquet(out / "meta" / "tasks.parquet")
    assert tasks.index.name == "task" and sorted(tasks.index) == TASKS
    meta = pd.read_parquet(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    by_id = {e.episode_id: e for e in episodes}
    assert sorted(meta["episode_id"]) == sorted(by_id)
    for row in meta.to_dict("records"):
        ep = by_id[row["episode_id"]]
        assert (row["pair_id"], row["side"], row["status"], row["success"]) == (
            ep.pair_id,
            "real",
            "ok",
            ep.success,
        )
        assert row["quality"] == ep.quality
        assert (row["judge_kind"], row["judge_name"]) == ("oracle", "twin-oracle")
        frames = data[data["episode_index"] == row["episode_index"]]
        assert row["length"] == len(frames) == STEPS
        assert list(row["tasks"]) == [ep.task_id]
        assert np.allclose(frames["timestamp"], np.arange(STEPS) / 50.0)

        # Against the recording: the loop's commands are the arm/gripper trajectories of one
        # control period (20 ms) from the "started" event on (homing comes before it; its
        # retreat also steps at 20 ms), and the hold is 0.1 s.
        rec = read_recording(str(tmp_path / ep.artifacts[0].path))  # relative to the store
        started = min(t for t, m in rec["/embodied_eval/episode"] if '"started"' in m.data)
        arm = [(t, m) for t, m in rec[ARM_TOPIC] if t >= started and _tfs(m) == pytest.approx(0.02)]
        grip = [m for t, m in rec[GRIPPER_TOPIC] if t >= started and _tfs(m) == pytest.approx(0.02)]
        assert len(arm) == len(grip) == STEPS
        action = np.stack(frames["action"])
        expected = [
            list(m.points[0].positions) + list(g.points[0].positions)
            for (_, m), g in zip(arm, grip, strict=True)
        ]
        assert np.array_equal(action, np.array(expected, dtype=np.float32))
        # State at frame i: the last joint state received before command i went out.
        states = rec["/joint_states"]
        state = np.stack(frames["observation.state"])
        for i, (sent_ns, _) in enumerate(arm):
            before = [m for t, m in states if t <= sent_ns]
            last = before[-1]
            assert list(last.name) == JOINTS
            assert np.array_equal(state[i, :9], np.array(last.position, dtype=np.float32))
            assert np.array_equal(state[i, 9:18], np.array(last.velocity, dtype=np.float32))

        # The camera: one video frame per step, frame i at i / 50 s, close to the recorded PNG.
        path = out / info["video_path"].format(
            video_key="observation.images.image",
            chunk_index=row["videos/observation.images.image/chunk_index"],
            file_index=row["videos/observation.images.image/file_index"],
        )
        with av.open(str(path)) as container:
            video = [f for f in container.decode(video=0)]
        assert len(video) == STEPS
        times = [float(f.pts * f.time_base) for f in video]
        assert np.allclose(times, np.arange(STEPS) / 50.0, atol=1e-4)
        images = rec["/camera/image_raw/compressed"]
        shown = [m for t, m in images if t <= arm[-1][0]][-1]
        with Image.open(io.BytesIO(bytes(shown.data))) as png:
            recorded = np.asarray(png.convert("RGB"), dtype=np.float64)
        last_frame = video[-1].to_ndarray(format="rgb24").astype(np.float64)
        assert last_frame.shape == (128, 128, 3)
        assert np.abs(last_frame - recorded).mean() < 4.0  # H.264 at crf 18: close, not exact
