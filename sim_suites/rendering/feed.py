"""Camera observation modes: what a vision policy sees instead of the privileged object pose.

Modes (`OBSERVATION_MODES`):

- `state`: the privileged state observation of `sim_suites.observations` (nothing rendered).
- `rgb`: proprioception and task inputs — `joint_pos`, `joint_vel`, `gripper_width`, `tcp_pos`,
  `tcp_target`, `goal_pos`, `grasped`, `obstacle` (same meaning as in state mode) — plus
  `scene_rgb` and `wrist_rgb`, (h, w, 3) uint8 images of the fixed scene camera and the wrist
  camera (`sim_suites.rendering.cameras`). No object pose, orientation or visibility flag.
- `rgbd`: rgb plus `scene_depth` and `wrist_depth`, (h, w, 1) float32 metric depth (m).

Cameras run at `camera_rate_hz` (default 10 Hz, a whole number of control steps per frame):
between frames an observation repeats the latest frame, as a real camera stream does. During
a perception-dropout fault the cameras deliver the frame from before the dropout. Every
observation holds fresh copies (no memory shared with the renderer or other observations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from sim_suites.rendering.cameras import CAMERAS, FAR_M, OBSERVATION_MODES

#: Default camera frame rate (Hz).
CAMERA_RATE_HZ = 10.0
#: State keys a camera observation keeps (everything but the object pose and its visibility).
PROPRIOCEPTION_KEYS = (
    "joint_pos",
    "joint_vel",
    "gripper_width",
    "tcp_pos",
    "tcp_target",
    "goal_pos",
    "grasped",
    "obstacle",
)


class Renders(Protocol):
    """What the feed needs from a backend built with cameras."""

    def render(self, camera: str, depth: bool) -> tuple[np.ndarray, np.ndarray | None]: ...


def check_mode(mode: str) -> str:
    """`mode` if it is an observation mode, else an EvalError naming them."""
    if mode not in OBSERVATION_MODES:
        raise EvalError(
            f"observation_mode: {mode!r} is not one of {', '.join(OBSERVATION_MODES)}",
            key="observation_mode",
        )
    return mode


def camera_space(state: spaces.Dict, mode: str, size: tuple[int, int]) -> spaces.Dict:
    """The Dict space of a camera mode, built from the state space's proprioception keys."""
    height, width = size
    out: dict[str, spaces.Space] = {k: state.spaces[k] for k in PROPRIOCEPTION_KEYS}
    for camera in CAMERAS:
        out[f"{camera.name}_rgb"] = spaces.Box(0, 255, (height, width, 3), dtype=np.uint8)
        if mode == "rgbd":
            out[f"{camera.name}_depth"] = spaces.Box(
                0.0, FAR_M, (height, width, 1), dtype=np.float32
            )
    return spaces.Dict(out)


class CameraFeed:
    """Renders the cameras at their frame rate and builds camera-mode observations."""

    def __init__(self, mode: str, camera_rate_hz: float = CAMERA_RATE_HZ) -> None:
        self.mode = check_mode(mode)
        if isinstance(camera_rate_hz, bool) or not camera_rate_hz > 0:
            raise EvalError(
                f"camera_rate_hz: expected a rate > 0, got {camera_rate_hz!r}",
                key="camera_rate_hz",
            )
        self.camera_rate_hz = float(camera_rate_hz)
        self.depth = mode == "rgbd"
        self._every = 1
        self._frames: dict[str, np.ndarray] = {}
        self.frames_rendered = 0

    def reset(self, control_dt: float) -> None:
        """Start an episode: the next observation renders a new frame."""
        self._every = max(1, round(1.0 / (self.camera_rate_hz * control_dt)))
        self._frames = {}

    def observe(
        self, backend: Renders, state_obs: Mapping[str, np.ndarray], step: int, frozen: bool
    ) -> dict[str, np.ndarray]:
        """The camera observation at control step `step` (frames repeat between camera ticks).

        Args:
            backend: draws the images. state_obs: this step's state observation (fresh arrays).
            step: control step index. frozen: a perception dropout is running (no new frame).
        """
        due = not self._frames or (step % self._every == 0 and not frozen)
        if due:
            for camera in CAMERAS:
                rgb, depth = backend.render(camera.name, self.depth)
                self._frames[f"{camera.name}_rgb"] = rgb
                if depth is not None:
                    self._frames[f"{camera.name}_depth"] = depth
            self.frames_rendered += 1
        out = {k: state_obs[k] for k in PROPRIOCEPTION_KEYS}
        for key, frame in self._frames.items():
            out[key] = frame.copy()
        return out
