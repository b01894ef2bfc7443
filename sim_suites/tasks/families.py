"""The task families: pick-and-place, push, drawer opening, peg insertion (and tool use, in
`sim_suites.tasks.tool_use`; mobile pick-and-place, in `sim_suites.tasks.mobile`).

Goal errors (the e of the scoring rule in `sim_suites.tasks.base`):

- pick_place: ‖p_cube − g‖, the 3-D distance of the cube's centre from the goal resting pose.
- push: ‖p_block,xy − g_xy‖, the planar distance of the block from the goal.
- drawer_open: max(0, d_goal − d), how much of the required pull d_goal is still missing
  (d = the drawer's slide position; from the handle's position p alone, max(0, (g − p) · a)
  with a the pull direction and g the handle's goal).
- peg_insert: √(ℓ² + max(0, z − z_goal)²), lateral offset ℓ from the hole axis combined with the
  insertion depth still missing (z_goal = the peg's centre when it stands on the hole floor).
"""

from __future__ import annotations

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.tasks.base import CUBE_HALF, Task, TaskState
from sim_suites.tasks.mobile import MobilePickPlace
from sim_suites.tasks.tool_use import ToolUse

BLOCK_HALF = (0.025, 0.025, 0.02)
PEG_HALF = (0.012, 0.012, 0.04)
HOLE_DEPTH = 0.04
WALL = 0.03
DRAWER_HALF = (0.06, 0.10, 0.04)
DRAWER_Z = 0.045
HANDLE_OFFSET = np.array([-0.035, 0.0, 0.055])
HANDLE_HALF = (0.012, 0.015, 0.015)
#: The direction the drawer (and its handle) moves when pulled open: toward the robot.
SLIDE_AXIS = (-1.0, 0.0, 0.0)

_RED = (0.8, 0.2, 0.2, 1.0)
_BLUE = (0.2, 0.3, 0.8, 1.0)
_WOOD = (0.6, 0.45, 0.3, 1.0)


class PickPlace(Task):
    """Pick a 4 cm cube and place it on a goal spot of the table.

    Instance extras: `mass_kg` (default 0.1, a plastic cube; a steel one weighs 0.5) and
    `friction` (its sliding friction against the pads, default 0.8; polished steel ~0.35).
    """

    family = "pick_place"
    object_name = "cube"
    faults = ("grasp_slip", "perception_dropout", "planner_dead_end", "actuator_stall")

    def bodies(self) -> tuple[Body, ...]:
        x, y = self.spec.start_xy
        return (
            Body(
                name="cube",
                role="object",
                geoms=(Geom("box", (CUBE_HALF,) * 3, rgba=_RED),),
                joint="free",
                pos=(x, y, CUBE_HALF),
                mass=float(self.spec.extra.get("mass_kg", 0.1)),
                friction=float(self.spec.extra.get("friction", 0.8)),
                grasp_width=2 * CUBE_HALF,
            ),
        )

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        return np.array([*self.spec.goal_xy, CUBE_HALF])

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        return float(np.linalg.norm(state.object_pos - goal))

    def grasp_width(self) -> float:
        return 2 * CUBE_HALF


class Push(Task):
    """Push a 5 cm block across the table to a goal spot (no grasping).

    Instance extras: `mass_kg` (default 0.3) and `friction` (the block's sliding friction,
    default 0.5).
    """

    family = "push"
    object_name = "block"
    faults = ("perception_dropout", "actuator_stall")
    graspable = False

    def bodies(self) -> tuple[Body, ...]:
        x, y = self.spec.start_xy
        return (
            Body(
                name="block",
                role="object",
                geoms=(Geom("box", BLOCK_HALF, rgba=_BLUE),),
                joint="free",
                pos=(x, y, BLOCK_HALF[2]),
                mass=float(self.spec.extra.get("mass_kg", 0.3)),
                friction=float(self.spec.extra.get("friction", 0.5)),
                grasp_width=2 * BLOCK_HALF[1],
            ),
        )

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        return np.array([*self.spec.goal_xy, BLOCK_HALF[2]])

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        return float(np.linalg.norm(state.object_pos[:2] - goal[:2]))

    def grasp_width(self) -> float:
        return 2 * BLOCK_HALF[1]


class DrawerOpen(Task):
    """Open a drawer (a prismatic joint toward the robot) by pulling its handle a set length.

    Instance extras: `pull_m` (how far to pull, m; default 0.15) and `slide_friction_n` (the
    runners' Coulomb friction, N; default 2).
    """

    family = "drawer_open"
    object_name = "drawer"
    faults = ("grasp_slip", "perception_dropout", "actuator_stall")

    @property
    def pull_m(self) -> float:
        return float(self.spec.extra.get("pull_m", 0.15))

    @property
    def slide_friction_n(self) -> float:
        """Coulomb friction of the drawer's runners (N): 2 N runs freely, 20 N sticks."""
        return float(self.spec.extra.get("slide_friction_n", 2.0))

    def bodies(self) -> tuple[Body, ...]:
        x, y = self.spec.start_xy
        return (
            Body(
                name="drawer",
                role="drawer",
                geoms=(
                    Geom("box", DRAWER_HALF, rgba=_WOOD),
                    Geom("box", HANDLE_HALF, pos=tuple(HANDLE_OFFSET), rgba=(0.2, 0.2, 0.2, 1)),
                ),
                joint="slide",
                pos=(x, y, DRAWER_Z),
                mass=1.0,
                slide_axis=SLIDE_AXIS,
                slide_range=(0.0, 0.30),
                slide_damping=5.0,
                slide_friction_n=self.slide_friction_n,
                grasp_width=2 * HANDLE_HALF[1],
            ),
        )

    def tracked_point(self, body_pos: np.ndarray) -> np.ndarray:
        return body_pos + HANDLE_OFFSET

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        x, y = self.spec.start_xy
        start = np.array([x + start_offset[0], y + start_offset[1], DRAWER_Z]) + HANDLE_OFFSET
        return start - np.array([self.pull_m, 0.0, 0.0])

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        return max(0.0, self.pull_m - state.slide_q)

    def point_error(self, point: np.ndarray, goal: np.ndarray) -> float:
        """The pull still missing, from the handle's position: the goal is the handle pulled
        `pull_m` along the slide axis, so e = max(0, (g − p) · a), a = the pull direction."""
        axis = np.array(SLIDE_AXIS)
        return max(0.0, float((np.asarray(goal) - np.asarray(point)) @ axis))

    def grasp_width(self) -> float:
        return 2 * HANDLE_HALF[1]

    def dead_end_xy(self, start: np.ndarray, goal: np.ndarray) -> np.ndarray:
        return 0.5 * (start[:2] + goal[:2])


class PegInsert(Task):
    """Pick a square peg and insert it into a square hole with a small clearance."""

    family = "peg_insert"
    object_name = "peg"
    faults = ("grasp_slip", "perception_dropout", "planner_dead_end", "actuator_stall")

    @property
    def clearance_m(self) -> float:
        return float(self.spec.extra.get("clearance_m", 0.004))

    def bodies(self) -> tuple[Body, ...]:
        x, y = self.spec.start_xy
        hx, hy = self.spec.goal_xy
        w = PEG_HALF[0] + self.clearance_m / 2
        h = HOLE_DEPTH / 2
        walls = (
            Geom("box", (WALL / 2, w + WALL, h), pos=(w + WALL / 2, 0.0, h), rgba=_WOOD),
            Geom("box", (WALL / 2, w + WALL, h), pos=(-w - WALL / 2, 0.0, h), rgba=_WOOD),
            Geom("box", (w, WALL / 2, h), pos=(0.0, w + WALL / 2, h), rgba=_WOOD),
            Geom("box", (w, WALL / 2, h), pos=(0.0, -w - WALL / 2, h), rgba=_WOOD),
        )
        return (
            Body(
                name="peg",
                role="object",
                geoms=(Geom("box", PEG_HALF, rgba=_RED),),
                joint="free",
                pos=(x, y, PEG_HALF[2]),
                mass=0.08,
                friction=0.8,
                grasp_width=2 * PEG_HALF[1],
            ),
            Body(name="hole", role="fixture", geoms=walls, pos=(hx, hy, 0.0)),
        )

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        return np.array([*self.spec.goal_xy, PEG_HALF[2]])

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        lateral = float(np.linalg.norm(state.object_pos[:2] - goal[:2]))
        depth = max(0.0, float(state.object_pos[2] - goal[2]))
        return float(np.hypot(lateral, depth))

    def grasp_width(self) -> float:
        return 2 * PEG_HALF[1]


FAMILY_CLASSES: dict[str, type[Task]] = {
    cls.family: cls for cls in (PickPlace, Push, DrawerOpen, PegInsert, ToolUse, MobilePickPlace)
}
