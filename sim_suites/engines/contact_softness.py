"""Contact softness of the manipulated objects, set the same way in both engines.

MuJoCo's soft contacts follow the reference acceleration of a mass-spring-damper with the time
constant τ and damping ratio ζ of `geom_solref` = (τ, ζ); the nominal simulator uses MuJoCo's
default (0.02 s, 1). A larger τ is a *softer* contact (more penetration, slower rebound): the
stiffness of the reference dynamics is k = d / (d_max² τ² ζ²) per unit effective mass, so τ = 0.04
s is 4× softer than 0.02 s and τ = 0.01 s 4× stiffer.

PyBullet's contacts are rigid by default; a contact time constant is applied there as the
per-body `contactStiffness` / `contactDamping` of a spring that sags about as MuJoCo's soft
contact does: treating one contact with MuJoCo's default impedance (solimp d = d_max = 0.95) as
the blend a = d·a_ref + (1 − d)·a_free gives a rest penetration r = (1 − d) g / (d k), so the
spring is k_N/m = m · d · k / (1 − d) ≈ 20 m / τ², critically damped, c = 2 √(k m); m is the
body's own mass (the drawer's sliding link for a drawer). Measured on the pick-place cube after
1 s at rest: MuJoCo sinks 0.027 mm at τ = 0.01 s and 0.83 mm at 0.08 s, PyBullet 0.034 mm and
1.58 mm — the same direction and order (tests/test_twin_plant.py).
"""

from __future__ import annotations

import math
from typing import Any

#: MuJoCo's default solimp impedance beyond its width, and its maximum (solimp = (0.9, 0.95, ...)).
IMPEDANCE = 0.95
#: MuJoCo's default contact time constant (s): the nominal simulator's contacts.
NOMINAL_TIMECONST_S = 0.02


def pybullet_contact_spring(mass_kg: float, timeconst_s: float) -> tuple[float, float]:
    """(contactStiffness N/m, contactDamping N·s/m) matching MuJoCo's solref (τ, 1) at rest.

    Args:
        mass_kg: the contacting body's mass. timeconst_s: the solref time constant τ > 0.
    """
    k_per_kg = IMPEDANCE / (IMPEDANCE**2 * timeconst_s**2)  # MuJoCo's reference stiffness
    stiffness = mass_kg * IMPEDANCE * k_per_kg / (1.0 - IMPEDANCE)
    return stiffness, 2.0 * math.sqrt(stiffness * mass_kg)


#: PyBullet cannot go back to rigid contacts once a body has a contact spring: a body made soft
#: by an earlier episode gets this stiff spring instead when an episode asks for the engine's own
#: contacts (10× stiffer than MuJoCo's default, s).
PYBULLET_STIFF_TIMECONST_S = 0.002


def set_contact_softness(backend: Any, timeconst_s: float) -> dict[str, Any]:
    """Set the contact time constant of the task objects' contacts (0 keeps the engine's own;
    the backends call this at every reset, after MuJoCo's nominal solref is restored).

    Args:
        backend: a MuJoCo or PyBullet physics backend of `sim_suites.engines`.
        timeconst_s: the solref time constant τ, s.
    Returns:
        What was applied, per engine: {"solref": [τ, 1]} or {"contact_stiffness_n_per_m": ...}.
    """
    engine = getattr(backend, "engine", "")
    if timeconst_s <= 0:
        if engine == "mujoco" or not getattr(backend, "_contact_spring", False):
            return {}
        timeconst_s = PYBULLET_STIFF_TIMECONST_S
    if engine == "mujoco":
        backend.model.geom_solref[backend._object_geoms, 0] = timeconst_s
        backend.model.geom_solref[backend._object_geoms, 1] = 1.0
        return {"solref": [timeconst_s, 1.0]}
    client = backend.client
    backend._contact_spring = True
    applied: dict[str, Any] = {}
    for body in backend.scene.bodies:
        if body.role != "object":
            continue
        bid = backend._ids[body.name]
        link = 0 if body.joint == "slide" else -1
        mass = float(client.getDynamicsInfo(bid, link)[0])
        stiffness, damping = pybullet_contact_spring(max(mass, 0.05), timeconst_s)
        client.changeDynamics(bid, link, contactStiffness=stiffness, contactDamping=damping)
        applied[body.name] = {
            "contact_stiffness_n_per_m": round(stiffness, 3),
            "contact_damping_ns_per_m": round(damping, 3),
        }
    return applied
