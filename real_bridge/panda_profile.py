"""The Franka Panda's profile defaults: its joint names, limits and home posture.

`real_bridge.robot_profile.RobotSpec` defaults to these (the twin plays a Panda); the
FR3's profile (`profiles/franka_ros2.toml`) gives its own. The values are Franka's datasheet's,
the same as the Panda description the simulation loads (`sim_suites.panda_description`).
"""

from __future__ import annotations

PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
PANDA_GRIPPER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
PANDA_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
PANDA_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
PANDA_VELOCITY = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
PANDA_ACCELERATION = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)
#: Home: elbow up, gripper pointing down (`sim_suites.panda_kinematics.HOME_Q`).
PANDA_HOME = (0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785398)
