"""Mobile pick-and-place: drive to the counter that holds a cube, pick it, drive to another
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
"""

from __future__ import annotations

import math

import numpy as np

from sim_suites.arena import Body, Geom, Scene
from sim_suites.human import HIP_HEIGHT_M, HumanProxy, Walk
from sim_suites.room import (
    COUNTER_SPREAD_M,
    PERSON_LANE_X,
    PERSON_LANE_Y,
    FloorPlan,
    counter_point,
    draw_floor_plan,
    handover_stand,
    room_bodies,
)
from sim_suites.tasks.base import CUBE_HALF, REST_SPEED_MPS, Task, TaskState

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
