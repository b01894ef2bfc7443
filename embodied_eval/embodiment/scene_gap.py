"""Start-scene gap of each pair: did the sim and real halves start from the same scene?

A pair is one trial in two worlds. Each episode records where its task object started
(`Episode.scene`): the sim what it set up, the real side what the robot's own tracker saw first
after the episode started. The gap of a pair is the distance between the two start positions
(m, 3-D) and the difference of their yaws (rad, wrapped to (−π, π]). A pair whose gap exceeds the
protocol's tolerance (`[real] scene_tolerance_m`, default 1 cm; `scene_tolerance_rad`, default
0.05 rad) compares two different scenes: it is flagged and left out of S2R and prediction-powered
AR, and the report says how many. A pair without a start reading on either side (a real episode
judged by hand, no tracker) is *unmeasured*: kept, and counted as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.records import Episode


@dataclass(frozen=True)
class SceneGap:
    """The start-scene gap of one pair (None when a side has no start reading)."""

    pair_id: str
    family: str
    distance_m: float | None
    yaw_rad: float | None
    flagged: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "pair_id": self.pair_id,
            "family": self.family,
            "distance_m": self.distance_m,
            "yaw_rad": self.yaw_rad,
            "flagged": self.flagged,
        }


def wrapped_angle(rad: float) -> float:
    """An angle difference wrapped to (−π, π]."""
    out = math.remainder(rad, 2.0 * math.pi)
    return math.pi if out == -math.pi else out


def start_scene_gap(sim: Episode, real: Episode) -> tuple[float, float] | None:
    """(distance m, |yaw difference| rad) between the two halves' start scenes, or None."""
    a, b = sim.scene, real.scene
    if "object_pos_m" not in a or "object_pos_m" not in b:
        return None
    distance = math.dist(
        [float(v) for v in a["object_pos_m"]], [float(v) for v in b["object_pos_m"]]
    )
    yaw = abs(
        wrapped_angle(float(a.get("object_yaw_rad", 0.0)) - float(b.get("object_yaw_rad", 0.0)))
    )
    return distance, yaw


@dataclass(frozen=True)
class SceneCheck:
    """Every pair's start-scene gap against the protocol's tolerance."""

    tolerance_m: float
    tolerance_rad: float
    gaps: tuple[SceneGap, ...] = field(default_factory=tuple)

    @property
    def flagged(self) -> list[str]:
        return [g.pair_id for g in self.gaps if g.flagged]

    @property
    def unmeasured(self) -> int:
        return sum(g.distance_m is None for g in self.gaps)

    def by_family(self) -> dict[str, dict[str, Any]]:
        """Per family: measured pairs, flagged pairs, median and largest gap."""
        out: dict[str, dict[str, Any]] = {}
        for family in sorted({g.family for g in self.gaps}):
            mine = [g for g in self.gaps if g.family == family and g.distance_m is not None]
            dists = sorted(g.distance_m for g in mine if g.distance_m is not None)
            yaws = sorted(g.yaw_rad for g in mine if g.yaw_rad is not None)
            out[family] = {
                "pairs": len(mine),
                "flagged": sum(g.flagged for g in mine),
                "median_m": _median(dists),
                "max_m": dists[-1] if dists else None,
                "median_yaw_rad": _median(yaws),
                "max_yaw_rad": yaws[-1] if yaws else None,
            }
        return out

    def note(self) -> str | None:
        """The sentence the report prints when pairs were left out (None otherwise)."""
        flagged = self.flagged
        if not flagged:
            return None
        return (
            f"{len(flagged)} pair(s) started from different scenes (start gap beyond "
            f"{self.tolerance_m * 100:g} cm / {self.tolerance_rad:g} rad: "
            f"{', '.join(flagged[:5])}{' …' if len(flagged) > 5 else ''}) and were left out of "
            "S2R and prediction-powered AR"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tolerance_m": self.tolerance_m,
            "tolerance_rad": self.tolerance_rad,
            "pairs": len(self.gaps),
            "measured": len(self.gaps) - self.unmeasured,
            "unmeasured": self.unmeasured,
            "flagged": self.flagged,
            "by_family": self.by_family(),
            "gaps": [g.to_json() for g in self.gaps],
        }


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def check_scenes(
    pairs: Sequence[tuple[Episode, Episode]], tolerance_m: float, tolerance_rad: float
) -> SceneCheck:
    """The start-scene gap of every (sim, real) pair, flagged beyond the tolerance.

    Args:
        pairs: (sim episode, real episode) of each pair, [m].
        tolerance_m, tolerance_rad: the protocol's `[real] scene_tolerance_m` / `_rad`.
    """
    gaps = []
    for sim, real in sorted(pairs, key=lambda p: p[1].pair_id):
        gap = start_scene_gap(sim, real)
        if gap is None:
            gaps.append(SceneGap(real.pair_id, real.family, None, None, False))
            continue
        distance, yaw = gap
        flagged = distance > tolerance_m or yaw > tolerance_rad
        gaps.append(SceneGap(real.pair_id, real.family, round(distance, 6), round(yaw, 6), flagged))
    return SceneCheck(tolerance_m, tolerance_rad, tuple(gaps))
