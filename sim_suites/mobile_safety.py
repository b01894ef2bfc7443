"""Speed and separation for a mobile manipulator: the controller's side of the monitoring.

The monitor (`sim_suites.safety_monitors.SafetyMonitor`) measures; this is what the robot's
controller does with the same numbers every control step (`sim_suites.mobile_env`):

- The protective separation distance S_p (`protective_separation`, ISO 13855-style) takes the
  whole robot's speed and its stopping time at that speed: the base's rim speed (planar speed
  plus yaw rate × footprint radius) with the base's braking time v/a, or the TCP's speed with the
  arm's stopping time — whichever needs the larger S_p (`governing_speed`).
- Within the profile's reduced-speed zone of a person the base drives at most its reduced speed
  (an ISO 3691-4-style zone, `sim_suites.robot_profiles`); near the arm's own zone the TCP is
  capped as on the fixed Panda.
- Below S_p + SSM_MARGIN_M base and arm are commanded to stop (a monitored stop, not an
  episode end): the robot waits until the person has moved away.

Collisions (`CollisionCounter`) are the robot's contacts with walls, furniture or the person
above COLLISION_FORCE_N, each onset counted once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_suites.controller import V_MAX_MPS
from sim_suites.engines.base import ROBOT
from sim_suites.robot_profiles import RobotProfile
from sim_suites.safety_monitors import (
    SSM_MARGIN_M,
    SSM_SPEED_FRACTION,
    SafetyLimits,
    SafetyMonitor,
    protective_separation,
)

#: A robot contact with a fixture or the person above this force counts as a collision (N).
COLLISION_FORCE_N = 1.0
#: Separation is measured up to this distance (m): beyond the largest S_p the base can need
#: (at 1 m/s with its braking time, about 2.3 m).
MOBILE_SEPARATION_RANGE_M = 4.0
#: A sphere holding the whole robot (centre height above its base, radius; the arm stretched
#: straight up from the highest lift reaches 1.33 m from it) and one holding any body part of
#: the person (m): a cheap lower bound that skips exact separation queries far away.
ROBOT_SPHERE_Z_M = 0.8
ROBOT_SPHERE_RADIUS_M = 1.5
PART_SPHERE_RADIUS_M = 0.35


@dataclass(frozen=True)
class SpeedCaps:
    """This step's caps: the TCP's speed and the base's planar speed (m/s), and whether the
    monitored stop holds base and arm."""

    tcp_mps: float
    base_mps: float
    stop: bool


def governing_speed(
    rim_mps: float, tcp_mps: float, stopping_s: float, limits: SafetyLimits
) -> tuple[float, float]:
    """The speed and stopping time S_p takes (m/s, s): (rim_mps, `stopping_s` — the base's
    braking time at that speed) or (tcp_mps, the arm's `limits.stopping_time_s`), whichever
    gives the larger S_p."""
    base = protective_separation(rim_mps, limits, stopping_s)
    arm = protective_separation(tcp_mps, limits)
    return (rim_mps, stopping_s) if base >= arm else (tcp_mps, limits.stopping_time_s)


def speed_caps(
    separation_m: float | None,
    speed: tuple[float, float],
    profile: RobotProfile,
    limits: SafetyLimits,
    monitor: SafetyMonitor,
) -> SpeedCaps:
    """The caps of one control step (see the module docstring).

    Args:
        separation_m: the robot–person separation, m (None: nobody in the room).
        speed: (speed m/s, stopping time s) from `governing_speed`.
    """
    assert profile.base is not None
    if separation_m is None:
        return SpeedCaps(V_MAX_MPS, profile.base.speed_mps, False)
    tcp = V_MAX_MPS
    if monitor.reduced_speed_required(separation_m):
        tcp = min(tcp, SSM_SPEED_FRACTION * limits.reduced_speed_mps)
    base = profile.base.speed_mps
    if separation_m < profile.reduced_speed_zone_m:
        base = profile.reduced_speed_mps
    required = protective_separation(speed[0], limits, speed[1])
    return SpeedCaps(tcp, base, separation_m < required + SSM_MARGIN_M)


def person_separation(
    backend: Any, part_names: Sequence[str], part_xyz: np.ndarray, base_xy: tuple[float, float]
) -> float:
    """The separation between the whole robot and the person (m, capped at
    MOBILE_SEPARATION_RANGE_M): the exact distance to the nearest of the parts (`part_xyz`
    (P, 3) where each part is) that the spheres around the robot and the part cannot already
    place beyond the range (`backend.nearest`; only the minimum counts)."""
    offset = part_xyz - np.array([base_xy[0], base_xy[1], ROBOT_SPHERE_Z_M])
    bounds = np.sqrt((offset * offset).sum(axis=1)) - (ROBOT_SPHERE_RADIUS_M + PART_SPHERE_RADIUS_M)
    near = [part_names[k] for k in np.flatnonzero(bounds < MOBILE_SEPARATION_RANGE_M).tolist()]
    return backend.nearest(near, MOBILE_SEPARATION_RANGE_M) if near else MOBILE_SEPARATION_RANGE_M


class CollisionCounter:
    """Counts the onsets of robot contacts with anything but the task part (see the module
    docstring)."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.count = 0
        self._touching: set[str] = set()

    def update(self, contacts: Mapping[tuple[str, str], float]) -> None:
        """One control step's peak contact forces (N per body pair)."""
        now = {
            b if a == ROBOT else a
            for (a, b), force in contacts.items()
            if ROBOT in (a, b) and force > COLLISION_FORCE_N and self.part not in (a, b)
        }
        self.count += len(now - self._touching)
        self._touching = now
