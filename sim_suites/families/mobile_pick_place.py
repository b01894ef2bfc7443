"""mobile_pick_place: drive to the counter that holds a cube, pick it, drive to another
counter (through the doorway when it stands in the other half of the room), place it.

The room comes from the pair's scene seed (`sim_suites.room`); the instance says which counter
holds the cube (`source`) and which receives it (`target`), the cube's mass and friction, and
whether a person paces the far end of the room (`person`, on a path drawn from the same scene
stream) or a panel closes the doorway (`doorway_blocked`). Where on the counters the cube
stands and goes is drawn too.

Goal error (the e of the scoring rule in `sim_suites.tasks.base`): ‖p_cube − g‖, the 3-D
distance of the cube's centre from its resting pose on the target counter (as pick_place), with
the family's tolerance (4 cm: the base localizes by wheel odometry).

Fetch and deliver (`deliver` = 1): the cube goes to a person instead of a counter. The person
stands still in the far half of the room, at a place drawn from the scene stream, facing the
room's centre line; the goal is the hand-over point HANDOVER_M in front of them at HANDOVER_Z_M
(a standing person's hand height). Done when the robot holds the cube there, still, for the
completion hold (it does not let go: the person takes it). The base stands off the hand-over
point on the centre line's side (`sim_suites.room.handover_stand`), so the robot reaches toward
the person while speed and separation monitoring watches the whole robot near them.

The reference script (`MobilePickPlaceScript`) plans, drives, picks, drives and places.
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

from sim_suites.arena import Body, Geom, Scene
from sim_suites.controller import V_MAX_MPS
from sim_suites.families.pick_place import CUBE_HALF, STEEL
from sim_suites.human import HIP_HEIGHT_M, HumanProxy, Walk
from sim_suites.mobile_description import BASE_LIMITS, LIFT_RANGE_M, MOUNT_X_M, MOUNT_Z0_M
from sim_suites.mobile_observations import floor_plan_rects
from sim_suites.policies.script_base import CLOSED, OPEN, Obs, ScriptedPolicy, toward
from sim_suites.room import (
    COUNTER_SPREAD_M,
    PERSON_LANE_X,
    PERSON_LANE_Y,
    FloorPlan,
    counter_point,
    draw_floor_plan,
    handover_stand,
    room_bodies,
    shortest_path,
    stand_pose,
)
from sim_suites.tasks.base import REST_SPEED_MPS, Task, TaskSpec, TaskState
from sim_suites.tasks.catalog import Family, register_family

_RED = (0.8, 0.2, 0.2, 1.0)
#: Where the cube waits before a reset places it (m).
CUBE_PARKING = (20.0, 30.0, CUBE_HALF)
#: The person's walking speed (m/s) and pause at each end of the lane (s).
PERSON_SPEED_MPS = 1.0
PERSON_HOLD_S = 2.0
#: Fetch and deliver: the hand-over point's distance in front of the person's centre and its
#: height (m); where the person may stand (x range, and |y| range: off the centre line).
HANDOVER_M = 0.7
HANDOVER_Z_M = 0.85
RECEIVER_X = (5.8, 7.6)
RECEIVER_ABS_Y = (0.9, 1.3)
#: A receiver keeps this far from a clutter box's centre (m), and so many places are tried.
RECEIVER_CLEAR_M = 0.6
RECEIVER_TRIES = 50


class MobilePickPlace(Task):
    """See the module docstring. Instance extras: `source`, `target` (counter indices),
    `mass_kg` (0.1), `friction` (0.8), `person` (1 = a person paces the far end),
    `doorway_blocked` (1 = the doorway is closed), `deliver` (1 = hand the cube to the person,
    who then stands still; needs `person`)."""

    family = "mobile_pick_place"
    object_name = "cube"
    faults = ()

    @property
    def source(self) -> int:
        return int(self.spec.extra.get("source", 0))

    @property
    def target(self) -> int:
        return int(self.spec.extra.get("target", 1))

    @property
    def doorway_blocked(self) -> bool:
        return bool(self.spec.extra.get("doorway_blocked", 0))

    @property
    def deliver(self) -> bool:
        """Whether the cube goes to a person (fetch and deliver) rather than a counter."""
        return bool(self.spec.extra.get("deliver", 0))

    @property
    def place_counter(self) -> int | None:
        """The counter that receives the cube (None when it goes to a person)."""
        return None if self.deliver else self.target

    def bodies(self) -> tuple[Body, ...]:
        return (
            Body(
                name="cube",
                role="object",
                geoms=(Geom("box", (CUBE_HALF,) * 3, rgba=_RED),),
                joint="free",
                pos=CUBE_PARKING,
                mass=float(self.spec.extra.get("mass_kg", 0.1)),
                friction=float(self.spec.extra.get("friction", 0.8)),
                grasp_width=2 * CUBE_HALF,
            ),
        )

    def scene(self) -> Scene:
        """The cube, the room's bodies and the person (when the instance has one)."""
        human = self.human()
        people = human.bodies() if human is not None else ()
        return Scene(bodies=(*self.bodies(), *room_bodies(), *people))

    def human(self) -> HumanProxy | None:
        """The person, standing at the lane's middle (a reset gives them their walk)."""
        if not self.spec.extra.get("person", 0):
            return None
        return HumanProxy((PERSON_LANE_X, 0.0), floor_height_m=HIP_HEIGHT_M)

    def draw_scene(
        self, rng: np.random.Generator
    ) -> tuple[FloorPlan, np.ndarray, np.ndarray, HumanProxy | None]:
        """The episode's scene from the pair's scene stream, in draw order: the room
        (`sim_suites.room.draw_floor_plan`), where the cube stands and where it goes
        (`placements`), the person on their walk (`walk`; None without a person)."""
        plan = draw_floor_plan(rng, self.doorway_blocked)
        start, goal = self.placements(plan, rng)
        human = self.human()
        if human is not None:
            human = HumanProxy(
                human.xy, floor_height_m=human.floor_height_m, walk=self.walk(rng, goal)
            )
        return plan, start, goal, human

    def walk(self, rng: np.random.Generator, goal: np.ndarray) -> Walk:
        """The person's walk this episode, from the scene stream: up and down the lane between
        two drawn points, round and round; a person receiving the cube (`deliver`) stands
        HANDOVER_M beyond the hand-over point `goal` from the room's centre line."""
        if self.deliver:
            side = 1.0 if float(goal[1]) >= 0.0 else -1.0
            spot = (float(goal[0]), float(goal[1]) + side * HANDOVER_M)
            return Walk((spot,), speed_mps=PERSON_SPEED_MPS)
        lo, hi = PERSON_LANE_Y
        a, b = float(rng.uniform(lo, 0.0)), float(rng.uniform(0.0, hi))
        return Walk(
            ((PERSON_LANE_X, a), (PERSON_LANE_X, b)),
            speed_mps=PERSON_SPEED_MPS,
            hold_s=PERSON_HOLD_S,
            loop=True,
        )

    def placements(
        self, plan: FloorPlan, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where the cube starts and where it must go (centres (3,), m), drawn along the source
        and target counters from the scene stream."""
        s = COUNTER_SPREAD_M
        start = counter_point(plan, self.source, float(rng.uniform(-s, s)))
        lift = np.array([0.0, 0.0, CUBE_HALF])
        if self.deliver:
            return start + lift, self.handover_point(plan, rng)
        goal = counter_point(plan, self.target, float(rng.uniform(-s, s)))
        return start + lift, goal + lift

    def handover_point(self, plan: FloorPlan, rng: np.random.Generator) -> np.ndarray:
        """Where the cube is handed over (3,), m: the receiver's place drawn in the far half
        (x in RECEIVER_X, |y| in RECEIVER_ABS_Y, the side drawn), redrawn while they would
        stand within RECEIVER_CLEAR_M of a clutter box or the base's hand-over stand is
        blocked (at most RECEIVER_TRIES draws; the last one stands)."""
        rects = plan.obstacles()
        goal = np.zeros(3)
        for _ in range(RECEIVER_TRIES):
            x = float(rng.uniform(*RECEIVER_X))
            side = 1.0 if rng.uniform() < 0.5 else -1.0
            y = side * float(rng.uniform(*RECEIVER_ABS_Y))
            goal = np.array([x, y - side * HANDOVER_M, HANDOVER_Z_M])
            clear = all(math.dist((x, y), c) >= RECEIVER_CLEAR_M for c in plan.clutter)
            if clear and handover_stand(goal, rects) is not None:
                break
        return goal

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        # The goal depends on the drawn room; the environment takes it from `placements`.
        raise NotImplementedError("mobile_pick_place goals come from the floor plan")

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        return float(np.linalg.norm(state.object_pos - goal))

    def complete(self, state: TaskState, goal: np.ndarray, error: float | None = None) -> bool:
        """As every task (within tolerance, at rest), but a delivered cube stays in the hand."""
        if not self.deliver:
            return super().complete(state, goal, error)
        e = self.goal_error(state, goal) if error is None else error
        return e <= self.spec.tolerance_m and state.attached and state.object_speed < REST_SPEED_MPS

    def grasp_width(self) -> float:
        return 2 * CUBE_HALF


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


def _instance(name: str, source: int, target: int, **extra: float) -> TaskSpec:
    """From counter `source` to counter `target` of the drawn room (positions come from the
    floor plan). Tolerance 4 cm (the base localizes by wheel odometry), QC tolerance 5 cm."""
    return TaskSpec(
        f"mobile_pick_place/{name}",
        (0.0, 0.0),
        (0.0, 0.0),
        tolerance_m=0.04,
        qc_tolerance_m=0.05,
        extra={"source": source, "target": target, **extra},
    )


FAMILY = register_family(
    Family(
        task=MobilePickPlace,
        instances=(
            _instance("cube_across", 0, 1, person=1),
            _instance("cube_across_quiet", 0, 1),
            _instance("cube_back", 1, 0, person=1),
            _instance("cube_same_half", 0, 2, person=1),
            _instance("steel_across", 0, 1, person=1, **STEEL),
            _instance("deliver_to_person", 0, 1, person=1, deliver=1),
        ),
        script=MobilePickPlaceScript,
        env="sim_suites.mobile_env:MobileTaskEnv",
        # A drive through the room takes ~25 s: 60 s at 50 Hz without a protocol.
        max_steps=3000,
    )
)
