"""The protocol's randomization knobs on a suite's MuJoCo model, where they map onto it.

A suite builds its own scene, so only some of the protocol's `[randomization]` knobs have a
counterpart in its model. On a suite's model they act as follows, each value s drawn uniformly
from the knob's [low, high] with the episode's physics generator, in knob-name order:

- `friction_scale`: every geom's sliding friction (`geom_friction[:, 0]`) × s;
- `link_mass_scale`: the mass of every body of the robot (the subtree of its root body:
  `right_arm_base_link` on Meta-World's Sawyer, `robot0_base` on LIBERO's Panda) × s;
- `joint_damping_scale`: the damping of every robot degree of freedom × s;
- `actuator_gain_scale`: every actuator's gain × s (`gainprm[0]`, and `biasprm[1]` with it so a
  position servo's set-point is unchanged): Meta-World's gripper servos' kp; on LIBERO the arm's
  torque motors (torque per command) and the gripper servos' kp;
- `object_mass_scale`: the task's main object × s (Meta-World: the body of its main geom;
  LIBERO: every body of the first object the task names that the robot can move);
- `lighting_scale`: every light's diffuse colour × s (what a camera sees; physics never reads it).

Every other knob is recorded as not applied, with the reason: the suite places its objects itself
from the scene seed (placement offset, yaw, size), it has no sensor-noise, latency or control-rate
model of ours, and knobs this module does not know have no counterpart in the suite's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: The body whose subtree is the robot in a Meta-World model.
ROBOT_ROOT_BODY = "right_arm_base_link"

#: The model arrays the knobs scale (`nominal_model` / `restore_model` keep and put them back).
SCALED_FIELDS = (
    "geom_friction", "body_mass", "dof_damping", "actuator_gainprm", "actuator_biasprm",
    "light_diffuse",
)  # fmt: skip

#: Why a knob with no counterpart is not applied.
NOT_APPLIED_REASONS: dict[str, str] = {
    "object_xy_offset_m": "the suite places its objects itself from the scene seed",
    "object_yaw_rad": "the suite places its objects itself from the scene seed",
    "object_size_scale": "the suite's objects have fixed sizes",
    "sensor_noise_std": "the suite's observations are used as it returns them",
    "action_latency_steps": "the suite applies each action at the step it is given",
    "actuator_delay_s": "the suite's own controller takes each action at the step it is given",
    "actuator_bandwidth_hz": "the suite's own controller sets its actuators directly",
    "contact_timeconst_s": "the suite's contacts are kept as it ships them",
    "control_rate_hz": "the suite steps at its own fixed rate",
    "grip_force_scale": "the gripper's force is set by actuator_gain_scale on this model",
    "colour_jitter": "the suite's materials are kept as it ships them",
}
UNKNOWN_KNOB_REASON = "no counterpart in the suite's model"


def robot_bodies(model: Any, root_body: str = ROBOT_ROOT_BODY) -> list[int]:
    """Ids of the bodies in the subtree of `root_body` (the root included)."""
    import mujoco

    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, root_body)
    if root < 0:
        return []
    inside = {int(root)}
    for body in range(int(root) + 1, model.nbody):
        if int(model.body_parentid[body]) in inside:
            inside.add(body)
    return sorted(inside)


def main_object_body(suite_env: Any) -> int | None:
    """The body of the task's main object (the suite's `_get_id_main_object` geom), or None."""
    try:
        geom = int(suite_env._get_id_main_object())
    except Exception:
        return None
    return int(suite_env.model.geom_bodyid[geom]) if 0 <= geom < suite_env.model.ngeom else None


def nominal_model(model: Any) -> dict[str, np.ndarray]:
    """Copies of the model arrays the knobs scale, to put back before the next episode's draw."""
    return {name: np.array(getattr(model, name), copy=True) for name in SCALED_FIELDS}


def restore_model(model: Any, nominal: Mapping[str, np.ndarray]) -> None:
    """Put the arrays `nominal_model` kept back into the model (in place)."""
    for name, values in nominal.items():
        getattr(model, name)[...] = values


def apply_suite_randomization(
    suite_env: Any, ranges: Mapping[str, tuple[float, float]], rng: np.random.Generator
) -> dict[str, Any]:
    """Scale a Meta-World model's parameters by values drawn from `ranges` (module docstring).

    Args:
        suite_env: Meta-World's own environment object (with `.model`), before its reset.
        ranges: knob → (low, high), the protocol's `[randomization]`.
        rng: the episode's physics generator.

    Returns:
        `{"applied": {knob: value}, "not_applied": {knob: reason}}`.
    """
    obj = main_object_body(suite_env)
    return randomize_suite_model(
        suite_env.model,
        ranges,
        rng,
        robot_root=ROBOT_ROOT_BODY,
        objects=None if obj is None else [obj],
    )


def randomize_suite_model(
    model: Any,
    ranges: Mapping[str, tuple[float, float]],
    rng: np.random.Generator,
    *,
    robot_root: str,
    objects: list[int] | None,
) -> dict[str, Any]:
    """Scale a suite's `mujoco.MjModel` by values drawn from `ranges` (see module docstring).

    Args:
        model: the suite's model, before its reset.
        ranges: knob → (low, high), the protocol's `[randomization]`.
        rng: the episode's physics generator (one draw per applied knob, in knob-name order).
        robot_root: the body whose subtree is the robot.
        objects: the bodies of the task's main object (None: the task names none).

    Returns:
        `{"applied": {knob: value}, "not_applied": {knob: reason}}`.
    """
    robot = robot_bodies(model, robot_root)
    robot_dofs = [d for d in range(model.nv) if int(model.dof_bodyid[d]) in set(robot)]
    obj = objects or None
    applied: dict[str, float] = {}
    not_applied: dict[str, str] = {}
    for knob in sorted(ranges):
        low, high = ranges[knob]
        if knob == "object_mass_scale" and obj is None:
            not_applied[knob] = "the task names no main object"
            continue
        if knob in ("link_mass_scale", "joint_damping_scale") and not robot:
            not_applied[knob] = f"the model has no body {robot_root!r}"
            continue
        if knob not in SCALERS:
            not_applied[knob] = NOT_APPLIED_REASONS.get(knob, UNKNOWN_KNOB_REASON)
            continue
        value = float(rng.uniform(low, high))
        SCALERS[knob](model, value, robot, robot_dofs, obj)
        applied[knob] = round(value, 12)
    return {"applied": applied, "not_applied": not_applied}


def _friction(model: Any, s: float, *_: Any) -> None:
    model.geom_friction[:, 0] *= s


def _link_mass(model: Any, s: float, robot: list[int], *_: Any) -> None:
    model.body_mass[robot] *= s


def _damping(model: Any, s: float, _robot: list[int], dofs: list[int], *_: Any) -> None:
    model.dof_damping[dofs] *= s


def _gain(model: Any, s: float, *_: Any) -> None:
    model.actuator_gainprm[:, 0] *= s
    model.actuator_biasprm[:, 1] *= s


def _object_mass(model: Any, s: float, _r: list[int], _d: list[int], obj: list[int] | None) -> None:
    model.body_mass[obj] *= s


def _lighting(model: Any, s: float, *_: Any) -> None:
    model.light_diffuse[:] *= s


SCALERS = {
    "friction_scale": _friction,
    "link_mass_scale": _link_mass,
    "joint_damping_scale": _damping,
    "actuator_gain_scale": _gain,
    "object_mass_scale": _object_mass,
    "lighting_scale": _lighting,
}
