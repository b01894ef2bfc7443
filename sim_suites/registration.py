"""Gymnasium registration: one versioned ID per (family, engine), the standard suites' IDs, and
`make_env`.

IDs look like `embodied/PickPlace-MuJoCo-v0`. A released ID never changes behaviour; a change
to a family's task, scoring or dynamics gets a new version. `gymnasium.make(id, task_id=...)`
picks the instance (default: the family's first instance). A family's IDs are registered when
the family is (`sim_suites.tasks.catalog.register_family`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from embodied_eval.errors import EvalError
from embodied_eval.plugins import resolve
from sim_suites.env import PandaTaskEnv
from sim_suites.faults import FaultRequest
from sim_suites.mobile_env import MobileTaskEnv
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.tasks.catalog import (
    ENGINE_NAMES,
    FAMILIES,
    NAMESPACE,
    TABLE_ENV,
    VERSION,
    env_id,
    register_family_envs,
    task_family,
)
from sim_suites.variations import RealityGap

#: Either environment: the fixed Panda's or the mobile manipulator's.
TaskEnv = PandaTaskEnv | MobileTaskEnv

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
    return [env_id(f, e) for f in FAMILIES for e in ENGINE_NAMES]


def register_envs() -> None:
    """Register all IDs with Gymnasium (idempotent)."""
    for family in FAMILIES.values():
        register_family_envs(family)
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
    """The environment of a task instance: its family's environment class (`Family.env`) built
    with `settings`, the environment's keyword arguments. A family with its own environment (the
    mobile base) carries its own arm, the Panda: another `robot` is refused."""
    family = task_family(task_id)
    if family.env != TABLE_ENV:
        robot = settings.pop("robot", "panda")
        if robot != "panda":
            raise EvalError(
                f"robot: the mobile families run the Panda on its base, not {robot!r}", key="robot"
            )
    env_class = resolve(family.env)
    env: TaskEnv = env_class(task_id, engine, **settings)
    return env
