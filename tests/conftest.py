"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from embodied_eval.records import Episode


def make_episode(**overrides: Any) -> Episode:
    """A valid real episode; override any field."""
    fields: dict[str, Any] = {
        "episode_id": "p0001-real-a1",
        "pair_id": "p0001",
        "side": "real",
        "family": "pick_place",
        "task_id": "pick_place/cube_center",
        "seed": 7,
        "policy": "sim_suites.policies:scripted",
        "engine": "ros2",
        "quality": 0.9,
        "target_quality": 0.8,
        "status": "ok",
        "duration_s": 12.5,
        "started_at": "2026-11-02T10:00:00Z",
    }
    fields.update(overrides)
    return Episode(**fields)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"
