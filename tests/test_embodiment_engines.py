"""A pair whose sim side ran on MuJoCo and PyBullet: S2R pairs the real side with one engine."""

from __future__ import annotations

import numpy as np

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import first_attempts
from tests.conftest import make_episode


def _episodes():
    out = []
    for i in range(10):
        pair = f"p{i}"
        task = f"pick_place/cube_{['center', 'left', 'right', 'far', 'near'][i % 5]}"
        real_ok = i < 8  # real: 8/10 succeed
        common = {"pair_id": pair, "task_id": task, "seed": i, "duration_s": 36.0}
        out.append(
            make_episode(
                episode_id=f"{pair}-real",
                side="real",
                engine="ros2",
                quality=0.9 if real_ok else 0.2,
                **common,
            )
        )
        # MuJoCo agrees with the real robot on every pair; PyBullet succeeds on all 10.
        out.append(
            make_episode(
                episode_id=f"{pair}-mj",
                side="sim",
                engine="mujoco",
                quality=0.9 if real_ok else 0.2,
                **common,
            )
        )
        out.append(
            make_episode(
                episode_id=f"{pair}-pb", side="sim", engine="pybullet", quality=0.95, **common
            )
        )
    return out


def test_first_attempts_keep_one_episode_per_engine():
    kept = first_attempts(_episodes())
    assert len(kept) == 30  # 10 pairs × (real, mujoco, pybullet)


def test_s2r_uses_the_protocols_first_engine_and_reports_the_others():
    proto = load_protocol(example_protocol_path())  # sim.engines = ["mujoco", "pybullet"]
    report = compute_embodiment(
        _episodes(), [], [], None, proto, rng=np.random.default_rng(1), resamples=200
    ).to_json()
    assert report["sim_engine"] == "mujoco"
    # AR_real = 8/10 = 0.8; AR_sim(MuJoCo) = 8/10 ⇒ S2R = 1 − |0.8 − 0.8| = 1.0
    assert report["AR"]["value"] == 0.8
    assert report["AR_sim"]["value"] == 0.8
    assert report["S2R"]["value"] == 1.0
    # PyBullet: AR_sim = 10/10 ⇒ S2R = 1 − |1.0 − 0.8| = 0.8
    assert abs(report["S2R_by_engine"]["pybullet"]["value"] - 0.8) < 1e-12
    assert report["S2R_by_engine"]["mujoco"]["value"] == 1.0
