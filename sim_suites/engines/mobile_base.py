"""A mobile base in each engine: its joints, the floor's forces and the lift servo.

`MujocoMobileBase` and `PybulletMobileBase` hold what the backends need beyond the arm: where
the base and lift joints are, the per-episode floor (`WheelDrive`: friction, slip, load) and base
mass, the wheel and lift commands; every physics step each applies the same generalized forces
(`sim_suites.engines.wheel_traction`, `sim_suites.mobile_description.lift_force`).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from embodied_eval.errors import EvalError
from sim_suites.engines.base import PHYSICS_DT, InitialState, PhysicsParams
from sim_suites.engines.wheel_traction import FLOOR_FRICTION, GRAVITY_MPS2, WheelDrive
from sim_suites.mobile_description import BASE_JOINTS, LIFT_JOINT, LIFT_RANGE_M, lift_force

BASE_AND_LIFT = (*BASE_JOINTS, LIFT_JOINT)


class MobileBaseState:
    """The engine-independent part: the wheel drive, the lift set-point and the gain."""

    def __init__(self) -> None:
        self.drive = WheelDrive(0.0, FLOOR_FRICTION)
        self.lift_target = LIFT_RANGE_M[0]
        self.gain = 1.0

    def start(self, robot_mass_kg: float, params: PhysicsParams, lift_m: float) -> None:
        """A new episode: the floor and the load (the robot's mass, kg), the lift at `lift_m`."""
        self.drive = WheelDrive(
            robot_mass_kg * GRAVITY_MPS2,
            FLOOR_FRICTION * params.floor_friction_scale,
            params.wheel_slip_scale,
        )
        self.lift_target = lift_m
        self.gain = params.actuator_gain_scale

    def command(self, wheel_velocity: np.ndarray, lift_m: float) -> None:
        self.drive.wheel = np.array(wheel_velocity, dtype=float).reshape(3)
        self.lift_target = float(np.clip(lift_m, *LIFT_RANGE_M))

    def forces(self, q: list[float], qd: list[float]) -> list[float]:
        """Generalized forces on x, y, yaw, lift at joint state q, qd (4 each)."""
        fx, fy, torque = self.drive.generalized_force(qd[0], qd[1], qd[2], q[2], PHYSICS_DT)
        return [fx, fy, torque, lift_force(q[3], qd[3], self.lift_target, self.gain)]


class MobileDrive:
    """What both backends add for a mobile base: `drive_base` and `base_state` (see
    `PhysicsBackend`), through their `mobile` part (None on a fixed base)."""

    mobile: MujocoMobileBase | PybulletMobileBase | None

    def drive_base(self, wheel_velocity: np.ndarray, lift_m: float) -> None:
        """The mobile base's wheel velocity and lift set-point (see `PhysicsBackend`)."""
        if self.mobile is None:
            raise EvalError("drive_base: this robot has a fixed base", key="robot")
        self.mobile.command(wheel_velocity, lift_m)

    def base_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The mobile base's x, y, yaw, lift and their velocities (see `PhysicsBackend`)."""
        if self.mobile is None:
            raise EvalError("base_state: this robot has a fixed base", key="robot")
        return self.mobile.state()


def arm_links(link_names: dict[int, str]) -> list[int]:
    """The links of a mobile robot that `link_mass_scale` scales: the Panda's, but its mount
    (`panda_link0`, part of the lift) — not the base's or the lift's."""
    return [
        j for j, name in link_names.items() if name.startswith("panda_") and name != "panda_link0"
    ]


def _as_slice(index: np.ndarray) -> slice | np.ndarray:
    """Consecutive indices as a slice (a view, no copy), others unchanged."""
    first = int(index[0])
    if np.array_equal(index, np.arange(first, first + len(index))):
        return slice(first, first + len(index))
    return index


class MujocoMobileBase(MobileBaseState):
    """The base in a compiled MuJoCo model (forces through `qfrc_applied`)."""

    def __init__(
        self, model: mujoco.MjModel, data: Any, robot_bodies: set[int], base_body: int
    ) -> None:
        super().__init__()
        m = model
        self.data = data
        self.qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in BASE_AND_LIFT])
        self.vadr = np.array([m.jnt_dofadr[m.joint(n).id] for n in BASE_AND_LIFT])
        # Read and written every physics step: as slices when the joints lie side by side
        # (they do: the base and the lift are one chain), else by index.
        self._q_at: slice | np.ndarray = _as_slice(self.qadr)
        self._v_at: slice | np.ndarray = _as_slice(self.vadr)
        self.robot_bodies = np.array(sorted(robot_bodies))
        self.base_body = base_body

    def scale_mass(self, model: Any, params: PhysicsParams) -> None:
        """Scale the base's mass and inertia (from the nominal model, before `mj_setConst`)."""
        model.body_mass[self.base_body] *= params.base_mass_scale
        model.body_inertia[self.base_body] *= params.base_mass_scale

    def reset(self, model: Any, data: Any, init: InitialState, params: PhysicsParams) -> None:
        """Place the base and set the floor and the load (after `mj_resetData`)."""
        pose = np.asarray(init.base_q if init.base_q is not None else np.zeros(4), dtype=float)
        data.qpos[self.qadr] = pose
        self.start(float(model.body_mass[self.robot_bodies].sum()), params, float(pose[3]))

    def apply(self, data: Any) -> None:
        """Write this physics step's floor and lift forces."""
        data.qfrc_applied[self._v_at] = self.forces(
            data.qpos[self._q_at].tolist(), data.qvel[self._v_at].tolist()
        )

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.qpos[self.qadr].copy(), self.data.qvel[self.vadr].copy()


class PybulletMobileBase(MobileBaseState):
    """The base in a PyBullet client (forces in TORQUE_CONTROL mode)."""

    def __init__(self, client: Any, robot: int, joint_index: dict[str, int]) -> None:
        super().__init__()
        self.client, self.robot = client, robot
        self.joints = [joint_index[n] for n in BASE_AND_LIFT]
        self.base_link = self.joints[2]  # the yaw joint's child: the base body

    def release_motors(self) -> None:
        """PyBullet's default velocity motors would hold the joints: switch them off."""
        import pybullet

        self.client.setJointMotorControlArray(
            self.robot, self.joints, pybullet.VELOCITY_CONTROL, forces=[0.0] * 4
        )

    def reset(
        self,
        nominal: tuple[float, tuple[float, float, float]],
        init: InitialState,
        params: PhysicsParams,
    ) -> None:
        """Scale the base's mass and inertia from `nominal` (mass kg, diagonal inertia), place
        the base, set the floor and the load."""
        c = self.client
        s = params.base_mass_scale
        c.changeDynamics(
            self.robot,
            self.base_link,
            mass=nominal[0] * s,
            localInertiaDiagonal=[v * s for v in nominal[1]],
        )
        pose = np.asarray(init.base_q if init.base_q is not None else np.zeros(4), dtype=float)
        for j, value in zip(self.joints, pose, strict=True):
            c.resetJointState(self.robot, j, float(value), 0.0)
        self.release_motors()
        total = sum(
            c.getDynamicsInfo(self.robot, link)[0] for link in range(c.getNumJoints(self.robot))
        )
        self.start(float(total), params, float(pose[3]))

    def apply(self, q: list[float], qd: list[float]) -> None:
        """Write this physics step's floor and lift forces at the base and lift joints' state
        q, qd (4 each; the backend reads them with the arm's in one query)."""
        import pybullet

        self.client.setJointMotorControlArray(
            self.robot, self.joints, pybullet.TORQUE_CONTROL, forces=self.forces(q, qd)
        )

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        states = self.client.getJointStates(self.robot, self.joints)
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])
