"""The robot part of a robot profile: kind, joints, limits, workspace, home (`[robot]`), and the
harness's loop and judge (`[loop]`). No ROS imports; `real_bridge.bridge_config` loads them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.plugins import ARMS
from real_bridge.panda_profile import (
    PANDA_ACCELERATION,
    PANDA_GRIPPER_JOINTS,
    PANDA_HOME,
    PANDA_JOINTS,
    PANDA_LOWER,
    PANDA_UPPER,
    PANDA_VELOCITY,
)

#: Robot kinds a profile may declare; only "twin" accepts the oracle judge.
ROBOT_KINDS = ("twin", "franka", "ur", "other")
#: Judges of real episodes (see `real_bridge.judges`).
JUDGES = ("technician", "detector", "oracle")

#: A profile's `[robot] kinematics` names its arm as the simulation's `[sim] robot` does: a
#: registered arm (`embodied_eval.plugins.ARMS`: "panda", "ur5e") or a lab's own "module:factory"
#: returning a `sim_suites.robot.SerialArm`. The harness uses it for the TCP (workspace box, TCP
#: speed of homing, the retreat's straight lift) and, through the adapter (`real_bridge.
#: observation.adapter_for`), for the reference policies' observations, IK and gripper.
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class RobotSpec:
    """What the harness knows about the robot: its kind, joints, limits and workspace.

    Every command (and a policy's whole action chunk before any of it is sent) is checked
    against these (`real_bridge.command_check`).

    Attributes:
        kind: "twin", "franka", "ur" or "other" (only "twin" accepts the oracle judge).
        kinematics: the arm: a name in `embodied_eval.plugins.ARMS` ("panda": the Panda model
            the twin and the FR3 share; "ur5e") or "module:factory"; the harness uses it for
            the TCP and the reference policies' Cartesian actions. "" for none (joint-space
            policies only, no workspace box).
        arm_joints: the joint_trajectory_controller's joints, in command order.
        gripper_joints: the gripper controller's joints ("" topic → unused).
        position_lower / position_upper: joint position limits, rad.
        velocity_max: joint speed limits, rad/s; acceleration_max: rad/s².
        workspace_min / workspace_max: the box the TCP must stay in, m (base frame); empty
            tuples disable the check (no kinematics).
        home: the homing posture, rad (one per arm joint).
        gripper_open: the gripper joints' open position (m per finger), sent before homing so
            nothing held is dragged along.
        home_tolerance_rad: homing is done when the arm has come to rest within this of `home`
            on every joint, rad. A worn arm, or one carrying a tool its controller's model does
            not know, settles short of home under gravity (the twin with the protocol's day-14
            drift on soft gains: up to ~0.1 rad on the shoulder and elbow).
        retreat_m: before homing, a TCP below the home posture's TCP is lifted straight up by up
            to this, m (also after a homing trajectory that came to rest away from home);
            0 disables it. Needs kinematics.
    """

    kind: str = "twin"
    kinematics: str = "panda"
    arm_joints: tuple[str, ...] = PANDA_JOINTS
    gripper_joints: tuple[str, ...] = PANDA_GRIPPER_JOINTS
    position_lower: tuple[float, ...] = PANDA_LOWER
    position_upper: tuple[float, ...] = PANDA_UPPER
    velocity_max: tuple[float, ...] = PANDA_VELOCITY
    acceleration_max: tuple[float, ...] = PANDA_ACCELERATION
    workspace_min: tuple[float, ...] = (0.1, -0.6, -0.05)
    workspace_max: tuple[float, ...] = (0.9, 0.6, 0.8)
    home: tuple[float, ...] = PANDA_HOME
    gripper_open: float = 0.04
    home_tolerance_rad: float = 0.15
    retreat_m: float = 0.10

    def __post_init__(self) -> None:
        if self.kind not in ROBOT_KINDS:
            raise EvalError(
                f"robot.kind: {self.kind!r} is not one of {', '.join(ROBOT_KINDS)}",
                key="robot.kind",
            )
        if self.kinematics not in ("", *ARMS) and not _IMPORT_PATH.fullmatch(self.kinematics):
            raise EvalError(
                f"robot.kinematics: {self.kinematics!r} is not one of "
                f"{', '.join(sorted(ARMS))}, '' (none) or 'package.module:factory'",
                key="robot.kinematics",
            )
        n = len(self.arm_joints)
        if n == 0:
            raise EvalError("robot.arm_joints: name at least one joint", key="robot.arm_joints")
        for name in ("position_lower", "position_upper", "velocity_max", "acceleration_max"):
            if len(getattr(self, name)) != n:
                raise EvalError(
                    f"robot.{name}: expected {n} values (one per arm joint)", key=f"robot.{name}"
                )
        if not 0.0 < self.home_tolerance_rad <= 0.5:
            raise EvalError(
                f"robot.home_tolerance_rad: {self.home_tolerance_rad!r} is not in (0, 0.5] rad",
                key="robot.home_tolerance_rad",
            )
        if not 0.0 <= self.retreat_m <= 0.3:
            raise EvalError(
                f"robot.retreat_m: {self.retreat_m!r} is not in [0, 0.3] m", key="robot.retreat_m"
            )
        if self.home and len(self.home) != n:
            raise EvalError(f"robot.home: expected {n} values", key="robot.home")
        if any(lo >= hi for lo, hi in zip(self.position_lower, self.position_upper, strict=True)):
            raise EvalError(
                "robot.position_lower: each lower limit must be below its upper limit",
                key="robot.position_lower",
            )
        if any(not v > 0 for v in (*self.velocity_max, *self.acceleration_max)):
            raise EvalError(
                "robot.velocity_max/acceleration_max: limits must be positive",
                key="robot.velocity_max",
            )
        if len(self.workspace_min) != len(self.workspace_max) or len(self.workspace_min) not in (
            0,
            3,
        ):
            raise EvalError(
                "robot.workspace_min/max: give 3 values each (x, y, z in m) or none",
                key="robot.workspace_min",
            )
        if any(lo >= hi for lo, hi in zip(self.workspace_min, self.workspace_max, strict=True)):
            raise EvalError(
                "robot.workspace_min: must be below workspace_max on every axis",
                key="robot.workspace_min",
            )
        if self.workspace_min and self.kinematics == "":
            raise EvalError(
                "robot.workspace_min: a workspace box needs kinematics (set kinematics or "
                "leave the box empty)",
                key="robot.workspace_min",
            )


def robot_kinematics(robot: RobotSpec) -> Any | None:
    """The arm model the profile's `robot.kinematics` names (`sim_suites.robot.SerialArm`; None
    for ""); EvalError when its factory cannot be imported or gives no arm."""
    if not robot.kinematics:
        return None
    from sim_suites.robot_core import arm_model

    return arm_model(robot.kinematics)


@dataclass(frozen=True)
class CameraSpec:
    """The scene camera's calibrated pose in the robot's base frame (`[camera]`), which the
    harness's success detector needs to place what the camera sees (its intrinsics come from the
    camera's CameraInfo). Empty tuples: not calibrated (the detector then uses the tracker only).

    Attributes:
        position_m: the camera's optical centre, m (x, y, z).
        look_at_m: a point on its optical axis, m; the image's up direction is the base frame's +z.
    """

    position_m: tuple[float, ...] = ()
    look_at_m: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.position_m) != len(self.look_at_m) or len(self.position_m) not in (0, 3):
            raise EvalError(
                "camera.position_m/look_at_m: give 3 values each (x, y, z in m) or none",
                key="camera.position_m",
            )
        if self.position_m:
            axis = [b - a for a, b in zip(self.position_m, self.look_at_m, strict=True)]
            horizontal = (axis[0] ** 2 + axis[1] ** 2) ** 0.5
            if horizontal < 1e-6:
                raise EvalError(
                    "camera.look_at_m: the optical axis must not be vertical (the image's up "
                    "direction is +z)",
                    key="camera.look_at_m",
                )


@dataclass(frozen=True)
class LoopSettings:
    """The harness's policy loop and judge.

    Attributes:
        rate_hz: control rate of the policy loop, Hz (the sim's 50 Hz by default).
        max_steps: policy steps per episode (0: the manifest's `max_steps`).
        heartbeat_hz: rate of the deadman heartbeat the harness publishes.
        judge: "technician", "detector" (the harness's success detector, judging from the
            recorded camera and tracker streams, `real_bridge.detector`) or "oracle" (the twin's
            ground truth; twin only).
        detector: "" or the name of the harness's detector ("scene-detector"); another name is
            refused (the detector runs in the harness, not on the robot).
        technician_key: Ed25519 private key (PEM) the technician's verdicts are signed with.
        technician: the technician's name recorded with the verdict.
        camera_every: record every n-th camera image (1 = all).
        use_sim_time: the robot publishes a simulated clock on `topics.clock`
            (rosgraph_msgs/Clock) and advances only as far as the harness allows: the loop's
            now/sleep, deadlines, deadman heartbeat and the recordings' log times use that clock,
            so machine load cannot change an outcome (the twin with `--sim-time`; never a real
            robot).
    """

    rate_hz: float = 50.0
    max_steps: int = 0
    heartbeat_hz: float = 50.0
    judge: str = "technician"
    detector: str = ""
    technician_key: str = ""
    technician: str = ""
    camera_every: int = 1
    use_sim_time: bool = False

    def __post_init__(self) -> None:
        if not 1.0 <= self.rate_hz <= 1000.0:
            raise EvalError(f"loop.rate_hz: {self.rate_hz!r} is not in 1..1000", key="loop.rate_hz")
        if not 1.0 <= self.heartbeat_hz <= 1000.0:
            raise EvalError(
                f"loop.heartbeat_hz: {self.heartbeat_hz!r} is not in 1..1000",
                key="loop.heartbeat_hz",
            )
        if self.max_steps < 0:
            raise EvalError("loop.max_steps: must be 0 or more", key="loop.max_steps")
        if self.judge not in JUDGES:
            raise EvalError(
                f"loop.judge: {self.judge!r} is not one of {', '.join(JUDGES)}", key="loop.judge"
            )
        from real_bridge.detector import DETECTOR_NAME

        if self.detector not in ("", DETECTOR_NAME):
            raise EvalError(
                f"loop.detector: {self.detector!r} is not the harness's detector "
                f"({DETECTOR_NAME!r}); leave it empty",
                key="loop.detector",
            )
        if self.camera_every < 1:
            raise EvalError("loop.camera_every: must be 1 or more", key="loop.camera_every")
