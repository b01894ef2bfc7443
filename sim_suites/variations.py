"""Domain randomization, drift and reality gap as small composable parameter changes.

Three layers change an episode's parameters, always in this order:

1. *Domain randomization* (DR): one `Variation` per knob of `embodied_eval.protocol.reader.DR_KNOBS`,
   each sampling its value from a [low, high] range with an explicit `numpy.random.Generator`
   (dm_control style). The sampled values are what the episode records as `randomization`.
2. *Drift* δ (`DRIFT_KEYS`): the day-indexed changes of the drift calendar, applied on top of DR
   (payload, friction, lighting, controller gains, latency, control rate, firmware). A
   `firmware` label names a profile of `FIRMWARE_PROFILES`: concrete servo gains, added latency
   and control rate, as a controller update changes them.
3. *Reality gap* (`RealityGap`): extra offsets the twin robot uses to play "the real robot".

`episode_params` folds the three into one `EpisodeParams`. `lighting_scale`, `colour_jitter`,
the camera pose offsets (`scene_camera_offset_m`, `scene_camera_tilt_rad`, `wrist_camera_offset_m`,
`wrist_camera_tilt_rad`) and the textures (`object_texture`, `table_texture`) change what the
cameras see (`sim_suites.rendering.appearance`); physics never reads them, so they matter to
policies that observe images (`rgb` / `rgbd` observation modes). `distractor_count` puts objects
on the table outside the task's working region (`sim_suites.distractors`): a camera sees them,
the task's parts never meet them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import DR_KNOBS, DRIFT_KEYS
from sim_suites.engines.base import PHYSICS_DT, PhysicsParams

#: Nominal control rate (Hz): max_steps counts control steps at this rate.
NOMINAL_CONTROL_RATE_HZ = 50.0

#: Knob values when a knob is not randomized.
NOMINAL: dict[str, Any] = {
    "friction_scale": 1.0,
    "object_mass_scale": 1.0,
    "link_mass_scale": 1.0,
    "joint_damping_scale": 1.0,
    "actuator_gain_scale": 1.0,
    "object_xy_offset_m": [0.0, 0.0],
    "sensor_noise_std": 0.0,
    "action_latency_steps": 0,
    "actuator_delay_s": 0.0,
    "actuator_bandwidth_hz": 0.0,
    "contact_timeconst_s": 0.0,
    "control_rate_hz": NOMINAL_CONTROL_RATE_HZ,
    "lighting_scale": 1.0,
    "grip_force_scale": 1.0,
    "object_yaw_rad": 0.0,
    "colour_jitter": 0.0,
    "object_size_scale": 1.0,
    "scene_camera_offset_m": [0.0, 0.0, 0.0],
    "scene_camera_tilt_rad": [0.0, 0.0, 0.0],
    "wrist_camera_offset_m": [0.0, 0.0, 0.0],
    "wrist_camera_tilt_rad": [0.0, 0.0, 0.0],
    "distractor_count": 0,
    "object_texture": 0,
    "table_texture": 0,
    "floor_friction_scale": 1.0,
    "wheel_slip_scale": 1.0,
    "base_mass_scale": 1.0,
    "odometry_drift": 0.0,
}

#: Knobs whose value is a vector in 3-D: a length (m) or an angle (rad) drawn from the range, in
#: a direction uniform on the sphere (`SphericalOffset`).
SPHERICAL_KNOBS = (
    "scene_camera_offset_m",
    "scene_camera_tilt_rad",
    "wrist_camera_offset_m",
    "wrist_camera_tilt_rad",
)
#: Knobs whose values are whole numbers (steps of latency, counts, choices from a bank).
WHOLE_KNOBS = ("action_latency_steps", "distractor_count", "object_texture", "table_texture")

#: DR ranges used when no protocol is given: mild, like the example protocol.
DEFAULT_RANDOMIZATION: dict[str, tuple[float, float]] = {
    "friction_scale": (0.9, 1.1),
    "object_mass_scale": (0.9, 1.1),
    "object_xy_offset_m": (0.0, 0.01),
    "sensor_noise_std": (0.0, 0.001),
}

#: A strong DR profile for robustness checks (the reference policy should degrade under it).
STRONG_RANDOMIZATION: dict[str, tuple[float, float]] = {
    "friction_scale": (0.3, 1.7),
    "object_mass_scale": (0.5, 3.0),
    "link_mass_scale": (0.7, 1.3),
    "joint_damping_scale": (0.2, 5.0),
    "actuator_gain_scale": (0.4, 1.6),
    "object_xy_offset_m": (0.0, 0.05),
    "sensor_noise_std": (0.0, 0.006),
    "action_latency_steps": (0.0, 4.0),
    "control_rate_hz": (25.0, 100.0),
    "lighting_scale": (0.5, 1.5),
    "grip_force_scale": (0.3, 1.0),
    "object_yaw_rad": (-0.5, 0.5),
    "colour_jitter": (0.0, 0.15),
    "object_size_scale": (0.8, 1.2),
}

#: Robot firmware profiles a drift's `firmware` label may name: what the controller update does
#: to the servo gains (multiplier), the command latency (added control steps) and the control
#: rate (Hz). "" is the nominal controller.
FIRMWARE_PROFILES: dict[str, dict[str, float]] = {
    "": {"gain_scale": 1.0, "latency_steps": 0, "control_rate_hz": NOMINAL_CONTROL_RATE_HZ},
    "4.2.2": {"gain_scale": 1.0, "latency_steps": 0, "control_rate_hz": NOMINAL_CONTROL_RATE_HZ},
    # Softer servos and one more step of command latency (a conservative safety update).
    "5.0.0": {"gain_scale": 0.7, "latency_steps": 1, "control_rate_hz": NOMINAL_CONTROL_RATE_HZ},
    # The command interface runs at 25 Hz with two steps of latency (a bandwidth-limited bus).
    "5.1.0-lowrate": {"gain_scale": 0.85, "latency_steps": 2, "control_rate_hz": 25.0},
}


Vec3 = tuple[float, float, float]


def _vec3(value: Sequence[float]) -> Vec3:
    x, y, z = (float(v) for v in value)
    return (x, y, z)


class Variation(Protocol):
    """One randomized knob: draws its value from an explicit generator."""

    @property
    def knob(self) -> str:
        """The DR knob this variation sets (a name from DR_KNOBS)."""

    def sample(self, rng: np.random.Generator) -> Any:
        """A value for the knob (a JSON-friendly number or list)."""


@dataclass(frozen=True)
class Uniform:
    """A real value uniform on [low, high]."""

    knob: str
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        return float(rng.uniform(self.low, self.high))


@dataclass(frozen=True)
class UniformInteger:
    """A whole number uniform on {⌈low⌉, …, ⌊high⌋} (e.g. steps of action latency)."""

    knob: str
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> int:
        lo, hi = math.ceil(self.low), math.floor(self.high)
        return int(rng.integers(lo, max(lo, hi) + 1))


@dataclass(frozen=True)
class PlanarOffset:
    """A planar displacement [dx, dy] (m): radius uniform on [low, high], direction uniform."""

    knob: str
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> list[float]:
        radius = float(rng.uniform(self.low, self.high))
        angle = float(rng.uniform(0.0, 2.0 * math.pi))
        return [radius * math.cos(angle), radius * math.sin(angle)]


@dataclass(frozen=True)
class SphericalOffset:
    """A 3-D vector [x, y, z]: length uniform on [low, high], direction uniform on the sphere.

    A camera's position offset (m) or its tilt as a rotation vector (axis × angle, rad).
    """

    knob: str
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> list[float]:
        length = float(rng.uniform(self.low, self.high))
        direction = rng.normal(size=3)
        direction /= max(float(np.linalg.norm(direction)), 1e-12)
        return [float(v) for v in length * direction]


def variation_for(knob: str, low: float, high: float) -> Variation:
    """The variation object of one DR knob with its [low, high] range."""
    if knob not in DR_KNOBS:
        raise EvalError(
            f"randomization.{knob}: unknown knob (known: {', '.join(DR_KNOBS)})",
            key=f"randomization.{knob}",
        )
    if low > high:
        raise EvalError(
            f"randomization.{knob}: low {low} is greater than high {high}",
            key=f"randomization.{knob}",
        )
    if knob == "object_xy_offset_m":
        return PlanarOffset(knob, low, high)
    if knob in WHOLE_KNOBS:
        return UniformInteger(knob, low, high)
    if knob in SPHERICAL_KNOBS:
        return SphericalOffset(knob, low, high)
    if knob == "control_rate_hz" and low <= 0:
        raise EvalError("randomization.control_rate_hz: rates must be > 0 Hz", key=knob)
    return Uniform(knob, low, high)


def variations_from_ranges(ranges: Mapping[str, Sequence[float]]) -> tuple[Variation, ...]:
    """Variation objects for a protocol's `[randomization]` table, in DR_KNOBS order."""
    for knob in ranges:
        if knob not in DR_KNOBS:
            variation_for(knob, 0.0, 0.0)  # raises the unknown-knob error
    return tuple(
        variation_for(knob, float(ranges[knob][0]), float(ranges[knob][1]))
        for knob in DR_KNOBS
        if knob in ranges
    )


def sample_randomization(
    variations: Sequence[Variation], rng: np.random.Generator
) -> dict[str, Any]:
    """Draw every variation once, in order; the result is the episode's `randomization`."""
    return {v.knob: v.sample(rng) for v in variations}


@dataclass(frozen=True)
class RealityGap:
    """Deliberate differences between the twin robot's physics and the nominal simulation, and
    the physical parameters a calibration file applies to a sim run (one name each).

    Attributes:
        friction_scale, object_mass_scale, link_mass_scale, actuator_gain_scale,
            joint_damping_scale: multiplicative offsets on the (randomized) values.
        actuator_delay_s: extra delay before a joint command takes effect, s (added to the
            command path's delay, `sim_suites.command_path`).
        actuator_bandwidth_hz: the actuator's first-order cut-off, Hz (0: no filter); when set
            it replaces the randomized value.
        contact_timeconst_s: contact softness of the manipulated objects (solref time constant,
            s; 0 keeps the engine's own), replacing the randomized value when set.
        sensor_noise_std: extra observation noise (m, rad), added in quadrature.
        payload_kg: unmodelled mass at the hand (kg); the controller's gravity model omits it.
    """

    friction_scale: float = 1.0
    object_mass_scale: float = 1.0
    link_mass_scale: float = 1.0
    actuator_gain_scale: float = 1.0
    joint_damping_scale: float = 1.0
    actuator_delay_s: float = 0.0
    actuator_bandwidth_hz: float = 0.0
    contact_timeconst_s: float = 0.0
    sensor_noise_std: float = 0.0
    payload_kg: float = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not value >= 0
                or math.isinf(value)
            ):
                raise EvalError(
                    f"reality_gap.{f.name}: expected a finite number ≥ 0, got {value!r}",
                    key=f"reality_gap.{f.name}",
                )
        if self.actuator_delay_s > 1.0:
            raise EvalError(
                "reality_gap.actuator_delay_s: at most 1 s", key="reality_gap.actuator_delay_s"
            )

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class EpisodeParams:
    """Everything that varies per episode, after DR, drift and reality gap are folded in.

    Attributes:
        physics: what the engine applies on reset.
        object_xy_offset: (2,) displacement of the task object/fixture from its nominal place, m.
        sensor_noise_std: std of the Gaussian noise on measured positions (m, rad).
        action_latency_steps: control steps of command latency (drift, firmware, DR).
        actuator_delay_s: delay from a joint command to its effect besides the latency, s.
        actuator_bandwidth_hz: the actuator's first-order cut-off, Hz (0: no filter).
        control_rate_hz: requested control rate; `substeps` physics steps make one control period.
        lighting_scale: light intensity factor of the cameras' lights (DR × drift).
        colour_jitter: amplitude of the per-body RGB colour shift seen by the cameras.
        firmware: the robot firmware label of the drift setting ("" when nominal).
        object_yaw_rad: rotation of the task object about the vertical at the start, rad.
        camera_offsets: camera name → (position offset (3,) m, tilt rotation vector (3,) rad),
            both in the camera's own frame (`sim_suites.rendering.cameras.offset_pose`).
        distractor_count: distractor objects standing on the table (`sim_suites.distractors`).
        object_texture, table_texture: texture of the task object / the table, 0 = nominal
            look, k = texture k of `sim_suites.rendering.textures.TEXTURES`.
        odometry_drift: a mobile base's wheel odometry scale error (fraction: 0.02 counts 2 %
            more distance and turn than the wheels made).
    """

    physics: PhysicsParams = field(default_factory=PhysicsParams)
    object_xy_offset: tuple[float, float] = (0.0, 0.0)
    sensor_noise_std: float = 0.0
    action_latency_steps: int = 0
    actuator_delay_s: float = 0.0
    actuator_bandwidth_hz: float = 0.0
    control_rate_hz: float = NOMINAL_CONTROL_RATE_HZ
    lighting_scale: float = 1.0
    colour_jitter: float = 0.0
    firmware: str = ""
    object_yaw_rad: float = 0.0
    camera_offsets: Mapping[str, tuple[Vec3, Vec3]] = field(default_factory=dict)
    distractor_count: int = 0
    object_texture: int = 0
    table_texture: int = 0
    odometry_drift: float = 0.0

    @property
    def substeps(self) -> int:
        """Physics steps per control period: the rate is quantized to the 2 ms physics step."""
        return max(1, round(1.0 / (self.control_rate_hz * PHYSICS_DT)))

    @property
    def control_dt(self) -> float:
        """The control period actually run (s)."""
        return self.substeps * PHYSICS_DT


def check_drift(drift: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a drift setting's parameters (keys from DRIFT_KEYS); returns a plain dict."""
    out: dict[str, Any] = {}
    for key, value in drift.items():
        if key not in DRIFT_KEYS:
            raise EvalError(
                f"drift.{key}: unknown drift parameter (known: {', '.join(DRIFT_KEYS)})",
                key=f"drift.{key}",
            )
        if key == "firmware":
            if not isinstance(value, str):
                raise EvalError("drift.firmware: expected a text label", key="drift.firmware")
            if value not in FIRMWARE_PROFILES:
                raise EvalError(
                    f"drift.firmware: unknown firmware {value!r} (known: "
                    f"{', '.join(repr(k) for k in FIRMWARE_PROFILES if k)})",
                    key="drift.firmware",
                )
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise EvalError(
                f"drift.{key}: expected a number ≥ 0, got {value!r}", key=f"drift.{key}"
            )
        out[key] = value
    if out.get("control_rate_hz", 1.0) <= 0:
        raise EvalError("drift.control_rate_hz: must be > 0 Hz", key="drift.control_rate_hz")
    return out


def episode_params(
    randomization: Mapping[str, Any],
    drift: Mapping[str, Any] | None = None,
    reality_gap: RealityGap | None = None,
) -> EpisodeParams:
    """Fold sampled DR values, a drift setting and a reality gap into `EpisodeParams`.

    Drift: friction_scale, lighting_scale and controller_gain_scale multiply; latency_steps
    adds; control_rate_hz replaces; payload_kg adds mass at the hand; firmware applies its
    profile (`FIRMWARE_PROFILES`: gains multiply, latency adds, its control rate replaces the
    nominal one unless the drift sets control_rate_hz itself).

    Args:
        randomization: sampled knob values (missing knobs take NOMINAL).
        drift: the drift setting's parameters (DRIFT_KEYS), or None.
        reality_gap: the twin robot's offsets, or None.
    """
    v = {**NOMINAL, **dict(randomization)}
    d = check_drift(drift or {})
    gap = reality_gap or RealityGap()
    firmware = FIRMWARE_PROFILES[str(d.get("firmware", ""))]
    friction = v["friction_scale"] * d.get("friction_scale", 1.0) * gap.friction_scale
    gain = (
        v["actuator_gain_scale"]
        * d.get("controller_gain_scale", 1.0)
        * firmware["gain_scale"]
        * gap.actuator_gain_scale
    )
    physics = PhysicsParams(
        friction_scale=float(friction),
        object_mass_scale=float(v["object_mass_scale"] * gap.object_mass_scale),
        link_mass_scale=float(v["link_mass_scale"] * gap.link_mass_scale),
        joint_damping_scale=float(v["joint_damping_scale"] * gap.joint_damping_scale),
        actuator_gain_scale=float(gain),
        payload_kg=float(d.get("payload_kg", 0.0) + gap.payload_kg),
        grip_force_scale=float(v["grip_force_scale"]),
        object_size_scale=float(v["object_size_scale"]),
        contact_timeconst_s=float(gap.contact_timeconst_s or v["contact_timeconst_s"]),
        floor_friction_scale=float(v["floor_friction_scale"]),
        wheel_slip_scale=float(v["wheel_slip_scale"]),
        base_mass_scale=float(v["base_mass_scale"]),
    )
    rate = v["control_rate_hz"]
    if firmware["control_rate_hz"] != NOMINAL_CONTROL_RATE_HZ:
        rate = firmware["control_rate_hz"]
    offset = v["object_xy_offset_m"]
    return EpisodeParams(
        physics=physics,
        object_xy_offset=(float(offset[0]), float(offset[1])),
        sensor_noise_std=float(math.hypot(v["sensor_noise_std"], gap.sensor_noise_std)),
        action_latency_steps=int(
            v["action_latency_steps"]
            + int(d.get("latency_steps", 0))
            + int(firmware["latency_steps"])
        ),
        actuator_delay_s=float(v["actuator_delay_s"] + gap.actuator_delay_s),
        actuator_bandwidth_hz=float(gap.actuator_bandwidth_hz or v["actuator_bandwidth_hz"]),
        control_rate_hz=float(d.get("control_rate_hz", rate)),
        lighting_scale=float(v["lighting_scale"] * d.get("lighting_scale", 1.0)),
        colour_jitter=float(v["colour_jitter"]),
        firmware=str(d.get("firmware", "")),
        object_yaw_rad=float(v["object_yaw_rad"]),
        camera_offsets={
            camera: (_vec3(v[f"{camera}_camera_offset_m"]), _vec3(v[f"{camera}_camera_tilt_rad"]))
            for camera in ("scene", "wrist")
        },
        distractor_count=int(v["distractor_count"]),
        object_texture=int(v["object_texture"]),
        table_texture=int(v["table_texture"]),
        odometry_drift=float(v["odometry_drift"]),
    )
