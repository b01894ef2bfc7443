"""Which physics engines exist, and how to build one for a scene."""

from __future__ import annotations

from embodied_eval.errors import EvalError
from sim_suites.arena import Scene
from sim_suites.engines.base import PhysicsBackend
from sim_suites.robot import SerialArm, arm_model
from sim_suites.robot_profiles import PANDA, RobotProfile

ENGINES = ("mujoco", "pybullet")


def check_engine(engine: str) -> str:
    """`engine` if it is one of ENGINES, else an EvalError naming them."""
    if engine not in ENGINES:
        raise EvalError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}", key="engine")
    return engine


def make_backend(
    engine: str,
    scene: Scene,
    image_size: tuple[int, int] | None = None,
    arm: SerialArm | None = None,
    profile: RobotProfile = PANDA,
) -> PhysicsBackend:
    """Build the physics backend of `engine` ("mujoco" or "pybullet") for `scene` with `arm`
    (default: the Panda) standing at the origin.

    With `image_size` (height, width) the backend also gets visual meshes, lights and cameras;
    `profile` is the robot (`sim_suites.robot_profiles`: the fixed Panda by default).
    """
    check_engine(engine)
    arm = arm if arm is not None else arm_model("panda")
    if engine == "mujoco":
        from sim_suites.engines.mujoco_backend import MujocoBackend

        return MujocoBackend(scene, arm, image_size=image_size, profile=profile)
    from sim_suites.engines.pybullet_backend import PybulletBackend

    return PybulletBackend(scene, arm, image_size=image_size, profile=profile)
