"""peg_insert: pick a square peg and insert it into a square hole with a small clearance.

Goal error (the e of the scoring rule in `sim_suites.tasks.base`): √(ℓ² + max(0, z − z_goal)²),
the lateral offset ℓ from the hole axis combined with the insertion depth still missing
(z_goal = the peg's centre when it stands on the hole floor); tolerance 1 cm.

The reference script is pick-and-place's (`sim_suites.families.pick_place`) grasping the peg
near its top and placing it by aligning it over the hole and inserting slowly, backing off and
re-aligning when it jams on the rim. The camera reference finds the red peg's top face.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.families.pick_place import PickAndPlaceScript
from sim_suites.policies.part_finder import PartModel
from sim_suites.policies.script_base import Obs, toward
from sim_suites.tasks.base import Task, TaskSpec, TaskState
from sim_suites.tasks.catalog import Family, register_family

PEG_HALF = (0.012, 0.012, 0.04)
HOLE_DEPTH = 0.04
WALL = 0.03
#: Smoothing factor of the peg-in-gripper offset estimate (exponential moving average).
PEG_FILTER = 0.2
#: Scoring tolerance and QC tracking tolerance of every instance (m).
TOLERANCE_M = 0.01
QC_TOLERANCE_M = 0.01

RED = (0.8, 0.2, 0.2, 1.0)
WOOD = (0.6, 0.45, 0.3, 1.0)


class PegInsert(Task):
    """Pick a square peg and insert it into a square hole with a small clearance.

    Instance extra: `clearance_m` (hole width minus peg width, m; default 0.004).
    """

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
            Geom("box", (WALL / 2, w + WALL, h), pos=(w + WALL / 2, 0.0, h), rgba=WOOD),
            Geom("box", (WALL / 2, w + WALL, h), pos=(-w - WALL / 2, 0.0, h), rgba=WOOD),
            Geom("box", (w, WALL / 2, h), pos=(0.0, w + WALL / 2, h), rgba=WOOD),
            Geom("box", (w, WALL / 2, h), pos=(0.0, -w - WALL / 2, h), rgba=WOOD),
        )
        return (
            Body(
                name="peg",
                role="object",
                geoms=(Geom("box", PEG_HALF, rgba=RED),),
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


class PegInsertScript(PickAndPlaceScript):
    """Pick the peg near its top, align it over the hole, insert slowly, release."""

    GRASP_DZ = 0.02
    ALIGN_TOL = 0.0005
    JAM_LAG_M = 0.008
    JAM_STEPS = 15

    def place(self, obs: Obs) -> np.ndarray:
        tcp, hole = obs["tcp_pos"], obs["goal_pos"]
        # Low-pass the peg's measured position: the tight hole needs sub-millimetre alignment,
        # finer than the sensor noise of a single reading.
        for key, value in (("peg_f", obs["object_pos"]), ("tcp_f", tcp)):
            old = self.memory.get(key)
            self.memory[key] = value if old is None else old + PEG_FILTER * (value - old)
        peg = self.memory["peg_f"]
        offset = self.memory["tcp_f"] - peg
        lateral = hole[:2] - peg[:2]
        entry_z = HOLE_DEPTH + PEG_HALF[2] + 0.008  # peg bottom 8 mm above the hole
        stage = self.memory.get("stage", np.array([0.0]))[0]
        if stage == 0.0:  # align above the hole, then dwell until the alignment is steady
            target = np.array([hole[0] + offset[0], hole[1] + offset[1], entry_z + offset[2]])
            aligned = float(np.linalg.norm(lateral)) < self.ALIGN_TOL
            steady = self.near(tcp, target, 0.003) and (aligned or self.phase_steps > 60)
            dwell = self.memory.get("dwell", np.array([0.0]))[0] + 1 if steady else 0.0
            self.memory["dwell"] = np.array([dwell])
            if dwell >= 5:
                self.memory["stage"] = np.array([1.0])
                self.memory["dwell"] = np.array([0.0])
                self.plan_depth += 1
            return toward(tcp, target, 0.4)
        # Insert: keep servoing the lateral error, go down slowly.
        target = np.array([hole[0] + offset[0], hole[1] + offset[1], hole[2] + offset[2] + 0.002])
        lag = float(np.linalg.norm(obs["tcp_target"] - tcp))
        best = float(self.memory.get("best_z", np.array([np.inf]))[0])
        if peg[2] < best - 0.0005:
            self.memory["best_z"] = np.array([peg[2]])
            self.memory["stuck"] = np.array([0.0])
        else:
            self.memory["stuck"] = self.memory.get("stuck", np.array([0.0])) + 1.0
        stuck = float(self.memory["stuck"][0]) > self.JAM_STEPS
        if lag > self.JAM_LAG_M and stuck and peg[2] > hole[2] + 0.008:
            # Jammed on the rim (pushing without going down): back off, re-align.
            self.memory["stage"] = np.array([0.0])
            self.memory.pop("best_z", None)
            self.memory.pop("stuck", None)
            self.phase_steps = 0
            self.plan_depth += 1
            return toward(tcp, tcp + np.array([0.0, 0.0, 0.02]))
        if peg[2] < hole[2] + 0.004:
            self.memory.pop("stage", None)
            self.goto("release")
        return toward(tcp, target, 0.15)

    def waiting(self, obs: Obs) -> bool:
        # During insertion a lagging TCP means a jam, which `place` handles by backing off.
        inserting = self.phase == "place" and self.memory.get("stage", [0.0])[0] == 1.0
        return super().waiting(obs) and not inserting


def _instance(
    name: str, start: tuple[float, float], hole: tuple[float, float], **kw: Any
) -> TaskSpec:
    return TaskSpec(
        f"peg_insert/{name}",
        start,
        hole,
        tolerance_m=TOLERANCE_M,
        qc_tolerance_m=QC_TOLERANCE_M,
        **kw,
    )


FAMILY = register_family(
    Family(
        task=PegInsert,
        instances=(
            _instance("peg_center", (0.42, -0.15), (0.55, 0.10)),
            _instance("peg_left", (0.40, 0.00), (0.50, 0.25)),
            _instance(
                "peg_right",
                (0.45, 0.05),
                (0.50, -0.22),
                human_xy=(0.30, -0.72),
                human_reach=(1.5, 0.15, 2.0),
            ),
            _instance("peg_far", (0.40, -0.10), (0.66, 0.05)),
            _instance("peg_tight", (0.42, -0.15), (0.55, 0.10), extra={"clearance_m": 0.0015}),
        ),
        script=PegInsertScript,
        vision=PartModel("red", (0.0, 0.0, -PEG_HALF[2])),
    )
)
