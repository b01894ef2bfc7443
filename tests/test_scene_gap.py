"""Start-scene gap per pair: measured, flagged beyond the protocol's tolerance, and left out of
S2R (hand-built episodes; no simulator)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.embodiment.scene_gap import check_scenes, start_scene_gap, wrapped_angle
from embodied_eval.embodiment.selection import select_episodes
from embodied_eval.records import Episode
from tests.conftest import make_episode
from tests.test_embodiment_data import load_protocol_fixture

pytestmark = pytest.mark.timeout(60)

PROTOCOL = load_protocol_fixture()


def half(i: int, side: str, ok: bool, pos: list[float] | None, yaw: float = 0.0) -> Episode:
    scene = {} if pos is None else {"object_pos_m": pos, "object_yaw_rad": yaw}
    if pos is not None:
        scene["source"] = "setup" if side == "sim" else "tracker"
    return make_episode(
        episode_id=f"e{i}-{side}",
        pair_id=f"q{i}",
        side=side,
        family="pick_place",
        task_id=f"pick_place/cube_{['center', 'left', 'right', 'far', 'near'][i % 5]}",
        seed=i,
        quality=0.9 if ok else 0.1,
        engine="mujoco" if side == "sim" else "ros2",
        scene=scene,
    )


def test_gap_is_the_3d_distance_and_the_wrapped_yaw_difference() -> None:
    sim = half(1, "sim", True, [0.50, 0.10, 0.025], yaw=3.10)
    real = half(1, "real", True, [0.53, 0.14, 0.025], yaw=-3.10)
    distance, yaw = start_scene_gap(sim, real)
    # √(0.03² + 0.04²) = 0.05 m; 3.10 − (−3.10) = 6.20 rad ≡ 6.20 − 2π = −0.0832 rad.
    assert distance == pytest.approx(0.05)
    assert yaw == pytest.approx(2 * math.pi - 6.20)
    assert wrapped_angle(-math.pi) == pytest.approx(math.pi)


def test_pairs_beyond_the_tolerance_are_flagged_and_unmeasured_pairs_kept() -> None:
    pairs = [
        (half(1, "sim", True, [0.5, 0.0, 0.02]), half(1, "real", True, [0.503, 0.004, 0.02])),
        (half(2, "sim", True, [0.5, 0.0, 0.02]), half(2, "real", True, [0.52, 0.0, 0.02])),
        (
            half(3, "sim", True, [0.5, 0.0, 0.02], 0.0),
            half(3, "real", True, [0.5, 0.0, 0.02], 0.08),
        ),
        (half(4, "sim", True, [0.5, 0.0, 0.02]), half(4, "real", True, None)),
    ]
    check = check_scenes(pairs, 0.01, 0.05)
    # 5 mm (3-4-5) is inside 1 cm; 2 cm is not; 0.08 rad is beyond 0.05 rad; pair 4 unmeasured.
    assert [g.distance_m for g in check.gaps] == [
        pytest.approx(0.005),
        pytest.approx(0.02),
        0.0,
        None,
    ]
    assert check.flagged == ["q2", "q3"]
    assert check.unmeasured == 1
    fam = check.by_family()["pick_place"]
    assert fam["pairs"] == 3 and fam["flagged"] == 2 and fam["max_m"] == pytest.approx(0.02)
    # Below the tracker's noise every measured pair disagrees.
    assert check_scenes(pairs, 0.001, 0.05).flagged == ["q1", "q2", "q3"]


def test_flagged_pairs_leave_s2r_and_the_report_says_so() -> None:
    episodes = []
    for i in range(6):
        real_pos = [0.5, 0.0, 0.02] if i < 4 else [0.55, 0.0, 0.02]  # pairs 4, 5 moved 5 cm
        # Sim succeeds everywhere; real fails only in the two moved pairs.
        episodes += [half(i, "sim", True, [0.5, 0.0, 0.02]), half(i, "real", i < 4, real_pos)]
    protocol = dataclasses.replace(PROTOCOL, engines=("mujoco",))
    sets = select_episodes(episodes, protocol)
    assert len(sets.pairs) == 4 and sets.scene_check.flagged == ["q4", "q5"]
    report = compute_embodiment(episodes, [], [], 10.0, protocol, resamples=200)
    # The four same-scene pairs all agree: the table is a = 4, b = c = d = 0.
    assert report.transfer.table.to_json() == {"a": 4, "b": 0, "c": 0, "d": 0}
    assert report.transfer.s2r.value == pytest.approx(1.0)
    assert any("2 pair(s) started from different scenes" in n for n in report.notes)
    assert report.to_json()["scene_check"]["flagged"] == ["q4", "q5"]
    # AR still counts every real episode (4 of 6 succeeded).
    assert report.ar.value == pytest.approx(4 / 6)
