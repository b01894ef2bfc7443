"""The parameters a calibration can fit, in the users' words, and what each one changes.

Each parameter is a physical property of the robot or its scene that the nominal simulator does
not know: the replay model (`real_bridge.calibration.replay`) applies it the way the robot has it,
and a sim run using a calibration applies it through `sim_suites.variations.RealityGap` where the
sim has the property (`embodied_eval.protocol.calibration_file.SIM_FIELDS`).

The actuator bandwidth is fitted as the actuator's time constant τ = 1/(2π f_c) (s): τ = 0 is an
unfiltered actuator, so the fit stays smooth where the bandwidth would be infinite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from embodied_eval.errors import EvalError


@dataclass(frozen=True)
class ParameterInfo:
    """One fittable parameter.

    Attributes:
        name: the name on the command line and in the calibration file.
        unit: unit of its value ("" for a multiplier).
        nominal: the nominal simulator's value (what an uncalibrated sim uses).
        low / high: the range the fit searches.
        meaning: one line for the report.
        needs_object: only the object tracker carries information about it.
    """

    name: str
    unit: str
    nominal: float
    low: float
    high: float
    meaning: str
    needs_object: bool = False


PARAMETERS: dict[str, ParameterInfo] = {
    p.name: p
    for p in (
        ParameterInfo("payload", "kg", 0.0, 0.0, 5.0, "unmodelled mass at the hand"),
        ParameterInfo(
            "actuator_delay", "s", 0.0, 0.0, 0.5,
            "time from a command's arrival to its effect (actuator delay plus command latency)",
        ),
        ParameterInfo("actuator_gain", "", 1.0, 0.2, 3.0, "servo stiffness multiplier"),
        ParameterInfo(
            "actuator_bandwidth", "s", 0.0, 0.0, 0.2,
            "actuator time constant τ = 1/(2π × bandwidth); 0 = unfiltered",
        ),
        ParameterInfo("joint_damping", "", 1.0, 0.1, 10.0, "joint damping multiplier"),
        ParameterInfo("link_mass", "", 1.0, 0.5, 2.0, "arm link mass multiplier"),
        ParameterInfo(
            "object_mass", "", 1.0, 0.2, 5.0, "manipulated object's mass multiplier",
            needs_object=True,
        ),
        ParameterInfo(
            "friction", "", 1.0, 0.1, 3.0, "object (and drawer) friction multiplier",
            needs_object=True,
        ),
        ParameterInfo(
            "contact_softness", "s", 0.02, 0.005, 0.2,
            "the objects' contact time constant (MuJoCo solref; larger is softer)",
            needs_object=True,
        ),
    )
}  # fmt: skip

#: What `calibrate` fits when `--params` is not given.
DEFAULT_PARAMS = (
    "payload",
    "actuator_delay",
    "actuator_gain",
    "actuator_bandwidth",
    "joint_damping",
    "object_mass",
    "friction",
)


def parse_params(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """The parameter names of `--params` ("payload,actuator_delay,..."), checked.

    Raises:
        EvalError: an unknown name (the message lists the known ones) or an empty list.
    """
    if text is None:
        return DEFAULT_PARAMS
    items = text.split(",") if isinstance(text, str) else list(text)
    names = tuple(dict.fromkeys(n.strip() for n in items if n.strip()))
    if not names:
        raise EvalError("--params: name at least one parameter", key="params")
    for name in names:
        if name not in PARAMETERS:
            raise EvalError(
                f"--params: unknown parameter {name!r} (known: {', '.join(PARAMETERS)})",
                key="params",
            )
    return names


def bandwidth_hz(time_constant_s: float) -> float:
    """Cut-off frequency f_c = 1/(2π τ) of a first-order actuator with time constant τ (∞ at 0)."""
    return math.inf if time_constant_s <= 0 else 1.0 / (2.0 * math.pi * time_constant_s)


def time_constant_s(bandwidth: float) -> float:
    """Time constant τ = 1/(2π f_c) of a first-order actuator of bandwidth f_c (0 when f_c = 0,
    the twin's "no filter")."""
    return 0.0 if bandwidth <= 0 else 1.0 / (2.0 * math.pi * bandwidth)


def nominal_values(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every parameter at its nominal value, with `overrides` applied."""
    values = {name: p.nominal for name, p in PARAMETERS.items()}
    values.update(overrides or {})
    return values
