"""A toy task family, defined outside `sim_suites` the way a lab would add one: `nudge`, push a
4 cm block 10 cm straight ahead with the closed fingers.

Everything about the family is here — the task (its body, goal and goal error), five instances,
the scripted reference policy — and one `register_family` call (made by the test that uses it,
`tests/test_toy_family.py`, so the family exists only while that test runs).

Goal error: |x_block − x_goal| + |y_block − y_goal| (the planar L1 distance, m), tolerance 2 cm.
"""

from __future__ import annotations

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.policies.script_base import CLOSED, Obs, ScriptedPolicy, toward
from sim_suites.tasks import Family, Task, TaskSpec, TaskState

HALF_M = 0.02
#: How far ahead the block goes (m).
NUDGE_M = 0.10
#: From the block's centre to the TCP when the closed fingers touch its back face (m): the
#: block's half-width plus the fingers' half-thickness.
CONTACT_M = 0.029
PUSH_Z_M = 0.03
HOVER_Z_M = 0.10


class Nudge(Task):
    """Push a 4 cm block `NUDGE_M` straight ahead (+x)."""

    family = "nudge"
    object_name = "block"
    faults = ("perception_dropout",)
    graspable = False

    def bodies(self) -> tuple[Body, ...]:
        x, y = self.spec.start_xy
        return (
            Body(
                name="block",
                role="object",
                geoms=(Geom("box", (HALF_M,) * 3, rgba=(0.2, 0.65, 0.25, 1.0)),),
                joint="free",
                pos=(x, y, HALF_M),
                mass=0.2,
                friction=0.5,
                grasp_width=2 * HALF_M,
            ),
        )

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        x, y = self.spec.goal_xy
        return np.array([x + start_offset[0], y + start_offset[1], HALF_M])

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        return float(np.abs(state.object_pos[:2] - goal[:2]).sum())

    def grasp_width(self) -> float:
        return 2 * HALF_M


class NudgeScript(ScriptedPolicy):
    """Go behind the block, lower the closed fingers, push it ahead to the goal, rise."""

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.gripper = CLOSED

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, block, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        behind = np.array([block[0] - CONTACT_M - 0.02, block[1], PUSH_Z_M])
        if self.phase == "start":
            self.goto("above")
        if self.phase == "above":
            above = behind + np.array([0.0, 0.0, HOVER_Z_M - PUSH_Z_M])
            if self.near(tcp, above, 0.01):
                self.goto("lower")
            return toward(tcp, above)
        if self.phase == "lower":
            if self.near(tcp, behind, 0.006):
                self.goto("push")
            return toward(tcp, behind, 0.6)
        if self.phase == "push":
            if goal[0] - block[0] < 0.003:
                self.goto("rise")
            target = np.array([goal[0] - CONTACT_M + 0.004, goal[1], PUSH_Z_M])
            return toward(tcp, target, 0.3)
        return toward(tcp, np.array([tcp[0], tcp[1], HOVER_Z_M]))


def _instance(name: str, x: float, y: float) -> TaskSpec:
    return TaskSpec(
        f"nudge/{name}", (x, y), (x + NUDGE_M, y), tolerance_m=0.02, qc_tolerance_m=0.03
    )


NUDGE = Family(
    task=Nudge,
    instances=(
        _instance("center", 0.45, 0.00),
        _instance("left", 0.45, 0.15),
        _instance("right", 0.45, -0.15),
        _instance("near", 0.38, 0.05),
        _instance("far", 0.55, -0.05),
    ),
    script=NudgeScript,
    max_steps=250,
)
