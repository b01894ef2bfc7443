"""The typed protocol: what a validated protocol file holds (seed §3 battery B).

`embodied_eval.protocol.reader` reads and validates protocol files into these records; everything else
reads protocols only through them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.plugins import SIM_ENGINES, SUITE_ENGINES, TASK_CATALOGS, resolve
from embodied_eval.protocol.closure_audits import ExpansionPlan, MaintenancePlan

#: Seed §3: an admissible battery has at least m_min instances in every family.
DEFAULT_M_MIN = 5

#: How simulated grasps are held: by contact friction, or by an assisting weld (declared).
GRASP_MODES = ("contact", "assisted")
#: What happens to a policy action outside the action space's bounds: "refuse" ends the episode
#: `error` naming the step and value (the default); "clip" clips it and counts it.
OUT_OF_RANGE_ACTIONS = ("refuse", "clip")

#: `[embodiment] ar_estimator`: which AR enters E and the AR gate ("ppi" = prediction-powered).
AR_ESTIMATORS = ("classical", "ppi")

#: DR knobs that change only what the cameras see (the physics a state policy acts on is
#: untouched; distractors stand outside the task's working region). The sensitivity sweep runs
#: them with a camera policy.
CAMERA_KNOBS = (
    "lighting_scale",
    "colour_jitter",
    "scene_camera_offset_m",
    "scene_camera_tilt_rad",
    "wrist_camera_offset_m",
    "wrist_camera_tilt_rad",
    "distractor_count",
    "object_texture",
    "table_texture",
)
#: DR knobs of a mobile manipulator's base (`sim_suites.engines.wheel_traction`: the floor's
#: friction, the wheels' slip, the base's mass; the wheel odometry's scale error). A robot on a
#: fixed base records them as not applied.
MOBILE_KNOBS = ("floor_friction_scale", "wheel_slip_scale", "base_mass_scale", "odometry_drift")
#: Domain-randomization knobs a protocol may set, as [low, high] ranges: the physical ones, then
#: the camera knobs.
DR_KNOBS = (
    "friction_scale",
    "object_mass_scale",
    "link_mass_scale",
    "joint_damping_scale",
    "actuator_gain_scale",
    "object_xy_offset_m",
    "sensor_noise_std",
    "action_latency_steps",
    "actuator_delay_s",
    "actuator_bandwidth_hz",
    "contact_timeconst_s",
    "control_rate_hz",
    "grip_force_scale",
    "object_yaw_rad",
    "object_size_scale",
    *MOBILE_KNOBS,
    *CAMERA_KNOBS,
)
#: Most distractor objects a scene can hold (`distractor_count` ≤ this).
MAX_DISTRACTORS = 3
#: Textures of the engines' texture bank: `object_texture` / `table_texture` k ∈ 1..this picks
#: one (0 keeps the nominal look).
TEXTURE_CHOICES = 6

#: Parameters a drift setting δ may change on top of DR (maintenance closure, seed §7).
DRIFT_KEYS = (
    "payload_kg",
    "friction_scale",
    "lighting_scale",
    "controller_gain_scale",
    "latency_steps",
    "control_rate_hz",
    "firmware",
)

SEVERITY_WEIGHT_DEFAULTS = {"near_miss": 0.25, "minor": 1.0, "major": 5.0, "critical": 20.0}


def family_names_hint() -> str:
    """The task families the simulators' catalogs hold (for messages): those of every registered
    sim engine with a task catalog (`embodied_eval.plugins.TASK_CATALOGS`) but the standard
    suites."""
    names: dict[str, None] = {}
    for engine, target in SIM_ENGINES.items():
        if engine in SUITE_ENGINES or target not in TASK_CATALOGS:
            continue
        catalog = resolve(TASK_CATALOGS[target])
        names.update(dict.fromkeys(catalog() if callable(catalog) else catalog))
    return ", ".join(names)


# --------------------------------------------------------------------------- typed protocol


@dataclass(frozen=True)
class TaskInstance:
    """One named task instance of a family, with its target quality q* and QC tolerance.

    `env_id` / `make_kwargs` map the instance to a registered Gymnasium environment (run with
    `--engine gymnasium`): `gymnasium.make(env_id, **make_kwargs)`.
    """

    task_id: str
    family: str
    target_quality: float
    qc_tolerance: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    env_id: str = ""
    make_kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DriftSetting:
    """A drift δ: a day index on the drift calendar and the parameters it changes."""

    name: str
    day: int
    params: Mapping[str, Any]
    weight: float = 1.0


@dataclass(frozen=True)
class PriceCard:
    """Declared prices for $_phys (seed §3.1 $, §7): cost per hour is itemized from these."""

    currency: str = "USD"
    energy_per_kwh: float = 0.30
    wear_per_hour: float = 0.0
    consumables_per_task: float = 0.0
    operator_per_hour: float = 0.0
    operator_fraction: float = 1.0


@dataclass(frozen=True)
class StoppingRule:
    """Anytime-valid stopping of the real side against an AR gate.

    `p1` and `beta` are used by `method = "sprt"` only (H0: p = ar_threshold against H1: p = p1,
    P(fail | p1) = beta); they enter the protocol hash only for that method.
    """

    enabled: bool = False
    ar_threshold: float = 0.75
    method: str = "mixture"
    min_trials: int = 5
    max_trials: int = 400
    p1: float | None = None
    beta: float = 0.10

    def canonical(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.method != "sprt":
            out.pop("p1")
            out.pop("beta")
        return out


@dataclass(frozen=True)
class Protocol:
    """A validated protocol. Build it with `load_protocol` or `protocol_from_mapping`."""

    name: str
    version: str
    base_seed: int
    window_id: str
    window_start: dt.date
    window_end: dt.date
    instances: tuple[TaskInstance, ...]
    drifts: tuple[DriftSetting, ...]
    seeds_per_instance: int
    randomization: Mapping[str, tuple[float, float]]
    severity_weights: Mapping[str, float]
    safety_thresholds: Mapping[str, Any]
    majors_allowed: bool
    e_anchor_low: float
    e_anchor_high: float
    price_card: PriceCard
    confidence: float
    bootstrap_resamples: int
    m_min: int
    engines: tuple[str, ...]
    max_steps: int
    sim_policy: str
    real_backend: str
    real_policy: str
    robot_id: str
    real_fraction: float
    stopping: StoppingRule
    baselines: Mapping[str, str]
    raw: Mapping[str, Any]
    protocol_hash: str
    sim_grasp: str = "contact"
    maintenance: MaintenancePlan | None = None
    expansion: ExpansionPlan | None = None
    ar_estimator: str = "classical"
    scene_tolerance_m: float = 0.01
    scene_tolerance_rad: float = 0.05
    out_of_range_actions: str = "refuse"
    #: `[real] judge_correction`: correct AR with the detector's measured accuracy.
    judge_correction: bool = False
    #: `[real] unsafe_successes`: "fail" counts unsafe successes as failures for AR.
    unsafe_successes: str = "count"
    #: `[real] certificate_valid_months`: a certificate expires this long after issue.
    certificate_valid_months: int = 12
    #: `[real] calibration_drift_tolerance`: relative parameter drift that voids a certificate.
    calibration_drift_tolerance: float = 0.25
    #: `[real] missing_outcomes`: "worst" gates AR on every pair's first attempt.
    missing_outcomes: str = "worst"
    #: The `[sim] calibration` file (or `run --calibration`): "" runs the nominal simulator.
    sim_calibration: str = ""
    #: `[sim] robot`: the simulated arm ("panda", "ur5e" or "module:factory").
    sim_robot: str = "panda"
    #: `[real] profile`: the robot profile the real backend loads ("": the run's or the twin's).
    real_profile: str = ""

    @property
    def families(self) -> dict[str, list[TaskInstance]]:
        out: dict[str, list[TaskInstance]] = {}
        for inst in self.instances:
            out.setdefault(inst.family, []).append(inst)
        return out

    def instance(self, task_id: str) -> TaskInstance:
        for inst in self.instances:
            if inst.task_id == task_id:
                return inst
        raise EvalError(f"task_id: {task_id!r} is not in protocol {self.name!r}", key="task_id")

    def drift(self, name: str) -> DriftSetting:
        for d in self.drifts:
            if d.name == name:
                return d
        raise EvalError(f"drift: {name!r} is not in protocol {self.name!r}", key="drift")

    def canonical(self) -> dict[str, Any]:
        """The canonical (validated, defaults filled) form that `protocol_hash` hashes.

        The hash covers the validated form, so comments and key order in the file do not change it.
        """
        return dict(self.raw)
