"""One description of the Panda for both engines: the URDF shipped in `pybullet_data`, corrected.

The URDF in `pybullet_data/franka_panda` has placeholder dynamics (every link 0.1 kg·m² of
inertia, rounded masses). `panda_urdf_text` rewrites it once, in memory, with:

- the identified link masses, centres of mass and inertia tensors of the Panda arm (links 1–7),
  typed in from Gaz, Cognetti, Oliva, Robuffo Giordano and De Luca, "Dynamic Identification of
  the Franka Emika Panda Robot With Retrieval of Feasible Parameters Using Penalty-Based
  Optimization", IEEE Robotics and Automation Letters 4(4):4147–4154, 2019, in the form the
  `franka_description` package and the MuJoCo Menagerie Panda model carry them (link frames as
  in this URDF; inertia about the centre of mass, kg·m²);
- the Franka Hand's mass 0.73 kg (Franka Emika datasheet; centre of mass and inertia as in the
  Menagerie model);
- finger pads: a small box on the inner face of each fingertip (the Menagerie Panda carries
  such pads), so grasps are held by friction on flat pads rather than on the finger mesh hulls.

Both backends load this text (MuJoCo through `MjSpec.from_string`, PyBullet from a file written
once per process), and `PandaKinematics` reads its gravity model from the same text, so the
same numbers reach both engines and the controller.

Joint parameters that a URDF cannot carry are here too, and each backend applies them:
`ARMATURE_KGM2` (rotor inertia reflected through the gear), `JOINT_DAMPING_NMS` and
`JOINT_FRICTION_NM` (Coulomb). MuJoCo models armature natively. PyBullet has none, so its copy
of the description adds each joint's armature to its link's inertia as a disc about the joint
axis (link z):
the joint sees the same extra inertia, at the price of a small extra inertia for the joints
upstream. Without it the light distal links make PyBullet's explicit 2 ms PD servo unstable.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pybullet_data


@dataclass(frozen=True)
class Inertial:
    """Mass (kg), centre of mass (m, link frame) and inertia about it (kg·m²)."""

    mass: float
    com: tuple[float, float, float]
    #: (ixx, iyy, izz, ixy, ixz, iyz)
    inertia: tuple[float, float, float, float, float, float]


#: Identified dynamics of the arm links (Gaz et al. 2019, see the module docstring).
ARM_INERTIALS: dict[str, Inertial] = {
    "panda_link1": Inertial(
        4.970684, (0.003875, 0.002081, -0.04762),
        (0.70337, 0.70661, 0.009117, -0.000139, 0.006772, 0.019169),
    ),
    "panda_link2": Inertial(
        0.646926, (-0.003141, -0.02872, 0.003495),
        (0.007962, 0.02811, 0.025995, -0.003925, 0.010254, 0.000704),
    ),
    "panda_link3": Inertial(
        3.228604, (0.027518, 0.039252, -0.066502),
        (0.037242, 0.036155, 0.01083, -0.004761, -0.011396, -0.012805),
    ),
    "panda_link4": Inertial(
        3.587895, (-0.05317, 0.104419, 0.027454),
        (0.025853, 0.019552, 0.028323, 0.007796, -0.001332, 0.008641),
    ),
    "panda_link5": Inertial(
        1.225946, (-0.011953, 0.041065, -0.038437),
        (0.035549, 0.029474, 0.008627, -0.002117, -0.004037, 0.000229),
    ),
    "panda_link6": Inertial(
        1.666555, (0.060149, -0.014117, -0.010517),
        (0.001964, 0.004354, 0.005433, 0.000109, -0.001158, 0.000341),
    ),
    "panda_link7": Inertial(
        0.735522, (0.010517, -0.004252, 0.061597),
        (0.012516, 0.010027, 0.004815, -0.000428, -0.001196, -0.000741),
    ),
    # Franka Hand: 0.73 kg (datasheet); centre of mass and inertia as in the Menagerie model.
    "panda_hand": Inertial(0.73, (-0.01, 0.0, 0.03), (0.001, 0.0025, 0.0017, 0.0, 0.0, 0.0)),
}  # fmt: skip

#: Each finger: the URDF's 0.1 kg with a 1e-4 kg·m² inertia. (The real finger is lighter; at a
#: 2 ms step a 15 g finger under a 2000 N/m grip servo is too stiff for PyBullet's explicit PD.)
FINGER_MASS_KG = 0.1
FINGER_INERTIA_KGM2 = 1e-4

#: Rotor inertia per arm joint (kg·m²), as in the Menagerie Panda model.
ARMATURE_KGM2 = np.full(7, 0.1)
#: Viscous joint damping (N·m·s/rad), as in the Menagerie Panda model; scaled by DR.
JOINT_DAMPING_NMS = np.full(7, 1.0)
#: Coulomb joint friction (N·m): a modelling choice of the order of the Coulomb terms Gaz et al.
#: identified (tenths of a newton-metre to about one), smaller on the wrist joints.
JOINT_FRICTION_NM = np.array([0.5, 0.5, 0.5, 0.5, 0.2, 0.2, 0.2])

#: Finger pads (finger link frame, m): centre and half-sizes of a box on the fingertip's inner
#: face. The left finger closes along −y of its frame, so the pad's inner face is at y = −0.5 mm,
#: just proud of the mesh's inner face at y ≈ 0; the right finger mirrors it.
PAD_CENTER_M = (0.0, 0.0035, 0.045)
PAD_HALF_M = (0.0085, 0.004, 0.009)


#: Link pairs never checked for self-collision (besides parent–child pairs, which both engines
#: skip): the hand against link 7 (joined through the massless flange link, their hulls overlap
#: by 2.5 cm at every posture) and the two fingers (their hulls meet when closed empty).
SELF_COLLISION_EXCLUDE: tuple[tuple[str, str], ...] = (
    ("panda_link7", "panda_hand"),
    ("panda_leftfinger", "panda_rightfinger"),
)


def pad_name(finger_link: str) -> str:
    """Name of the pad collision of a finger link ("panda_leftfinger_pad")."""
    return f"{finger_link}_pad"


def pybullet_panda_urdf_path() -> Path:
    """The Panda URDF as shipped in the installed `pybullet_data` package."""
    return Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"


def _set_inertial(link: ET.Element, inertial: Inertial) -> None:
    old = link.find("inertial")
    if old is not None:
        link.remove(old)
    node = ET.Element("inertial")
    ET.SubElement(node, "origin", rpy="0 0 0", xyz=" ".join(f"{v:.9g}" for v in inertial.com))
    ET.SubElement(node, "mass", value=f"{inertial.mass:.9g}")
    ixx, iyy, izz, ixy, ixz, iyz = inertial.inertia
    ET.SubElement(
        node,
        "inertia",
        ixx=f"{ixx:.9g}",
        iyy=f"{iyy:.9g}",
        izz=f"{izz:.9g}",
        ixy=f"{ixy:.9g}",
        ixz=f"{ixz:.9g}",
        iyz=f"{iyz:.9g}",
    )
    link.insert(0, node)


def _add_pad(link: ET.Element, sign: float) -> None:
    cx, cy, cz = PAD_CENTER_M
    pad = ET.SubElement(link, "collision", name=pad_name(link.attrib["name"]))
    ET.SubElement(pad, "origin", rpy="0 0 0", xyz=f"{cx:.9g} {sign * cy:.9g} {cz:.9g}")
    geometry = ET.SubElement(pad, "geometry")
    ET.SubElement(geometry, "box", size=" ".join(f"{2 * h:.9g}" for h in PAD_HALF_M))


@functools.lru_cache(maxsize=2)
def panda_urdf_text(armature_in_links: bool = False) -> str:
    """The corrected Panda URDF (see the module docstring), mesh paths made absolute.

    Args:
        armature_in_links: add each arm joint's armature to its link's izz (for engines without
            joint armature).
    """
    source = pybullet_panda_urdf_path()
    root = ET.fromstring(source.read_text(encoding="utf-8"))
    links = {link.attrib["name"]: link for link in root.findall("link")}
    for name, inertial in ARM_INERTIALS.items():
        if armature_in_links and name != "panda_hand":
            ixx, iyy, izz, ixy, ixz, iyz = inertial.inertia
            extra = float(ARMATURE_KGM2[int(name[-1]) - 1])
            # A rotor is a disc about the joint axis: a about z, a/2 about x and y (keeps the
            # tensor physically valid).
            inertial = Inertial(
                inertial.mass,
                inertial.com,
                (ixx + extra / 2, iyy + extra / 2, izz + extra, ixy, ixz, iyz),
            )
        _set_inertial(links[name], inertial)
    inertia = FINGER_INERTIA_KGM2
    for name, sign in (("panda_leftfinger", 1.0), ("panda_rightfinger", -1.0)):
        origin = links[name].find("inertial/origin")
        x, y, z = (
            float(v)
            for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()
        )
        finger = Inertial(FINGER_MASS_KG, (x, y, z), (inertia, inertia, inertia, 0.0, 0.0, 0.0))
        _set_inertial(links[name], finger)
        _add_pad(links[name], sign)
    text = ET.tostring(root, encoding="unicode")
    return text.replace("package://", f"{source.parent}/")


def panda_urdf_file(armature_in_links: bool = False) -> Path:
    """`panda_urdf_text` written to a private temporary file (for loaders that need a path)."""
    return urdf_file(panda_urdf_text(armature_in_links))


@functools.lru_cache(maxsize=4)
def urdf_file(text: str) -> Path:
    """A robot description written once per process to a private temporary file."""
    folder = Path(tempfile.mkdtemp(prefix="panda-urdf-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "robot.urdf"
    path.write_text(text, encoding="utf-8")
    return path
