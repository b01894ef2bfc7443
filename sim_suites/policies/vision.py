"""The vision reference policy: the family's scripted policy, fed by a camera instead of state.

It reads the `rgbd` observation (`sim_suites.rendering.feed`) — proprioception, the goal and the
scene camera's colour and depth images — and never the object pose, which that observation
does not contain. Each camera frame is segmented by the part's colour with fixed thresholds
(the pipeline a lab would calibrate under its nominal lighting): a pixel belongs to the part when
its dominant channel is at least MIN_LEVEL and it has the part's hue (`COLOUR_RULES`). Pixels are
back-projected with the depth and the camera's calibration (`sim_suites.rendering.cameras`),
points outside the work area are dropped, and the part's tracked point is the centre of its
top face (the highest points) moved down by the known part size (CAD data, not state).

While the part is held, the camera cannot see it well (the hand covers it): the estimate then
follows the TCP with the offset measured when the grasp closed. While the hand is right above
a part it is about to grasp, the estimate is kept as it was (a pushed block is tracked always). With no estimate yet the policy
reports the part as not visible, and the scripted policy waits.

Because the thresholds are fixed, lighting matters: a dim cell (lighting_scale ≲ 0.3) leaves the
part below MIN_LEVEL and the policy never finds it; colour jitter can push it out of its hue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sim_suites.policies.scripted import SCRIPTS, ScriptedPolicy
from sim_suites.rendering.cameras import SCENE_CAMERA, pixel_rays, scene_camera_pose
from sim_suites.rendering.feed import PROPRIOCEPTION_KEYS
from sim_suites.tasks import family_of
from sim_suites.tasks.families import BLOCK_HALF, CUBE_HALF, DRAWER_HALF, HANDLE_OFFSET, PEG_HALF
from sim_suites.tasks.tool_use import HOOK_SHAFT_HALF, HOOK_SHAFT_X, TARGET_HALF

#: Darkest value (0–255) of the dominant channel that still counts as the part's colour.
MIN_LEVEL = 60
#: Fewest part pixels that make a detection.
MIN_PIXELS = 3
#: Top-face points: within this distance (m) of the highest part point.
TOP_BAND_M = 0.006
#: Work area where parts can be (m): points outside are background.
WORK_LOW = np.array([0.2, -0.45, 0.002])
WORK_HIGH = np.array([0.9, 0.45, 0.2])
#: The estimate is kept while the TCP is within this horizontal distance (m) and this height
#: above it (m): the hand then hides the part's top face.
HOLD_XY_M, HOLD_Z_M = 0.05, 0.075


def _red(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (r >= MIN_LEVEL) & (r >= 2 * g) & (r >= 2 * b)


def _blue(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (b >= MIN_LEVEL) & (b >= 2 * r) & (b >= 1.25 * g)


def _wood(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (r >= MIN_LEVEL) & (r >= 1.7 * b) & (g >= 1.25 * b) & (r <= 1.6 * g)


def _green(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (g >= MIN_LEVEL) & (g >= 2 * r) & (g >= 2 * b)


def _orange(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (r >= MIN_LEVEL) & (r >= 1.6 * g) & (r <= 2.8 * g) & (g >= 3 * b)


#: Colour tests per part colour, on int arrays of the R, G, B channels.
COLOUR_RULES = {"red": _red, "blue": _blue, "wood": _wood, "green": _green, "orange": _orange}
#: The hook's colour, and where its grasp point lies from the near end of its shaft (m).
HOOK_COLOUR = "orange"
HOOK_END_TO_GRASP_M = HOOK_SHAFT_HALF[0] - HOOK_SHAFT_X
#: Hook points nearer than this to the shaft's near end (m) are the shaft (not the foot).
SHAFT_BAND_M = 0.10
#: Phases of the tool script in which the hook hangs over the untouched block and hides part of
#: it: the block's estimate is kept as it was.
TOOL_OVER_PART = ("reach", "lower")


@dataclass(frozen=True)
class PartModel:
    """What the policy knows about a family's part: its colour, where its tracked point is
    relative to the centre of its top face (m), and whether the hand comes down over it to grasp
    (then the estimate is held while the hand covers it)."""

    colour: str
    top_to_point: tuple[float, float, float]
    grasped: bool = True


PARTS = {
    "pick_place": PartModel("red", (0.0, 0.0, -CUBE_HALF)),
    "peg_insert": PartModel("red", (0.0, 0.0, -PEG_HALF[2])),
    "push": PartModel("blue", (0.0, 0.0, -BLOCK_HALF[2]), grasped=False),
    # The hook is grasped, not the block: the block is tracked always.
    "tool_use": PartModel("green", (0.0, 0.0, -TARGET_HALF[2]), grasped=False),
    # The drawer's top face is seen; the handle sits at HANDLE_OFFSET from the body centre.
    "drawer_open": PartModel(
        "wood",
        (
            float(HANDLE_OFFSET[0]),
            float(HANDLE_OFFSET[1]),
            float(HANDLE_OFFSET[2]) - DRAWER_HALF[2],
        ),
    ),
}


def coloured_points(rgb: np.ndarray, depth: np.ndarray, colour: str) -> np.ndarray | None:
    """Work-area points (n, 3) in the robot base frame of one colour's pixels, or None if fewer
    than MIN_PIXELS.

    Args:
        rgb: (h, w, 3) uint8 scene-camera image. depth: (h, w, 1) metric depth, m.
        colour: a key of COLOUR_RULES.
    """
    channels = rgb.astype(np.int32)
    mask = COLOUR_RULES[colour](channels[..., 0], channels[..., 1], channels[..., 2])
    v, u = np.nonzero(mask)
    if len(u) < MIN_PIXELS:
        return None
    eye, rot = scene_camera_pose()
    rays = pixel_rays(SCENE_CAMERA, rot, u, v, rgb.shape[:2])
    points = eye + depth[v, u, 0][:, None] * rays
    inside = np.all((points >= WORK_LOW) & (points <= WORK_HIGH), axis=1)
    points = points[inside]
    return points if len(points) >= MIN_PIXELS else None


def top_face(points: np.ndarray) -> np.ndarray:
    """The points within TOP_BAND_M of the highest one."""
    return points[points[:, 2] >= points[:, 2].max() - TOP_BAND_M]


def locate(rgb: np.ndarray, depth: np.ndarray, part: PartModel) -> np.ndarray | None:
    """The part's tracked point (3,) in the robot base frame from one RGB-D frame, or None.

    Args:
        rgb: (h, w, 3) uint8 scene-camera image. depth: (h, w, 1) metric depth, m.
        part: the part's colour and geometry.
    """
    points = coloured_points(rgb, depth, part.colour)
    if points is None:
        return None
    top = top_face(points)
    centre = np.array([top[:, 0].mean(), top[:, 1].mean(), top[:, 2].max()])
    return centre + np.array(part.top_to_point)


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


class VisionPolicy:
    """The scripted reference policy of a family, localizing the part from the scene camera."""

    name = "sim_suites.policies:vision"
    #: The runner builds the environment in this observation mode for this policy.
    observation_mode = "rgbd"

    def __init__(self, task_id: str) -> None:
        family = family_of(task_id)
        self.part = PARTS[family]
        #: The family works with a tool the policy must find as well (tool_use's hook).
        self.uses_tool = family == "tool_use"
        self.script: ScriptedPolicy = SCRIPTS[family]()
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
        seen = locate_hook(obs["scene_rgb"], obs["scene_depth"])
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
        if self.estimate is not None and self.uses_tool and self.script.phase in TOOL_OVER_PART:
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
