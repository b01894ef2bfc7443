"""What the cameras see change per episode: light intensity and the colours of the scene.

`lighting_scale` (DR knob and drift key) multiplies every light's ambient, diffuse and specular
intensity: 0.2 is a dim cell, 1.5 a glaring one. `colour_jitter` (DR knob) shifts the RGB colour
of every scene body (task objects, fixtures, the table) by one uniform offset in [−j, +j] per
channel and body, clipped to [0, 1], drawn from the episode's generator. Both change the pixels
only; physics never reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sim_suites.arena import Scene

#: Colour of the table top (RGBA) in both engines.
TABLE_RGBA = (0.62, 0.6, 0.56, 1.0)

RGBA = tuple[float, float, float, float]


@dataclass(frozen=True)
class Appearance:
    """Per-episode look of the cell: light scale and an RGB shift per scene body and "table"."""

    lighting_scale: float = 1.0
    shifts: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)

    def colour(self, body: str, rgba: Sequence[float]) -> RGBA:
        """`rgba` of a geom of `body` with the body's shift applied (clipped to [0, 1])."""
        shift = self.shifts.get(body, (0.0, 0.0, 0.0))
        r, g, b = (min(1.0, max(0.0, float(c) + s)) for c, s in zip(rgba[:3], shift, strict=True))
        return (r, g, b, float(rgba[3]))


def sample_appearance(
    scene: Scene, lighting_scale: float, colour_jitter: float, rng: np.random.Generator
) -> Appearance:
    """The episode's appearance: lights scaled, every body colour shifted by ±`colour_jitter`.

    Always draws the same number of values from `rng` (one RGB triple per body, then the table),
    so the jitter amplitude does not shift any other random stream.
    """
    names = [*(b.name for b in scene.bodies), "table"]
    draws = rng.uniform(-1.0, 1.0, size=(len(names), 3)) * float(colour_jitter)
    shifts = {n: (float(d[0]), float(d[1]), float(d[2])) for n, d in zip(names, draws, strict=True)}
    return Appearance(lighting_scale=float(lighting_scale), shifts=shifts)
