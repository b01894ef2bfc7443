"""The UR5e with a parallel gripper: a 6-DoF arm, registered as "ur5e".

Its description (`sim_suites.ur5e_description`) is written from Universal Robots' published DH
parameters, masses and limits; `ur5e_kinematics` reads the joint tree and link masses from it
once (`sim_suites.robot.SerialArm`). This module holds what the description cannot carry: the
home posture, the servo gains and the joint acceleration limits.
"""

from __future__ import annotations

import functools

import numpy as np

from sim_suites.robot import ArmLayout, SerialArm
from sim_suites.ur5e_description import (
    ARM_JOINTS,
    ARMATURE_KGM2,
    FINGER_FORCE_N,
    FINGER_JOINTS,
    FINGER_TRAVEL_M,
    HAND,
    JOINT_DAMPING_NMS,
    JOINT_FRICTION_NM,
    LEFT_FINGER,
    RIGHT_FINGER,
    SELF_COLLISION_EXCLUDE,
    ur5e_urdf_file,
    ur5e_urdf_text,
)

#: Home posture: the arm turned to face +x, gripper pointing down with its fingers along the
#: world y axis, the TCP where the Panda's home puts it (0.4635 m in front of the base, 0.4012 m
#: up; solved with this model's IK, rounded to 0.1 mrad).
HOME_Q = np.array([2.8499, -1.6789, 1.5748, -1.4666, -1.5708, -1.8625])
#: Joint-space PD gains of the position servos (N·m/rad, N·m·s/rad; fingers N/m, N·s/m): the
#: Panda's for the shoulder and elbow, its wrist gains on the wrist.
ARM_KP = np.array([800.0, 800.0, 600.0, 150.0, 150.0, 60.0])
ARM_KV = np.array([60.0, 60.0, 45.0, 8.0, 8.0, 3.0])
FINGER_KP = 2000.0
FINGER_KV = 20.0
#: Joint acceleration limits, rad/s²: Universal Robots publishes none per joint; this is the
#: conservative lab choice the `ur_robot_driver` profile carries too.
ACCELERATION_MAX = np.full(6, 5.0)

UR5E_LAYOUT = ArmLayout(
    name="ur5e",
    arm_joints=ARM_JOINTS,
    finger_joints=FINGER_JOINTS,
    hand_chain=("ur5e_hand_joint",),
    tcp_joint="ur5e_tcp_joint",
    hand_links=(HAND, LEFT_FINGER, RIGHT_FINGER),
    home_q=HOME_Q,
    finger_max_m=FINGER_TRAVEL_M,
    arm_kp=ARM_KP,
    arm_kv=ARM_KV,
    finger_kp=FINGER_KP,
    finger_kv=FINGER_KV,
    grip_force_n=FINGER_FORCE_N,
    damping=JOINT_DAMPING_NMS,
    acceleration_max=ACCELERATION_MAX,
    description=ur5e_urdf_text,
    description_file=ur5e_urdf_file,
    armature=ARMATURE_KGM2,
    friction=JOINT_FRICTION_NM,
    self_collision_exclude=SELF_COLLISION_EXCLUDE,
)


@functools.lru_cache(maxsize=1)
def ur5e_kinematics() -> SerialArm:
    """The shared, read-only UR5e model (parsed once per process); the "ur5e" arm."""
    return SerialArm(UR5E_LAYOUT)
