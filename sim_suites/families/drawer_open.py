"""drawer_open: open a drawer (a prismatic joint toward the robot) by pulling its handle a set
length.

Goal error (the e of the scoring rule in `sim_suites.tasks.base`): max(0, d_goal − d), how much
of the required pull d_goal is still missing (d = the drawer's slide position; from the handle's
position p alone, max(0, (g − p) · a) with a the pull direction and g the handle's goal);
tolerance 1.5 cm.

The reference script grasps the handle from above, pulls it along the drawer's axis to the goal
and releases it. The camera reference sees the drawer's wooden top face and knows where the
handle sits on the drawer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.policies.part_finder import PartModel
from sim_suites.policies.script_base import Obs, ScriptedPolicy, toward
from sim_suites.tasks.base import Task, TaskSpec, TaskState
from sim_suites.tasks.catalog import Family, register_family

DRAWER_HALF = (0.06, 0.10, 0.04)
DRAWER_Z = 0.045
HANDLE_OFFSET = np.array([-0.035, 0.0, 0.055])
HANDLE_HALF = (0.012, 0.015, 0.015)
#: The direction the drawer (and its handle) moves when pulled open: toward the robot.
SLIDE_AXIS = (-1.0, 0.0, 0.0)
#: Scoring tolerance and QC tracking tolerance of every instance (m).
TOLERANCE_M = 0.015
QC_TOLERANCE_M = 0.03
#: The harder instances' runners: 22 N of friction, which pulls the handle out of a weak grip.
STICKY_N = 22.0
#: The proxy of `drawer_left` / `sticky_left`: a person standing beside the table.
LEFT_PERSON: dict[str, Any] = {"human_xy": (0.45, 0.75)}

WOOD = (0.6, 0.45, 0.3, 1.0)


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
                    Geom("box", DRAWER_HALF, rgba=WOOD),
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


class DrawerScript(ScriptedPolicy):
    """Grasp the handle from above, pull it along the drawer's axis to the goal, release."""

    HOVER = 0.08

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, handle, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        grasped = obs["grasped"][0] > 0.5
        if self.phase == "pull" and not grasped:
            self.goto("approach")  # slipped off the handle: grasp it again
        if self.phase == "start":
            self.goto("approach")
        if self.phase == "approach":
            return self.approach_phase(obs, handle, self.HOVER, 0.008)
        if self.phase == "descend":
            if self.near(tcp, handle, 0.005):
                self.goto("close")
            return toward(tcp, handle, 0.5)
        if self.phase == "close":
            return self.close_phase(obs, handle, "pull", 30)
        if self.phase == "pull":
            offset = tcp - handle
            target = goal + offset - np.array([0.006, 0.0, 0.0])
            if handle[0] <= goal[0] + 0.001:
                self.goto("release")
            return toward(tcp, target, 0.5)
        if self.phase == "release":
            return self.release_phase(obs)
        if self.phase == "retreat":
            return self.retreat_phase(obs)
        return np.zeros(3)


def _instance(name: str, xy: tuple[float, float], pull_m: float, **kw: Any) -> TaskSpec:
    """A drawer standing at `xy` (start and goal: the goal is the pull), pulled `pull_m`."""
    extra = {"pull_m": pull_m, **kw.pop("extra", {})}
    return TaskSpec(
        f"drawer_open/{name}",
        xy,
        xy,
        tolerance_m=TOLERANCE_M,
        qc_tolerance_m=QC_TOLERANCE_M,
        extra=extra,
        **kw,
    )


STICKY = {"slide_friction_n": STICKY_N}

FAMILY = register_family(
    Family(
        task=DrawerOpen,
        instances=(
            _instance("drawer_center", (0.60, 0.00), 0.15),
            _instance("drawer_left", (0.60, 0.18), 0.15, **LEFT_PERSON),
            _instance("drawer_right", (0.60, -0.18), 0.15),
            _instance("drawer_short_pull", (0.60, 0.05), 0.08),
            _instance("drawer_long_pull", (0.65, -0.05), 0.22),
            _instance("sticky_center", (0.60, 0.00), 0.15, extra=STICKY),
            _instance("sticky_left", (0.60, 0.18), 0.15, **LEFT_PERSON, extra=STICKY),
            _instance("sticky_right", (0.60, -0.18), 0.15, extra=STICKY),
            _instance("sticky_short_pull", (0.60, 0.05), 0.08, extra=STICKY),
            _instance("sticky_long_pull", (0.65, -0.05), 0.22, extra=STICKY),
        ),
        script=DrawerScript,
        # The drawer's top face is seen; the handle sits at HANDLE_OFFSET from the body centre.
        vision=PartModel(
            "wood",
            (
                float(HANDLE_OFFSET[0]),
                float(HANDLE_OFFSET[1]),
                float(HANDLE_OFFSET[2]) - DRAWER_HALF[2],
            ),
        ),
    )
)
