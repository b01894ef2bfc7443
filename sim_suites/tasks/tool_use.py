"""Tool use: grasp an L-shaped hook and pull an out-of-reach block into a goal region.

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
"""

from __future__ import annotations

import numpy as np

from sim_suites.arena import Body, Geom
from sim_suites.tasks.base import Task, TaskState, footprint_xy

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

_GREEN = (0.2, 0.65, 0.25, 1.0)
_ORANGE = (0.95, 0.45, 0.05, 1.0)


def hook_body(x: float, y: float, friction: float = HOOK_FRICTION) -> Body:
    """The hook lying flat on the table with its grasp point at (x, y), sliding friction
    `friction`."""
    return Body(
        name="hook",
        role="tool",
        geoms=(
            Geom("box", HOOK_SHAFT_HALF, pos=(HOOK_SHAFT_X, 0.0, 0.0), rgba=_ORANGE),
            Geom("box", HOOK_FOOT_HALF, pos=HOOK_FOOT_POS, rgba=_ORANGE),
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
                geoms=(Geom("box", TARGET_HALF, rgba=_GREEN),),
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
