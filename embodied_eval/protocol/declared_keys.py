"""The keys of a protocol file, each declared once: type, default, range, allowed values.

`embodied_eval.protocol.reader` reads a protocol against these declarations; a section read with
`TableReader.section` goes into the canonical form (and so the protocol hash) exactly as declared.
To add a key, add it to its section's table here (and, if code needs it as an attribute, to
`protocol_model.Protocol`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from embodied_eval.plugins import ARMS, ROBOT_BACKENDS, SIM_ENGINES
from embodied_eval.protocol.model import (
    AR_ESTIMATORS,
    DEFAULT_M_MIN,
    DRIFT_KEYS,
    GRASP_MODES,
    MAX_DISTRACTORS,
    OUT_OF_RANGE_ACTIONS,
    TEXTURE_CHOICES,
)
from embodied_eval.validation import MAX_INT64, Key

#: Dates a window may span (episodes recorded before 1970 or after 2200 are typing mistakes).
EARLIEST_DATE = dt.date(1970, 1, 1)
LATEST_DATE = dt.date(2200, 1, 1)
#: Size limits: a protocol's battery and drift calendar stay far below these.
MAX_INSTANCES = 10_000
MAX_DRIFTS = 1_000


_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _task_id_problem(value: str) -> str | None:
    if value != value.strip():
        return f"{value!r} has leading or trailing spaces"
    return None


def _engines_problem(value: list[Any]) -> str | None:
    known = tuple(SIM_ENGINES)
    if not value or not all(isinstance(e, str) and e in known for e in value):
        return f"expected a non-empty list of {' / '.join(known)}"
    if len(set(value)) != len(value):
        return "an engine is listed twice"
    return None


def _names_problem(value: list[Any]) -> str | None:
    if not all(isinstance(v, str) and v.strip() for v in value):
        return "expected a list of names (text)"
    return None


def _backend_problem(value: str) -> str | None:
    if value in ROBOT_BACKENDS or _IMPORT_PATH.fullmatch(value):
        return None
    return (
        f"{value!r} is not a registered robot backend (known: {', '.join(sorted(ROBOT_BACKENDS))})"
        " nor a 'package.module:factory'"
    )


def _arm_problem(value: str) -> str | None:
    if value in ARMS or _IMPORT_PATH.fullmatch(value):
        return None
    return (
        f"{value!r} is not a registered arm (known: {', '.join(sorted(ARMS))}) nor a "
        "'package.module:factory'"
    )


PROTOCOL_KEYS: dict[str, Key] = {
    "name": Key(str, nonempty=True),
    "version": Key(str, nonempty=True),
    "base_seed": Key(int, low=0, high=MAX_INT64),
    "confidence": Key(float, 0.95, low=0.5, high=0.9999),
    "bootstrap_resamples": Key(int, 2000, low=100, high=1_000_000),
    "majors_allowed": Key(bool, False),
    "m_min": Key(int, DEFAULT_M_MIN, low=1, high=MAX_INSTANCES),
}
WINDOW_KEYS: dict[str, Key] = {
    "id": Key(str, None, nonempty=True),
    "start": Key((str, dt.date)),
    "end": Key((str, dt.date)),
}
FAMILY_KEYS: dict[str, Key] = {
    "target_quality": Key(float, 0.8, low=0.0, high=1.0),
    "qc_tolerance": Key(float, None, low=0.0, high=1.0),
    "instances": Key(list, nonempty=True),
}
INSTANCE_KEYS: dict[str, Key] = {
    "task_id": Key(str, nonempty=True, check=_task_id_problem),
    "target_quality": Key(float, None, low=0.0, high=1.0),
    "qc_tolerance": Key(float, None, low=0.0, high=1.0),
    "params": Key(dict, {}),
    # `gymnasium.make(env_id, **make_kwargs)` for `--engine gymnasium`
    "env_id": Key(str, ""),
    "make_kwargs": Key(dict, {}),
}


def whole_problem(value: float) -> str | None:
    """Why `value` is not a whole number (e.g. a count of control steps), or None."""
    return None if float(value).is_integer() else f"{value!r} is not a whole number of steps"


DRIFT_TABLE_KEYS: dict[str, Key] = {
    "day": Key(int, 0, low=0, high=100_000),
    "weight": Key(float, 1.0, low=0.0, high=1e6),
    **{
        k: Key(str, None, nonempty=True) if k == "firmware" else Key(float, None, low=0.0, high=1e6)
        for k in DRIFT_KEYS
    },
    # A delay is a whole number of control steps; a control rate must be positive.
    "latency_steps": Key(float, None, low=0.0, high=1000.0, check=whole_problem),
    "control_rate_hz": Key(float, None, low=1e-3, high=100_000.0),
}
#: DR knobs whose range ends are whole numbers (a delay of 0.5 control steps does not exist).
WHOLE_DR_KNOBS = ("action_latency_steps", "distractor_count", "object_texture", "table_texture")


SAMPLING_KEYS: dict[str, Key] = {
    "seeds_per_instance": Key(int, 1, low=1, high=100_000),
    "drifts": Key(list, None, nonempty=True, check=_names_problem),
    "real_fraction": Key(float, 1.0, low=0.0, high=1.0),
}
#: Smallest and largest value of each DR knob's [low, high] range (scales and rates are > 0).
DR_KNOB_BOUNDS: dict[str, tuple[float, float]] = {
    "friction_scale": (1e-6, 100.0),
    "object_mass_scale": (1e-6, 100.0),
    "link_mass_scale": (1e-6, 100.0),
    "joint_damping_scale": (1e-6, 100.0),
    "actuator_gain_scale": (1e-6, 100.0),
    "object_xy_offset_m": (0.0, 10.0),
    "sensor_noise_std": (0.0, 10.0),
    "action_latency_steps": (0.0, 1000.0),
    # the command path's actuator (`sim_suites.command_path`): delay, first-order cut-off
    # (0 = no filter) and the objects' contact softness (solref time constant, 0 = engine's own)
    "actuator_delay_s": (0.0, 1.0),
    "actuator_bandwidth_hz": (0.0, 1000.0),
    "contact_timeconst_s": (0.0, 1.0),
    "control_rate_hz": (1e-3, 100_000.0),
    "lighting_scale": (1e-6, 100.0),
    "grip_force_scale": (1e-6, 100.0),
    "object_yaw_rad": (-math.pi, math.pi),
    "colour_jitter": (0.0, 1.0),
    # a part from a tenth to ten times its nominal size (beyond, no gripper or scene fits it)
    "object_size_scale": (0.1, 10.0),
    # a mobile base's floor, wheels and mass (scales), and its odometry's scale error (fraction)
    "floor_friction_scale": (1e-6, 100.0),
    "wheel_slip_scale": (1e-6, 100.0),
    "base_mass_scale": (1e-6, 100.0),
    "odometry_drift": (-0.5, 0.5),
    # camera pose offsets: up to 20 cm and 0.5 rad (beyond, the camera no longer sees the table)
    "scene_camera_offset_m": (0.0, 0.2),
    "scene_camera_tilt_rad": (0.0, 0.5),
    "wrist_camera_offset_m": (0.0, 0.2),
    "wrist_camera_tilt_rad": (0.0, 0.5),
    "distractor_count": (0.0, float(MAX_DISTRACTORS)),
    "object_texture": (0.0, float(TEXTURE_CHOICES)),
    "table_texture": (0.0, float(TEXTURE_CHOICES)),
}
EMBODIMENT_KEYS: dict[str, Key] = {
    "L": Key(float, 0.0, low=0.0, high=1.0),
    "U": Key(float, 1.0, low=0.0, high=1.0),
    # "ppi" = prediction-powered AR in E and the AR gate; in the hash only when not the default
    "ar_estimator": Key(str, "classical", choices=AR_ESTIMATORS),
}
PRICE_CARD_KEYS: dict[str, Key] = {
    "currency": Key(str, "USD", nonempty=True),
    "energy_per_kwh": Key(float, 0.30, low=0.0, high=1e6),
    "wear_per_hour": Key(float, 0.0, low=0.0, high=1e9),
    "consumables_per_task": Key(float, 0.0, low=0.0, high=1e9),
    "operator_per_hour": Key(float, 0.0, low=0.0, high=1e9),
    "operator_fraction": Key(float, 1.0, low=0.0, high=1.0),
}
SIM_KEYS: dict[str, Key] = {
    "engines": Key(list, ["mujoco"], check=_engines_problem),
    "max_steps": Key(int, 400, low=1, high=1_000_000),
    "policy": Key(str, "sim_suites.policies:scripted", nonempty=True),
    # "assisted": a weld holds grasped parts (certify refuses it unless declared here)
    "grasp": Key(str, "contact", choices=GRASP_MODES),
    # in the hash only when not the default ("refuse")
    "out_of_range_actions": Key(str, "refuse", choices=OUT_OF_RANGE_ACTIONS),
    # a calibration file (`embodied-eval calibrate`); in the hash only when set
    "calibration": Key(str, ""),
    # the simulated arm (`embodied_eval.plugins.ARMS` or "module:factory"); in the hash only
    # when not the Panda
    "robot": Key(str, "panda", check=_arm_problem),
}
REAL_KEYS: dict[str, Key] = {
    "backend": Key(str, "ros2", check=_backend_problem),
    "policy": Key(str, None, nonempty=True),
    "robot_id": Key(str, "robot-1", nonempty=True),
    # the robot profile a ros2 or mujoco backend loads (a shipped profile's name, or a TOML path
    # relative to the protocol file) unless the run names one; in the hash only when set
    "profile": Key(str, ""),
    # How far a pair's real start may be from its sim start (the robot's tracker against what the
    # sim set up) before the pair is flagged and left out of S2R and PPI.
    "scene_tolerance_m": Key(float, 0.01, low=0.0, high=1.0),
    "scene_tolerance_rad": Key(float, 0.05, low=0.0, high=3.15),
    # correct AR with the real episodes' detector's measured accuracy (Rogan–Gladen); in the
    # hash only when true
    "judge_correction": Key(bool, False),
    # "fail": a success with an incident above the warning level counts as a failure for AR
    # ("count": reported only); in the hash only when "fail"
    "unsafe_successes": Key(str, "count", choices=("count", "fail")),
    # a certificate expires this many months after issue; in the hash only when not 12
    "certificate_valid_months": Key(int, 12, low=1, high=120),
    # a later drift-day calibration moving a parameter more than this (relative) from its
    # certified value voids the certificate; in the hash only when not 0.25
    "calibration_drift_tolerance": Key(float, 0.25, low=0.0, high=100.0),
    # the AR gate over every pair's first attempt, unknown outcomes as failures ("worst"), or AR
    # as judged ("judged"); in the hash only when "judged"
    "missing_outcomes": Key(str, "worst", choices=("worst", "judged")),
}
#: `[real]` keys that enter the canonical form (and the hash) only when set to a non-default.
REAL_KEYS_DECLARED_ONLY = (
    "profile",
    "scene_tolerance_m",
    "scene_tolerance_rad",
    "judge_correction",
    "unsafe_successes",
    "certificate_valid_months",
    "calibration_drift_tolerance",
    "missing_outcomes",
)
STOPPING_KEYS: dict[str, Key] = {
    "enabled": Key(bool, False),
    "ar_threshold": Key(float, 0.75, low=0.0, high=1.0),
    "method": Key(str, "mixture", choices=("mixture", "sprt")),
    "min_trials": Key(int, 5, low=1, high=1_000_000),
    "max_trials": Key(int, 400, low=1, high=1_000_000),
    "p1": Key(float, None, low=0.0, high=1.0),
    "beta": Key(float, 0.10, low=0.0001, high=0.5),
}
