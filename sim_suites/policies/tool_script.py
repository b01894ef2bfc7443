"""The tool-use reference policy: grasp the hook, reach behind the block, pull it to the goal.

Phases: approach the hook's grasp point (`tool_pos`), descend, close → lift the hook over the
block's height → reach: move the hook so its foot hangs behind the block, the shaft PULL_SIDE_M
to the block's left → lower the foot to just above the table → pull the block toward the goal
(the shaft PULL_SIDE_M to the left of the goal's line, so
a block drifting toward the shaft is pushed back) → release the hook → retreat.

It uses `tool_pos` only until the grasp closes: from then on the hook is where the hand is, at
the offset measured when the grasp closed (so the same script runs on a robot whose tool is
seen only where it was set up). A grasp that drops while carrying sends it back to the hook; a
block that stays behind while pulling (the foot missed it) sends it back to reach again.
"""

from __future__ import annotations

import numpy as np

from sim_suites.policies.script_base import Obs, ScriptedPolicy, toward
from sim_suites.tasks.tool_use import (
    HOOK_FOOT_HALF,
    HOOK_FOOT_POS,
    HOOK_SHAFT_HALF,
    PULL_SIDE_M,
    TARGET_HALF,
)

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
