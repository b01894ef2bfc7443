"""Finding a task part in the scene camera's RGB-D frame by its colour (the vision policy's eye).

Each camera frame is segmented by the part's colour with fixed thresholds (the pipeline a lab
would calibrate under its nominal lighting): a pixel belongs to the part when its dominant
channel is at least MIN_LEVEL and it has the part's hue (`COLOUR_RULES`). Pixels are
back-projected with the depth and the camera's calibration (`sim_suites.rendering.cameras`),
points outside the work area are dropped, and the part's tracked point is the centre of its top
face (the highest points) moved down by the known part size (CAD data, not state).

A family says what its part looks like with a `PartModel` in its registration
(`sim_suites.tasks.catalog.Family.vision`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim_suites.rendering.cameras import SCENE_CAMERA, pixel_rays, scene_camera_pose

#: Darkest value (0–255) of the dominant channel that still counts as the part's colour.
MIN_LEVEL = 60
#: Fewest part pixels that make a detection.
MIN_PIXELS = 3
#: Top-face points: within this distance (m) of the highest part point.
TOP_BAND_M = 0.006
#: Work area where parts can be (m): points outside are background.
WORK_LOW = np.array([0.2, -0.45, 0.002])
WORK_HIGH = np.array([0.9, 0.45, 0.2])

#: Finds a tool's grasp point (3,) in one RGB-D frame (rgb (h, w, 3) uint8, depth (h, w, 1) m),
#: or None.
ToolLocator = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]


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


@dataclass(frozen=True)
class PartModel:
    """What the vision policy knows about a family's part.

    Attributes:
        colour: a key of COLOUR_RULES.
        top_to_point: where the tracked point is relative to the centre of the part's top
            face (m).
        grasped: the hand comes down over the part to grasp it (the estimate is then held while
            the hand covers it); False for a part that is pushed or pulled (tracked always).
        locate_tool: for a family with a tool, finds the tool's grasp point in a frame.
        hidden_in_phases: phases of the family's script in which the tool hangs over the
            untouched part and hides some of it: the part's estimate is kept as it was.
    """

    colour: str
    top_to_point: tuple[float, float, float]
    grasped: bool = True
    locate_tool: ToolLocator | None = None
    hidden_in_phases: tuple[str, ...] = ()


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
