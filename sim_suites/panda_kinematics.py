"""The Franka Panda: a 7-DoF arm with a parallel gripper, as shipped in `pybullet_data`.

Both engines load the same description, `sim_suites.panda_description.panda_urdf_text` (the
`pybullet_data` URDF with identified link dynamics and finger pads); `panda_kinematics` reads the
joint tree and link masses from that description once (`sim_suites.robot.SerialArm`). This
module holds what the Panda's description cannot carry: its home posture, finger travel, servo
gains, grip force and the datasheet's joint acceleration limits. It is registered as "panda"
(`embodied_eval.plugins.ARMS`).
"""

from __future__ import annotations

import functools

import numpy as np

from sim_suites.panda_description import (
    ARMATURE_KGM2,
    JOINT_DAMPING_NMS,
    JOINT_FRICTION_NM,
    SELF_COLLISION_EXCLUDE,
    panda_urdf_file,
    panda_urdf_text,
)
from sim_suites.robot import ArmLayout, SerialArm

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
#: Home posture: elbow up, gripper pointing down, fingers along the world y axis.
HOME_Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, np.pi / 4])
#: Finger travel per finger (m); the gripper opening is twice this.
FINGER_MAX_M = 0.04

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
#: Franka Panda joint acceleration limits, rad/s² (Franka's datasheet, "Robot and interface
#: specifications": q̈_max per joint). The velocity limits are the URDF's (the datasheet's).
PANDA_ACCELERATION_MAX = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])

PANDA_LAYOUT = ArmLayout(
    name="panda",
    arm_joints=ARM_JOINTS,
    finger_joints=FINGER_JOINTS,
    hand_chain=("panda_joint8", "panda_hand_joint"),
    tcp_joint="panda_grasptarget_hand",
    hand_links=("panda_hand", "panda_leftfinger", "panda_rightfinger"),
    home_q=HOME_Q,
    finger_max_m=FINGER_MAX_M,
    arm_kp=ARM_KP,
    arm_kv=ARM_KV,
    finger_kp=FINGER_KP,
    finger_kv=FINGER_KV,
    grip_force_n=GRIP_FORCE_N,
    damping=ARM_DAMPING,
    acceleration_max=PANDA_ACCELERATION_MAX,
    description=panda_urdf_text,
    description_file=panda_urdf_file,
    armature=ARMATURE_KGM2,
    friction=JOINT_FRICTION_NM,
    self_collision_exclude=SELF_COLLISION_EXCLUDE,
)


class PandaKinematics(SerialArm):
    """Kinematics and gravity model of the Panda, read from its URDF (engine-independent)."""

    def __init__(self) -> None:
        super().__init__(PANDA_LAYOUT)


@functools.lru_cache(maxsize=1)
def panda_kinematics() -> PandaKinematics:
    """The shared, read-only kinematic model (parsed once per process); the "panda" arm."""
    return PandaKinematics()
