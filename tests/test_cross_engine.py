"""Cross-engine agreement: sim engines against each other on the same manifest rows, not S2R."""

from __future__ import annotations

import pytest

from embodied_eval.embodiment.cross_engine import cross_engine_agreement
from embodied_eval.records import Episode


def ep(pair: str, engine: str, success: bool, attempt: int = 1, status: str = "ok") -> Episode:
    return Episode(
        episode_id=f"{pair}-{engine}-{attempt}",
        pair_id=pair,
        side="sim",
        family="push",
        task_id="push/block_left",
        seed=1,
        policy="p",
        engine=engine,
        quality=0.9 if success else 0.1,
        target_quality=0.8,
        status=status,
        attempt=attempt,
    )


def test_agreement_table_by_hand() -> None:
    outcomes = {"p1": (1, 1), "p2": (1, 0), "p3": (0, 1), "p4": (0, 0), "p5": (1, 1)}
    episodes = [ep(p, "mujoco", bool(m)) for p, (m, _) in outcomes.items()]
    episodes += [ep(p, "pybullet", bool(b)) for p, (_, b) in outcomes.items()]
    # A retry and a row only one engine ran do not count.
    episodes += [ep("p4", "pybullet", True, attempt=2), ep("p6", "mujoco", True)]
    result = cross_engine_agreement(episodes, 0.95)
    pair = result["mujoco~pybullet"]
    # a = 2 (p1, p5), b = 1 (p2), c = 1 (p3), d = 1 (p4): agreement (2 + 1)/5 = 0.6, gap
    # p_mujoco − p_pybullet = 3/5 − 3/5 = 0.
    assert pair.table == (2, 1, 1, 1)
    assert pair.agreement.value == pytest.approx(0.6)
    assert pair.agreement.low < 0.6 < pair.agreement.high
    assert pair.gap.value == pytest.approx(0.0)
    assert pair.to_json()["n"] == 5


def test_one_engine_has_no_agreement() -> None:
    assert cross_engine_agreement([ep("p1", "mujoco", True)], 0.95) == {}
