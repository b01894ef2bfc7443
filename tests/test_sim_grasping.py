"""Contact grasping: friction holds the part, so a slippery or heavy part is lost; the assisted
weld holds anything and is recorded; instances already done at reset are redrawn."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from embodied_eval.certificate.inputs import refuse_undeclared_assistance
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import Episode
from sim_suites.env import PandaTaskEnv
from sim_suites.families.pick_place import CUBE_HALF
from sim_suites.grasping import GRASP_CONTACT_N, both_fingers_press

#: What defeats each grasping family's friction grip, far beyond what the grip can carry:
#: the pads (friction 0.8) hold at most 0.8 · 2 · 20 N = 32 N; a 6 kg cube (60 × nominal)
#: weighs 58.9 N, a 3.6 kg peg (45 ×) 35.3 N — a 3 kg cube (29.4 N) is within reach of a careful
#: grasp; a drawer whose slide friction is 30 × 2 N = 60 N needs more than the 2 × 20 N · μ =
#: 40 N the pads can pull with.
DEFEAT = {
    "pick_place/cube_center": {"object_mass_scale": (60.0, 60.0)},
    "peg_insert/peg_center": {"object_mass_scale": (45.0, 45.0)},
    "drawer_open/drawer_center": {"friction_scale": (30.0, 30.0)},
}


def play(task_id: str, engine: str, ranges: dict, grasp: str) -> tuple[bool, int, str]:
    """(success, steps grasped, recorded grasp mode) of the reference policy."""
    from sim_suites.policies import load_policy

    env = PandaTaskEnv(task_id, engine, randomization=ranges, grasp=grasp)
    try:
        policy = load_policy("sim_suites.policies:scripted", task_id)
        policy.reset(0)
        obs, _ = env.reset(seed=3)
        held = 0
        while True:
            obs, _, terminated, truncated, info = env.step(policy.act(obs))
            held += int(obs["grasped"][0])
            if terminated or truncated:
                break
        return bool(info["is_success"]), held, env.episode_summary()["control"]["grasp_mode"]
    finally:
        env.close()


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
@pytest.mark.parametrize("task_id", sorted(DEFEAT))
def test_contact_grasp_holds_nominally_loses_what_friction_cannot_carry(
    task_id: str, engine: str
) -> None:
    ok, held, mode = play(task_id, engine, {}, "contact")
    assert ok and held > 20 and mode == "contact"
    lost, _, _ = play(task_id, engine, DEFEAT[task_id], "contact")
    assert not lost
    # The weld of the assisted mode carries the same part: it was the weld that held it.
    assisted, held, mode = play(task_id, engine, DEFEAT[task_id], "assisted")
    assert assisted and held > 20 and mode == "assisted"


def test_grasped_needs_both_fingers_pressing() -> None:
    assert both_fingers_press(GRASP_CONTACT_N, GRASP_CONTACT_N)
    assert not both_fingers_press(GRASP_CONTACT_N, 0.0)
    assert not both_fingers_press(0.0, 25.0)


def test_instances_done_at_reset_are_redrawn_and_recorded() -> None:
    # push/block_forward starts at (0.40, 0) with its goal at (0.56, 0), tolerance 2.5 cm. A
    # placement offset of exactly 16 cm in a uniform direction θ lands the block within the
    # tolerance of the goal when 2·0.16·sin(|θ|/2) ≤ 0.025, i.e. |θ| ≤ 0.156 rad: 5 % of draws.
    env = PandaTaskEnv(
        "push/block_forward", "mujoco", randomization={"object_xy_offset_m": (0.16, 0.16)}
    )
    try:
        redrawn = []
        for seed in range(80):
            _, info = env.reset(seed=seed)
            assert info["quality"] < 0.8  # never starts done
            redrawn.extend(info["invalid_draws"])
        assert 1 <= len(redrawn) <= 12
        for draw in redrawn:
            dx, dy = draw["object_xy_offset_m"]
            assert math.hypot(0.40 + dx - 0.56, dy) <= 0.025
    finally:
        env.close()


def test_certify_refuses_assisted_episodes_unless_declared() -> None:
    protocol = load_protocol(example_protocol_path())
    assert protocol.sim_grasp == "contact"

    def ep(mode: str, side: str = "sim") -> Episode:
        return Episode(
            episode_id=f"e-{mode}-{side}",
            pair_id="p",
            side=side,
            family="pick_place",
            task_id="pick_place/cube_center",
            seed=1,
            policy="p",
            engine="mujoco" if side == "sim" else "ros2",
            quality=1.0,
            target_quality=0.8,
            control={"grasp_mode": mode},
        )

    refuse_undeclared_assistance(protocol, [ep("contact"), ep("assisted", "real")])
    with pytest.raises(EvalError, match=r'declare it; set \[sim\] grasp = "assisted"'):
        refuse_undeclared_assistance(protocol, [ep("contact"), ep("assisted")])
    declared = dataclasses.replace(protocol, sim_grasp="assisted")
    refuse_undeclared_assistance(declared, [ep("assisted")])


def test_object_yaw_turns_the_part() -> None:
    env = PandaTaskEnv(
        "pick_place/cube_center", "pybullet", randomization={"object_yaw_rad": (0.3, 0.3)}
    )
    try:
        obs, _ = env.reset(seed=0)
        # (w, x, y, z) of a 0.3 rad turn about z: (cos 0.15, 0, 0, sin 0.15).
        np.testing.assert_allclose(
            obs["object_quat"], [math.cos(0.15), 0.0, 0.0, math.sin(0.15)], atol=1e-6
        )
        assert obs["object_pos"][2] == pytest.approx(CUBE_HALF, abs=1e-3)
    finally:
        env.close()


def test_one_description_reaches_both_engines() -> None:
    from sim_suites.engines.factory import make_backend
    from sim_suites.tasks import make_task

    scene = make_task("pick_place/cube_center").scene()
    mj = make_backend("mujoco", scene)
    pb = make_backend("pybullet", scene)
    try:
        m = mj.model  # type: ignore[attr-defined]
        # Gaz et al. 2019: link 1 4.970684 kg, link 4 3.587895 kg; MuJoCo fuses the 0.73 kg hand
        # into link 7 (0.735522 kg): 1.465522 kg.
        assert m.body("panda_link1").mass[0] == pytest.approx(4.970684)
        assert m.body("panda_link4").mass[0] == pytest.approx(3.587895)
        assert m.body("panda_link7").mass[0] == pytest.approx(0.735522 + 0.73)
        arm_dofs = [m.joint(f"panda_joint{i}").dofadr[0] for i in range(1, 8)]
        np.testing.assert_allclose(m.dof_armature[arm_dofs], 0.1)
        np.testing.assert_allclose(
            m.dof_frictionloss[arm_dofs], [0.5, 0.5, 0.5, 0.5, 0.2, 0.2, 0.2]
        )
        c, robot = pb.client, pb.robot  # type: ignore[attr-defined]
        names = {c.getJointInfo(robot, j)[12].decode(): j for j in range(c.getNumJoints(robot))}
        assert c.getDynamicsInfo(robot, names["panda_link1"])[0] == pytest.approx(4.970684)
        assert c.getDynamicsInfo(robot, names["panda_hand"])[0] == pytest.approx(0.73)
        # Every robot link has friction 1.0 (a combined changeDynamics call used to leave 0.5).
        assert {c.getDynamicsInfo(robot, j)[1] for j in range(-1, c.getNumJoints(robot))} == {1.0}
    finally:
        mj.close()
        pb.close()
