"""Cameras of the cell: a fixed scene camera and a wrist camera on the hand, and their geometry.

Both engines render the same two cameras with the same pinhole model (OpenGL convention: the
camera looks along its −z axis, +y is up in the image), so a policy can turn a pixel and a depth
into a point in the robot's base frame without knowing which engine drew the picture. The camera
placement and intrinsics are calibration constants, not privileged state: a lab measures them
once per cell.

Images are (height, width, 3) uint8 RGB, row 0 at the top; depth is (height, width, 1) float32
metric distance along the optical axis (m), clipped to the far plane.

Units: m, rad (fields of view in degrees, as both engines take them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from embodied_eval.errors import EvalError

#: Observation modes: privileged state only, or proprioception plus camera images.
OBSERVATION_MODES = ("state", "rgb", "rgbd")
#: Default image size (pixels): small enough for fast episodes, enough to find a 4 cm part.
DEFAULT_IMAGE_SIZE = (128, 128)
#: Clip planes of both cameras (m).
NEAR_M = 0.02
FAR_M = 3.0


@dataclass(frozen=True)
class CameraSpec:
    """A pinhole camera: name, vertical field of view (degrees) and clip planes (m)."""

    name: str
    fovy_deg: float
    near_m: float = NEAR_M
    far_m: float = FAR_M


#: The fixed scene camera: across the table from the robot, looking down at the work area.
SCENE_CAMERA = CameraSpec("scene", fovy_deg=45.0)
SCENE_EYE = np.array([1.25, 0.0, 0.70])
SCENE_TARGET = np.array([0.45, 0.0, 0.10])
#: The wrist camera: on the hand, 6 cm off the finger axis, looking along the fingers.
WRIST_CAMERA = CameraSpec("wrist", fovy_deg=75.0)
#: Camera pose in the hand frame (hand z points from the palm toward the fingertips).
WRIST_POS_IN_HAND = np.array([0.06, 0.0, 0.02])
WRIST_ROT_IN_HAND = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
CAMERAS = (SCENE_CAMERA, WRIST_CAMERA)


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray | None = None) -> np.ndarray:
    """Rotation (3, 3) whose columns are the camera's x, y, z axes in the world (−z to target)."""
    up = np.array([0.0, 0.0, 1.0]) if up is None else up
    back = eye - target
    z = back / np.linalg.norm(back)
    x = np.cross(up, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


def scene_camera_pose() -> tuple[np.ndarray, np.ndarray]:
    """World position (3,) and rotation (3, 3) of the scene camera."""
    return SCENE_EYE.copy(), look_at(SCENE_EYE, SCENE_TARGET)


def wrist_camera_pose(hand_rot: np.ndarray, hand_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World position and rotation of the wrist camera from the hand's world frame."""
    return hand_pos + hand_rot @ WRIST_POS_IN_HAND, hand_rot @ WRIST_ROT_IN_HAND


def rotation_from_vector(rotvec: np.ndarray | tuple[float, ...]) -> np.ndarray:
    """Rotation matrix (3, 3) of a rotation vector (axis × angle, rad), by Rodrigues' formula:
    R = I + sin θ·K + (1 − cos θ)·K², K the cross-product matrix of the unit axis."""
    r = np.asarray(rotvec, dtype=float)
    angle = float(np.linalg.norm(r))
    if angle < 1e-12:
        return np.eye(3)
    kx, ky, kz = r / angle
    k = np.array([[0.0, -kz, ky], [kz, 0.0, -kx], [-ky, kx, 0.0]])
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def offset_pose(
    pos: np.ndarray,
    rot: np.ndarray,
    offset: tuple[float, ...] | np.ndarray,
    tilt: tuple[float, ...] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """A camera pose moved by a pose offset given in the camera's own frame.

    The camera moves by `offset` (m, along its own x right, y up, z back) and turns by the
    rotation vector `tilt` (rad, about its own axes): pos' = pos + R·offset, R' = R·R(tilt). The
    same rule holds whatever frame (world, hand) `pos` and `rot` are given in, so both engines
    apply one offset identically to the fixed scene camera and the wrist camera. A vision policy
    still uses the nominal pose (its calibration), so an offset is a calibration error it sees.
    """
    return pos + rot @ np.asarray(offset, dtype=float), rot @ rotation_from_vector(tilt)


def focal_px(camera: CameraSpec, height: int) -> float:
    """Focal length in pixels for an image `height` pixels tall (square pixels)."""
    return 0.5 * height / math.tan(math.radians(camera.fovy_deg) / 2.0)


def pixel_rays(
    camera: CameraSpec, rot: np.ndarray, u: np.ndarray, v: np.ndarray, size: tuple[int, int]
) -> np.ndarray:
    """Unit-depth ray directions (n, 3) in the world through pixel centres (u right, v down).

    Each ray is scaled so its component along the optical axis is 1 m: a point at depth d
    (the renderers' depth) lies at eye + d · ray.

    Args:
        camera: the camera. rot: its world rotation (3, 3). u, v: (n,) pixel columns and rows.
        size: image (height, width) in pixels.
    """
    height, width = size
    f = focal_px(camera, height)
    x = (np.asarray(u, dtype=float) + 0.5 - width / 2.0) / f
    y = -(np.asarray(v, dtype=float) + 0.5 - height / 2.0) / f
    cam = np.stack([x, y, -np.ones_like(x)], axis=-1)
    return cam @ rot.T


def project(
    camera: CameraSpec, pos: np.ndarray, rot: np.ndarray, points: np.ndarray, size: tuple[int, int]
) -> np.ndarray:
    """Pixel coordinates (n, 2) = (u, v) of world points (n, 3) (continuous, centre at +0.5)."""
    height, width = size
    f = focal_px(camera, height)
    cam = (np.atleast_2d(points) - pos) @ rot
    depth = -cam[:, 2]
    u = f * cam[:, 0] / depth + width / 2.0
    v = -f * cam[:, 1] / depth + height / 2.0
    return np.stack([u, v], axis=-1)


def check_image_size(size: tuple[int, int] | list[int]) -> tuple[int, int]:
    """(height, width) validated: whole numbers in [16, 1024]."""
    try:
        height, width = (int(s) for s in size)
    except (TypeError, ValueError):
        raise EvalError(
            f"image_size: expected (height, width), got {size!r}", key="image_size"
        ) from None
    if not (16 <= height <= 1024 and 16 <= width <= 1024) or list(size) != [height, width]:
        raise EvalError(
            f"image_size: expected whole numbers of pixels in [16, 1024], got {size!r}",
            key="image_size",
        )
    return height, width
