"""Cameras and rendering: a fixed scene camera and a wrist camera in both engines.

- `cameras`: the camera specs, their poses and pinhole geometry (shared by renderers and
  vision policies), the observation modes.
- `appearance`: per-episode lighting and colour randomization.
- `mujoco_render` (EGL/OSMesa offscreen OpenGL) and `pybullet_render` (TinyRenderer on CPU).
"""

from sim_suites.rendering.appearance import Appearance, sample_appearance
from sim_suites.rendering.cameras import (
    CAMERAS,
    DEFAULT_IMAGE_SIZE,
    OBSERVATION_MODES,
    SCENE_CAMERA,
    WRIST_CAMERA,
    CameraSpec,
)

__all__ = [
    "CAMERAS",
    "DEFAULT_IMAGE_SIZE",
    "OBSERVATION_MODES",
    "SCENE_CAMERA",
    "WRIST_CAMERA",
    "Appearance",
    "CameraSpec",
    "sample_appearance",
]
