"""Where the scene camera sees the task object: colour segmentation and back-projection.

A lab's fixed scene camera, calibrated once: its intrinsics come from its `CameraInfo` (K), its
pose from the robot profile (`[camera] position_m` and `look_at_m` in the robot's base frame,
the image's up direction being world +z). The object is found by its colour — pixels whose
chromaticity (r, g, b)/(r + g + b) lies within `CHROMA_TOLERANCE` of the object's declared colour
and that are bright enough (`MIN_BRIGHTNESS`) — which a camera's exposure gain does not change.
The centroid of those pixels is back-projected along its viewing ray onto the horizontal plane
at the height the object's centre has when it rests on the table (the goal's height), giving the
object's position in the base frame.

A camera sees less than a tracker: an object lifted off the table is placed where its ray meets
the resting plane, and an object without a distinctive colour (the drawer's grey handle) cannot
be found at all. The detector therefore prefers the tracker when the profile declares one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Chromaticity distance within which a pixel has the object's colour.
CHROMA_TOLERANCE = 0.1
#: Pixels darker than this (sum of r, g, b in 0–255 units) are not classified.
MIN_BRIGHTNESS = 40.0
#: Fewest object pixels for a frame to locate the object.
MIN_PIXELS = 4
#: A declared colour whose chromaticity is within this of grey cannot be segmented by colour.
MIN_COLOUR_SATURATION = 0.08


@dataclass(frozen=True)
class CameraModel:
    """A calibrated pinhole camera: intrinsics K (3×3) and its pose in the base frame."""

    k: np.ndarray
    position: np.ndarray
    look_at: np.ndarray

    def rotation(self) -> np.ndarray:
        """Columns: the optical frame's x (right), y (down) and z (forward) in the base frame."""
        forward = self.look_at - self.position
        forward = forward / np.linalg.norm(forward)
        right = np.cross(forward, np.array([0.0, 0.0, 1.0]))
        right = right / np.linalg.norm(right)
        down = np.cross(forward, right)
        return np.column_stack([right, down, forward])

    def project(self, point: np.ndarray) -> np.ndarray:
        """Pixel (u, v) of a base-frame point (u to the right, v down, origin top left)."""
        cam = self.rotation().T @ (np.asarray(point, dtype=float) - self.position)
        uvw = self.k @ cam
        return np.asarray(uvw[:2] / uvw[2])

    def ray_to_plane(self, u: float, v: float, height_m: float) -> np.ndarray | None:
        """Where the viewing ray through pixel (u, v) meets the plane z = height_m (None when it
        does not, in front of the camera)."""
        direction_cam = np.linalg.solve(self.k, np.array([u, v, 1.0]))
        direction = self.rotation() @ direction_cam
        if abs(direction[2]) < 1e-9:
            return None
        t = (height_m - self.position[2]) / direction[2]
        if t <= 0:
            return None
        return np.asarray(self.position + t * direction)


def colour_is_distinct(rgb: Sequence[float]) -> bool:
    """Whether a declared colour (0–1 each) can be told from grey by its chromaticity."""
    c = np.asarray(rgb[:3], dtype=float)
    total = float(c.sum())
    if total <= 0:
        return False
    return float(np.linalg.norm(c / total - 1.0 / 3.0)) >= MIN_COLOUR_SATURATION


def object_mask(image: np.ndarray, rgb: Sequence[float]) -> np.ndarray:
    """Boolean (h, w) mask of the pixels of an (h, w, 3) uint8 image with the object's colour."""
    pixels = image.astype(np.float64)
    brightness = pixels.sum(axis=2)
    target = np.asarray(rgb[:3], dtype=float)
    target = target / target.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        chroma = pixels / brightness[..., None]
    distance = np.linalg.norm(chroma - target, axis=2)
    return np.asarray((brightness >= MIN_BRIGHTNESS) & (distance <= CHROMA_TOLERANCE))


def locate_in_image(
    image: np.ndarray, rgb: Sequence[float], camera: CameraModel, height_m: float
) -> tuple[np.ndarray | None, int]:
    """The object's base-frame position seen in one frame (None when too few pixels match) and
    the number of matching pixels."""
    mask = object_mask(image, rgb)
    count = int(mask.sum())
    if count < MIN_PIXELS:
        return None, count
    rows, cols = np.nonzero(mask)
    # Pixel centres: column j spans [j, j + 1), so its centre is j + 0.5.
    u, v = float(cols.mean()) + 0.5, float(rows.mean()) + 0.5
    return camera.ray_to_plane(u, v, height_m), count


def intrinsics(k: Sequence[float]) -> np.ndarray | None:
    """K (3×3) of a CameraInfo's row-major `k`, None when it is not a calibrated pinhole."""
    values = [float(x) for x in k]
    if len(values) != 9 or not all(math.isfinite(x) for x in values):
        return None
    matrix = np.array(values).reshape(3, 3)
    if matrix[0, 0] <= 0 or matrix[1, 1] <= 0 or matrix[2, 2] != 1.0:
        return None
    return matrix
