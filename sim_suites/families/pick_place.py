"""pick_place: pick a 4 cm cube and place it on a goal spot of the table.

Goal error (the e of the scoring rule in `sim_suites.tasks.base`): ‖p_cube − g‖, the 3-D distance
of the cube's centre from the goal resting pose; tolerance 2 cm.

The reference script picks the cube, carries it (over an obstacle if one is reported), places
it and retreats; peg insertion (`sim_suites.families.peg_insert`) changes its grasp height and
its placing motion. The camera reference finds the red cube's top face.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.policies.part_finder import PartModel
from sim_suites.policies.script_base import Obs, ScriptedPolicy, toward
from sim_suites.tasks.base import Task, TaskSpec, TaskState
from sim_suites.tasks.catalog import Family, register_family

CUBE_HALF = 0.02
#: Scoring tolerance and QC tracking tolerance of every instance (m).
TOLERANCE_M = 0.02
QC_TOLERANCE_M = 0.02
#: The harder instances' cube: 4 cm of steel (0.5 kg) with polished faces (friction 0.3 against
#: the pads) that a weak grip drops.
STEEL = {"mass_kg": 0.5, "friction": 0.3}
#: The proxy of `cube_left` / `steel_left`: where the person stands and how they reach in.
LEFT_PERSON: dict[str, Any] = {"human_xy": (0.30, 0.78), "human_reach": (2.0, 0.2, 1.5)}

RED = (0.8, 0.2, 0.2, 1.0)


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
                geoms=(Geom("box", (CUBE_HALF,) * 3, rgba=RED),),
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


class PickAndPlaceScript(ScriptedPolicy):
    """Pick the object, carry it (over an obstacle if one is reported), place it, retreat.

    Subclasses change the grasp height and the placing motion (peg insertion).
    """

    CARRY_Z = 0.15
    HOVER = 0.10
    GRASP_DZ = 0.0
    CLOSE_TIMEOUT = 30

    def carry_z(self, obs: Obs) -> float:
        obstacle = obs["obstacle"]
        if obstacle[3] > 0.5:
            return max(self.CARRY_Z, float(obstacle[2]) + 0.12)
        return self.CARRY_Z

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, obj, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        grasped = obs["grasped"][0] > 0.5
        grasp_point = obj + np.array([0.0, 0.0, self.GRASP_DZ])
        carrying = self.phase in ("lift", "transfer", "place")
        if carrying and not grasped:
            self.goto("approach")  # slipped: re-grasp
        if self.phase == "start":
            self.goto("approach")
        if self.phase == "approach":
            return self.approach_phase(obs, grasp_point, self.HOVER, 0.01)
        if self.phase == "descend":
            if self.near(tcp, grasp_point, 0.006):
                self.goto("close")
            xy_ok = self.near(tcp[:2], grasp_point[:2], 0.02)
            return toward(
                tcp, grasp_point if xy_ok else grasp_point + np.array([0.0, 0.0, self.HOVER]), 0.6
            )
        if self.phase == "close":
            return self.close_phase(obs, grasp_point, "lift", self.CLOSE_TIMEOUT)
        z_carry = self.carry_z(obs)
        if self.phase == "lift":
            up = np.array([tcp[0], tcp[1], z_carry])
            if tcp[2] > z_carry - 0.01:
                self.goto("transfer")
            return toward(tcp, up)
        if self.phase == "transfer":
            if tcp[2] < z_carry - 0.03:
                self.memory.pop("placed", None)
                self.goto("lift")  # an obstacle appeared: re-plan over it
                return toward(tcp, np.array([tcp[0], tcp[1], z_carry]))
            offset = tcp - obj  # where the object hangs relative to the TCP
            above = np.array([goal[0] + offset[0], goal[1] + offset[1], z_carry])
            if self.near(tcp[:2], above[:2], 0.004):
                self.goto("place")
            return toward(tcp, above)
        if self.phase == "place":
            return self.place(obs)
        if self.phase == "release":
            return self.release_phase(obs)
        if self.phase == "retreat":
            return self.retreat_phase(obs)
        return np.zeros(3)

    def place(self, obs: Obs) -> np.ndarray:
        tcp, obj, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        offset = tcp - obj
        target = goal + offset + np.array([0.0, 0.0, 0.004])
        if self.near(tcp, target, 0.005):
            self.goto("release")
        return toward(tcp, target, 0.5)


def _instance(
    name: str, start: tuple[float, float], goal: tuple[float, float], **kw: Any
) -> TaskSpec:
    return TaskSpec(
        f"pick_place/{name}",
        start,
        goal,
        tolerance_m=TOLERANCE_M,
        qc_tolerance_m=QC_TOLERANCE_M,
        **kw,
    )


FAMILY = register_family(
    Family(
        task=PickPlace,
        instances=(
            _instance("cube_center", (0.50, -0.02), (0.50, 0.24)),
            _instance("cube_left", (0.45, 0.20), (0.60, 0.00), **LEFT_PERSON),
            _instance("cube_right", (0.45, -0.20), (0.60, 0.05)),
            _instance("cube_far", (0.65, 0.05), (0.45, -0.15)),
            _instance("cube_near", (0.35, -0.05), (0.55, -0.20)),
            _instance("steel_center", (0.50, -0.02), (0.50, 0.24), extra=STEEL),
            _instance("steel_left", (0.45, 0.20), (0.60, 0.00), **LEFT_PERSON, extra=STEEL),
            _instance("steel_right", (0.45, -0.20), (0.60, 0.05), extra=STEEL),
            _instance("steel_far", (0.65, 0.05), (0.45, -0.15), extra=STEEL),
            _instance("steel_near", (0.35, -0.05), (0.55, -0.20), extra=STEEL),
        ),
        script=PickAndPlaceScript,
        vision=PartModel("red", (0.0, 0.0, -CUBE_HALF)),
    )
)
