"""Mobile manipulation per engine: success, SPL, collisions per metre, and harness vs bare loop.

Harness: `sim_suites.episode.run_episode` on `mobile_pick_place/cube_across` (a person paces the
far end of the room) with the default domain randomization, over `--seeds` manifest seeds: the
success rate, mean SPL (`sim_suites.mobile_metrics.spl`: S·l/max(p, l) averaged), collisions per
metre over all metres driven, mean time to goal of the successes and the smallest separation to
the person.

Bare loop (`--timing-seeds`): the same model and room (the same scene seed), the same command
path (arm: controller, limiter, follower; base: limiter, wheel drive) and scripted policy,
stepping to the same completion rule with nominal parameters, the policy fed straight from the
physics (true poses, no odometry, no person, no monitors, no records). Printed: seconds per
episode and per control step on both sides, and the ratio bare / harness per step (≥ 0.8 means
the harness costs at most a quarter more), on this process's CPU time (what other programs on a
shared machine do not change) and on the wall clock.

Run: .venv/bin/python benchmarks/mobile_bench.py [--seeds 20] [--timing-seeds 3]
     [--engines mujoco,pybullet]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from embodied_eval.records import EpisodeSpec
from embodied_eval.seeds import episode_seeds
from sim_suites.command_path import ArmCommandPath, BaseLimiter, JointFollower, JointLimits
from sim_suites.engines.base import PHYSICS_DT, InitialState, PhysicsParams
from sim_suites.engines.factory import make_backend
from sim_suites.episode import run_episode
from sim_suites.families.mobile_pick_place import MobilePickPlace, MobilePickPlaceScript
from sim_suites.grasping import both_fingers_press
from sim_suites.mobile_description import BASE_LIMITS, LIFT_RANGE_M, MOUNT_X_M, MOUNT_Z0_M
from sim_suites.mobile_env import CARRY_Q
from sim_suites.mobile_metrics import collisions_per_metre, spl, success_rate
from sim_suites.mobile_observations import floor_plan_array
from sim_suites.panda_kinematics import FINGER_MAX_M, panda_kinematics
from sim_suites.robot_profiles import MOBILE_PANDA
from sim_suites.room import draw_floor_plan
from sim_suites.tasks import TaskState, make_task
from sim_suites.tasks.base import COMPLETION_HOLD_STEPS

TASK = "mobile_pick_place/cube_across"
DT = 0.02
SUBSTEPS = round(DT / PHYSICS_DT)
MAX_STEPS = 3000


def spec_for(engine: str, seed: int) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"mobile-bench-{engine}-{seed}",
        pair_id=f"mobile-bench-{seed}",
        side="sim",
        family="mobile_pick_place",
        task_id=TASK,
        seed=seed,
        drift_name="nominal",
        engine=engine,
    )


def rot(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def bare_episode(backend: object, task: MobilePickPlace, seed: int) -> int:
    """One bare-loop episode on the room of `seed`'s scene seed; its control steps (MAX_STEPS
    when the task did not complete)."""
    kin = panda_kinematics()
    scene_rng = np.random.default_rng(episode_seeds(seed).scene)
    plan = draw_floor_plan(scene_rng, task.doorway_blocked)
    start, goal = task.placements(plan, scene_rng)
    positions = plan.body_positions()
    positions["cube"] = start
    lift = float(np.clip(start[2] - MOUNT_Z0_M - 0.02, *LIFT_RANGE_M))
    b = backend
    b.reset(  # type: ignore[attr-defined]
        InitialState(
            arm_q=CARRY_Q.copy(),
            finger_q=FINGER_MAX_M,
            body_pos=positions,
            base_q=np.array([*plan.start, lift]),
        ),
        PhysicsParams(),
    )
    path = ArmCommandPath(kin, JointLimits.of_arm(kin), DT)
    follower = JointFollower(kin)
    limiter = BaseLimiter(BASE_LIMITS, DT)
    path.reset(CARRY_Q)
    follower.reset(CARRY_Q, finger=FINGER_MAX_M)
    policy = MobilePickPlaceScript()
    policy.reset(seed)
    floor = floor_plan_array(plan.obstacles())
    lift_target, complete = lift, 0
    for step in range(MAX_STEPS):
        q, _ = b.joint_state()  # type: ignore[attr-defined]
        base, _ = b.base_state()  # type: ignore[attr-defined]
        x, y, yaw, lift_now = base.tolist()
        rots, origins = kin.link_frames(q[:7])
        r = rot(yaw)
        mount = np.array([x, y, 0.0]) + r @ np.array([MOUNT_X_M, 0.0, MOUNT_Z0_M + lift_now])
        tcp = mount + r @ kin.tcp_from_frames(rots[6], origins[6])[0]
        cube = b.body_pose("cube")[0]  # type: ignore[attr-defined]
        held = both_fingers_press(*b.finger_contact_forces("cube"))  # type: ignore[attr-defined]
        obs = {
            "base_pose": np.array([x, y, yaw]),
            "lift": np.array([lift_now]),
            "tcp_pos": tcp,
            "tcp_target": mount + r @ path.tcp_target,
            "object_pos": cube,
            "object_visible": np.ones(1),
            "goal_pos": goal,
            "grasped": np.array([1.0 if held else 0.0]),
            "gripper_width": np.array([q[7] + q[8]]),
            "floor_plan": floor,
        }
        action = policy.act(obs)
        sent = path.step(action[:4], q, frames=(rots, origins))
        follower.set_target(sent.target, sent.duration_s)
        follower.set_finger(sent.finger)
        cmd = follower.command(DT, rots, origins)
        body = limiter.step(
            np.array([action[4], action[5], action[6]])
            * [BASE_LIMITS.speed_mps, BASE_LIMITS.speed_mps, BASE_LIMITS.yaw_rate_rps]
        )
        lift_target = float(
            np.clip(lift_target + action[7] * BASE_LIMITS.lift_speed_mps * DT, *LIFT_RANGE_M)
        )
        b.drive_base(body, lift_target)  # type: ignore[attr-defined]
        b.step(cmd.arm_cmd, cmd.finger, SUBSTEPS)  # type: ignore[attr-defined]
        cube = b.body_pose("cube")[0]  # type: ignore[attr-defined]
        held = both_fingers_press(*b.finger_contact_forces("cube"))  # type: ignore[attr-defined]
        speed = float(np.linalg.norm(b.body_velocity("cube")))  # type: ignore[attr-defined]
        done = task.complete(TaskState(cube, speed, 0.0, held), goal)
        complete = complete + 1 if done else 0
        if complete >= COMPLETION_HOLD_STEPS:
            return step + 1
    return MAX_STEPS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="0: timing only")
    parser.add_argument("--timing-seeds", type=int, default=3)
    parser.add_argument("--engines", default="mujoco,pybullet")
    args = parser.parse_args()
    task = make_task(TASK)
    assert isinstance(task, MobilePickPlace)
    for engine in args.engines.split(","):
        if args.seeds:
            episodes = [
                run_episode(spec_for(engine, seed), max_steps=MAX_STEPS).episode
                for seed in range(args.seeds)
            ]
            wins = [e.success for e in episodes]
            controls = [e.control for e in episodes]
            metres = sum(c["path_length_m"] for c in controls)
            collisions = sum(c["collisions"] for c in controls)
            shortest = [c["shortest_path_m"] or 0.0 for c in controls]
            taken = [c["path_length_m"] for c in controls]
            times = [c["time_to_goal_s"] for c in controls if c["time_to_goal_s"] is not None]
            seps = [c["min_separation_m"] for c in controls if c["min_separation_m"] is not None]
            print(
                f"{engine:9s} {args.seeds} seeds: success {success_rate(wins):.2f} "
                f"({sum(wins)}/{len(wins)}), mean SPL {spl(wins, shortest, taken):.3f}, "
                f"collisions/m {collisions_per_metre(collisions, metres):.4f} "
                f"({collisions} in {metres:.1f} m), mean time to goal "
                f"{np.mean(times) if times else float('nan'):.1f} s, "
                f"min separation {min(seps) if seps else float('nan'):.2f} m"
            )
        # Timing: both sides built beforehand (the harness's environment is cached), each seed's
        # harness episode and bare episode run back to back.
        backend = make_backend(engine, task.scene(), profile=MOBILE_PANDA)
        harness_s, bare_s, bare_steps, harness_steps = [], [], [], []
        harness_wall, bare_wall = [], []
        for seed in range(args.timing_seeds):
            t0, w0 = time.process_time(), time.perf_counter()
            harness_steps.append(
                run_episode(spec_for(engine, seed), max_steps=MAX_STEPS).episode.actions
            )
            harness_s.append(time.process_time() - t0)
            harness_wall.append(time.perf_counter() - w0)
            t0, w0 = time.process_time(), time.perf_counter()
            bare_steps.append(bare_episode(backend, task, seed))
            bare_s.append(time.process_time() - t0)
            bare_wall.append(time.perf_counter() - w0)
        backend.close()
        n = args.timing_seeds
        h_step = sum(harness_s) / sum(harness_steps)
        b_step = sum(bare_s) / sum(bare_steps)
        wall_ratio = (sum(bare_wall) / sum(bare_steps)) / (sum(harness_wall) / sum(harness_steps))
        print(
            f"{engine:9s} timing over {n} seeds (CPU time): harness {np.mean(harness_s):.2f} "
            f"s/episode ({1e3 * h_step:.2f} ms/step, steps {harness_steps}), bare loop "
            f"{np.mean(bare_s):.2f} s/episode ({1e3 * b_step:.2f} ms/step, steps {bare_steps}); "
            f"bare/harness per step = {b_step / h_step:.2f} (wall clock: {wall_ratio:.2f})"
        )


if __name__ == "__main__":
    main()
