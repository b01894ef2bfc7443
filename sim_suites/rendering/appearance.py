"""What the cameras see change per episode: light, colours, textures and the cameras' poses.

`lighting_scale` (DR knob and drift key) multiplies every light's ambient, diffuse and specular
intensity: 0.2 is a dim cell, 1.5 a glaring one. `colour_jitter` (DR knob) shifts the RGB colour
of every scene body (task objects, fixtures, the table, distractors) by one uniform offset in
[−j, +j] per channel and body, clipped to [0, 1], drawn from the episode's generator.
`object_texture` / `table_texture` swap the task object's / the table's colour for a texture of
the bank (`sim_suites.rendering.textures`), and the camera pose offsets move and turn the scene
and wrist cameras (`sim_suites.rendering.cameras.offset_pose`). All of them change the pixels
only; physics never reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sim_suites.arena import Scene

#: Colour of the table top (RGBA) in both engines.
TABLE_RGBA = (0.62, 0.6, 0.56, 1.0)
#: Roles of the bodies `object_texture` retextures: the scored part (or the drawer).
TEXTURED_ROLES = ("object", "drawer")

RGBA = tuple[float, float, float, float]
Vec3 = tuple[float, float, float]
_ZERO: Vec3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Appearance:
    """Per-episode look of the cell (see the module docstring).

    Attributes:
        lighting_scale: light intensity factor. shifts: RGB shift per scene body and "table".
        textures: body name (or "table") → texture k of the bank (1-based; absent = none).
        camera_offsets: camera name → (position offset, tilt rotation vector), camera frame.
    """

    lighting_scale: float = 1.0
    shifts: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    textures: Mapping[str, int] = field(default_factory=dict)
    camera_offsets: Mapping[str, tuple[Vec3, Vec3]] = field(default_factory=dict)

    def colour(self, body: str, rgba: Sequence[float]) -> RGBA:
        """`rgba` of a geom of `body` with the body's shift applied (clipped to [0, 1])."""
        shift = self.shifts.get(body, (0.0, 0.0, 0.0))
        r, g, b = (min(1.0, max(0.0, float(c) + s)) for c, s in zip(rgba[:3], shift, strict=True))
        return (r, g, b, float(rgba[3]))

    def texture(self, body: str) -> int:
        """Texture k (1-based) the body is drawn with, 0 for its own flat colour."""
        return int(self.textures.get(body, 0))

    def camera_offset(self, camera: str) -> tuple[Vec3, Vec3]:
        """(position offset (3,) m, tilt rotation vector (3,) rad) of a camera, camera frame."""
        return self.camera_offsets.get(camera, (_ZERO, _ZERO))


def sample_appearance(
    scene: Scene,
    lighting_scale: float,
    colour_jitter: float,
    rng: np.random.Generator,
    *,
    object_texture: int = 0,
    table_texture: int = 0,
    camera_offsets: Mapping[str, tuple[Vec3, Vec3]] | None = None,
) -> Appearance:
    """The episode's appearance: lights scaled, every body colour shifted by ±`colour_jitter`,
    textures and camera offsets as drawn by their knobs (no draws here).

    Always draws the same number of values from `rng` (one RGB triple per body, the table, then
    one per distractor), so the jitter amplitude does not shift any other random stream, and
    scenes without distractors draw exactly what they drew before distractors existed.
    """
    distractors = [b.name for b in scene.bodies if b.role == "distractor"]
    names = [*(b.name for b in scene.bodies if b.role != "distractor"), "table", *distractors]
    draws = rng.uniform(-1.0, 1.0, size=(len(names), 3)) * float(colour_jitter)
    shifts = {n: (float(d[0]), float(d[1]), float(d[2])) for n, d in zip(names, draws, strict=True)}
    textures: dict[str, int] = {}
    if object_texture:
        textures.update({b.name: object_texture for b in scene.bodies if b.role in TEXTURED_ROLES})
    if table_texture:
        textures["table"] = table_texture
    return Appearance(
        lighting_scale=float(lighting_scale),
        shifts=shifts,
        textures=textures,
        camera_offsets=dict(camera_offsets or {}),
    )
