"""One description of a UR5e with a parallel gripper for both engines, written from Universal
Robots' published numbers.

The arm (`ur5e_urdf_text`) is built from the UR5e's Denavit–Hartenberg parameters, link masses
and centres of mass as Universal Robots publishes them ("DH Parameters for calculations of
kinematics and dynamics", Universal Robots support article, UR5e table):

    a = (0, −0.425, −0.3922, 0, 0, 0) m        d = (0.1625, 0, 0, 0.1333, 0.0997, 0.0996) m
    α = (π/2, 0, 0, π/2, −π/2, 0) rad          mass = (3.761, 8.058, 2.846, 1.37, 1.3, 0.365) kg
    centre of mass in DH frame i: (0, −0.02561, 0.00193), (0.2125, 0, 0.11336), (0.15, 0, 0.0265),
    (0, −0.0018, 0.01634), (0, 0.0018, 0.01634), (0, 0, −0.001159) m

and the e-Series limits of `ur_description` (Universal Robots' ROS description) and the UR5e
datasheet: every joint ±2π rad except the elbow (±π), 180 °/s (π rad/s) on every joint, joint
torques 150, 150, 150, 28, 28, 28 N·m (the "max joint torques" article). Joint names are
`ur_robot_driver`'s (shoulder_pan_joint … wrist_3_joint), so the twin publishes what a UR does.

Each URDF link frame is the DH frame i − 1 turned by the joint angle (L_i = F_{i−1} Rz(q_i)), so
every arm joint turns about its own z axis, and the joint from link i to i + 1 has the fixed
origin Tz(d_i) Tx(a_i) Rx(α_i): xyz = (a_i, 0, d_i), rpy = (α_i, 0, 0). The published centres of
mass (DH frame i) are carried into link frame i by the same transform. UR publishes no inertia
tensors; each link's is that of a solid cylinder of its mass along the link (as `ur_description`
approximates them). The collision shapes are cylinders along the links, with the shoulder's
0.138 m and the elbow's −0.131 m lateral offsets that the DH form folds into d4.

The gripper is a parallel two-finger gripper of the Robotiq 2F-85 class on the flange: 85 mm
stroke (42.5 mm per finger), 0.925 kg in all, fingers moving at 150 mm/s between the jaws
(Robotiq 2F-85 datasheet); its grip force is set to 20 N per finger (40 N between the jaws,
within the 2F-85's 20–235 N), as on the Panda. The fingers are boxes 22 mm wide, 16 mm thick and
50 mm long (the 2F-85's fingertip width; thick enough that the closed pair pushes a block with a
32 mm face) whose inner faces meet when closed, so the opening is the sum of the two finger
joints; the grasp target (TCP) is 0.125 m from the flange, at the fingertips' centre.

Joint parameters a URDF cannot carry are here too, as for the Panda: `ARMATURE_KGM2`,
`JOINT_DAMPING_NMS`, `JOINT_FRICTION_NM` (modelling choices of the Panda model's order).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np

ARM_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
LINKS = (
    "ur5e_shoulder_link",
    "ur5e_upper_arm_link",
    "ur5e_forearm_link",
    "ur5e_wrist_1_link",
    "ur5e_wrist_2_link",
    "ur5e_wrist_3_link",
)
FINGER_JOINTS = ("ur5e_finger_joint1", "ur5e_finger_joint2")
HAND, LEFT_FINGER, RIGHT_FINGER = "ur5e_hand", "ur5e_left_finger", "ur5e_right_finger"

#: UR5e Denavit–Hartenberg parameters (Universal Robots, see the module docstring): m, m, rad.
DH_A = (0.0, -0.425, -0.3922, 0.0, 0.0, 0.0)
DH_D = (0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996)
DH_ALPHA = (np.pi / 2, 0.0, 0.0, np.pi / 2, -np.pi / 2, 0.0)
#: Link masses, kg, and centres of mass in DH frame i, m (Universal Robots).
MASS_KG = (3.761, 8.058, 2.846, 1.37, 1.3, 0.365)
COM_DH_M = (
    (0.0, -0.02561, 0.00193),
    (0.2125, 0.0, 0.11336),
    (0.15, 0.0, 0.0265),
    (0.0, -0.0018, 0.01634),
    (0.0, 0.0018, 0.01634),
    (0.0, 0.0, -0.001159),
)
#: e-Series limits (`ur_description`, UR5e datasheet): rad, rad/s, N·m.
LOWER = (-2 * np.pi, -2 * np.pi, -np.pi, -2 * np.pi, -2 * np.pi, -2 * np.pi)
UPPER = (2 * np.pi, 2 * np.pi, np.pi, 2 * np.pi, 2 * np.pi, 2 * np.pi)
VELOCITY = (np.pi,) * 6
EFFORT = (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)

#: Collision cylinders per link (link frame): (radius, length, centre xyz, along "x" or "z").
_SHAPES: dict[str, tuple[float, float, tuple[float, float, float], str]] = {
    "ur5e_shoulder_link": (0.06, 0.11, (0.0, 0.0, 0.145), "z"),
    "ur5e_upper_arm_link": (0.054, 0.33, (-0.2125, 0.0, 0.138), "x"),
    "ur5e_forearm_link": (0.04, 0.30, (-0.1961, 0.0, 0.007), "x"),
    "ur5e_wrist_1_link": (0.045, 0.08, (0.0, 0.0, 0.11), "z"),
    "ur5e_wrist_2_link": (0.045, 0.08, (0.0, 0.0, 0.08), "z"),
    "ur5e_wrist_3_link": (0.045, 0.04, (0.0, 0.0, 0.07), "z"),
}

#: Gripper (Robotiq 2F-85 class, see the module docstring): body, fingers, TCP, m / kg / N.
GRIPPER_MASS_KG = 0.925
FINGER_MASS_KG = 0.1
FINGER_INERTIA_KGM2 = 1e-4
FINGER_TRAVEL_M = 0.0425
FINGER_SPEED_MPS = 0.075
FINGER_FORCE_N = 20.0
HAND_HALF_M = (0.03, 0.045, 0.045)
FINGER_JOINT_Z_M = 0.09
FINGER_HALF_M = (0.011, 0.008, 0.025)
TCP_Z_M = 0.125

#: Rotor inertia (kg·m²), viscous damping (N·m·s/rad) and Coulomb friction (N·m) per joint.
ARMATURE_KGM2 = np.full(6, 0.1)
JOINT_DAMPING_NMS = np.full(6, 1.0)
JOINT_FRICTION_NM = np.array([0.5, 0.5, 0.5, 0.2, 0.2, 0.2])

#: Link pairs never checked for self-collision: the wrist's neighbours two apart (their
#: housings touch in ordinary postures) and the two fingers (they meet when closed empty).
SELF_COLLISION_EXCLUDE: tuple[tuple[str, str], ...] = (
    ("ur5e_forearm_link", "ur5e_wrist_2_link"),
    ("ur5e_wrist_1_link", "ur5e_wrist_3_link"),
    ("ur5e_forearm_link", "ur5e_wrist_3_link"),
    (LEFT_FINGER, RIGHT_FINGER),
)


def _rx(alpha: float) -> np.ndarray:
    c, s = np.cos(alpha), np.sin(alpha)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _f(values: tuple[float, ...] | np.ndarray) -> str:
    return " ".join(f"{float(v):.9g}" for v in values)


def _inertial(mass: float, com: np.ndarray, inertia: tuple[float, float, float]) -> str:
    ixx, iyy, izz = inertia
    return (
        f'<inertial><origin xyz="{_f(com)}" rpy="0 0 0"/><mass value="{mass:.9g}"/>'
        f'<inertia ixx="{ixx:.9g}" iyy="{iyy:.9g}" izz="{izz:.9g}" ixy="0" ixz="0" iyz="0"/>'
        "</inertial>"
    )


def _cylinder(radius: float, length: float, centre: tuple[float, ...], along: str) -> str:
    rpy = "0 1.57079633 0" if along == "x" else "0 0 0"
    return (
        f'<collision><origin xyz="{_f(centre)}" rpy="{rpy}"/>'
        f'<geometry><cylinder radius="{radius:.9g}" length="{length:.9g}"/></geometry></collision>'
    )


def _box(half: tuple[float, ...], centre: tuple[float, ...]) -> str:
    return (
        f'<collision><origin xyz="{_f(centre)}" rpy="0 0 0"/>'
        f'<geometry><box size="{_f(tuple(2 * h for h in half))}"/></geometry></collision>'
    )


def link_inertia(i: int) -> tuple[np.ndarray, tuple[float, float, float]]:
    """Centre of mass (link frame, m) and cylinder inertia (kg·m², about it, link axes) of arm
    link i (0-based): the published centre of mass carried from DH frame i into the link frame,
    and a solid cylinder of the link's mass and collision size about the link's own axis."""
    origin_rot, origin_pos = _rx(DH_ALPHA[i]), np.array([DH_A[i], 0.0, DH_D[i]])
    com = origin_pos + origin_rot @ np.array(COM_DH_M[i])
    radius, length, _, along = _SHAPES[LINKS[i]]
    m = MASS_KG[i]
    axial, transverse = m * radius**2 / 2, m * (3 * radius**2 + length**2) / 12
    inertia = (axial, transverse, transverse) if along == "x" else (transverse, transverse, axial)
    return com, inertia


@functools.lru_cache(maxsize=2)
def ur5e_urdf_text(armature_in_links: bool = False) -> str:
    """The UR5e and its gripper as URDF (see the module docstring).

    Args:
        armature_in_links: add each arm joint's armature to its link's izz (for engines without
            joint armature), as a disc about the joint axis.
    """
    parts = ['<robot name="ur5e">']
    parts.append(
        '<link name="ur5e_base_link">'
        + _inertial(4.0, np.array([0.0, 0.0, 0.04]), (0.01, 0.01, 0.01))
        + _cylinder(0.075, 0.08, (0.0, 0.0, 0.04), "z")
        + "</link>"
    )
    parent = "ur5e_base_link"
    origin_xyz, origin_rpy = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    for i, (joint, link) in enumerate(zip(ARM_JOINTS, LINKS, strict=True)):
        com, (ixx, iyy, izz) = link_inertia(i)
        if armature_in_links:
            extra = float(ARMATURE_KGM2[i])
            ixx, iyy, izz = ixx + extra / 2, iyy + extra / 2, izz + extra
        radius, length, centre, along = _SHAPES[link]
        parts.append(
            f'<link name="{link}">'
            + _inertial(MASS_KG[i], com, (ixx, iyy, izz))
            + _cylinder(radius, length, centre, along)
            + "</link>"
        )
        parts.append(
            f'<joint name="{joint}" type="revolute"><parent link="{parent}"/>'
            f'<child link="{link}"/><origin xyz="{_f(origin_xyz)}" rpy="{_f(origin_rpy)}"/>'
            f'<axis xyz="0 0 1"/><limit lower="{LOWER[i]:.9g}" upper="{UPPER[i]:.9g}" '
            f'effort="{EFFORT[i]:.9g}" velocity="{VELOCITY[i]:.9g}"/></joint>'
        )
        parent = link
        origin_xyz, origin_rpy = (DH_A[i], 0.0, DH_D[i]), (DH_ALPHA[i], 0.0, 0.0)
    # The gripper's body on the flange (DH frame 6), its two fingers and the TCP.
    hand_mass = GRIPPER_MASS_KG - 2 * FINGER_MASS_KG
    hx, hy, hz = HAND_HALF_M
    hand_inertia = (
        hand_mass * (hy**2 + hz**2) / 3,
        hand_mass * (hx**2 + hz**2) / 3,
        hand_mass * (hx**2 + hy**2) / 3,
    )
    parts.append(
        f'<link name="{HAND}">'
        + _inertial(hand_mass, np.array([0.0, 0.0, hz]), hand_inertia)
        + _box(HAND_HALF_M, (0.0, 0.0, hz))
        + "</link>"
    )
    parts.append(
        f'<joint name="ur5e_hand_joint" type="fixed"><parent link="{parent}"/>'
        f'<child link="{HAND}"/><origin xyz="{_f(origin_xyz)}" rpy="{_f(origin_rpy)}"/></joint>'
    )
    _, fy, fz = FINGER_HALF_M
    for joint, link, sign in (
        (FINGER_JOINTS[0], LEFT_FINGER, 1.0),
        (FINGER_JOINTS[1], RIGHT_FINGER, -1.0),
    ):
        centre = (0.0, sign * fy, fz)
        inertia = (FINGER_INERTIA_KGM2,) * 3
        parts.append(
            f'<link name="{link}">'
            + _inertial(FINGER_MASS_KG, np.array(centre), inertia)  # type: ignore[arg-type]
            + _box(FINGER_HALF_M, centre)
            + "</link>"
        )
        parts.append(
            f'<joint name="{joint}" type="prismatic"><parent link="{HAND}"/>'
            f'<child link="{link}"/><origin xyz="0 0 {FINGER_JOINT_Z_M:.9g}" rpy="0 0 0"/>'
            f'<axis xyz="0 {sign:.0f} 0"/><limit lower="0" upper="{FINGER_TRAVEL_M:.9g}" '
            f'effort="{FINGER_FORCE_N:.9g}" velocity="{FINGER_SPEED_MPS:.9g}"/></joint>'
        )
    # A massless TCP link (an engine gives a link without an inertial 1 kg otherwise).
    parts.append(
        '<link name="ur5e_tcp">' + _inertial(0.0, np.zeros(3), (0.0, 0.0, 0.0)) + "</link>"
    )
    parts.append(
        f'<joint name="ur5e_tcp_joint" type="fixed"><parent link="{HAND}"/>'
        f'<child link="ur5e_tcp"/><origin xyz="0 0 {TCP_Z_M:.9g}" rpy="0 0 0"/></joint>'
    )
    parts.append("</robot>")
    return "\n".join(parts)


@functools.lru_cache(maxsize=2)
def ur5e_urdf_file(armature_in_links: bool = False) -> Path:
    """`ur5e_urdf_text` written to a private temporary file (for loaders that need a path)."""
    folder = Path(tempfile.mkdtemp(prefix="ur5e-urdf-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "ur5e.urdf"
    path.write_text(ur5e_urdf_text(armature_in_links), encoding="utf-8")
    return path
