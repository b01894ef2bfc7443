"""The arena: an engine-neutral description of what stands around the robot.

A scene is a table (the floor plane at z = 0, the robot base at the origin), the task's bodies
(a free object, fixtures, an articulated drawer), an optional human proxy (`sim_suites.human`:
one body per body region) and a hidden
obstacle used by the planner-dead-end fault. Each engine backend builds the same scene from this
description, so the two simulators see the same geometry, masses and friction.

All bodies are axis-aligned (no rotation), which every task here needs. Units: m, kg.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embodied_eval.protocol.reader import MAX_DISTRACTORS

#: Body roles: what a contact with the body means to the safety monitors.
ROLES = ("object", "tool", "fixture", "drawer", "human", "obstacle", "distractor")
#: Roles of the free parts a task moves: the scored object and the tool the hand uses on it.
PART_ROLES = ("object", "tool")
#: Where the hidden obstacle waits when not in use (far outside the workspace).
OBSTACLE_PARKING = (0.0, 3.0, 0.3)


@dataclass(frozen=True)
class Geom:
    """A collision shape in its body frame.

    `size` is the half-extents (x, y, z) for a box, (radius, half_length) for a capsule or
    cylinder (axis z), (radius,) for a sphere.
    """

    shape: str
    size: tuple[float, ...]
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rgba: tuple[float, float, float, float] = (0.7, 0.7, 0.7, 1.0)


@dataclass(frozen=True)
class Body:
    """One rigid body of the scene.

    Attributes:
        name: unique name. role: one of ROLES.
        joint: "fixed" (welded to the world), "free" (6-DoF object) or "slide" (prismatic joint
            along `slide_axis`, limits `slide_range`, viscous `slide_damping` N·s/m and
            Coulomb `slide_friction_n` N).
        pos: body origin in the world at the start of an episode (m).
        mass: kg (ignored for fixed bodies). friction: sliding friction coefficient of the
            body's contacts (combined so that both engines use this value; see the backends).
        grasp_width: how wide the body is across the gripper fingers (m), for grasping.
    """

    name: str
    role: str
    geoms: tuple[Geom, ...]
    joint: str = "fixed"
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    mass: float = 0.0
    friction: float = 0.8
    slide_axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    slide_range: tuple[float, float] = (0.0, 0.0)
    slide_damping: float = 0.0
    slide_friction_n: float = 0.0
    grasp_width: float = 0.0


@dataclass(frozen=True)
class Scene:
    """Everything around the robot for one task instance."""

    bodies: tuple[Body, ...]
    table_friction: float = 1.0

    def body(self, name: str) -> Body:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(name)

    def names(self, role: str) -> list[str]:
        return [b.name for b in self.bodies if b.role == role]


@dataclass(frozen=True)
class Workspace:
    """Where the TCP and the task object may be; leaving it is a workspace breach.

    Bounds are (low, high) per axis in m. The TCP box excludes the region around the robot base;
    the object may not leave the table area or fall below it.
    """

    tcp_low: tuple[float, float, float] = (0.15, -0.55, -0.01)
    tcp_high: tuple[float, float, float] = (0.85, 0.55, 0.75)
    object_low: tuple[float, float, float] = (0.05, -0.65, -0.05)
    object_high: tuple[float, float, float] = (0.95, 0.65, 0.9)

    def tcp_inside(self, pos: np.ndarray) -> bool:
        return bool(np.all(pos >= self.tcp_low) and np.all(pos <= self.tcp_high))

    def object_inside(self, pos: np.ndarray) -> bool:
        return bool(np.all(pos >= self.object_low) and np.all(pos <= self.object_high))


def obstacle(half_height: float = 0.15) -> Body:
    """The planner-dead-end obstacle: a 2 cm square pillar, parked out of the way until used."""
    return Body(
        name="obstacle",
        role="obstacle",
        geoms=(Geom("box", (0.01, 0.01, half_height), rgba=(0.8, 0.1, 0.1, 1.0)),),
        pos=OBSTACLE_PARKING,
    )


@dataclass(frozen=True)
class Distractor:
    """One distractor object (`sim_suites.distractors`): its shape, how high its centre stands
    when it rests on the table (m) and the radius of its footprint (m)."""

    geom: Geom
    half_height_m: float
    radius_m: float


#: The distractors: a red mug, a blue box and a green cube (colours of the task parts).
DISTRACTORS: tuple[Distractor, ...] = (
    Distractor(Geom("cylinder", (0.03, 0.045), rgba=(0.8, 0.2, 0.2, 1.0)), 0.045, 0.03),
    Distractor(Geom("box", (0.03, 0.02, 0.025), rgba=(0.2, 0.3, 0.8, 1.0)), 0.025, 0.036),
    Distractor(Geom("box", (0.02, 0.02, 0.02), rgba=(0.2, 0.65, 0.25, 1.0)), 0.02, 0.029),
)[:MAX_DISTRACTORS]


def distractor_bodies() -> tuple[Body, ...]:
    """The distractor bodies, parked high above the floor far outside the cell (fixed bodies a
    reset moves onto the table when `distractor_count` asks for them)."""
    return tuple(
        Body(
            name=f"distractor_{k}",
            role="distractor",
            geoms=(d.geom,),
            pos=(0.3 * k, -3.0, 0.5),
        )
        for k, d in enumerate(DISTRACTORS)
    )


@dataclass(frozen=True)
class SceneExtras:
    """Optional parts of a scene shared by all families."""

    human_xy: tuple[float, float] | None = None
    extra_bodies: tuple[Body, ...] = field(default_factory=tuple)
