"""The scripted reference policy of mobile_pick_place: plan, drive, pick, drive, place.

It reads only the observation (the map, its odometry pose, the cube and the goal in the map):
the counter holding the cube is the map footprint under it; the base stands off that counter's
nearest free side (`sim_suites.room.stand_pose`) and drives there along the shortest path among
the map's footprints (`sim_suites.room.shortest_path`), turning to face the counter and setting
the lift to the counter's height on the way; the arm then picks as the fixed Panda's reference
does (hover, descend, close, lift), tucks, and the base drives to the target counter, where the
arm places the cube and lets go. A goal over no counter is a hand-over point (fetch and
deliver): the base stands off it on the room centre line's side (`sim_suites.room.
handover_stand`), the arm holds the cube out there and keeps it (the person takes it). With no
route (a closed doorway) it holds still.

Actions (8,): the arm's TCP velocity in the base frame (the map-frame wish rotated by the
odometry's yaw), the gripper, the base's velocity in its frame, the lift's velocity.
"""

from __future__ import annotations

import math

import numpy as np

from sim_suites.controller import V_MAX_MPS
from sim_suites.mobile_description import BASE_LIMITS, LIFT_RANGE_M, MOUNT_X_M, MOUNT_Z0_M
from sim_suites.mobile_observations import floor_plan_rects
from sim_suites.policies.script_base import CLOSED, OPEN, Obs, ScriptedPolicy, toward
from sim_suites.room import handover_stand, shortest_path, stand_pose

#: The TCP's place in the mount frame while driving (the tucked arm), m.
TUCK_TCP = np.array([0.305, 0.0, 0.385])
#: Cruise speed (m/s: with the base turning at its 0.8 rad/s the tucked TCP stays below the
#: monitor's 1 m/s), the final approach's gain (1/s) and where a waypoint counts as passed (m).
CRUISE_MPS = 0.5
APPROACH_GAIN = 3.0
WAYPOINT_TOL_M = 0.05
#: Arrival at a stand-off: position (m) and heading (rad) tolerances.
ARRIVE_M = 0.01
ARRIVE_RAD = 0.02
YAW_GAIN = 2.0
#: Height above the counter top of the carried cube's path and of the hover (m).
HOVER_M = 0.10


def wrap(angle: float) -> float:
    """An angle in (−π, π]."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


def counter_under(rects: list[tuple[float, float, float, float]], point: np.ndarray) -> int | None:
    """Index of the map footprint under `point` (x, y) (the smallest, if several), else None."""
    best: tuple[float, int] | None = None
    for k, (x, y, hx, hy) in enumerate(rects):
        inside = abs(point[0] - x) <= hx and abs(point[1] - y) <= hy
        if inside and (best is None or hx * hy < best[0]):
            best = (hx * hy, k)
    return None if best is None else best[1]


class MobilePickPlaceScript(ScriptedPolicy):
    """See the module docstring."""

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.route: list[np.ndarray] = []
        self.stand = np.zeros(3)
        self.lift_goal = 0.0
        self.handover = False

    # ------------------------------------------------------------------ helpers

    def _to_base(self, obs: Obs, v_map: np.ndarray) -> np.ndarray:
        yaw = float(obs["base_pose"][2])
        c, s = math.cos(yaw), math.sin(yaw)
        return np.array([c * v_map[0] + s * v_map[1], -s * v_map[0] + c * v_map[1], v_map[2]])

    def _mount(self, obs: Obs) -> tuple[np.ndarray, float]:
        x, y, yaw = (float(v) for v in obs["base_pose"])
        lift = float(obs["lift"][0])
        pos = np.array(
            [x + math.cos(yaw) * MOUNT_X_M, y + math.sin(yaw) * MOUNT_X_M, MOUNT_Z0_M + lift]
        )
        return pos, yaw

    def _tuck_point(self, obs: Obs) -> np.ndarray:
        mount, yaw = self._mount(obs)
        c, s = math.cos(yaw), math.sin(yaw)
        local = TUCK_TCP
        return mount + np.array(
            [c * local[0] - s * local[1], s * local[0] + c * local[1], local[2]]
        )

    def _plan(self, obs: Obs, point: np.ndarray) -> bool:
        """Route to the stand-off serving `point` (map frame); False when there is none."""
        rects = floor_plan_rects(obs["floor_plan"])
        k = counter_under(rects, point)
        self.handover = k is None
        stand = handover_stand(point, rects) if k is None else stand_pose(rects[k], point, rects)
        if stand is None:
            return False
        route = shortest_path(obs["base_pose"][:2], stand[:2], rects)
        if route is None:
            return False
        self.route, self.stand = route[1:], stand
        # The mount at the counter's top (the cube's centre is 2 cm above it), or as near the
        # hand-over height as the lift goes.
        self.lift_goal = min(
            LIFT_RANGE_M[1], max(LIFT_RANGE_M[0], float(point[2]) - 0.02 - MOUNT_Z0_M)
        )
        return True

    def _drive(self, obs: Obs) -> tuple[np.ndarray, bool]:
        """Base action (3,) toward the route's next waypoint, and whether the stand is reached."""
        pose = obs["base_pose"]
        while len(self.route) > 1 and np.linalg.norm(self.route[0] - pose[:2]) < WAYPOINT_TOL_M:
            self.route.pop(0)
        target = self.route[0] if self.route else self.stand[:2]
        d = np.asarray(target) - pose[:2]
        dist = float(np.linalg.norm(d))
        final = len(self.route) <= 1
        brake = math.sqrt(2.0 * 0.5 * BASE_LIMITS.acceleration_mps2 * dist)
        speed = min(CRUISE_MPS, brake, APPROACH_GAIN * dist) if final else CRUISE_MPS
        v_map = np.array([*(d / max(dist, 1e-9) * speed), 0.0])
        yaw_error = wrap(float(self.stand[2]) - float(pose[2]))
        body = self._to_base(obs, v_map)
        body[2] = max(-1.0, min(1.0, YAW_GAIN * yaw_error)) / BASE_LIMITS.yaw_rate_rps
        body[:2] /= BASE_LIMITS.speed_mps
        lift_ok = abs(float(obs["lift"][0]) - self.lift_goal) < 0.005
        arrived = final and dist < ARRIVE_M and abs(yaw_error) < ARRIVE_RAD and lift_ok
        return body, arrived

    def _lift_action(self, obs: Obs) -> float:
        error = self.lift_goal - float(obs["lift"][0])
        return max(-1.0, min(1.0, 3.0 * error / BASE_LIMITS.lift_speed_mps))

    def _arm(self, obs: Obs, v_map: np.ndarray) -> np.ndarray:
        return self._to_base(obs, v_map)

    # ------------------------------------------------------------------ the script

    def act(self, obs: Obs) -> np.ndarray:
        self.phase_steps += 1
        arm, base = np.zeros(3), np.zeros(3)
        arm_map = self.plan_arm(obs)
        if self.phase in ("to_pick", "to_place"):
            base, arrived = self._drive(obs)
            if arrived:
                self.goto("approach" if self.phase == "to_pick" else "transfer")
        elif arm_map is not None:
            arm = self._arm(obs, arm_map)
        lift = self._lift_action(obs)
        return np.concatenate(
            [np.clip(arm, -1, 1), [self.gripper], np.clip(base, -1, 1), [lift]]
        ).astype(np.float32)

    def plan_arm(self, obs: Obs) -> np.ndarray | None:
        """The arm's map-frame velocity action (3,) of the current phase (None while driving)."""
        tcp, obj, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        grasped = obs["grasped"][0] > 0.5
        if self.phase == "start":
            self.gripper = OPEN
            self.goto("to_pick" if self._plan(obs, obj) else "no_route")
        if self.phase in ("to_pick", "to_place", "no_route"):
            return None
        if self.phase in ("carry", "to_place", "transfer", "place", "offer") and not grasped:
            self.goto("approach")  # dropped: pick it up again where it is
        if self.phase == "approach":
            return self.approach_phase(obs, obj, HOVER_M, 0.01)
        if self.phase == "descend":
            if self.near(tcp, obj, 0.006):
                self.goto("close")
            xy_ok = self.near(tcp[:2], obj[:2], 0.02)
            return toward(tcp, obj if xy_ok else obj + np.array([0.0, 0.0, HOVER_M]), 0.6)
        if self.phase == "close":
            return self.close_phase(obs, obj, "lift", 30)
        if self.phase == "lift":
            if "lift_z" not in self.memory:
                self.memory["lift_z"] = np.array([tcp[2] + HOVER_M + 0.05])
            up = np.array([tcp[0], tcp[1], float(self.memory["lift_z"][0])])
            if tcp[2] > up[2] - 0.01:
                self.goto("carry")
            return toward(tcp, up)
        if self.phase == "carry":
            tuck = self._tuck_point(obs)
            if self.near(tcp, tuck, 0.02):
                self.goto("to_place" if self._plan(obs, goal) else "no_route")
            return toward(tcp, tuck)
        if self.phase == "transfer" and self.handover:
            # Hold the cube out at the hand-over point …
            there = goal + (tcp - obj)
            if self.near(tcp, there, 0.006):
                self.goto("offer")
                self.memory["there"] = there
            return toward(tcp, there)
        if self.phase == "offer":
            # … and keep the hand there: the target stays put (chasing the cube's sway in the
            # fingers would make it swing on).
            return toward(tcp, self.memory["there"])
        if self.phase == "transfer":
            offset = tcp - obj
            above = goal + offset + np.array([0.0, 0.0, HOVER_M])
            if self.near(tcp, above, 0.006):
                self.goto("place")
            return toward(tcp, above)
        if self.phase == "place":
            target = goal + (tcp - obj) + np.array([0.0, 0.0, 0.004])
            if self.near(tcp, target, 0.005):
                self.goto("release")
            return toward(tcp, target, 0.5)
        if self.phase == "release":
            return self.release_phase(obs)
        if self.phase == "retreat":
            up = np.array([tcp[0], tcp[1], goal[2] + HOVER_M])
            return toward(tcp, up)
        return np.zeros(3)

    def plan(self, obs: Obs) -> np.ndarray:  # the fixed-arm scripts' hook; unused here
        return np.zeros(3)


__all__ = ["CLOSED", "V_MAX_MPS", "MobilePickPlaceScript"]
