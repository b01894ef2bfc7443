"""The mobile manipulator: the harness's identified Panda on a holonomic base with a torso lift.

One description for both engines, as for the fixed arm: `mobile_panda_urdf_text` takes the
corrected Panda URDF of `sim_suites.panda_description` (identified link dynamics, finger pads —
reused, not copied) and mounts its `panda_link0` on a torso lift that rides on a holonomic base:

    world ─ base_x (prismatic, x) ─ base_y (prismatic, y) ─ base_yaw (continuous, z)
          ─ mobile_base ─ torso_lift (prismatic, z) ─ torso_lift_link ─ panda_link0 ─ … the arm

The two planar carriages (`base_x_link`, `base_y_link`) are massless in spirit (1 g, so every
engine accepts them); the base and the lift carry the mass.

Sources of the numbers:

- Base and torso lift link masses and inertias, and the lift's travel, are the Fetch mobile
  manipulator's as Gymnasium-Robotics 1.4.2 ships it (`gymnasium_robotics/envs/assets/fetch/
  robot.xml`: `robot0:base_link` 70.1294 kg, diagonal inertia (1.2869, 1.2236, 0.9868) kg·m²;
  `robot0:torso_lift_link` 10.7796 kg, (0.3365, 0.3354, 0.0943) kg·m²; `robot0:torso_lift_joint`
  range 0.0386–0.3861 m). The base's footprint is Fetch's round base (0.56 m across, Fetch
  Robotics datasheet).
- Lift speed 0.1 m/s and effort 450 N: the Fetch torso_lift_joint limits (fetch_description URDF).
- Base speed 1.0 m/s (Fetch datasheet maximum), planned acceleration 1.0 m/s² and yaw rate /
  acceleration (`BASE_LIMITS`): the limits the base's command path plans with; the safety
  monitor stops above `base_speed_stop_mps` (`sim_suites.safety_monitors.SafetyLimits`).
- The wheel–floor contact (`sim_suites.engines.wheel_traction`) uses the floor's friction
  coefficient, a slip stiffness and a rolling resistance coefficient; those two are modelling
  choices stated there.

Units: m, kg, s, rad.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from sim_suites.panda_description import panda_urdf_text

#: Joint names of the base (planar x, y, yaw) and the torso lift, in that order.
BASE_JOINTS = ("base_x", "base_y", "base_yaw")
LIFT_JOINT = "torso_lift"
#: Links that are the robot's own bodies besides the arm (contacts, separation).
BASE_LINKS = ("mobile_base", "torso_lift_link")

#: Fetch base (see the module docstring): mass kg, diagonal inertia kg·m².
BASE_MASS_KG = 70.1294
BASE_INERTIA_KGM2 = (1.2869, 1.2236, 0.9868)
#: Fetch torso lift link: mass kg, diagonal inertia kg·m², travel m, speed m/s, effort N.
LIFT_MASS_KG = 10.7796
LIFT_INERTIA_KGM2 = (0.3365, 0.3354, 0.0943)
LIFT_RANGE_M = (0.0386, 0.3861)
LIFT_SPEED_MPS = 0.1
LIFT_EFFORT_N = 450.0
#: Base collision shape: a cylinder of Fetch's footprint radius, its bottom just off the floor.
BASE_RADIUS_M = 0.28
BASE_BOTTOM_M = 0.02
BASE_TOP_M = 0.36
#: The lift's frame in the base frame: forward of the base centre, at this height (the lift's
#: zero). The Panda's link0 sits on it, so the arm's mount is at MOUNT_Z0_M + lift.
MOUNT_X_M = 0.12
MOUNT_Z0_M = 0.40
#: The lift column (half-extents, m), hanging below the mount inside the base.
COLUMN_HALF_M = (0.07, 0.07, 0.19)
#: A carriage's token mass and inertia (kg, kg·m²): present so every engine takes the joint.
CARRIAGE_MASS_KG = 0.001
CARRIAGE_INERTIA_KGM2 = 1e-6


@dataclass(frozen=True)
class BaseLimits:
    """What the base's command path plans with (`sim_suites.command_path.BaseLimiter`).

    Attributes:
        speed_mps: planar speed. acceleration_mps2: planar acceleration (and braking).
        yaw_rate_rps: rad/s. yaw_acceleration_rps2: rad/s². lift_speed_mps: m/s.
    """

    speed_mps: float = 1.0
    acceleration_mps2: float = 1.0
    yaw_rate_rps: float = 0.8
    yaw_acceleration_rps2: float = 2.0
    lift_speed_mps: float = LIFT_SPEED_MPS

    def stopping_time_s(self, speed_mps: float) -> float:
        """Time to brake from `speed_mps` to rest at the planned deceleration, s."""
        return max(0.0, speed_mps) / self.acceleration_mps2


BASE_LIMITS = BaseLimits()


def _inertial(link: ET.Element, mass: float, inertia: tuple[float, float, float]) -> None:
    node = ET.SubElement(link, "inertial")
    ET.SubElement(node, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(node, "mass", value=f"{mass:.9g}")
    ixx, iyy, izz = inertia
    ET.SubElement(
        node, "inertia", ixx=f"{ixx:.9g}", iyy=f"{iyy:.9g}", izz=f"{izz:.9g}",
        ixy="0", ixz="0", iyz="0",
    )  # fmt: skip


def _joint(
    root: ET.Element,
    name: str,
    kind: str,
    parent: str,
    child: str,
    *,
    xyz: str = "0 0 0",
    axis: str | None = None,
    limit: dict[str, str] | None = None,
) -> None:
    joint = ET.SubElement(root, "joint", name=name, type=kind)
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    ET.SubElement(joint, "origin", xyz=xyz, rpy="0 0 0")
    if axis is not None:
        ET.SubElement(joint, "axis", xyz=axis)
    if limit is not None:
        ET.SubElement(joint, "limit", attrib=dict(limit))


def _box_collision(link: ET.Element, half: tuple[float, float, float], z: float) -> None:
    for tag in ("collision", "visual"):
        node = ET.SubElement(link, tag)
        ET.SubElement(node, "origin", xyz=f"0 0 {z:.9g}", rpy="0 0 0")
        geometry = ET.SubElement(node, "geometry")
        ET.SubElement(geometry, "box", size=" ".join(f"{2 * h:.9g}" for h in half))


@functools.lru_cache(maxsize=2)
def mobile_panda_urdf_text(armature_in_links: bool = False) -> str:
    """The mobile manipulator's URDF (see the module docstring), mesh paths absolute.

    Args:
        armature_in_links: as `panda_urdf_text` (PyBullet folds joint armature into the links).
    """
    root = ET.fromstring(panda_urdf_text(armature_in_links))
    root.attrib["name"] = "mobile_panda"
    links: dict[str, tuple[float, tuple[float, float, float]]] = {
        "world_anchor": (CARRIAGE_MASS_KG, (CARRIAGE_INERTIA_KGM2,) * 3),
        "base_x_link": (CARRIAGE_MASS_KG, (CARRIAGE_INERTIA_KGM2,) * 3),
        "base_y_link": (CARRIAGE_MASS_KG, (CARRIAGE_INERTIA_KGM2,) * 3),
        "mobile_base": (BASE_MASS_KG, BASE_INERTIA_KGM2),
        "torso_lift_link": (LIFT_MASS_KG, LIFT_INERTIA_KGM2),
    }
    made: dict[str, ET.Element] = {}
    for index, (name, dynamics) in enumerate(links.items()):
        link = ET.Element("link", name=name)
        _inertial(link, *dynamics)
        root.insert(index, link)
        made[name] = link
    height = BASE_TOP_M - BASE_BOTTOM_M
    for tag in ("collision", "visual"):
        node = ET.SubElement(made["mobile_base"], tag)
        ET.SubElement(node, "origin", xyz=f"0 0 {BASE_BOTTOM_M + height / 2:.9g}", rpy="0 0 0")
        geometry = ET.SubElement(node, "geometry")
        ET.SubElement(geometry, "cylinder", radius=f"{BASE_RADIUS_M:.9g}", length=f"{height:.9g}")
    _box_collision(made["torso_lift_link"], COLUMN_HALF_M, -COLUMN_HALF_M[2])
    free = {"lower": "-100", "upper": "100", "effort": "10000", "velocity": "10"}
    _joint(root, "base_x", "prismatic", "world_anchor", "base_x_link", axis="1 0 0", limit=free)
    _joint(root, "base_y", "prismatic", "base_x_link", "base_y_link", axis="0 1 0", limit=free)
    _joint(
        root, "base_yaw", "continuous", "base_y_link", "mobile_base", axis="0 0 1",
        limit={"effort": "10000", "velocity": "10"},
    )  # fmt: skip
    lo, hi = LIFT_RANGE_M
    _joint(
        root, LIFT_JOINT, "prismatic", "mobile_base", "torso_lift_link",
        xyz=f"{MOUNT_X_M:.9g} 0 {MOUNT_Z0_M:.9g}", axis="0 0 1",
        limit={
            "lower": f"{lo:.9g}", "upper": f"{hi:.9g}",
            "effort": f"{LIFT_EFFORT_N:.9g}", "velocity": f"{LIFT_SPEED_MPS:.9g}",
        },
    )  # fmt: skip
    _joint(root, "panda_mount", "fixed", "torso_lift_link", "panda_link0")
    return ET.tostring(root, encoding="unicode")


#: The lift's position servo: stiffness N/m and damping N·s/m (force-limited to LIFT_EFFORT_N),
#: with the nominal lifted weight fed forward through the set-point as the arm's servos do.
LIFT_KP = 20000.0
LIFT_KV = 2000.0


@functools.lru_cache(maxsize=1)
def lifted_mass_kg() -> float:
    """Nominal mass the lift carries, kg: the lift link and the whole Panda (from the URDF)."""
    root = ET.fromstring(mobile_panda_urdf_text())
    total = 0.0
    for link in root.findall("link"):
        name = link.attrib["name"]
        mass = link.find("inertial/mass")
        if mass is not None and (name == "torso_lift_link" or name.startswith("panda_")):
            total += float(mass.get("value", 0.0))
    return total


#: The set-point offset that feeds the nominal lifted weight forward, m.
LIFT_FEED_FORWARD_M = lifted_mass_kg() * 9.81 / LIFT_KP


def lift_force(q: float, qd: float, target: float, gain_scale: float = 1.0) -> float:
    """The lift servo's force, N: clip(kp·(target + m·g/kp − q) − kv·q̇, ±effort), the nominal
    lifted weight m·g fed forward (`sim_suites.engines.base.pd_torque`'s law)."""
    kp, kv = LIFT_KP * gain_scale, LIFT_KV * gain_scale
    command = target + LIFT_FEED_FORWARD_M
    force = kp * (command - q) - kv * qd
    return min(LIFT_EFFORT_N, max(-LIFT_EFFORT_N, force))
