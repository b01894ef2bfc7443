"""Gymnasium registration: one versioned ID per (family, engine), and `make_env`.

IDs look like `embodied/PickPlace-MuJoCo-v0`. A released ID never changes behaviour; a change
to a family's task, scoring or dynamics gets a new version. `gymnasium.make(id, task_id=...)`
picks the instance (default: the family's first instance).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from embodied_eval.errors import EvalError
from sim_suites.env import PandaTaskEnv
from sim_suites.faults import FaultRequest
from sim_suites.mobile_env import MobileTaskEnv
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.variations import RealityGap

NAMESPACE = "embodied"
VERSION = 0
FAMILY_NAMES = {
    "pick_place": "PickPlace",
    "push": "Push",
    "drawer_open": "DrawerOpen",
    "peg_insert": "PegInsert",
    "tool_use": "ToolUse",
    "mobile_pick_place": "MobilePickPlace",
}
#: The environment of each family whose robot is not the fixed Panda (`PandaTaskEnv`).
FAMILY_ENTRY_POINTS = {"mobile_pick_place": "sim_suites.mobile_env:MobileTaskEnv"}
#: Either environment: the fixed Panda's or the mobile manipulator's.
TaskEnv = PandaTaskEnv | MobileTaskEnv
ENGINE_NAMES = {"mujoco": "MuJoCo", "pybullet": "PyBullet"}


def env_id(family: str, engine: str) -> str:
    """The Gymnasium ID of a (family, engine) pair."""
    return f"{NAMESPACE}/{FAMILY_NAMES[family]}-{ENGINE_NAMES[engine]}-v{VERSION}"


#: Gymnasium IDs of the standard suites as the harness runs them (`gymnasium.make(id,
#: task_id="metaworld/reach-v3", randomization={...})`; the suite's package must be installed).
SUITE_IDS = {
    "metaworld": f"{NAMESPACE}/MetaWorld-v{VERSION}",
    "libero": f"{NAMESPACE}/Libero-v{VERSION}",
}
SUITE_ENTRY_POINTS = {
    "metaworld": "sim_suites.suites.meta_world:MetaWorldTaskEnv",
    "libero": "sim_suites.suites.libero_suite:LiberoTaskEnv",
}


def registered_ids() -> list[str]:
    """Every ID this package registers, in a stable order."""
    return [env_id(f, e) for f in FAMILY_NAMES for e in ENGINE_NAMES]


def register_envs() -> None:
    """Register all IDs with Gymnasium (idempotent)."""
    for family in FAMILY_NAMES:
        for engine in ENGINE_NAMES:
            name = env_id(family, engine)
            if name in gym.registry:
                continue
            gym.register(
                id=name,
                entry_point=FAMILY_ENTRY_POINTS.get(family, "sim_suites.env:PandaTaskEnv"),
                kwargs={"family": family, "engine": engine},
            )
    for suite, name in SUITE_IDS.items():
        if name not in gym.registry:
            gym.register(id=name, entry_point=SUITE_ENTRY_POINTS[suite])


def make_env(
    task_id: str,
    engine: str = "mujoco",
    *,
    reality_gap: RealityGap | None = None,
    randomization: Mapping[str, Sequence[float]] | None = None,
    drift: Mapping[str, Any] | None = None,
    safety: SafetyLimits | None = None,
    faults: Iterable[str | FaultRequest] = (),
    max_steps: int = 400,
    target_quality: float | None = None,
    qc_tolerance_m: float | None = None,
    observation_mode: str = "state",
) -> TaskEnv:
    """Build the bare environment (no wrappers) for one task instance, e.g. for the twin robot.

    The returned env steps at a fixed control rate: `env.control_dt` seconds of simulated time per
    `step` (50 Hz unless the control rate is randomized or drifted). A `reality_gap` adds the
    twin's deliberate physics offsets. Pass `randomization={}` for no domain randomization.
    `observation_mode` "rgb" or "rgbd" gives camera observations (see `sim_suites.rendering`).
    """
    return task_env(
        task_id,
        engine,
        randomization=randomization,
        drift=drift,
        reality_gap=reality_gap,
        safety=safety,
        faults=faults,
        max_steps=max_steps,
        target_quality=target_quality,
        qc_tolerance_m=qc_tolerance_m,
        observation_mode=observation_mode,
    )


def task_env(task_id: str, engine: str = "mujoco", **settings: Any) -> TaskEnv:
    """The environment of a task instance: `MobileTaskEnv` for a mobile family, else
    `PandaTaskEnv`, built with `settings` (their shared keyword arguments)."""
    from sim_suites.tasks import family_of

    if family_of(task_id) in FAMILY_ENTRY_POINTS:
        robot = settings.pop("robot", "panda")
        if robot != "panda":
            raise EvalError(
                f"robot: the mobile families run the Panda on its base, not {robot!r}", key="robot"
            )
        return MobileTaskEnv(task_id, engine, **settings)
    return PandaTaskEnv(task_id, engine, **settings)
