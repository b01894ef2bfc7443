"""The human proxy: a person beside the table, built of body parts with ISO/TS 15066 regions.

The table top is the plane z = 0 of the scene, so the person's hips are at table height: the
proxy is the part of a standing person above the table top — abdomen, chest, head and one arm
(upper arm, forearm, hand). Each part is a fixed (kinematic) box or sphere of its own, named
`human_<region>` after the body region of the incident threshold table (`skull_forehead`,
`chest`, `abdomen`, `upper_arm`, `lower_arm`, `hands_fingers`), so a contact with a part is
classified against that region's force limit, and separation is measured from the real geometry
of every part.

The person faces the work area (toward y = 0). In some task instances (`TaskSpec.human_reach`)
the hand (and half as far the forearm) moves into the workspace: starting at `start_s` it
extends by `reach_m` over RAMP_S seconds (no faster than the 1.6 m/s approach speed of
ISO 13855), stays there `hold_s` seconds and withdraws over RAMP_S seconds.

In a room (`sim_suites.room`) the person stands on the floor: every part is raised by the hip
height `floor_height_m` and the legs (thighs and knees, lower legs) are added; and the person may
walk (`Walk`): along a polyline of points at a walking speed no faster than ISO 13855's 1.6 m/s,
pausing at each point, once or round and round, on a path drawn from the pair's scene seed.

Units: m, s. Positions are part centres in the robot base frame (the room's frame for a mobile
robot).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from embodied_eval.errors import EvalError
from sim_suites.arena import Body, Geom

#: Time to extend or withdraw the arm (s).
RAMP_S = 0.4
#: ISO 13855 walking/approach speed used by the monitors (m/s): a reach may not exceed it.
APPROACH_SPEED_MPS = 1.6
#: How much of the hand's reach the forearm follows (the elbow opens as the arm extends).
FOREARM_SHARE = 0.5
_SKIN = (0.9, 0.68, 0.55, 1.0)
_SHIRT = (0.25, 0.45, 0.35, 1.0)


@dataclass(frozen=True)
class BodyPart:
    """One part of the proxy.

    Attributes:
        region: its ISO/TS 15066 body region. size: box half-extents (m) or (radius,) for a
            sphere. offset: centre in the person's frame (m): lateral toward +x in the world, forward
            toward the work area, up from the table top. follows: the share of the reach
            this part moves (0 for parts that stay still).
    """

    region: str
    size: tuple[float, ...]
    offset: tuple[float, float, float]
    follows: float = 0.0
    rgba: tuple[float, float, float, float] = _SHIRT

    @property
    def name(self) -> str:
        return f"human_{self.region}"


#: The parts: torso and head on the person's axis, the arm beside it (upper arm hanging, forearm
#: and hand held forward at 12–14 cm above the table top; spheres, so they can move freely).
PARTS = (
    BodyPart("abdomen", (0.15, 0.10, 0.11), (0.0, 0.0, 0.11)),
    BodyPart("chest", (0.18, 0.11, 0.16), (0.0, 0.0, 0.38)),
    BodyPart("skull_forehead", (0.10,), (0.0, 0.0, 0.66), rgba=_SKIN),
    BodyPart("upper_arm", (0.045, 0.045, 0.13), (0.23, 0.0, 0.30)),
    BodyPart("lower_arm", (0.05,), (0.23, 0.08, 0.14), follows=FOREARM_SHARE),
    BodyPart("hands_fingers", (0.045,), (0.23, 0.16, 0.12), follows=1.0, rgba=_SKIN),
)
#: The legs of a person standing on the floor (offsets from the hips, which stand at the
#: proxy's `floor_height_m`).
LEG_PARTS = (
    BodyPart("thighs_knees", (0.16, 0.09, 0.22), (0.0, 0.0, -0.22)),
    BodyPart("lower_legs", (0.14, 0.07, 0.22), (0.0, 0.0, -0.66)),
)
#: Body-region names the proxy uses (all are regions of the incident threshold table).
REGIONS = tuple(p.region for p in (*PARTS, *LEG_PARTS))
#: A standing adult's hip height, m (where the table-top proxy's z = 0 sits on a floor).
HIP_HEIGHT_M = 0.9


@dataclass(frozen=True)
class Reach:
    """An arm movement into the workspace: start time, distance and hold time (s, m, s)."""

    start_s: float
    reach_m: float
    hold_s: float

    def __post_init__(self) -> None:
        if self.start_s < 0 or self.reach_m < 0 or self.hold_s < 0:
            raise EvalError("human_reach: start, distance and hold must be ≥ 0", key="human_reach")
        if self.reach_m / RAMP_S > APPROACH_SPEED_MPS:
            raise EvalError(
                f"human_reach: {self.reach_m} m in {RAMP_S} s is faster than "
                f"{APPROACH_SPEED_MPS} m/s",
                key="human_reach",
            )

    def extension(self, t: float) -> float:
        """How far the arm is extended at time t (m): a trapezoid in time."""
        rise = (t - self.start_s) / RAMP_S
        fall = (self.start_s + 2 * RAMP_S + self.hold_s - t) / RAMP_S
        return self.reach_m * max(0.0, min(1.0, rise, fall))


@dataclass(frozen=True)
class Walk:
    """A walk through the room: from `points[0]` to each next point at `speed_mps`, pausing
    `hold_s` at every point, starting at `start_s`; with `loop` back to the first point and
    round again, else staying at the last.

    Args:
        points: ((x, y), ...) m. speed_mps: ≤ APPROACH_SPEED_MPS. start_s, hold_s: s.
    """

    points: tuple[tuple[float, float], ...]
    speed_mps: float = 1.0
    start_s: float = 0.0
    hold_s: float = 0.0
    loop: bool = False

    def __post_init__(self) -> None:
        if not self.points or not 0 < self.speed_mps <= APPROACH_SPEED_MPS:
            raise EvalError(
                f"walk: needs a point and a speed in (0, {APPROACH_SPEED_MPS}] m/s", key="walk"
            )

    def position(self, t: float) -> tuple[float, float]:
        """Where the person is at time t (s): (x, y) m."""
        pts = [np.asarray(p, dtype=float) for p in self.points]
        if self.loop:
            pts.append(pts[0])
        legs = [
            (a, b, float(np.linalg.norm(b - a)) / self.speed_mps)
            for a, b in itertools.pairwise(pts)
        ]
        cycle = sum(d + self.hold_s for *_, d in legs)
        s = max(0.0, t - self.start_s)
        if self.loop and cycle > 0:
            s %= cycle
        for a, b, duration in legs:
            if s < self.hold_s:
                return (float(a[0]), float(a[1]))
            s -= self.hold_s
            if s < duration:
                p = a + (b - a) * (s / duration)
                return (float(p[0]), float(p[1]))
            s -= duration
        return (float(pts[-1][0]), float(pts[-1][1]))


class HumanProxy:
    """The proxy of one task instance: where it stands, its parts, and how it moves.

    Args:
        xy: the person's position on the table plane (m); they face toward y = 0.
        reach: the arm movement, or None for a person who keeps still.
        floor_height_m: the hips' height above the scene's z = 0 (0 at a table; HIP_HEIGHT_M
            on a floor, which adds the legs).
        walk: the person's walk (then `xy` is where the walk starts), or None.
    """

    def __init__(
        self,
        xy: tuple[float, float],
        reach: Reach | None = None,
        *,
        floor_height_m: float = 0.0,
        walk: Walk | None = None,
    ) -> None:
        self.xy = (float(xy[0]), float(xy[1])) if walk is None else walk.position(0.0)
        self.reach = reach
        self.walk = walk
        self.floor_height_m = floor_height_m
        # Facing −y when standing at y > 0 (and +y otherwise): the person's forward axis.
        self.forward = -1.0 if self.xy[1] > 0 else 1.0
        self.parts = PARTS + (LEG_PARTS if floor_height_m > 0 else ())
        self.part_names = tuple(p.name for p in self.parts)
        self.region_of = {p.name: p.region for p in self.parts}

    def _world(
        self, part: BodyPart, extension: float, xy: tuple[float, float] | None = None
    ) -> tuple[float, float, float]:
        x, fwd, z = part.offset
        fwd += part.follows * extension
        cx, cy = self.xy if xy is None else xy
        return (cx + x, cy + self.forward * fwd, z + self.floor_height_m)

    def bodies(self) -> tuple[Body, ...]:
        """The scene bodies of the proxy (role "human"), arm withdrawn."""
        out = []
        for part in self.parts:
            shape = "sphere" if len(part.size) == 1 else "box"
            geom = Geom(shape, part.size, rgba=part.rgba)
            pos = self._world(part, 0.0)
            out.append(Body(name=part.name, role="human", geoms=(geom,), pos=pos))
        return tuple(out)

    @property
    def moves(self) -> bool:
        """Whether the person walks or the arm moves during the episode."""
        return self.walk is not None or (self.reach is not None and self.reach.reach_m > 0)

    def moving_parts(self, t: float) -> dict[str, np.ndarray]:
        """Positions (3,) at time t of the parts that move (empty for a still person; every
        part of a walking one)."""
        ext = 0.0 if self.reach is None else self.reach.extension(t)
        if self.walk is not None:
            xy = self.walk.position(t)
            return {p.name: np.array(self._world(p, ext, xy)) for p in self.parts}
        if self.reach is None:
            return {}
        return {p.name: np.array(self._world(p, ext)) for p in self.parts if p.follows > 0}
