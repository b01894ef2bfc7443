"""Registry-wide checks of the Gymnasium environments (one parametrized test per property)."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import mujoco
import numpy as np
import pybullet
import pytest
from gymnasium.utils.env_checker import check_env
from pybullet_utils import bullet_client

import sim_suites
from sim_suites.panda_description import panda_urdf_file, panda_urdf_text
from sim_suites.panda_kinematics import ARM_JOINTS, panda_kinematics

IDS = sim_suites.registered_ids()

pytestmark = pytest.mark.timeout(120)


def test_registry_has_every_family_on_both_engines() -> None:
    # Six families (pick_place, push, drawer_open, peg_insert, tool_use, mobile_pick_place)
    # × two engines.
    assert len(IDS) == 12
    assert "embodied/MobilePickPlace-PyBullet-v0" in IDS
    assert "embodied/PickPlace-MuJoCo-v0" in IDS
    assert "embodied/PegInsert-PyBullet-v0" in IDS
    assert "embodied/ToolUse-MuJoCo-v0" in IDS
    assert "embodied/ToolUse-PyBullet-v0" in IDS
    assert all(i in gym.registry for i in IDS)


def _rollout(env: gym.Env, seed: int, steps: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(123)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(steps):
        shape = env.action_space.shape
        obs, _, term, trunc, _ = env.step(rng.uniform(-1, 1, shape).astype(np.float32))
        out.append(obs)
        if term or trunc:
            break
    return out


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env(env_id: str) -> None:
    """check_env, two-rollout determinism, randomized start, no shared memory, no warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id)
        check_env(env.unwrapped, skip_render_check=True)
        first = _rollout(env, seed=7, steps=12)
        other = gym.make(env_id)
        second = _rollout(other, seed=7, steps=12)
        # Same env, same seed again: the reset restores the simulator exactly.
        third = _rollout(env, seed=7, steps=12)
        starts = [env.reset(seed=s)[0]["object_pos"] for s in range(4)]
        obs_a, _ = env.reset(seed=1)
        obs_b, *_ = env.step(env.action_space.sample())
        env.close()
        other.close()
    unexpected = [str(w.message) for w in caught]
    assert unexpected == []
    for a, b, c in zip(first, second, third, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
            np.testing.assert_array_equal(a[key], c[key])
    # Default DR offsets the object by up to 1 cm: four seeds, four different starts.
    assert len({tuple(np.round(s, 6)) for s in starts}) == 4
    arrays = [*obs_a.values(), *obs_b.values()]
    for x, y in itertools.combinations(arrays, 2):
        assert not np.shares_memory(x, y)


def test_same_kinematics_and_limits_in_both_engines() -> None:
    kin = panda_kinematics()
    model = mujoco.MjSpec.from_string(panda_urdf_text()).compile()
    data = mujoco.MjData(model)
    client = bullet_client.BulletClient(connection_mode=pybullet.DIRECT)
    try:
        robot = client.loadURDF(str(panda_urdf_file(armature_in_links=True)), useFixedBase=True)
        names = {
            client.getJointInfo(robot, j)[1].decode(): j for j in range(client.getNumJoints(robot))
        }
        links = {
            client.getJointInfo(robot, j)[12].decode(): j for j in range(client.getNumJoints(robot))
        }
        for i, name in enumerate(ARM_JOINTS):
            info = client.getJointInfo(robot, names[name])
            np.testing.assert_allclose(model.joint(name).range, [info[8], info[9]])
            assert (info[8], info[9]) == (kin.lower[i], kin.upper[i])
        rng = np.random.default_rng(0)
        link7 = model.body("panda_link7").id
        for _ in range(5):
            q = rng.uniform(kin.lower, kin.upper)
            data.qpos[:7] = q
            mujoco.mj_forward(model, data)
            for i, name in enumerate(ARM_JOINTS):
                client.resetJointState(robot, names[name], q[i])
            tcp, _ = kin.forward(q)
            mj_tcp = data.xpos[link7] + data.xmat[link7].reshape(3, 3) @ kin.link7_to_tcp[:3, 3]
            pb_tcp = client.getLinkState(
                robot, links["panda_grasptarget"], computeForwardKinematics=True
            )[4]
            np.testing.assert_allclose(tcp, mj_tcp, atol=1e-9)
            np.testing.assert_allclose(tcp, pb_tcp, atol=1e-6)
            # Gravity model equals MuJoCo's bias force at rest.
            np.testing.assert_allclose(kin.gravity_torque(q), data.qfrc_bias[:7], atol=1e-9)
    finally:
        client.disconnect()


def test_pybullet_envs_use_private_clients() -> None:
    """Two PyBullet envs in one process have separate DIRECT clients and do not interfere."""
    a = sim_suites.make_env("push/block_forward", "pybullet")
    b = sim_suites.make_env("push/block_forward", "pybullet")
    try:
        id_a = a.backend.client._client  # type: ignore[attr-defined]
        id_b = b.backend.client._client  # type: ignore[attr-defined]
        assert id_a != id_b
        action = np.array([0.5, 0.0, -0.5, -1.0], dtype=np.float32)
        a.reset(seed=3)
        b.reset(seed=4)
        for _ in range(5):
            obs_a, *_ = a.step(action)
            b.step(-action)
        a.reset(seed=3)
        for _ in range(5):
            alone, *_ = a.step(action)
        np.testing.assert_array_equal(obs_a["tcp_pos"], alone["tcp_pos"])
    finally:
        a.close()
        b.close()
    assert not pybullet.isConnected(id_a) and not pybullet.isConnected(id_b)
