"""tool_use: grasp an L-shaped hook and pull an out-of-reach block into a goal region.

The block lies beyond where the gripper can get behind it (x ≈ 0.82–0.84 m; the hand's reach at
table height ends near 0.80 m); the hook lies within reach. The robot grasps the hook's shaft,
lifts it over the block, lowers its foot behind the block and pulls the block toward itself.

What is grasped (the tool, `tool_name`) and what is scored (the block, `object_name`) are
separate bodies: the grasp detector watches the fingers on the hook, observations report the
block as the object and the hook's grasp point as `tool_pos`, contact between hook and block is
intended (not counted against control quality), and quality comes from the block alone.

Goal error: ‖p_block,xy − g_xy‖, the planar distance of the block from the goal region's centre
(as for push). Hook geometry (hook frame = its grasp point, the body origin; x along the shaft
toward the foot): shaft HOOK_SHAFT_HALF centred at HOOK_SHAFT_X, foot HOOK_FOOT_HALF centred at
HOOK_FOOT_POS, reaching toward −y so that with the shaft beside the block (PULL_SIDE_M to its
left) the foot spans the block's far face.

The reference script (`ToolScript`) goes through these phases: approach the hook's grasp point
(`tool_pos`), descend, close → lift the hook over the block's height → reach: move the hook so
its foot hangs behind the block, the shaft PULL_SIDE_M to the block's left → lower the foot to
just above the table → pull the block toward the goal (the shaft PULL_SIDE_M to the left of the
goal's line, so a block drifting toward the shaft is pushed back) → release the hook → retreat.

It uses `tool_pos` only until the grasp closes: from then on the hook is where the hand is, at
the offset measured when the grasp closed (so the same script runs on a robot whose tool is
seen only where it was set up). A grasp that drops while carrying sends it back to the hook; a
block that stays behind while pulling (the foot missed it) sends it back to reach again.

The camera reference finds the green block and the orange hook (`locate_hook`); while the hook
hangs over the block (phases reach and lower) the block's estimate is kept.
"""

from __future__ import annotations

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.policies.part_finder import PartModel, coloured_points, top_face
from sim_suites.policies.script_base import Obs, ScriptedPolicy, toward
from sim_suites.tasks.base import Task, TaskSpec, TaskState, footprint_xy
from sim_suites.tasks.catalog import Family, register_family

#: The scored block (half extents, m), its mass (kg) and friction.
TARGET_HALF = (0.025, 0.025, 0.02)
TARGET_MASS_KG = 0.2
TARGET_FRICTION = 0.5
#: The hook: shaft and foot half extents (m), their centres in the hook frame (m), mass (kg).
HOOK_SHAFT_HALF = (0.16, 0.01, 0.015)
HOOK_SHAFT_X = 0.06
HOOK_FOOT_HALF = (0.01, 0.06, 0.015)
HOOK_FOOT_POS = (0.21, -0.05, 0.0)
HOOK_MASS_KG = 0.08
HOOK_FRICTION = 0.8
#: How far to the left (+y) of the block's centre the shaft runs while pulling (m): the foot
#: spans y ∈ [−0.11, +0.01] of the hook frame, so the block (±0.025) sits inside it with 2.5 cm
#: between the block and the shaft.
PULL_SIDE_M = 0.06

GREEN = (0.2, 0.65, 0.25, 1.0)
ORANGE = (0.95, 0.45, 0.05, 1.0)


def hook_body(x: float, y: float, friction: float = HOOK_FRICTION) -> Body:
    """The hook lying flat on the table with its grasp point at (x, y), sliding friction
    `friction`."""
    return Body(
        name="hook",
        role="tool",
        geoms=(
            Geom("box", HOOK_SHAFT_HALF, pos=(HOOK_SHAFT_X, 0.0, 0.0), rgba=ORANGE),
            Geom("box", HOOK_FOOT_HALF, pos=HOOK_FOOT_POS, rgba=ORANGE),
        ),
        joint="free",
        pos=(x, y, HOOK_SHAFT_HALF[2]),
        mass=HOOK_MASS_KG,
        friction=friction,
        grasp_width=2 * HOOK_SHAFT_HALF[1],
    )


class ToolUse(Task):
    """Pull a block out of reach into a goal region with a hook (see the module docstring).

    Instance extras: `hook_x`, `hook_y`, where the hook's grasp point lies (m);
    `block_mass_kg` and `block_friction`, the block's mass and sliding friction (defaults
    TARGET_MASS_KG, TARGET_FRICTION); `hook_friction` (default HOOK_FRICTION).
    """

    family = "tool_use"
    object_name = "block"
    tool_name = "hook"
    faults = ("grasp_slip", "perception_dropout", "actuator_stall")

    @property
    def hook_xy(self) -> tuple[float, float]:
        extra = self.spec.extra
        return float(extra["hook_x"]), float(extra["hook_y"])

    def bodies(self) -> tuple[Body, ...]:
        x, y = self.spec.start_xy
        return (
            Body(
                name="block",
                role="object",
                geoms=(Geom("box", TARGET_HALF, rgba=GREEN),),
                joint="free",
                pos=(x, y, TARGET_HALF[2]),
                mass=float(self.spec.extra.get("block_mass_kg", TARGET_MASS_KG)),
                friction=float(self.spec.extra.get("block_friction", TARGET_FRICTION)),
                grasp_width=2 * TARGET_HALF[1],
            ),
            hook_body(*self.hook_xy, float(self.spec.extra.get("hook_friction", HOOK_FRICTION))),
        )

    def goal_pos(self, start_offset: np.ndarray) -> np.ndarray:
        return np.array([*self.spec.goal_xy, TARGET_HALF[2]])

    def goal_error(self, state: TaskState, goal: np.ndarray) -> float:
        return float(np.linalg.norm(state.object_pos[:2] - goal[:2]))

    def grasp_width(self) -> float:
        return 2 * HOOK_SHAFT_HALF[1]

    def work_region_xy(self) -> np.ndarray:
        """The base region, plus the hook where it pulls: its foot just beyond the block's far
        face and its shaft PULL_SIDE_M to the block's left, at the block's start and goal."""
        behind = np.array([TARGET_HALF[0] + HOOK_FOOT_HALF[0] - HOOK_FOOT_POS[0], PULL_SIDE_M])
        hook = footprint_xy(hook_body(0.0, 0.0))
        pulls = [hook + np.array(xy) + behind for xy in (self.spec.start_xy, self.spec.goal_xy)]
        return np.concatenate([super().work_region_xy(), *pulls])


#: Height of the hook's grasp point while carrying it over the block (m): the hook's underside
#: then clears the 4 cm block by 5.5 cm.
CARRY_Z = 0.11
#: Height of the grasp point while pulling (m): the hook's underside 4 mm above the table.
PULL_Z = HOOK_SHAFT_HALF[2] + 0.004
#: The hand grasps the shaft this far above its centre line (m): the fingertips, 9 mm below the
#: TCP, then stay 1.5 cm above the table.
GRASP_DZ = 0.006
#: Gap left between the block's far face and the foot when the foot comes down (m).
FOOT_CLEARANCE_M = 0.015
#: Where the grasp point goes, relative to the block's centre, for the foot to come down behind
#: it: x = block half + clearance + foot half − foot offset, y = PULL_SIDE_M.
REACH_OFFSET = np.array(
    [TARGET_HALF[0] + FOOT_CLEARANCE_M + HOOK_FOOT_HALF[0] - HOOK_FOOT_POS[0], PULL_SIDE_M]
)
#: The block trails the grasp point by −REACH_OFFSET[0] = 0.16 m when the foot comes down and
#: 0.175 m when the foot presses on it; 5 cm more means the block is not in the hook (the foot
#: came down on it or in front of it): lift and reach again.
BLOCK_LOST_M = -float(REACH_OFFSET[0]) + 0.05
#: The pull stops when the block is this close to the goal along x (m).
PULL_STOP_M = 0.004
#: Fastest pull, as a fraction of the full-scale TCP speed.
PULL_SPEED = 0.4


class ToolScript(ScriptedPolicy):
    """The tool_use reference policy (see the module docstring)."""

    HOVER = 0.08
    CLOSE_TIMEOUT = 30

    def hook_in_hand(self, obs: Obs) -> np.ndarray:
        """TCP minus the hook's grasp point, measured when the grasp closed (m)."""
        return self.memory.get("offset", np.zeros(3))

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, block, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        grasped = obs["grasped"][0] > 0.5
        carrying = self.phase in ("lift", "reach", "lower", "pull")
        if carrying and not grasped:
            self.goto("approach")  # the hook slipped out: grasp it again
        if self.phase == "start":
            self.goto("approach")
        tool = obs["tool_pos"] + np.array([0.0, 0.0, GRASP_DZ])
        if self.phase == "approach":
            return self.approach_phase(obs, tool, self.HOVER, 0.01)
        if self.phase == "descend":
            if self.near(tcp, tool, 0.006):
                self.goto("close")
            xy_ok = self.near(tcp[:2], tool[:2], 0.02)
            # Slow for the last 3 cm: an arm that lags its set-point must not overshoot into
            # the table.
            speed = 0.6 if tcp[2] > tool[2] + 0.03 else 0.15
            return toward(tcp, tool if xy_ok else tool + np.array([0.0, 0.0, self.HOVER]), speed)
        if self.phase == "close":
            velocity = self.close_phase(obs, tool, "lift", self.CLOSE_TIMEOUT)
            if self.phase == "lift":
                self.memory["offset"] = tcp - obs["tool_pos"]
            return velocity
        offset = self.hook_in_hand(obs)
        spot = block[:2] + REACH_OFFSET + offset[:2]  # TCP over the reach spot
        if self.phase == "lift":
            if tcp[2] > CARRY_Z + offset[2] - 0.01:
                self.goto("reach")
            return toward(tcp, np.array([tcp[0], tcp[1], CARRY_Z + offset[2]]))
        if self.phase == "reach":
            if self.near(tcp[:2], spot, 0.005):
                self.goto("lower")
            return toward(tcp, np.array([spot[0], spot[1], CARRY_Z + offset[2]]))
        if self.phase == "lower":
            low = np.array([spot[0], spot[1], PULL_Z + offset[2]])
            if self.near(tcp, low, 0.006):
                self.goto("pull")
            return toward(tcp, low, 0.5)
        if self.phase == "pull":
            if float(block[0] - (tcp[0] - offset[0])) > BLOCK_LOST_M:
                self.goto("lift")  # the block stayed behind: reach behind it again
                return toward(tcp, np.array([tcp[0], tcp[1], CARRY_Z + offset[2]]))
            left = float(block[0] - goal[0])
            if left < PULL_STOP_M:
                self.goto("release")
                return np.zeros(3)
            # The shaft runs along the goal's line: a block drifting toward it is pushed back.
            side = goal[1] + PULL_SIDE_M + offset[1]
            target = np.array([tcp[0] - left, side, PULL_Z + offset[2]])
            return toward(tcp, target, min(PULL_SPEED, max(0.08, left * 10.0)))
        if self.phase == "release":
            return self.release_phase(obs)
        if self.phase == "retreat":
            return self.retreat_phase(obs)
        return np.zeros(3)


#: The hook's colour, and where its grasp point lies from the near end of its shaft (m).
HOOK_COLOUR = "orange"
HOOK_END_TO_GRASP_M = HOOK_SHAFT_HALF[0] - HOOK_SHAFT_X
#: Hook points nearer than this to the shaft's near end (m) are the shaft (not the foot).
SHAFT_BAND_M = 0.10


def locate_hook(rgb: np.ndarray, depth: np.ndarray) -> np.ndarray | None:
    """The hook's grasp point (3,) in the robot base frame from one RGB-D frame, or None.

    The hook lies with its shaft along x, the foot at the far end: the shaft's near end is the
    hook's lowest x; the grasp point is HOOK_END_TO_GRASP_M beyond it, on the centre line of
    the shaft's top face (the top points within SHAFT_BAND_M of the near end), half the shaft's
    height below that face.
    """
    points = coloured_points(rgb, depth, HOOK_COLOUR)
    if points is None:
        return None
    top = top_face(points)
    near_end = float(top[:, 0].min())
    shaft = top[top[:, 0] <= near_end + SHAFT_BAND_M]
    return np.array(
        [
            near_end + HOOK_END_TO_GRASP_M,
            float(shaft[:, 1].mean()),
            float(top[:, 2].max()) - HOOK_SHAFT_HALF[2],
        ]
    )


#: Scoring tolerance and QC tracking tolerance of every instance (m).
TOLERANCE_M = 0.03
QC_TOLERANCE_M = 0.03
#: The harder instances' block: rubber-footed (friction 1.5), which the hook drags badly.
RUBBER_FOOT = 1.5


def _instance(
    name: str,
    block: tuple[float, float],
    goal: tuple[float, float],
    hook: tuple[float, float],
    **extra: float,
) -> TaskSpec:
    """A block at `block` pulled to `goal` with the hook's grasp point lying at `hook` (m)."""
    return TaskSpec(
        f"tool_use/{name}",
        block,
        goal,
        tolerance_m=TOLERANCE_M,
        qc_tolerance_m=QC_TOLERANCE_M,
        extra={"hook_x": hook[0], "hook_y": hook[1], **extra},
    )


FAMILY = register_family(
    Family(
        task=ToolUse,
        instances=(
            _instance("hook_center", (0.83, 0.00), (0.62, 0.00), (0.45, 0.20)),
            _instance("hook_left", (0.82, 0.12), (0.62, 0.12), (0.45, -0.10)),
            _instance("hook_right", (0.82, -0.14), (0.62, -0.14), (0.42, 0.15)),
            _instance("hook_long_pull", (0.84, 0.03), (0.52, 0.03), (0.40, -0.22)),
            _instance("hook_short_pull", (0.83, -0.05), (0.70, -0.05), (0.48, 0.22)),
            _instance(
                "rubber_center",
                (0.83, 0.00),
                (0.62, 0.00),
                (0.45, 0.20),
                block_friction=RUBBER_FOOT,
            ),
            _instance(
                "rubber_left", (0.82, 0.12), (0.62, 0.12), (0.45, -0.10), block_friction=RUBBER_FOOT
            ),
            _instance(
                "rubber_right",
                (0.82, -0.14),
                (0.62, -0.14),
                (0.42, 0.15),
                block_friction=RUBBER_FOOT,
            ),
            _instance(
                "rubber_long_pull",
                (0.84, 0.03),
                (0.52, 0.03),
                (0.40, -0.22),
                block_friction=RUBBER_FOOT,
            ),
            _instance(
                "rubber_short_pull",
                (0.83, -0.05),
                (0.70, -0.05),
                (0.48, 0.22),
                block_friction=RUBBER_FOOT,
            ),
        ),
        script=ToolScript,
        # The hook is grasped, not the block: the block is tracked always.
        vision=PartModel(
            "green",
            (0.0, 0.0, -TARGET_HALF[2]),
            grasped=False,
            locate_tool=locate_hook,
            hidden_in_phases=("reach", "lower"),
        ),
    )
)
