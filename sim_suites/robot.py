"""The robot: a 7-DoF Franka Panda with a parallel gripper, as shipped in `pybullet_data`.

Both engines load the same description, `sim_suites.panda_description.panda_urdf_text` (the
`pybullet_data` URDF with identified link dynamics and finger pads). This module reads the
joint tree and link masses from that description once and provides the robot-side computations the controller needs,
identical for both engines: forward kinematics, the geometric Jacobian, damped-least-squares IK
for a downward-pointing gripper, and gravity compensation from the *nominal* link masses (so an
unmodelled payload or a randomized link mass shows up as tracking error, as on a real arm).

Units: metres, radians, kilograms, newton-metres. Arrays are float64.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim_suites.panda_description import JOINT_DAMPING_NMS, panda_urdf_text

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
#: Home posture: elbow up, gripper pointing down, fingers along the world y axis.
HOME_Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, np.pi / 4])
#: Finger travel per finger (m); the gripper opening is twice this.
FINGER_MAX_M = 0.04
GRAVITY = np.array([0.0, 0.0, -9.81])
_EYE6 = np.eye(6)
_EYE7 = np.eye(7)

#: Joint-space PD gains of the position servos (N·m/rad, N·m·s/rad; fingers N/m, N·s/m).
ARM_KP = np.array([800.0, 800.0, 600.0, 600.0, 150.0, 150.0, 60.0])
ARM_KV = np.array([60.0, 60.0, 45.0, 45.0, 8.0, 8.0, 3.0])
#: Finger servo (per finger, coupled): stiff enough that a closed command saturates at the grip
#: force on any part here (2000 N/m × ≥ 1.2 cm > 20 N), so the gripper is force-limited.
FINGER_KP = 2000.0
FINGER_KV = 20.0
#: Grip force per finger (N) at grip_force_scale = 1: the URDF finger effort limit (20 N), i.e.
#: 40 N between the jaws, the order of the Franka Hand's 70 N continuous grasp force.
GRIP_FORCE_N = 20.0
#: Nominal passive joint damping (N·m·s/rad), randomized by `joint_damping_scale`.
ARM_DAMPING = JOINT_DAMPING_NMS


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

    Bit for bit `PandaKinematics.jacobian_from_frames(...)[:3] @ qd[:7]` (column i is
    z_i × (tcp − o_i)), without building the angular rows the monitors do not need. The rows go
    into a C-ordered (3, 7) array as there: the matrix product's rounding depends on the layout.

    Args:
        rots: (7, 3, 3) link rotations. origins: (7, 3) link origins, m. tcp: (3,) m.
        qd: (≥7,) joint velocities, rad/s (the first 7 are the arm's).
    """
    # Rows (a_{k+1}, a_{k+2}) of the axes times rows (b_{k+2}, b_{k+1}) of the lever arms, so
    # that row k of the difference of the two halves is (a × b)_k for every joint at once.
    axes = rots[:, :, 2].T  # (3, 7): z axis of every joint
    arm = (tcp - origins).T  # (3, 7): joint origin → TCP
    prod = axes.take(_CROSS_FIRST, axis=0) * arm.take(_CROSS_SECOND, axis=0)
    linear = np.empty((3, 7))
    np.subtract(prod[:3], prod[3:], out=linear)
    return linear @ qd[:7]


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


class PandaKinematics:
    """Kinematics and gravity model of the Panda, read from the URDF (engine-independent).

    Attributes:
        lower, upper: (7,) arm joint position limits (rad). vel_limit: (7,) rad/s.
        effort: (7,) arm torque limits (N·m). finger_effort: finger force limit (N).
    """

    def __init__(self, urdf_path: Path | None = None) -> None:
        root = (
            ET.parse(urdf_path).getroot()
            if urdf_path is not None
            else ET.fromstring(panda_urdf_text())
        )
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
        self.joints = joints
        self.arm = [joints[n] for n in ARM_JOINTS]
        self.lower = np.array([j.lower for j in self.arm])
        self.upper = np.array([j.upper for j in self.arm])
        self.vel_limit = np.array([j.velocity for j in self.arm])
        self.effort = np.array([j.effort for j in self.arm])
        self.finger_effort = joints[FINGER_JOINTS[0]].effort
        self.finger_vel_limit = joints[FINGER_JOINTS[0]].velocity
        # Fixed transforms from link7 to the hand and to the grasp target (TCP).
        self.link7_to_hand = (
            joints["panda_joint8"].origin @ joints["panda_hand_joint"].origin
        )  # (4, 4)
        self.link7_to_tcp = self.link7_to_hand @ joints["panda_grasptarget_hand"].origin
        # Link masses carried by each arm joint, lumped per moving link i (1..7); the hand and
        # fingers ride on link 7. COMs are expressed in the link-i frame.
        masses: list[float] = []
        coms: list[np.ndarray] = []
        for i in range(1, 8):
            li = inertials[f"panda_link{i}"]
            m, c = li.mass, li.com * li.mass
            if i == 7:
                for name, tf in (
                    ("panda_hand", self.link7_to_hand),
                    ("panda_leftfinger", self.link7_to_hand),
                    ("panda_rightfinger", self.link7_to_hand),
                ):
                    extra = inertials[name]
                    offset = np.array([0.0, 0.0, joints[FINGER_JOINTS[0]].origin[2, 3]])
                    local = extra.com + (offset if "finger" in name else 0.0)
                    c = c + extra.mass * (tf[:3, :3] @ local + tf[:3, 3])
                    m += extra.mass
            masses.append(m)
            coms.append(c / m)
        self.link_mass = np.array(masses)  # (7,)
        self.link_com = np.array(coms)  # (7, 3)
        #: Centre of the hand's own mass in the link-7 frame: where a payload is lumped.
        hand = inertials["panda_hand"]
        self.hand_com_in_link7 = self.link7_to_hand[:3, :3] @ hand.com + self.link7_to_hand[:3, 3]
        self._joint_rot = np.array([j.origin[:3, :3] for j in self.arm])
        self._joint_pos = np.array([j.origin[:3, 3] for j in self.arm])
        self._tcp_rot = self.link7_to_tcp[:3, :3]
        self._tcp_pos = self.link7_to_tcp[:3, 3]
        self.home_tcp_rot = self.forward(HOME_Q)[1]

    def link_frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World frames of links 1..7 for arm joint angles q (robot base at the world origin).

        Args:
            q: (7,) joint angles, rad.
        Returns:
            rotations (7, 3, 3) and origins (7, 3) in m.
        """
        cos, sin = np.cos(q)[:, None], np.sin(q)[:, None]
        base = self._joint_rot
        # Joint-local rotations R0_i · Rz(q_i) for all joints at once (every axis is +z).
        local = np.empty((7, 3, 3))
        local[:, :, 0] = base[:, :, 0] * cos + base[:, :, 1] * sin
        local[:, :, 1] = base[:, :, 1] * cos - base[:, :, 0] * sin
        local[:, :, 2] = base[:, :, 2]
        rots = np.empty((7, 3, 3))
        origins = np.empty((7, 3))
        rot = np.eye(3)
        pos = np.zeros(3)
        for i in range(7):
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
        return self.tcp_from_frames(rots[6], origins[6])

    def tcp_from_frames(self, rot7: np.ndarray, pos7: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return pos7 + rot7 @ self._tcp_pos, rot7 @ self._tcp_rot

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """Geometric Jacobian of the TCP: rows vx, vy, vz, wx, wy, wz.

        Returns:
            (6, 7) array; linear rows in m/rad, angular rows in rad/rad.
        """
        rots, origins = self.link_frames(q)
        tcp = self.tcp_from_frames(rots[6], origins[6])[0]
        return self.jacobian_from_frames(rots, origins, tcp)

    @staticmethod
    def jacobian_from_frames(rots: np.ndarray, origins: np.ndarray, tcp: np.ndarray) -> np.ndarray:
        axes = rots[:, :, 2]
        jac = np.empty((6, 7))
        jac[:3] = cross3(axes, tcp - origins).T
        jac[3:] = axes.T
        return jac

    def gravity_torque(self, q: np.ndarray, payload_kg: float = 0.0) -> np.ndarray:
        """Joint torques that hold the arm still against gravity (nominal masses).

        τ_i = a_i · Σ_{j ≥ i} (c_j − o_i) × w_j with w_j = −m_j g, the upward force holding link j.

        Args:
            q: (7,) joint angles, rad. payload_kg: extra mass at the hand, kg (0 = nominal model).
        Returns:
            (7,) torques in N·m.
        """
        rots, origins = self.link_frames(q)
        return self.gravity_from_frames(rots, origins, payload_kg)

    def gravity_from_frames(
        self, rots: np.ndarray, origins: np.ndarray, payload_kg: float = 0.0
    ) -> np.ndarray:
        """`gravity_torque` from link frames already computed by `link_frames` (7,) N·m."""
        coms = np.einsum("kij,kj->ki", rots, self.link_com) + origins  # (7, 3)
        masses = self.link_mass
        if payload_kg:
            coms = np.vstack([coms, rots[6] @ self.hand_com_in_link7 + origins[6]])
            masses = np.append(masses, payload_kg)
        weights = -masses[:, None] * GRAVITY  # (n, 3)
        # Suffix sums over the links each joint carries.
        moment = np.cumsum(cross3(coms, weights)[::-1], axis=0)[::-1][:7]
        force = np.cumsum(weights[::-1], axis=0)[::-1][:7]
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

        A null-space term pulls the elbow toward HOME_Q so the redundant joint stays put.

        Args:
            target_pos: (3,) m. target_rot: (3, 3). q_init: (7,) rad.
            iterations: Gauss–Newton steps (targets move < 1 cm per control step, so few are needed).
            damping: λ of the damped pseudo-inverse.
        Returns:
            (7,) joint angles within the URDF limits.
        """
        q = q_init.copy()
        eye6, eye7 = _EYE6, _EYE7
        for _ in range(iterations):
            rots, origins = self.link_frames(q)
            pos, rot = self.tcp_from_frames(rots[6], origins[6])
            err = np.empty(6)
            err[:3] = target_pos - pos
            # Orientation error ½ Σ_k r_k × r*_k over the frame axes (small-angle rotation vector).
            err[3:] = 0.5 * cross3(rot.T, target_rot.T).sum(axis=0)
            jac = self.jacobian_from_frames(rots, origins, pos)
            jt = jac.T
            pinv = jt @ np.linalg.inv(jac @ jt + damping**2 * eye6)
            null = eye7 - pinv @ jac
            dq = pinv @ err + null @ (0.2 * (HOME_Q - q))
            q = np.clip(q + dq, self.lower, self.upper)
        return q


@functools.lru_cache(maxsize=1)
def panda_kinematics() -> PandaKinematics:
    """The shared, read-only kinematic model (parsed once per process)."""
    return PandaKinematics()
