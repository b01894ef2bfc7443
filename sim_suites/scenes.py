"""The scene a pair shares, and the draws only the simulation makes.

A pair is one trial in two worlds: the sim half and the real half must start from the same scene.
Everything random about an episode therefore comes from its manifest seed through one function,
`embodied_eval.seeds.episode_seeds` (used by the sim and the real side alike), which splits it
into three independent streams:

- `scene`: what a technician or an automated reset station sets up on the real table — the
  object's placement offset, its yaw and its size, and the distractor objects standing around it
  (`SCENE_KNOBS`, `sim_suites.distractors`). The sim environment, the twin
  robot's scene reset and the technician's setup prompt all draw the scene from this stream, with
  the protocol's ranges for those knobs only, so both halves of a pair start from one placement.
- `physics`: the sim-only draws — domain randomization of physics (friction, masses, gains,
  latency, control rate), sensor noise, fault timing and the cameras' looks (lighting, colours,
  textures, camera pose offsets). A real robot has
  its own physics; it never takes these.
- `policy`: the seed both halves' policies are reset with.

The streams are children of `SeedSequence(seed)` (`physics` = child 0, `policy` = child 1,
`scene` = child 2), so adding the scene stream did not change the physics or policy seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Randomization knobs that are part of the scene a technician sets up (shared by both halves).
SCENE_KNOBS = ("object_xy_offset_m", "object_yaw_rad", "object_size_scale", "distractor_count")


def scene_ranges(ranges: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, ...]]:
    """The scene knobs of a protocol's `[randomization]` ranges (what a real table takes)."""
    return {k: tuple(v) for k, v in ranges.items() if k in SCENE_KNOBS}


def yaw_of_quat(quat: Sequence[float] | np.ndarray) -> float:
    """Rotation about the vertical (rad, in (−π, π]) of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in quat)
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def scene_record(
    source: str,
    object_pos: Sequence[float] | np.ndarray,
    object_quat: Sequence[float] | np.ndarray,
    **extra: Any,
) -> dict[str, Any]:
    """An episode's `scene`: where the task object started and who says so.

    Args:
        source: "setup" (the sim: what was set up) or "tracker" (the real side: the robot's own
            sensor reading after the episode started).
        object_pos: (3,) the tracked point of the task object, m, world frame.
        object_quat: (4,) its orientation (w, x, y, z).
        extra: further entries (e.g. the drawn `object_xy_offset_m`, `object_size_scale`).
    """
    return {
        "source": source,
        "object_pos_m": [round(float(v), 6) for v in object_pos],
        "object_yaw_rad": round(yaw_of_quat(object_quat), 6),
        **extra,
    }


def check_scene_seed(seed: Any) -> int:
    """A scene seed given to `reset(options={"scene_seed": ...})`: a whole number ≥ 0."""
    from embodied_eval.errors import EvalError

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise EvalError(
            f"reset options: scene_seed must be a whole number ≥ 0, got {seed!r}",
            key="scene_seed",
        )
    return int(seed)
