"""End to end on the real sim engines: a small protocol on MuJoCo and PyBullet, run twice.

One family with the admissible minimum of 5 instances, one seed, one drift, short episodes: 10 sim
episodes per run. The local pool and the sequential executor must store identical episodes (the
sim engine is deterministic per spec, start time included) and byte-identical recordings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_eval.canonical import file_sha256
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store

pytest.importorskip("sim_suites.episode")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PUSH = [
    "push/block_forward",
    "push/block_left",
    "push/block_right",
    "push/block_long",
    "push/block_diagonal",
]


def small_protocol():
    return protocol_from_mapping(
        {
            "protocol": {"name": "runner-e2e", "version": "1", "base_seed": 11},
            "window": {"id": "w-e2e", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "sim": {"engines": ["mujoco", "pybullet"], "max_steps": 80},
        }
    )


def test_small_protocol_on_both_engines_is_recorded_and_deterministic(tmp_path: Path):
    proto = small_protocol()
    runs = {}
    for name, executor in (("pool", "local"), ("seq", "sequential")):
        summary = run_trials(
            proto,
            RunOptions(sides=("sim",), executor=executor, workers=2, record=True),
            db_path=tmp_path / name / "store.db",
            out_dir=tmp_path / name / "out",
            show_progress=False,
        )
        assert summary.complete and summary.written == 10
        with Store(tmp_path / name / "store.db") as store:
            runs[name] = {e.episode_id: e for e in store.episodes()}

    manifest = plan_manifest(proto)
    assert set(runs["pool"]) == {s.episode_id for s in manifest.specs}  # 5 pairs x 2 engines
    for episode_id, ep in runs["pool"].items():
        other = runs["seq"][episode_id]
        assert ep.status in ("ok", "safety_stop", "out_of_bounds"), ep.status_reason
        assert ep.engine in ("mujoco", "pybullet") and ep.actions <= 80
        assert ep.seed == other.seed and ep.drift == other.drift
        # Same spec, same outcome: everything but where the recording was written and when the
        # episode started (each carries its actual start time).
        assert ep.replace(artifacts=(), started_at=other.started_at) == other.replace(artifacts=())
        [mine], [theirs] = ep.artifacts, other.artifacts
        assert mine.kind == "trajectory" and mine.sha256 == theirs.sha256
        # Recorded relative to the store's folder: the store travels with its run folder.
        assert file_sha256(tmp_path / "pool" / mine.path) == mine.sha256
        assert mine.path.startswith("out/artifacts/")


@pytest.mark.ros
def test_both_sides_at_once_with_the_twin_robot_over_ros2(tmp_path: Path):
    pytest.importorskip("rclpy")
    from real_bridge.discovery import domain_id_for_test
    from real_bridge.twin.process import TwinProcess

    proto = protocol_from_mapping(
        {
            "protocol": {"name": "runner-twin", "version": "1", "base_seed": 11},
            "window": {"id": "w-twin", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            # round(0.4 * 5) = 2 real pairs.
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.4},
            "sim": {"engines": ["mujoco"], "max_steps": 80},
        }
    )
    domain = domain_id_for_test(57)
    with TwinProcess(domain, sim_time=True):  # on its simulated clock: load changes nothing
        summary = run_trials(
            proto,
            RunOptions(
                executor="local",
                workers=2,
                robot_options={"domain_id": domain, "profile": "twin_sim"},
            ),
            db_path=tmp_path / "store.db",
            out_dir=tmp_path / "out",
            show_progress=False,
        )
    assert summary.real_error == "" and summary.complete
    with Store(tmp_path / "store.db") as store:
        real = store.episodes(side="real")
        sim = {e.pair_id: e for e in store.episodes(side="sim")}
    assert len(real) == 2 and len(sim) == 5
    for ep in real:
        assert ep.engine == "ros2" and ep.status in ("ok", "safety_stop", "aborted")
        assert ep.pair_id in sim and ep.seed == sim[ep.pair_id].seed  # paired on (t, s, δ)
        [mcap] = [a for a in ep.artifacts if a.kind == "mcap"]
        assert file_sha256(tmp_path / mcap.path) == mcap.sha256
