"""Robot profiles: which robot a simulated task runs, as one record the engines and the
environment read.

- `panda`: the identified Panda on a fixed base (`sim_suites.panda_description`).
- `mobile_panda`: the same Panda on a holonomic base with a torso lift
  (`sim_suites.mobile_description`), driving through a room.

A profile names the robot's URDF (one description for both engines), the links that are the
robot's own besides the arm (contacts, separation) and, for a mobile robot, the base's planned
limits and its reduced-speed zone near people: within `reduced_speed_zone_m` of a person the
base drives at most `reduced_speed_mps` (an ISO 3691-4-style reduced-speed zone; the values are
this profile's, a lab sets its own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from embodied_eval.errors import EvalError
from sim_suites.mobile_description import (
    BASE_LIMITS,
    BASE_LINKS,
    BaseLimits,
    mobile_panda_urdf_text,
)
from sim_suites.panda_description import panda_urdf_text


@dataclass(frozen=True)
class RobotProfile:
    """One robot the simulation can run (see the module docstring).

    Attributes:
        name: the profile's name. urdf_text: (armature_in_links) → the URDF both engines load.
        base_links: links of the robot besides the arm's (empty on a fixed base).
        base: the base's planned limits (None: a fixed base).
        reduced_speed_zone_m, reduced_speed_mps: the base's reduced-speed zone near people.
    """

    name: str
    urdf_text: Callable[[bool], str]
    base_links: tuple[str, ...] = ()
    base: BaseLimits | None = None
    reduced_speed_zone_m: float = 0.0
    reduced_speed_mps: float = 0.0

    @property
    def mobile(self) -> bool:
        return self.base is not None


PANDA = RobotProfile("panda", panda_urdf_text)
MOBILE_PANDA = RobotProfile(
    "mobile_panda",
    mobile_panda_urdf_text,
    base_links=BASE_LINKS,
    base=BASE_LIMITS,
    reduced_speed_zone_m=1.5,
    reduced_speed_mps=0.3,
)
ROBOT_PROFILES = {p.name: p for p in (PANDA, MOBILE_PANDA)}


def robot_profile(name: str) -> RobotProfile:
    """The profile called `name` (EvalError naming the known ones otherwise)."""
    try:
        return ROBOT_PROFILES[name]
    except KeyError:
        raise EvalError(
            f"robot: unknown robot profile {name!r} (known: {', '.join(ROBOT_PROFILES)})",
            key="robot",
        ) from None
