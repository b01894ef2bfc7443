"""push: push a 5 cm block across the table to a goal spot (no grasping).

Goal error (the e of the scoring rule in `sim_suites.tasks.base`): ‖p_block,xy − g_xy‖, the
planar distance of the block from the goal; tolerance 2.5 cm.

The reference script pushes the block with the closed fingers along the line through it toward
the goal, re-positioning behind it when it drifts off that line. The camera reference finds the
blue block and tracks it always (the hand never covers it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.controller import V_MAX_MPS
from sim_suites.policies.part_finder import PartModel
from sim_suites.policies.script_base import CLOSED, Obs, ScriptedPolicy, toward
from sim_suites.tasks.base import Task, TaskSpec, TaskState
from sim_suites.tasks.catalog import Family, register_family

BLOCK_HALF = (0.025, 0.025, 0.02)
#: Scoring tolerance and QC tracking tolerance of every instance (m).
TOLERANCE_M = 0.025
QC_TOLERANCE_M = 0.03
#: The harder instances' block: rubber (friction 0.9), which tips when pushed on a grippy table.
RUBBER_BLOCK = {"friction": 0.9}
#: The proxy of `block_right` / `rubber_right`: a person standing beside the table.
RIGHT_PERSON: dict[str, Any] = {"human_xy": (0.35, -0.72)}

BLUE = (0.2, 0.3, 0.8, 1.0)


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
                geoms=(Geom("box", BLOCK_HALF, rgba=BLUE),),
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


class PushScript(ScriptedPolicy):
    """Push the block toward the goal with the closed fingers, re-positioning when off-line."""

    PUSH_Z = 0.03
    HOVER_Z = 0.10
    CONTACT = 0.034  # block half-width + finger half-thickness (m)
    LINE_TOL = 0.012

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.gripper = CLOSED

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, block, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        to_goal = goal[:2] - block[:2]
        dist = float(np.linalg.norm(to_goal))
        self.gripper = CLOSED
        if self.phase == "start":
            self.goto("reposition")
        if self.phase == "done" or (dist < 0.008 and self.phase == "push"):
            self.goto("done")
            return toward(tcp, np.array([tcp[0], tcp[1], self.HOVER_Z]))
        u = to_goal / max(dist, 1e-9)
        behind = block[:2] - u * (self.CONTACT + 0.02)
        if self.phase == "reposition":
            hover = np.array([behind[0], behind[1], self.HOVER_Z])
            if tcp[2] < self.HOVER_Z - 0.02 and not self.near(tcp[:2], behind, 0.01):
                return toward(tcp, np.array([tcp[0], tcp[1], self.HOVER_Z]))
            if self.near(tcp[:2], behind, 0.006):
                self.goto("lower")
            return toward(tcp, hover)
        if self.phase == "lower":
            low = np.array([behind[0], behind[1], self.PUSH_Z])
            if self.near(tcp, low, 0.006):
                self.goto("push")
            return toward(tcp, low, 0.6)
        # Push: stay on the line through the block toward the goal, advance along it.
        rel = tcp[:2] - block[:2]
        along = float(rel @ u)
        across = float(rel @ np.array([-u[1], u[0]]))
        if abs(across) > self.LINE_TOL or along > -self.CONTACT + 0.01:
            self.goto("reposition")
            return toward(tcp, np.array([tcp[0], tcp[1], self.HOVER_Z]))
        speed = min(0.35, max(0.08, 2.0 * dist / V_MAX_MPS))
        contact = block[:2] - u * (self.CONTACT - 0.006)
        target = np.array([contact[0], contact[1], self.PUSH_Z])
        v = toward(tcp, target, 1.0)
        v[:2] += u * speed
        return v


def _instance(
    name: str, start: tuple[float, float], goal: tuple[float, float], **kw: Any
) -> TaskSpec:
    return TaskSpec(
        f"push/{name}", start, goal, tolerance_m=TOLERANCE_M, qc_tolerance_m=QC_TOLERANCE_M, **kw
    )


FAMILY = register_family(
    Family(
        task=Push,
        instances=(
            _instance("block_forward", (0.40, 0.00), (0.56, 0.00)),
            _instance("block_left", (0.50, -0.08), (0.50, 0.10)),
            _instance("block_right", (0.50, 0.08), (0.50, -0.10), **RIGHT_PERSON),
            _instance("block_long", (0.38, 0.00), (0.64, 0.00)),
            _instance("block_diagonal", (0.42, -0.10), (0.56, 0.04)),
            _instance("rubber_forward", (0.40, 0.00), (0.56, 0.00), extra=RUBBER_BLOCK),
            _instance("rubber_left", (0.50, -0.08), (0.50, 0.10), extra=RUBBER_BLOCK),
            _instance(
                "rubber_right", (0.50, 0.08), (0.50, -0.10), **RIGHT_PERSON, extra=RUBBER_BLOCK
            ),
            _instance("rubber_long", (0.38, 0.00), (0.64, 0.00), extra=RUBBER_BLOCK),
            _instance("rubber_diagonal", (0.42, -0.10), (0.56, 0.04), extra=RUBBER_BLOCK),
        ),
        script=PushScript,
        vision=PartModel("blue", (0.0, 0.0, -BLOCK_HALF[2]), grasped=False),
    )
)
