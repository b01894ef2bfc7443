"""Domain randomization and energy on a third-party Gymnasium environment, where it exposes them.

A Gymnasium MuJoCo environment (`env.unwrapped.model` is a `mujoco.MjModel`) exposes the physics
the protocol's `[randomization]` knobs name, so they are applied through the model before reset:

- `friction_scale`: every geom's sliding friction (`geom_friction[:, 0]`) × s;
- `link_mass_scale`: every body's mass (`body_mass`) × s;
- `joint_damping_scale`: every degree of freedom's damping (`dof_damping`) × s;
- `actuator_gain_scale`: every actuator's gain (`actuator_gainprm[:, 0]`) × s.

Each s is drawn uniformly from the knob's [low, high] with a generator seeded from the episode
seed, so a retry or another executor replays the same values. Knobs with no generic meaning on an
arbitrary model (`object_mass_scale`, `object_xy_offset_m`, `sensor_noise_std`, ...) and every
knob on an environment without a MuJoCo model are recorded as not applied, with the reason.

Energy: with a MuJoCo model, mechanical actuator work E = Σ_steps Σ_a |f_a · v_a| · dt (actuator
force times actuator velocity, per control step of dt simulated seconds), in Wh.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Knob -> (model field, column or None for the whole array) applied on MuJoCo models.
MUJOCO_KNOBS: dict[str, tuple[str, int | None]] = {
    "friction_scale": ("geom_friction", 0),
    "link_mass_scale": ("body_mass", None),
    "joint_damping_scale": ("dof_damping", None),
    "actuator_gain_scale": ("actuator_gainprm", 0),
}


def mujoco_model(env: Any) -> Any | None:
    """The `mujoco.MjModel` behind a Gymnasium environment, or None."""
    model = getattr(getattr(env, "unwrapped", env), "model", None)
    return model if model is not None and hasattr(model, "geom_friction") else None


def apply_randomization(
    env: Any, ranges: Mapping[str, tuple[float, float]], rng: np.random.Generator
) -> dict[str, Any]:
    """Scale the model's parameters by values drawn from `ranges`; returns what was done.

    Returns:
        `{"applied": {knob: value}, "not_applied": {knob: reason}}`.
    """
    model = mujoco_model(env)
    applied: dict[str, float] = {}
    not_applied: dict[str, str] = {}
    for knob in sorted(ranges):
        low, high = ranges[knob]
        if model is None:
            not_applied[knob] = "the environment exposes no MuJoCo model"
            continue
        if knob not in MUJOCO_KNOBS:
            not_applied[knob] = "no generic equivalent on an arbitrary MuJoCo model"
            continue
        name, column = MUJOCO_KNOBS[knob]
        value = float(rng.uniform(low, high))
        array = getattr(model, name)
        if column is None:
            array *= value
        else:
            array[:, column] *= value
        applied[knob] = round(value, 12)
    return {"applied": applied, "not_applied": not_applied}


def step_energy_j(env: Any, dt: float) -> float:
    """Mechanical actuator work of the last control step, J: Σ_a |force_a · velocity_a| · dt."""
    data = getattr(getattr(env, "unwrapped", env), "data", None)
    if data is None or not hasattr(data, "actuator_force"):
        return 0.0
    return float(np.sum(np.abs(data.actuator_force * data.actuator_velocity))) * dt
