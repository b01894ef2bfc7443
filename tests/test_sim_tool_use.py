"""The tool_use family: a hook is grasped, a block out of reach is scored.

The block lies beyond the hand's reach at table height; the reference policy grasps the hook,
reaches behind the block and pulls it into the goal region. These tests check that the task keeps
what is grasped (the hook) apart from what is scored (the block) in the grasp detector, the
observations and the control-quality contact term, that the reference policies succeed
nominally in both engines, and that they fail when the hook is out of reach or its friction is
very low.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim_suites.control_quality import unintended_contact
from sim_suites.env import PandaTaskEnv
from sim_suites.policies import scripted, vision
from sim_suites.tasks import TASK_SPECS, make_task

pytestmark = pytest.mark.timeout(180)

TASK = "tool_use/hook_center"


def _run(env: PandaTaskEnv, policy: object, seed: int = 0) -> tuple[dict, dict]:
    """One episode; returns the last info and what was seen along the way."""
    obs, _ = env.reset(seed=seed)
    policy.reset(seed)  # type: ignore[attr-defined]
    seen = {"hook_held": False, "hook_on_block_n": 0.0, "start": obs.get("object_pos")}
    while True:
        obs, _, term, trunc, info = env.step(policy.act(obs))  # type: ignore[attr-defined]
        seen["hook_held"] = seen["hook_held"] or bool(info["grasped"])
        force = env.backend.contact_forces().get(("block", "hook"), 0.0)
        seen["hook_on_block_n"] = max(seen["hook_on_block_n"], force)
        if term or trunc:
            return info, seen


def test_task_grasps_the_hook_and_scores_the_block() -> None:
    task = make_task(TASK)
    assert task.object_name == "block" and task.grasped_name == "hook"
    scene = task.scene()
    assert scene.body("hook").role == "tool" and scene.body("block").role == "object"
    # The grasp width is the shaft's 2 cm across the fingers, not the 5 cm block.
    assert task.grasp_width() == pytest.approx(0.02)
    # Every instance's block lies beyond the hand's reach at table height (x ≥ 0.82 m) and its
    # goal well inside it.
    for task_id in (t for t in TASK_SPECS if t.startswith("tool_use/")):
        spec = TASK_SPECS[task_id]
        assert spec.start_xy[0] >= 0.82 and spec.goal_xy[0] <= 0.70


def test_contact_between_tool_and_object_is_intended() -> None:
    contacts = {("robot", "hook"): 40.0, ("block", "hook"): 35.0, ("block", "table"): 30.0}
    assert unintended_contact(contacts, "block", "hook") == 0.0
    # The hand touching the block itself, or the hook hitting a fixture, is not the task's.
    assert unintended_contact({**contacts, ("robot", "block"): 25.0}, "block", "hook") == 25.0
    assert unintended_contact({**contacts, ("hole", "hook"): 31.0}, "block", "hook") == 31.0
    # Without a tool the rule is unchanged: the hand on the object is the grasp.
    assert unintended_contact({("robot", "cube"): 40.0, ("cube", "hole"): 22.0}, "cube") == 22.0


def test_state_observation_carries_the_hook_grasp_point() -> None:
    env = PandaTaskEnv(TASK, "mujoco", randomization={})
    try:
        obs, _ = env.reset(seed=0)
        hook, _ = env.backend.body_pose("hook")
        np.testing.assert_allclose(obs["tool_pos"], hook)
        np.testing.assert_allclose(obs["tool_pos"][:2], [0.45, 0.20], atol=1e-6)
        np.testing.assert_allclose(obs["object_pos"][:2], [0.83, 0.0], atol=1e-6)
        assert env.observation_space.contains(obs)
    finally:
        env.close()
    other = PandaTaskEnv("push/block_forward", "mujoco")
    try:
        assert "tool_pos" not in other.observation_space.spaces
    finally:
        other.close()


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_reference_pulls_the_block_with_the_hook(engine: str) -> None:
    env = PandaTaskEnv(TASK, engine, randomization={})
    try:
        info, seen = _run(env, scripted(TASK))
        block = env.object_point
    finally:
        env.close()
    assert info["status"] == "ok" and info["is_success"], info["status_reason"]
    assert seen["hook_held"]
    # The hook pressed on the block, and the block travelled 0.21 m to the goal (0.62, 0).
    assert seen["hook_on_block_n"] > 0.5
    assert float(np.hypot(block[0] - 0.62, block[1])) <= 0.03


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_hook_out_of_reach_fails(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    far = "tool_use/hook_out_of_reach"
    spec = dataclasses.replace(
        TASK_SPECS[TASK], task_id=far, extra={"hook_x": 0.95, "hook_y": 0.30}
    )
    monkeypatch.setitem(TASK_SPECS, far, spec)
    env = PandaTaskEnv(far, engine, randomization={})
    try:
        info, seen = _run(env, scripted(far))
    finally:
        env.close()
    assert not info["is_success"] and not seen["hook_held"]
    assert seen["hook_on_block_n"] == 0.0


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_very_low_friction_hook_slips_and_fails(engine: str) -> None:
    # friction ×0.02: μ = 0.8 × 0.02 = 0.016 on the pads; the 20 N grip then holds
    # 2 × 20 N × 0.016 = 0.64 N, less than the 0.08 kg hook's weight (0.78 N).
    env = PandaTaskEnv(TASK, engine, randomization={"friction_scale": (0.02, 0.02)})
    try:
        info, _ = _run(env, scripted(TASK))
    finally:
        env.close()
    assert not info["is_success"]


def test_vision_reference_finds_hook_and_block_in_the_camera() -> None:
    env = PandaTaskEnv(TASK, "mujoco", randomization={}, observation_mode="rgbd")
    policy = vision(TASK)
    try:
        assert "tool_pos" not in env.observation_space.spaces  # privileged: state mode only
        obs, _ = env.reset(seed=0)
        policy.reset(0)
        policy.act(obs)
        # The hook's grasp point as found in the first frame, within 5 mm of where it lies.
        assert policy.tool is not None
        assert float(np.linalg.norm(policy.tool - np.array([0.45, 0.20, 0.015]))) < 0.005
        info, seen = _run(env, policy)
    finally:
        env.close()
    assert info["is_success"], info["status_reason"]
    assert seen["hook_held"]


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_a_slippery_hook_alone_fails(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the hook is slippery (μ = 0.016, the block keeps its 0.5): the 20 N grip holds
    # 2 × 20 N × 0.016 = 0.64 N, less than the 0.08 kg hook's weight (0.78 N), so the hand
    # cannot carry the hook behind the block and the block stays out of the goal region.
    slippery = "tool_use/hook_slippery"
    spec = dataclasses.replace(
        TASK_SPECS[TASK], task_id=slippery, extra={**TASK_SPECS[TASK].extra, "hook_friction": 0.016}
    )
    monkeypatch.setitem(TASK_SPECS, slippery, spec)
    env = PandaTaskEnv(slippery, engine, randomization={})
    try:
        assert env.backend.scene.body("hook").friction == 0.016
        assert env.backend.scene.body("block").friction == 0.5
        info, _ = _run(env, scripted(slippery))
        block = env.object_point
    finally:
        env.close()
    assert not info["is_success"]
    # The block never reached the goal region (0.62, 0) ± 3 cm.
    assert float(np.hypot(block[0] - 0.62, block[1])) > 0.03
