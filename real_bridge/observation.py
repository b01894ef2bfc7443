"""From ROS streams to the policy's observation, and from the policy's action to joint targets.

`ArmAdapter` gives a policy on the real side exactly the observation keys it sees in sim
(`sim_suites.env.PandaTaskEnv`), built from what a lab has: joint states, the arm's kinematics,
the object tracker (when the profile has one) and the manifest's setup for the seed (object
placement, goal, obstacle — the scene the reset station or the technician set up). The grasp flag
is the gripper's own reading: fingers commanded closed and stopped at the part's width with the
part at the TCP (the sim's grasp rule, on measured values). In a task with a tool (tool_use's
hook) the part is the tool: its grasp point is where the setup put it (`tool_pos`, observed as
in sim), and the tracker follows the scored object.

A tracker loses the object while the hand covers it. The policy is not told the object vanished
then (`object_visible` stays 1): a held part is where the hand holds it (the TCP plus the offset
at which it was grasped), a part under the hand is where it was last seen. Only a stale pose with
the hand elsewhere is a perception dropout (`object_visible` = 0).

Actions: a Cartesian policy's (4,) action (or a (k, 4) chunk) goes through the harness side of
the one command path the sim episode runs (`sim_suites.command_path.ArmCommandPath`: the
controller with the nominal model, the TCP speed cap, the braking-aware joint limiter with the
profile's velocity and acceleration limits), giving one joint target per control step and the
gripper's wanted opening; the robot's side of the path (delay, trajectory, gripper drive, servos)
is the robot's.
A policy that declares `command_space = "joint_position"` returns joint targets directly, (n,) or
(k, n). Either way the targets are checked before anything is sent.

The adapter is chosen by one seam, `adapter_for`: the profile's `[robot] kinematics` names the
arm (`sim_suites.robot.arm_model`: "panda", "ur5e", or a lab's "module:factory"), whose model
gives the IK, the TCP, the command limits' defaults and the gripper's travel; "" gives an adapter
without an arm (joint-space policies only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec
from real_bridge.bridge_config import RobotSpec
from real_bridge.robot import TrackerPose

#: The tracker's pose older than this, s, means the object is not seen.
POSE_FRESH_S = 0.25
#: A tracker loses the object under the hand: while the TCP is within this horizontal distance
#: of where the object was last seen, m, and at most HAND_COVER_HEIGHT_M above it (or holds it),
#: a stale pose is the hand covering the object, not the object being gone.
HAND_COVER_RADIUS_M = 0.06
HAND_COVER_HEIGHT_M = 0.20


@dataclass(frozen=True)
class SceneSetup:
    """The manifest's scene for one seed: what the reset station (or technician) sets up."""

    task_id: str
    seed: int
    object_pos: np.ndarray
    object_quat: np.ndarray
    goal_pos: np.ndarray
    obstacle: np.ndarray
    arm_q: np.ndarray
    part_width_m: float
    tool_pos: np.ndarray | None = None
    #: Where distractor k stands on the table (x, y), m (`sim_suites.distractors`).
    distractors_xy: tuple[tuple[float, float], ...] = ()

    def lines(self) -> list[str]:
        """The placement as a technician reads it."""
        p, g = self.object_pos, self.goal_pos
        out = [
            f"task {self.task_id}, seed {self.seed}",
            f"object at x={p[0]:.3f} y={p[1]:.3f} z={p[2]:.3f} m (base frame)",
            f"goal at x={g[0]:.3f} y={g[1]:.3f} z={g[2]:.3f} m",
        ]
        if self.tool_pos is not None:
            t = self.tool_pos
            out.append(f"tool grasp point at x={t[0]:.3f} y={t[1]:.3f} z={t[2]:.3f} m")
        for k, (x, y) in enumerate(self.distractors_xy):
            out.append(f"distractor_{k} standing at x={x:.3f} y={y:.3f} m")
        if np.any(self.obstacle):
            o = self.obstacle
            out.append(f"obstacle at x={o[0]:.3f} y={o[1]:.3f} z={o[2]:.3f} m, size {o[3]:.3f} m")
        return out


_SETUP_ENVS: dict[tuple[str, str], Any] = {}


def hand_covers(tcp: np.ndarray, object_pos: np.ndarray) -> bool:
    """Whether the hand is where it hides the object from a tracker (see HAND_COVER_RADIUS_M)."""
    horizontal = float(np.hypot(tcp[0] - object_pos[0], tcp[1] - object_pos[1]))
    above = float(tcp[2] - object_pos[2])
    return horizontal <= HAND_COVER_RADIUS_M and -0.02 <= above <= HAND_COVER_HEIGHT_M


def scene_setup(spec: EpisodeSpec, manifest: Mapping[str, Any], robot: str = "panda") -> SceneSetup:
    """The pair's scene of `spec` (placement, yaw, size and distractors from the pair's scene
    stream, as the sim half drew them) from the sim's own model with the arm `robot` names."""
    from embodied_eval.seeds import episode_seeds
    from sim_suites.robot_core import PandaTaskEnv, scene_ranges

    kwargs: dict[str, Any] = {
        "randomization": scene_ranges(manifest.get("randomization", {})),
        "drift": dict(spec.drift),
        "max_steps": 10,
    }
    env = _SETUP_ENVS.get((spec.task_id, robot))
    if env is None:
        env = PandaTaskEnv(spec.task_id, "mujoco", robot=robot, **kwargs)
        _SETUP_ENVS[spec.task_id, robot] = env
    else:
        env.configure(**kwargs)
    obs, _ = env.reset(seed=spec.seed, options={"scene_seed": episode_seeds(spec.seed).scene})
    return SceneSetup(
        task_id=spec.task_id,
        seed=spec.seed,
        object_pos=np.array(obs["object_pos"], dtype=float),
        object_quat=np.array(obs["object_quat"], dtype=float),
        goal_pos=np.array(obs["goal_pos"], dtype=float),
        obstacle=np.array(obs["obstacle"], dtype=float),
        arm_q=np.array(obs["joint_pos"][: env.kin.n], dtype=float),
        part_width_m=float(env.task.grasp_width()),
        tool_pos=np.array(obs["tool_pos"], dtype=float) if "tool_pos" in obs else None,
        distractors_xy=tuple(
            (float(x), float(y)) for x, y in env.start_scene.get("distractors_xy", [])
        ),
    )


def adapter_for(robot: RobotSpec, dt_s: float) -> ArmAdapter:
    """The observation/action adapter of a profile: its arm is the one `robot.kinematics` names
    (EvalError for a name that is neither registered nor "module:factory", or an arm whose joint
    count is not the profile's); "" gives an adapter without an arm (joint-space policies)."""
    if not robot.kinematics:
        return ArmAdapter(robot, dt_s, None)
    from sim_suites.robot_core import arm_model

    arm = arm_model(robot.kinematics)
    if arm.n != len(robot.arm_joints):
        raise EvalError(
            f"robot.kinematics: the arm {robot.kinematics!r} has {arm.n} joints, the profile's "
            f"arm_joints name {len(robot.arm_joints)}",
            key="robot.kinematics",
        )
    return ArmAdapter(robot, dt_s, arm)


class ArmAdapter:
    """Observation and action conversion for one arm (see the module docstring).

    Args:
        robot: the profile (joint names, limits).
        dt_s: control period, s.
        arm: the arm's model (`sim_suites.robot.SerialArm`); None: no kinematics, so joint-space
            policies only (observations carry the joint states alone).
    """

    def __init__(self, robot: RobotSpec, dt_s: float, arm: Any) -> None:
        from sim_suites.robot_core import LIMIT_MARGIN, ArmCommandPath, JointLimits

        self.robot = robot
        self.dt_s = dt_s
        self.kin = arm
        self.n = len(robot.arm_joints)
        limits = JointLimits(
            lower=np.asarray(robot.position_lower, dtype=float),
            upper=np.asarray(robot.position_upper, dtype=float),
            velocity_max=LIMIT_MARGIN * np.asarray(robot.velocity_max, dtype=float),
            acceleration_max=LIMIT_MARGIN * np.asarray(robot.acceleration_max, dtype=float),
        )
        self.path = ArmCommandPath(arm, limits, dt_s) if arm is not None else None
        self.finger_max_m = float(arm.finger_max_m) if arm is not None else robot.gripper_open
        self.setup: SceneSetup | None = None
        self.finger_cmd = self.finger_max_m
        self.grasped = False
        self.last_pose: tuple[np.ndarray, np.ndarray] | None = None
        self.grasp_offset: np.ndarray | None = None
        self.sent_q = np.zeros(len(robot.arm_joints))
        self.sent_v = np.zeros(len(robot.arm_joints))
        self._first = True

    def tcp_of(self, q: np.ndarray) -> np.ndarray:
        if self.kin is None:
            raise EvalError("the profile has no kinematics: no TCP", key="robot.kinematics")
        return np.asarray(self.kin.forward(np.asarray(q, dtype=float))[0])

    def reset(self, q_arm: np.ndarray, fingers: np.ndarray, setup: SceneSetup | None) -> None:
        if self.path is not None:
            self.path.reset(np.asarray(q_arm, dtype=float))
        self.setup = setup
        self.finger_cmd = float(np.mean(fingers)) if len(fingers) else self.finger_max_m
        self.grasped = False
        self.last_pose = None
        self.grasp_offset = None
        self.sent_q = np.array(q_arm, dtype=float)
        self.sent_v = np.zeros_like(self.sent_q)
        self._first = True

    def observe(
        self,
        q: np.ndarray,
        qd: np.ndarray,
        pose: TrackerPose | None,
        now_s: float,
        has_tracker: bool,
    ) -> dict[str, np.ndarray]:
        """The observation dict (sim keys) from joint states (the arm's n joints, then 2 fingers)
        and the tracker's latest pose (`now_s` on the same clock as its `received_s`)."""
        from sim_suites.robot_core import grasp_closes, grasp_releases

        setup, n = self.setup, self.n
        if self._first:  # the first command starts from the posture the policy first sees
            self._first = False
            self.sent_q = np.array(q[:n], dtype=float)
            if self.path is not None:
                self.path.reset(self.sent_q)
        if self.path is None:  # no kinematics: the joint states are all there is
            return {
                "joint_pos": np.asarray(q[: n + 2], dtype=float),
                "joint_vel": np.asarray(qd[: n + 2], dtype=float),
            }
        tcp = self.tcp_of(q[:n])
        visible = 1.0
        if has_tracker:
            last = self.last_pose
            if pose is not None and now_s - pose.received_s <= POSE_FRESH_S:
                self.last_pose = (pose.position, pose.quaternion)
            elif last is not None and self.grasped and self.grasp_offset is not None:
                self.last_pose = (tcp + self.grasp_offset, last[1])  # carried in the hand
            elif last is None or not hand_covers(tcp, last[0]):
                visible = 0.0
        if self.last_pose is not None:
            obj_pos, obj_quat = self.last_pose
        elif setup is not None:
            obj_pos, obj_quat = setup.object_pos, setup.object_quat
        else:
            obj_pos, obj_quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        opening = float(q[n] + q[n + 1]) if q.size >= n + 2 else 0.0
        if setup is not None:
            width = setup.part_width_m
            part = obj_pos if setup.tool_pos is None else setup.tool_pos
            if self.grasped and grasp_releases(self.finger_cmd, width):
                self.grasped = False
                self.grasp_offset = None
            elif not self.grasped and grasp_closes(self.finger_cmd, opening, width, part - tcp):
                self.grasped = True
                # The object moves with the hand only when the object is what is held (a tool
                # is held in tool use; the scored object stays where the tool leaves it).
                if setup.tool_pos is None:
                    self.grasp_offset = np.asarray(obj_pos, dtype=float) - tcp
        obs = {
            "joint_pos": np.asarray(q[: n + 2], dtype=float),
            "joint_vel": np.asarray(qd[: n + 2], dtype=float),
            "gripper_width": np.array([min(1.0, max(0.0, opening))]),
            "tcp_pos": tcp,
            "tcp_target": self.path.tcp_target.copy(),
            "object_pos": np.asarray(obj_pos, dtype=float),
            "object_quat": np.asarray(obj_quat, dtype=float),
            "object_visible": np.array([visible]),
            "goal_pos": setup.goal_pos.copy() if setup is not None else np.zeros(3),
            "grasped": np.array([1.0 if self.grasped else 0.0]),
            "obstacle": setup.obstacle.copy() if setup is not None else np.zeros(4),
        }
        if setup is not None and setup.tool_pos is not None:
            obs["tool_pos"] = setup.tool_pos.copy()
        return obs

    def targets(self, action: Any, q: np.ndarray, joint_space: bool) -> tuple[np.ndarray, float]:
        """Joint targets (k, n) for an action or chunk, and the finger set-point (m).

        The limiter plans each row from the target before it (the first from the target last
        sent); its state is put back afterwards, so only what is sent (`sent`) moves it on."""
        rows = np.atleast_2d(np.asarray(action, dtype=float))
        if joint_space:
            return rows, self.finger_cmd
        path = self.path
        if path is None:
            raise EvalError(
                "the reference (Cartesian) policies need the arm's kinematics; this profile has "
                "none (set [robot] kinematics, or use a joint_position policy)",
                key="kinematics",
            )
        if rows.shape[1] != 4:
            raise EvalError(f"the policy returned actions of shape {rows.shape}, expected (4,)")
        out: list[np.ndarray] = []
        finger = self.finger_cmd
        path.limiter.reset(self.sent_q, self.sent_v)
        for i, act in enumerate(np.clip(rows, -1.0, 1.0)):
            q_now = q[: self.n] if i == 0 else out[-1]
            command = path.step(act, q_now)
            out.append(command.target)
            finger = command.finger
        path.limiter.reset(self.sent_q, self.sent_v)
        return np.array(out), finger

    def sent(self, q_target: np.ndarray, finger: float) -> None:
        """Book-keeping after a target was sent (the next check starts from it)."""
        self.sent_v = (np.asarray(q_target) - self.sent_q) / self.dt_s
        self.sent_q = np.array(q_target, dtype=float)
        self.finger_cmd = finger
