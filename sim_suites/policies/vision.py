"""The vision reference policy: the family's scripted policy, fed by a camera instead of state.

It reads the `rgbd` observation (`sim_suites.rendering.feed`) — proprioception, the goal and the
scene camera's colour and depth images — and never the object pose, which that observation
does not contain. The part (and a family's tool) is found in each frame by its colour
(`sim_suites.policies.part_finder`, with the family's registered `PartModel`).

While the part is held, the camera cannot see it well (the hand covers it): the estimate then
follows the TCP with the offset measured when the grasp closed. While the hand is right above
a part it is about to grasp, the estimate is kept as it was (a pushed block is tracked always). With no estimate yet the policy
reports the part as not visible, and the scripted policy waits.

Because the thresholds are fixed, lighting matters: a dim cell (lighting_scale ≲ 0.3) leaves the
part below MIN_LEVEL and the policy never finds it; colour jitter can push it out of its hue.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from embodied_eval.errors import EvalError
from sim_suites.policies.part_finder import PartModel, locate
from sim_suites.policies.script_base import ScriptedPolicy
from sim_suites.rendering.feed import PROPRIOCEPTION_KEYS
from sim_suites.tasks import task_family

#: The estimate is kept while the TCP is within this horizontal distance (m) and this height
#: above it (m): the hand then hides the part's top face.
HOLD_XY_M, HOLD_Z_M = 0.05, 0.075


class VisionPolicy:
    """The scripted reference policy of a family, localizing the part from the scene camera."""

    name = "sim_suites.policies:vision"
    #: The runner builds the environment in this observation mode for this policy.
    observation_mode = "rgbd"

    def __init__(self, task_id: str) -> None:
        family = task_family(task_id)
        if family.vision is None:
            raise EvalError(
                f"policy: family {family.name!r} has no camera reference (sim_suites.policies:"
                "vision); use sim_suites.policies:scripted",
                key="policy",
            )
        self.part: PartModel = family.vision
        #: The family works with a tool the policy must find as well (tool_use's hook).
        self.uses_tool = self.part.locate_tool is not None
        self.script: ScriptedPolicy = family.script()
        self.reset()

    @property
    def plan_depth(self) -> int:
        return self.script.plan_depth

    def reset(self, seed: int | None = None) -> None:
        self.script.reset(seed)
        self.estimate: np.ndarray | None = None
        self.grasp_offset: np.ndarray | None = None
        self.detections = 0
        self.tool: np.ndarray | None = None

    def perceive_tool(self, obs: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """Update and return the estimate of the tool's grasp point (None: not found yet).

        Kept while the tool is held or the hand is right above it (the hand hides it)."""
        tcp = obs["tcp_pos"]
        if self.tool is not None:
            gap = tcp - self.tool
            covered = float(np.hypot(gap[0], gap[1])) < HOLD_XY_M and gap[2] < HOLD_Z_M
            if obs["grasped"][0] > 0.5 or covered:
                return self.tool
        locate_tool = self.part.locate_tool
        seen = None if locate_tool is None else locate_tool(obs["scene_rgb"], obs["scene_depth"])
        if seen is not None:
            self.tool = seen
        return self.tool

    def perceive(self, obs: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """Update and return the estimate of the part's tracked point (None: not found yet)."""
        tcp = obs["tcp_pos"]
        if obs["grasped"][0] > 0.5 and self.part.grasped:
            if self.grasp_offset is None and self.estimate is not None:
                self.grasp_offset = tcp - self.estimate
            if self.grasp_offset is not None:
                self.estimate = tcp - self.grasp_offset
            return self.estimate
        self.grasp_offset = None
        if self.estimate is not None and self.script.phase in self.part.hidden_in_phases:
            return self.estimate
        if self.estimate is not None and self.part.grasped:
            gap = tcp - self.estimate
            if float(np.hypot(gap[0], gap[1])) < HOLD_XY_M and gap[2] < HOLD_Z_M:
                return self.estimate
        seen = locate(obs["scene_rgb"], obs["scene_depth"], self.part)
        if seen is not None:
            self.estimate = seen
            self.detections += 1
        return self.estimate

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        estimate = self.perceive(obs)
        view = {key: obs[key] for key in PROPRIOCEPTION_KEYS}
        view["object_visible"] = np.array([0.0 if estimate is None else 1.0])
        view["object_pos"] = np.zeros(3) if estimate is None else estimate.copy()
        view["object_quat"] = np.array([1.0, 0.0, 0.0, 0.0])
        if self.uses_tool:
            tool = self.perceive_tool(obs)
            if tool is None:
                view["object_visible"] = np.array([0.0])
            view["tool_pos"] = np.zeros(3) if tool is None else tool.copy()
        return self.script.act(view)
