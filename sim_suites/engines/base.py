"""What every physics backend provides: the small interface the environment steps through.

A backend owns one simulator instance (a MuJoCo model/data pair, or a PyBullet client in DIRECT
mode with its own client id). It builds the robot and a `Scene`, applies per-episode physical
parameters on reset, runs the same joint-space PD law with the same gains and torque limits, and
reports joint state, body poses and contact forces. Everything above it (kinematics, IK, tasks,
monitors) is engine-independent.

Quaternions are (w, x, y, z). Units: m, rad, kg, N, N·m.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sim_suites.rendering.appearance import Appearance
from sim_suites.robot import SerialArm

#: Physics time step of both engines (s); the control period is a whole number of these.
PHYSICS_DT = 0.002
#: Force the grasp weld may transmit (N): far above any payload here, well below breaking things.
WELD_MAX_FORCE_N = 400.0
ROBOT = "robot"
TABLE = "table"


@dataclass(frozen=True)
class PhysicsParams:
    """Per-episode physical parameters, after domain randomization, drift and reality gap.

    Scales are multiplicative on the nominal values; `payload_kg` is lumped at the hand's centre
    of mass; `friction_scale` multiplies the friction of the free parts (the object and a tool,
    `sim_suites.arena.PART_ROLES`) and the drawer's slide friction; `object_mass_scale` the
    scored object's mass only (a tool keeps its own);
    `grip_force_scale` multiplies the gripper's force limit (GRIP_FORCE_N per finger);
    `contact_timeconst_s` sets the manipulated objects' contact softness.

    `object_size_scale` s scales the free task part (role "object", joint "free") uniformly:
    every collision and visual geom's size and offset × s, so the cameras see the part as the
    physics has it. Its mass is kept (only `object_mass_scale` changes mass), so the two knobs stay
    separate and a sensitivity sweep attributes an effect to size alone; its rotational inertia
    follows the geometry at that mass (× s², as I = m·(a² + b²)/12 for a box of sides a, b).
    Fixtures and the drawer are never resized (`sim_suites.instances` records the knob as not
    applied there); task goals and tolerances stay as declared.
    """

    friction_scale: float = 1.0
    object_mass_scale: float = 1.0
    link_mass_scale: float = 1.0
    joint_damping_scale: float = 1.0
    actuator_gain_scale: float = 1.0
    payload_kg: float = 0.0
    grip_force_scale: float = 1.0
    object_size_scale: float = 1.0
    #: Contact softness of the manipulated objects, s (solref time constant; 0 keeps the
    #: engine's own contacts; `sim_suites.engines.contact_softness`).
    contact_timeconst_s: float = 0.0
    #: A mobile base's floor friction, wheel slip and base mass, as scales
    #: (`sim_suites.engines.wheel_traction`; a fixed base ignores them).
    floor_friction_scale: float = 1.0
    wheel_slip_scale: float = 1.0
    base_mass_scale: float = 1.0


@dataclass(frozen=True)
class InitialState:
    """Where everything starts: arm joints (n,), finger opening per finger, body positions,
    rotations of free bodies about the vertical (rad), slide positions (m), and a mobile base's
    pose (4,): x, y (m), yaw (rad), lift (m)."""

    arm_q: np.ndarray
    finger_q: float
    body_pos: Mapping[str, np.ndarray] = field(default_factory=dict)
    slide_q: Mapping[str, float] = field(default_factory=dict)
    body_yaw: Mapping[str, float] = field(default_factory=dict)
    base_q: np.ndarray | None = None


def yaw_quat(yaw_rad: float) -> np.ndarray:
    """Unit (w, x, y, z) quaternion of a rotation by `yaw_rad` about the world z axis."""
    return np.array([np.cos(yaw_rad / 2), 0.0, 0.0, np.sin(yaw_rad / 2)])


class PhysicsBackend(Protocol):
    """The interface the environment uses; see `MujocoBackend` and `PybulletBackend`."""

    engine: str
    #: The arm standing at the origin (`sim_suites.robot.SerialArm`).
    kin: SerialArm

    def reset(self, init: InitialState, params: PhysicsParams) -> None:
        """Restore the built scene, apply `params`, place everything as in `init`."""

    def step(self, arm_cmd: np.ndarray, finger_cmd: float, substeps: int) -> None:
        """Hold PD set-points (arm (n,) rad, each finger m) for `substeps` physics steps."""

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Joint positions and velocities, (n + 2,) each: n arm joints then 2 fingers."""

    def applied_torque(self) -> np.ndarray:
        """Actuator torques/forces applied at the last physics step, (n + 2,)."""

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and quaternion (4,) of a scene body."""

    def body_velocity(self, name: str) -> np.ndarray:
        """World linear velocity (3,) of a scene body (m/s)."""

    def slide_q(self, name: str) -> float:
        """Position of a slide-jointed body along its axis (m)."""

    def finger_contact_forces(self, name: str) -> tuple[float, float]:
        """Total normal force (N) between body `name` and the left and the right finger."""

    def attach(self, name: str) -> None:
        """Weld a body to the hand at its current relative pose (assisted grasping only)."""

    def detach(self) -> None:
        """Remove the grasp weld, if any."""

    def move_body(self, name: str, pos: np.ndarray) -> None:
        """Teleport a fixed or mocap body (the hidden obstacle)."""

    def contact_forces(self) -> dict[tuple[str, str], float]:
        """Peak total normal contact force (N) per body pair over the last control step.

        Forces are read after every physics step of `step` and the largest per pair is kept, so
        a short impact between two control steps is seen (safety monitors run at physics rate).

        Reported pairs: the robot against anything, and task parts (object, tool) against
        anything but the table (an object resting on the table is not a contact event). Keys come from
        `pair_key`: ("robot", x), (body, "table") or two body names in alphabetical order.
        """

    def robot_external_force(self) -> np.ndarray:
        """The net external force on the robot (3,) N, world frame, at the physics step of the
        last control step where it was largest: the vector sum of every contact force that
        something not the robot exerts on it — what a wrist force/torque sensor or the robot's
        external-wrench estimate reads (a grip's opposing finger forces cancel; a fixture
        pressed through the hand or a held part counts)."""

    def separation(self, bodies: Sequence[str], max_m: float) -> dict[str, float]:
        """Distance (m) from the robot's collision geometry to each named body (0 if touching,
        `max_m` if farther): real geometry, not link origins."""

    def nearest(self, bodies: Sequence[str], max_m: float) -> float:
        """Distance (m) from the robot's collision geometry to the nearest of the named bodies:
        the minimum of `separation` over them, found with fewer exact queries."""

    def diverged(self) -> bool:
        """Whether the simulator reported an instability since the last reset."""

    def drive_base(self, wheel_velocity: np.ndarray, lift_m: float) -> None:
        """A mobile base's wheel velocity (3,): vx, vy in the base's frame m/s, yaw rate rad/s, and the
        torso lift's set-point (m), held from the next `step` on (`sim_suites.engines.
        wheel_traction`); a fixed base has none."""

    def base_state(self) -> tuple[np.ndarray, np.ndarray]:
        """A mobile base's joint positions (x, y, yaw, lift) and velocities, (4,) each."""

    def set_appearance(self, appearance: Appearance) -> None:
        """Lighting and colours of the episode (backends built with cameras only)."""

    def render(self, camera: str, depth: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """RGB (h, w, 3) uint8 and optional depth (h, w, 1) float32 m of a named camera."""

    def close(self) -> None:
        """Release the simulator."""


def pair_key(a: str, b: str) -> tuple[str, str]:
    """Canonical key of a contact pair: the robot first, the table last, else alphabetical."""
    if b == ROBOT or a == TABLE:
        a, b = b, a
    if a != ROBOT and b != TABLE and b < a:
        a, b = b, a
    return a, b


def pd_torque(
    q: np.ndarray,
    qd: np.ndarray,
    cmd: np.ndarray,
    kp: np.ndarray,
    kv: np.ndarray,
    limit: np.ndarray,
) -> np.ndarray:
    """The joint servo law both engines run: τ = clip(kp·(cmd − q) − kv·q̇, ±limit).

    Gravity feed-forward enters through the set-point (cmd = q* + τ_ff / kp_nominal), as in a
    position-controlled arm whose controller adds a model-based offset.

    Args:
        q, qd, cmd, kp, kv, limit: (n,) arrays in rad, rad/s, rad, N·m/rad, N·m·s/rad, N·m.
    Returns:
        (n,) torques in N·m (N for fingers).
    """
    # min(max(·)) is clip's definition, without its per-call overhead (every physics step).
    return np.minimum(np.maximum(kp * (cmd - q) - kv * qd, -limit), limit)


def quat_conj_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """conj(a) ⊗ b for (w, x, y, z) quaternions: the rotation of b expressed in a's frame."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    aw, ax, ay, az = aw, -ax, -ay, -az
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit (w, x, y, z) quaternion."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


#: An object faster than this (m/s) means the simulation blew up: the episode is an error.
DIVERGED_SPEED_MPS = 50.0
DIVERGED_REASON = "physics diverged (simulator instability)"


def physics_diverged(state_sum: float, object_speed: float, engine_diverged: bool) -> bool:
    """Whether the physics blew up: a non-finite state (`state_sum`, the sum of the robot's
    joint positions), an object faster than DIVERGED_SPEED_MPS, or an instability the engine
    reported."""
    return (
        not math.isfinite(state_sum + object_speed)
        or object_speed > DIVERGED_SPEED_MPS
        or engine_diverged
    )
