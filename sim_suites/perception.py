"""What the policy perceives: the observation mode, sensor noise, cameras and their look.

`Perception` turns a physics reading into one observation per control step: the state
observation of `sim_suites.observations` (with the episode's sensor noise) in `state` mode, or
proprioception and camera images in `rgb` / `rgbd` mode (`sim_suites.rendering.feed`), after
setting the episode's lighting, colours, textures and camera poses
(`sim_suites.rendering.appearance`). Only the camera
modes build cameras and render.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from sim_suites.arena import Scene
from sim_suites.engines.base import PhysicsBackend
from sim_suites.observations import NOISY_CHANNELS, StateReading, state_observation, state_space
from sim_suites.rendering.appearance import sample_appearance
from sim_suites.rendering.cameras import check_image_size
from sim_suites.rendering.feed import CameraFeed, camera_space, check_mode
from sim_suites.variations import EpisodeParams


class Perception:
    """The observation side of one environment (see the module docstring).

    Args:
        mode: "state", "rgb" or "rgbd". image_size: (height, width) of camera images.
        camera_rate_hz: camera frame rate (camera modes). tool: the task has a tool (state
            observations then carry `tool_pos`). joints: joint values observed (arm and fingers).
    """

    def __init__(
        self,
        mode: str,
        image_size: tuple[int, int],
        camera_rate_hz: float,
        tool: bool = False,
        joints: int = 9,
    ) -> None:
        self.mode = check_mode(mode)
        size = check_image_size(image_size)
        cameras = mode != "state"
        self.feed = CameraFeed(mode, camera_rate_hz) if cameras else None
        #: Image size the backend must render (None: no cameras are built).
        self.image_size = size if cameras else None
        state = state_space(tool, joints)
        self.space: spaces.Dict = camera_space(state, mode, size) if cameras else state
        self._noise_rng = np.random.default_rng(0)
        self._noise = 0.0

    def reset(
        self,
        backend: PhysicsBackend,
        scene: Scene,
        params: EpisodeParams,
        noise_rng: np.random.Generator,
        look_rng: np.random.Generator,
    ) -> None:
        """Start an episode: its sensor noise, and (camera modes) its lighting and colours."""
        self._noise_rng, self._noise = noise_rng, params.sensor_noise_std
        if self.feed is not None:
            look = sample_appearance(
                scene,
                params.lighting_scale,
                params.colour_jitter,
                look_rng,
                object_texture=params.object_texture,
                table_texture=params.table_texture,
                camera_offsets=params.camera_offsets,
            )
            backend.set_appearance(look)
            self.feed.reset(params.control_dt)

    def observe(
        self, backend: PhysicsBackend, reading: StateReading, step: int
    ) -> dict[str, np.ndarray]:
        """The observation of control step `step` (fresh arrays)."""
        noise = self._noise
        eps = (
            self._noise_rng.normal(0.0, noise, size=NOISY_CHANNELS)
            if noise > 0
            else np.zeros(NOISY_CHANNELS)
        )
        obs = state_observation(reading, eps)
        if self.feed is None:
            return obs
        return self.feed.observe(backend, obs, step, reading.frozen is not None)
