"""Tasks: goal, scoring rule and completion, kept apart from the robot and the arena.

A task instance names its scene bodies, where they start, where the goal is and how close is close
enough. Quality comes from the physics state only (object poses, the drawer's slide position),
never from what the policy meant to do.

Scoring rule (all families): a family-specific goal error e (m) is mapped to a graded quality

    q = exp(−ln(1.25) · (e / tol)²) = 0.8^((e / tol)²)

so q = 1 at zero error, q = 0.8 exactly at the tolerance, 0.41 at twice it and → 0 beyond. With
the default target q* = 0.8, success z = 1{q ≥ q*} means "within tolerance".
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from sim_suites.arena import Body, Scene, distractor_bodies, obstacle
from sim_suites.human import HumanProxy, Reach

#: q at e = tol: the graded rule is anchored so the default target q* = 0.8 sits at the tolerance.
QUALITY_AT_TOLERANCE = 0.8
#: Objects count as at rest below this speed (m/s) for task completion.
REST_SPEED_MPS = 0.03
#: Consecutive control steps the completion condition must hold before the episode ends.
COMPLETION_HOLD_STEPS = 5


def graded_quality(error_m: float, tolerance_m: float) -> float:
    """Graded task quality q ∈ [0, 1] from a goal error (§3 scoring rule S_t).

    q = QUALITY_AT_TOLERANCE^((e / tol)²): 1 at e = 0, 0.8 at e = tol, 0.8⁴ = 0.4096 at e = 2·tol.

    Args:
        error_m: goal error e ≥ 0 in m. tolerance_m: tolerance tol > 0 in m.
    Returns:
        q in [0, 1].
    """
    ratio = max(0.0, error_m) / tolerance_m
    return float(math.exp(math.log(QUALITY_AT_TOLERANCE) * ratio * ratio))


@dataclass(frozen=True)
class TaskState:
    """The physics state a task scores: pose of the tracked point, its speed, the slide position.

    `object_pos` is the tracked point (the object's centre; the drawer handle for drawers).
    """

    object_pos: np.ndarray
    object_speed: float
    slide_q: float
    attached: bool


@dataclass(frozen=True)
class TaskSpec:
    """The parameters of one named task instance.

    Attributes:
        task_id: "family/name". start_xy: object (or fixture) position on the table, m.
        goal: family-specific goal parameters. tolerance_m: tol of the scoring rule.
        qc_tolerance_m: default tracking tolerance of the QC functional (the protocol may
            override it per instance). human_xy: where a human proxy stands, if any.
        human_reach: (start s, distance m, hold s) of the proxy's arm moving into the
            workspace (`sim_suites.human.Reach`), or None for a person who keeps still.
        target_quality: default q* (the protocol may override it).
        extra: family-specific parameters (drawer pull length, hole clearance, ...).
    """

    task_id: str
    start_xy: tuple[float, float]
    goal_xy: tuple[float, float]
    tolerance_m: float
    qc_tolerance_m: float
    human_xy: tuple[float, float] | None = None
    human_reach: tuple[float, float, float] | None = None
    target_quality: float = 0.8
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def family(self) -> str:
        return self.task_id.split("/", 1)[0]


def footprint_xy(body: Body) -> np.ndarray:
    """Corners (n, 2) of the planar bounding boxes of a body's geoms where it starts, m."""
    out = []
    for geom in body.geoms:
        hx, hy = (geom.size[0], geom.size[1]) if geom.shape == "box" else (geom.size[0],) * 2
        cx, cy = body.pos[0] + geom.pos[0], body.pos[1] + geom.pos[1]
        out.extend([(cx - hx, cy - hy), (cx + hx, cy - hy), (cx + hx, cy + hy), (cx - hx, cy + hy)])
    return np.array(out)


class Task(ABC):
    """A task family bound to one instance (`TaskSpec`)."""

    family: str = ""
    #: Scene body tracked as "the object" in observations and scoring.
    object_name: str = ""
    #: Scene body the hand grasps when it is not the scored object (a tool), else "".
    tool_name: str = ""
    #: Faults of the taxonomy that make sense for this family.
    faults: tuple[str, ...] = ()
    #: Whether the gripper may weld the object (grasp model).
    graspable: bool = True

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec

    @property
    def task_id(self) -> str:
        return self.spec.task_id

    @abstractmethod
    def bodies(self) -> tuple[Body, ...]:
        """Task bodies (object, fixtures) at their nominal start."""

    @abstractmethod
    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        """Goal position (3,) of the tracked point, given the placement offset (2,) in m."""

    @abstractmethod
    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        """Family goal error e (m) of a physics state."""

    def point_error(self, point: np.ndarray, goal: np.ndarray) -> float:
        """Goal error e (m) seen from the tracked point alone — what a lab's tracker or camera
        measures (no slide position, no speed): the family's `goal_error` of a state whose
        tracked point is `point`."""
        state = TaskState(np.asarray(point, dtype=float), 0.0, 0.0, False)
        return self.goal_error(state, goal)

    @abstractmethod
    def grasp_width(self) -> float:
        """Width (m) of the grasped part across the fingers."""

    @property
    def grasped_name(self) -> str:
        """The body the hand grasps: the tool when the task has one, else the scored object."""
        return self.tool_name or self.object_name

    def tracked_point(self, body_pos: np.ndarray) -> np.ndarray:
        """Tracked point (3,) from the object body's origin (the handle for drawers)."""
        return body_pos

    def placement_bodies(self) -> tuple[str, ...]:
        """Bodies moved by the placement offset (the object; the drawer for drawers)."""
        return (self.object_name,)

    def scene(self) -> Scene:
        """The whole scene: task bodies, the human proxy if any, the hidden obstacle, the
        (parked) distractors."""
        extra: list[Body] = [obstacle()]
        human = self.human()
        if human is not None:
            extra.extend(human.bodies())
        return Scene(bodies=(*self.bodies(), *extra, *distractor_bodies()))

    def work_region_xy(self) -> np.ndarray:
        """Planar points (n, 2), m, whose convex hull holds everything the task moves: each
        task body's footprint where it starts, and the scored object's where the goal puts it
        (distractors stand clear of it, `sim_suites.distractors`)."""
        start = np.array(self.spec.start_xy)
        shift = self.goal_pos(np.zeros(2))[:2] - self.tracked_point(np.array([*start, 0.0]))[:2]
        points = []
        for body in self.bodies():
            corners = footprint_xy(body)
            points.append(corners)
            if body.name == self.object_name:
                points.append(corners + shift)
        return np.concatenate(points)

    def human(self) -> HumanProxy | None:
        """The human proxy of the instance (None when nobody is in the cell)."""
        if self.spec.human_xy is None:
            return None
        reach = None if self.spec.human_reach is None else Reach(*self.spec.human_reach)
        return HumanProxy(self.spec.human_xy, reach)

    def quality(self, state: TaskState, goal: np.ndarray) -> float:
        """Graded quality q of a state (see the module docstring)."""
        return graded_quality(self.goal_error(state, goal), self.spec.tolerance_m)

    def complete(self, state: TaskState, goal: np.ndarray, error: float | None = None) -> bool:
        """Done: within tolerance, released and at rest (held COMPLETION_HOLD_STEPS by the env).

        `error` may pass the already computed goal error of `state`.
        """
        e = self.goal_error(state, goal) if error is None else error
        return (
            e <= self.spec.tolerance_m
            and not state.attached
            and state.object_speed < REST_SPEED_MPS
        )

    def dead_end_xy(self, start: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """Where the planner-dead-end obstacle appears: midway along the transport path."""
        return 0.5 * (start[:2] + goal[:2])
