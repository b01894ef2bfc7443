"""The robot the simulation runs: a serial arm with a parallel gripper, chosen by name.

An arm is its kinematic and gravity model (`SerialArm`), read from the robot description both
engines load, plus what the command path and the servos need from it (home posture, finger
travel, servo gains, joint acceleration limits). `arm_model` picks it by the name a protocol's
`[sim] robot` or a robot profile's `[robot] kinematics` gives: a registered name
(`embodied_eval.plugins.ARMS`: "panda", "ur5e") or "package.module:factory" with `factory()`
returning a `SerialArm`. The Panda's and the UR5e's data live in their own modules
(`sim_suites.panda_kinematics`, `sim_suites.ur5e_kinematics`).

`SerialArm` provides the robot-side computations the controller needs, identical for both
engines: forward kinematics, the geometric Jacobian, damped-least-squares IK for a
downward-pointing gripper, and gravity compensation from the *nominal* link masses (so an
unmodelled payload or a randomized link mass shows up as tracking error, as on a real arm).
Every arm joint turns about the z axis of its own frame (as in the Panda's URDF and in a
Denavit–Hartenberg description).

Units: metres, radians, kilograms, newton-metres. Arrays are float64.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embodied_eval.errors import EvalError

GRAVITY = np.array([0.0, 0.0, -9.81])
_EYE6 = np.eye(6)
#: "package.module:factory": an arm (or a profile's kinematics) given by import path.
IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def _rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _transform(xyz: np.ndarray, rpy: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = _rpy_matrix(rpy)
    out[:3, 3] = xyz
    return out


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross product of (n, 3) arrays (or (3,) broadcast); np.cross is slow on tiny arrays."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def tcp_linear_velocity(
    rots: np.ndarray, origins: np.ndarray, tcp: np.ndarray, qd: np.ndarray
) -> np.ndarray:
    """Linear TCP velocity (3,) m/s: the Jacobian's linear rows times the arm joint velocities.

    Bit for bit `SerialArm.jacobian_from_frames(...)[:3] @ qd[:n]` (column i is
    z_i × (tcp − o_i)), without building the angular rows the monitors do not need. The rows go
    into a C-ordered (3, n) array as there: the matrix product's rounding depends on the layout.

    Args:
        rots: (n, 3, 3) link rotations. origins: (n, 3) link origins, m. tcp: (3,) m.
        qd: (≥n,) joint velocities, rad/s (the first n are the arm's).
    """
    n = len(rots)
    # Rows (a_{k+1}, a_{k+2}) of the axes times rows (b_{k+2}, b_{k+1}) of the lever arms, so
    # that row k of the difference of the two halves is (a × b)_k for every joint at once.
    axes = rots[:, :, 2].T  # (3, n): z axis of every joint
    arm = (tcp - origins).T  # (3, n): joint origin → TCP
    prod = axes.take(_CROSS_FIRST, axis=0) * arm.take(_CROSS_SECOND, axis=0)
    linear = np.empty((3, n))
    np.subtract(prod[:3], prod[3:], out=linear)
    return linear @ qd[:n]


#: Row orders for `tcp_linear_velocity`'s cross products (x, y, z = rows 0, 1, 2).
_CROSS_FIRST = np.array([1, 2, 0, 2, 0, 1])
_CROSS_SECOND = np.array([2, 0, 1, 1, 2, 0])


def _vec(text: str | None, default: str = "0 0 0") -> np.ndarray:
    return np.array([float(v) for v in (text or default).split()])


@dataclass(frozen=True)
class JointInfo:
    """One URDF joint: its parent→joint transform, axis and limits."""

    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray  # (4, 4)
    axis: np.ndarray  # (3,)
    lower: float
    upper: float
    velocity: float
    effort: float


@dataclass(frozen=True)
class LinkInertial:
    """Mass (kg) and centre of mass (m, in the link frame) of one URDF link."""

    mass: float
    com: np.ndarray  # (3,)


def read_urdf(text: str) -> tuple[dict[str, JointInfo], dict[str, LinkInertial]]:
    """The joints and link inertials of a URDF document."""
    root = ET.fromstring(text)
    joints: dict[str, JointInfo] = {}
    for j in root.findall("joint"):
        origin = j.find("origin")
        limit = j.find("limit")
        axis = j.find("axis")
        joints[j.attrib["name"]] = JointInfo(
            name=j.attrib["name"],
            kind=j.attrib["type"],
            parent=j.find("parent").attrib["link"],  # type: ignore[union-attr]
            child=j.find("child").attrib["link"],  # type: ignore[union-attr]
            origin=_transform(
                _vec(origin.get("xyz") if origin is not None else None),
                _vec(origin.get("rpy") if origin is not None else None),
            ),
            axis=_vec(axis.get("xyz") if axis is not None else None, "1 0 0"),
            lower=float(limit.get("lower", 0.0)) if limit is not None else 0.0,
            upper=float(limit.get("upper", 0.0)) if limit is not None else 0.0,
            velocity=float(limit.get("velocity", 0.0)) if limit is not None else 0.0,
            effort=float(limit.get("effort", 0.0)) if limit is not None else 0.0,
        )
    inertials: dict[str, LinkInertial] = {}
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        origin = inertial.find("origin")
        mass = inertial.find("mass")
        inertials[link.attrib["name"]] = LinkInertial(
            mass=float(mass.get("value", 0.0)) if mass is not None else 0.0,
            com=_vec(origin.get("xyz") if origin is not None else None),
        )
    return joints, inertials


@dataclass(frozen=True)
class ArmLayout:
    """Which parts of a robot description make the arm, its hand and its gripper.

    Attributes:
        name: the arm's registered name ("panda", "ur5e").
        arm_joints: the arm's revolute joints, base to wrist (each turns about its frame's z).
        finger_joints: the gripper's two prismatic finger joints (coupled: one drive).
        hand_chain: the fixed joints from the last arm link to the hand link.
        tcp_joint: the fixed joint from the hand to the grasp target (TCP).
        hand_links: the links riding on the last arm link whose mass the gravity model lumps
            into it: the hand first, then the two fingers.
        home_q: the home posture (gripper pointing down), rad.
        finger_max_m: finger travel per finger, m (the gripper opening is twice this).
        arm_kp, arm_kv: joint-space PD gains of the position servos (N·m/rad, N·m·s/rad).
        finger_kp, finger_kv: the finger servo (per finger, N/m, N·s/m).
        grip_force_n: grip force per finger at grip_force_scale = 1, N.
        damping: nominal passive joint damping, N·m·s/rad (randomized by joint_damping_scale).
        acceleration_max: the joints' published acceleration limits, rad/s².
        description: the URDF text both engines load; with True, each arm joint's armature
            added to its link's inertia (for engines without joint armature).
        description_file: the same written to a file (for loaders that need a path).
        armature: rotor inertia per arm joint, kg·m². friction: Coulomb friction per joint, N·m.
        self_collision_exclude: link pairs never checked for self-collision (besides
            parent–child pairs).
    """

    name: str
    arm_joints: tuple[str, ...]
    finger_joints: tuple[str, str]
    hand_chain: tuple[str, ...]
    tcp_joint: str
    hand_links: tuple[str, str, str]
    home_q: np.ndarray
    finger_max_m: float
    arm_kp: np.ndarray
    arm_kv: np.ndarray
    finger_kp: float
    finger_kv: float
    grip_force_n: float
    damping: np.ndarray
    acceleration_max: np.ndarray
    description: Callable[[bool], str]
    description_file: Callable[[bool], Path]
    armature: np.ndarray
    friction: np.ndarray
    self_collision_exclude: tuple[tuple[str, str], ...] = ()


class SerialArm:
    """Kinematics and gravity model of an arm, read from its URDF (engine-independent).

    Args:
        layout: the arm's description and which of its joints and links are what.

    Attributes:
        n: number of arm joints. lower, upper: (n,) arm joint position limits (rad).
        vel_limit: (n,) rad/s. effort: (n,) arm torque limits (N·m). finger_effort: finger force
        limit (N). The layout's fields (home_q, finger_max_m, gains, ...) are attributes too.
    """

    def __init__(self, layout: ArmLayout) -> None:
        joints, inertials = read_urdf(layout.description(False))
        self.layout = layout
        self.name = layout.name
        self.arm_joints = layout.arm_joints
        self.finger_joints = layout.finger_joints
        self.home_q = np.asarray(layout.home_q, dtype=float)
        self.finger_max_m = layout.finger_max_m
        self.arm_kp, self.arm_kv = layout.arm_kp, layout.arm_kv
        self.finger_kp, self.finger_kv = layout.finger_kp, layout.finger_kv
        self.grip_force_n = layout.grip_force_n
        self.damping = layout.damping
        self.acceleration_max = layout.acceleration_max
        self.joints = joints
        self.arm = [joints[n] for n in layout.arm_joints]
        n = self.n = len(self.arm)
        self._eye_n = np.eye(n)
        self.lower = np.array([j.lower for j in self.arm])
        self.upper = np.array([j.upper for j in self.arm])
        self.vel_limit = np.array([j.velocity for j in self.arm])
        self.effort = np.array([j.effort for j in self.arm])
        finger = joints[layout.finger_joints[0]]
        self.finger_effort = finger.effort
        self.finger_vel_limit = finger.velocity
        # Fixed transforms from the last arm link to the hand and to the grasp target (TCP).
        hand = joints[layout.hand_chain[0]].origin
        for name in layout.hand_chain[1:]:
            hand = hand @ joints[name].origin
        self.link7_to_hand = hand  # (4, 4); "link 7": the last arm link, whatever its number
        self.link7_to_tcp = self.link7_to_hand @ joints[layout.tcp_joint].origin
        self.last_link = self.arm[-1].child
        #: Links the engines' URDF import fuses into the last arm link (fixed joints).
        self.fused_into_last = tuple(joints[name].child for name in layout.hand_chain)
        self.hand_link, self.finger_links = layout.hand_links[0], layout.hand_links[1:]
        # Link masses carried by each arm joint, lumped per moving link; the hand and fingers
        # ride on the last one. COMs are expressed in the link frame.
        masses: list[float] = []
        coms: list[np.ndarray] = []
        hand_link, *fingers = layout.hand_links
        for i, joint in enumerate(self.arm):
            li = inertials[joint.child]
            m, c = li.mass, li.com * li.mass
            if i == n - 1:
                tf = self.link7_to_hand
                for name in (hand_link, *fingers):
                    extra = inertials[name]
                    offset = np.array([0.0, 0.0, finger.origin[2, 3]])
                    local = extra.com + (offset if name in fingers else 0.0)
                    c = c + extra.mass * (tf[:3, :3] @ local + tf[:3, 3])
                    m += extra.mass
            masses.append(m)
            coms.append(c / m)
        self.link_mass = np.array(masses)  # (n,)
        self.link_com = np.array(coms)  # (n, 3)
        #: Centre of the hand's own mass in the last link's frame: where a payload is lumped.
        hand_inertial = inertials[hand_link]
        self.hand_com_in_link7 = (
            self.link7_to_hand[:3, :3] @ hand_inertial.com + self.link7_to_hand[:3, 3]
        )
        self._joint_rot = np.array([j.origin[:3, :3] for j in self.arm])
        self._joint_pos = np.array([j.origin[:3, 3] for j in self.arm])
        self._tcp_rot = self.link7_to_tcp[:3, :3]
        self._tcp_pos = self.link7_to_tcp[:3, 3]
        self.home_tcp_rot = self.forward(self.home_q)[1]

    def link_frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World frames of the arm's links for joint angles q (robot base at the world origin).

        Args:
            q: (n,) joint angles, rad.
        Returns:
            rotations (n, 3, 3) and origins (n, 3) in m.
        """
        n = self.n
        cos, sin = np.cos(q)[:, None], np.sin(q)[:, None]
        base = self._joint_rot
        # Joint-local rotations R0_i · Rz(q_i) for all joints at once (every axis is +z).
        local = np.empty((n, 3, 3))
        local[:, :, 0] = base[:, :, 0] * cos + base[:, :, 1] * sin
        local[:, :, 1] = base[:, :, 1] * cos - base[:, :, 0] * sin
        local[:, :, 2] = base[:, :, 2]
        rots = np.empty((n, 3, 3))
        origins = np.empty((n, 3))
        rot = np.eye(3)
        pos = np.zeros(3)
        for i in range(n):
            pos = pos + rot @ self._joint_pos[i]
            rot = rot @ local[i]
            rots[i] = rot
            origins[i] = pos
        return rots, origins

    def forward(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP (grasp target) pose for arm joint angles q.

        Returns:
            position (3,) in m and rotation matrix (3, 3).
        """
        rots, origins = self.link_frames(q)
        return self.tcp_from_frames(rots[-1], origins[-1])

    def tcp_from_frames(self, rot7: np.ndarray, pos7: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP pose from the last arm link's frame."""
        return pos7 + rot7 @ self._tcp_pos, rot7 @ self._tcp_rot

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """Geometric Jacobian of the TCP: rows vx, vy, vz, wx, wy, wz.

        Returns:
            (6, n) array; linear rows in m/rad, angular rows in rad/rad.
        """
        rots, origins = self.link_frames(q)
        tcp = self.tcp_from_frames(rots[-1], origins[-1])[0]
        return self.jacobian_from_frames(rots, origins, tcp)

    @staticmethod
    def jacobian_from_frames(rots: np.ndarray, origins: np.ndarray, tcp: np.ndarray) -> np.ndarray:
        axes = rots[:, :, 2]
        jac = np.empty((6, len(rots)))
        jac[:3] = cross3(axes, tcp - origins).T
        jac[3:] = axes.T
        return jac

    def gravity_torque(self, q: np.ndarray, payload_kg: float = 0.0) -> np.ndarray:
        """Joint torques that hold the arm still against gravity (nominal masses).

        τ_i = a_i · Σ_{j ≥ i} (c_j − o_i) × w_j with w_j = −m_j g, the upward force holding link j.

        Args:
            q: (n,) joint angles, rad. payload_kg: extra mass at the hand, kg (0 = nominal model).
        Returns:
            (n,) torques in N·m.
        """
        rots, origins = self.link_frames(q)
        return self.gravity_from_frames(rots, origins, payload_kg)

    def gravity_from_frames(
        self, rots: np.ndarray, origins: np.ndarray, payload_kg: float = 0.0
    ) -> np.ndarray:
        """`gravity_torque` from link frames already computed by `link_frames` (n,) N·m."""
        n = self.n
        coms = np.einsum("kij,kj->ki", rots, self.link_com) + origins  # (n, 3)
        masses = self.link_mass
        if payload_kg:
            coms = np.vstack([coms, rots[-1] @ self.hand_com_in_link7 + origins[-1]])
            masses = np.append(masses, payload_kg)
        weights = -masses[:, None] * GRAVITY  # (m, 3)
        # Suffix sums over the links each joint carries.
        moment = np.cumsum(cross3(coms, weights)[::-1], axis=0)[::-1][:n]
        force = np.cumsum(weights[::-1], axis=0)[::-1][:n]
        tau = moment - cross3(origins, force)
        return np.einsum("ij,ij->i", tau, rots[:, :, 2])

    def solve_ik(
        self,
        target_pos: np.ndarray,
        target_rot: np.ndarray,
        q_init: np.ndarray,
        *,
        iterations: int = 3,
        damping: float = 0.03,
    ) -> np.ndarray:
        """Damped-least-squares IK for a TCP pose, warm-started from `q_init`.

        A null-space term pulls a redundant arm's elbow toward its home posture (for a 6-joint
        arm the null space is empty and the term vanishes).

        Args:
            target_pos: (3,) m. target_rot: (3, 3). q_init: (n,) rad.
            iterations: Gauss–Newton steps (targets move < 1 cm per control step, so few are needed).
            damping: λ of the damped pseudo-inverse.
        Returns:
            (n,) joint angles within the URDF limits.
        """
        q = q_init.copy()
        eye6, eye_n = _EYE6, self._eye_n
        for _ in range(iterations):
            rots, origins = self.link_frames(q)
            pos, rot = self.tcp_from_frames(rots[-1], origins[-1])
            err = np.empty(6)
            err[:3] = target_pos - pos
            # Orientation error ½ Σ_k r_k × r*_k over the frame axes (small-angle rotation vector).
            err[3:] = 0.5 * cross3(rot.T, target_rot.T).sum(axis=0)
            jac = self.jacobian_from_frames(rots, origins, pos)
            jt = jac.T
            pinv = jt @ np.linalg.inv(jac @ jt + damping**2 * eye6)
            null = eye_n - pinv @ jac
            dq = pinv @ err + null @ (0.2 * (self.home_q - q))
            q = np.clip(q + dq, self.lower, self.upper)
        return q


def arm_target(name: str) -> str:
    """The "module:factory" of the arm `name` names: a registered arm
    (`embodied_eval.plugins.ARMS`) or an import path; EvalError for anything else."""
    from embodied_eval.plugins import ARMS

    if name in ARMS:
        return ARMS[name]
    if IMPORT_PATH.fullmatch(name):
        return name
    raise EvalError(
        f"robot: {name!r} is not a known arm ({', '.join(sorted(ARMS))}) or "
        "'package.module:factory'",
        key="robot",
    )


@functools.lru_cache(maxsize=8)
def arm_model(name: str = "panda") -> SerialArm:
    """The shared, read-only model of the arm `name` names (see the module docstring; built
    once per process); EvalError for an unknown name or a factory that gives no arm."""
    from embodied_eval.plugins import resolve

    arm = resolve(arm_target(name))()
    if not isinstance(arm, SerialArm):
        raise EvalError(
            f"robot: {name!r} gave a {type(arm).__name__}, not a sim_suites.robot.SerialArm",
            key="robot",
        )
    return arm
