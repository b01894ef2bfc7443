"""Protocol files: everything fixed ex ante for a reporting window (seed §3 battery B).

A protocol is a TOML file. Loading it validates every key (unknown keys, missing required keys,
wrong types and out-of-range values each raise one `EvalError` naming the key), fills defaults,
checks admissibility (every family has ≥ m_min = 5 instances) and computes `protocol_hash`, the
SHA-256 of the canonical JSON of the validated protocol. The hash is what every episode, incident
and certificate refers to.

Sections (see `embodied_eval/data/example_protocol.toml`, which the demo uses):

- `[protocol]` name, version, base_seed, confidence, bootstrap_resamples, majors_allowed, m_min
- `[window]` id, start, end (dates)
- `[battery.<family>]` target_quality (family default), instances (≥ 5; optional `env_id` and
  `make_kwargs` map an instance to a Gymnasium environment), each instance with
  task_id, optional target_quality and qc_tolerance
- `[sampling]` seeds_per_instance, drifts (names from `[drift.<name>]`), real_fraction
- `[randomization]` domain-randomization knobs as [low, high] ranges
- `[drift.<name>]` day index and parameter changes (payload, friction, lighting, firmware)
- `[incidents]` severity weights, safety threshold overrides
- `[embodiment]` anchors L, U for φ_E; `ar_estimator` ("classical" or "ppi")
- `[price_card]` energy, wear, consumables, operator time
- `[sim]` engines, max_steps, policy, grasp ("contact", or "assisted": a weld holds grasped
  parts; certify refuses assisted episodes unless the protocol declares it),
  out_of_range_actions ("refuse": an action outside the action space ends the episode `error`;
  "clip": clipped and counted), calibration (a file from `embodied-eval calibrate`, relative to
  the protocol file: the sim side runs with its fitted parameters), robot (the simulated arm:
  "panda", "ur5e" or "module:factory"); `[real]` backend, robot_id, profile (the robot profile
  a ros2 or mujoco backend loads, e.g. "ur_robot_driver"), policy, judge_correction (AR corrected with the detector's measured accuracy),
  unsafe_successes ("fail": successes with an incident above the warning level fail for AR),
  certificate_valid_months, calibration_drift_tolerance (what voids a certificate),
  missing_outcomes ("worst": the AR gate counts every pair's first attempt, unknowns failing),
  scene_tolerance_m / scene_tolerance_rad
- `[stopping]` anytime-valid stopping of the real side against an AR gate
- `[baselines]` null/expert policies for baseline calibration
- `[maintenance]`, `[expansion]` the closure audits (see `embodied_eval.protocol.closure_audits`)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_hash
from embodied_eval.errors import EvalError
from embodied_eval.input_files import MAX_CONFIG_BYTES, read_user_text
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.protocol.closure_audits import (
    read_expansion,
    read_maintenance,
)
from embodied_eval.protocol.declared_keys import (
    DR_KNOB_BOUNDS,
    DRIFT_TABLE_KEYS,
    EARLIEST_DATE,
    EMBODIMENT_KEYS,
    FAMILY_KEYS,
    INSTANCE_KEYS,
    LATEST_DATE,
    MAX_DRIFTS,
    MAX_INSTANCES,
    PRICE_CARD_KEYS,
    PROTOCOL_KEYS,
    REAL_KEYS,
    REAL_KEYS_DECLARED_ONLY,
    SAMPLING_KEYS,
    SIM_KEYS,
    STOPPING_KEYS,
    WHOLE_DR_KNOBS,
    WINDOW_KEYS,
    whole_problem,
)
from embodied_eval.protocol.model import (
    AR_ESTIMATORS,
    CAMERA_KNOBS,
    DEFAULT_M_MIN,
    DR_KNOBS,
    DRIFT_KEYS,
    GRASP_MODES,
    MAX_DISTRACTORS,
    SEVERITY_WEIGHT_DEFAULTS,
    TEXTURE_CHOICES,
    DriftSetting,
    PriceCard,
    Protocol,
    StoppingRule,
    TaskInstance,
    family_names_hint,
)
from embodied_eval.validation import (
    Key,
    TableReader,
    as_date,
    first_nonfinite,
    range_pair,
)

__all__ = [
    "AR_ESTIMATORS",
    "CAMERA_KNOBS",
    "DEFAULT_M_MIN",
    "DRIFT_KEYS",
    "DR_KNOBS",
    "GRASP_MODES",
    "MAX_DISTRACTORS",
    "SEVERITY_WEIGHT_DEFAULTS",
    "TEXTURE_CHOICES",
    "DriftSetting",
    "PriceCard",
    "Protocol",
    "StoppingRule",
    "TaskInstance",
    "example_protocol_path",
    "family_names_hint",
    "load_protocol",
    "protocol_from_mapping",
]

# --------------------------------------------------------------------------- reading


def _read_window(root: TableReader, name: str) -> dict[str, Any]:
    w = root.sub("window", required=True).section(WINDOW_KEYS)
    start, end = as_date(w["start"], "window.start"), as_date(w["end"], "window.end")
    for key, day in (("window.start", start), ("window.end", end)):
        if not EARLIEST_DATE <= day < LATEST_DATE:
            raise EvalError(
                f"{key}: {day.isoformat()} is not a plausible date "
                f"({EARLIEST_DATE.isoformat()} to {LATEST_DATE.isoformat()})",
                key=key,
            )
    if end < start:
        raise EvalError("window.end: the window ends before it starts", key="window.end")
    window_id = w["id"] if w["id"] is not None else f"{name}-{start.isoformat()}"
    return {"id": window_id, "start": start, "end": end}


def _read_battery(root: TableReader, m_min: int) -> list[TaskInstance]:
    battery = root.sub("battery", required=True)
    if not battery.table:
        raise EvalError("battery: needs at least one family", key="battery")
    instances: list[TaskInstance] = []
    seen: set[str] = set()
    for family in sorted(battery.table, key=str):
        if not str(family).strip() or family != str(family).strip():
            raise EvalError(
                f"battery.{family!r}: a family needs a name without surrounding spaces "
                f"(e.g. {family_names_hint()})",
                key="battery",
            )
        fam_reader = battery.sub(family)
        fam = fam_reader.section(FAMILY_KEYS)
        raw_instances = fam["instances"]
        if len(raw_instances) > MAX_INSTANCES:
            raise EvalError(
                f"battery.{family}.instances: {len(raw_instances)} instances; at most "
                f"{MAX_INSTANCES}",
                key=f"battery.{family}.instances",
            )
        for i, item in enumerate(raw_instances):
            where = f"battery.{family}.instances[{i}]"
            inst = TableReader({"task_id": item} if isinstance(item, str) else item, where)
            values = inst.section(INSTANCE_KEYS)
            task_id = values["task_id"]
            prefix = task_id.partition("/")[0] if "/" in task_id else family
            if prefix != family:
                raise EvalError(
                    f"{where}.task_id: {task_id!r} belongs to family {prefix!r}, not {family!r} "
                    f"(a task id is '<family>/<name>')",
                    key=f"{where}.task_id",
                )
            if task_id in seen:
                raise EvalError(
                    f"{where}.task_id: task id {task_id!r} appears twice", key=f"{where}.task_id"
                )
            seen.add(task_id)
            instances.append(
                TaskInstance(
                    task_id=task_id,
                    family=family,
                    target_quality=fam["target_quality"]
                    if values["target_quality"] is None
                    else values["target_quality"],
                    qc_tolerance=fam["qc_tolerance"]
                    if values["qc_tolerance"] is None
                    else values["qc_tolerance"],
                    params=dict(values["params"]),
                    env_id=values["env_id"],
                    make_kwargs=dict(values["make_kwargs"]),
                )
            )
        if len(raw_instances) < m_min:
            raise EvalError(
                f"battery.{family}.instances: family {family!r} has {len(raw_instances)} "
                f"instance(s); an admissible battery needs at least m_min = {m_min}",
                key=f"battery.{family}.instances",
            )
    battery.done()
    return instances


def _read_drifts(root: TableReader) -> list[DriftSetting]:
    drift_table = root.sub("drift")
    if len(drift_table.table) > MAX_DRIFTS:
        raise EvalError(
            f"drift: {len(drift_table.table)} drifts; at most {MAX_DRIFTS}", key="drift"
        )
    drifts: list[DriftSetting] = []
    for dname in drift_table.table:
        if not str(dname).strip():
            raise EvalError("drift: a drift needs a non-empty name", key="drift")
        values = drift_table.sub(dname).section(DRIFT_TABLE_KEYS)
        params = {k: values[k] for k in DRIFT_KEYS if values[k] is not None}
        drifts.append(
            DriftSetting(name=dname, day=values["day"], params=params, weight=values["weight"])
        )
    drift_table.done()
    if not drifts:
        drifts.append(DriftSetting(name="nominal", day=0, params={}, weight=1.0))
    return drifts


def _read_randomization(root: TableReader) -> dict[str, tuple[float, float]]:
    dr = root.sub("randomization")
    out: dict[str, tuple[float, float]] = {}
    for knob in list(dr.table):
        if knob not in DR_KNOBS:
            raise EvalError(
                f"randomization.{knob}: unknown knob (known: {', '.join(DR_KNOBS)})",
                key=f"randomization.{knob}",
            )
        low, high = DR_KNOB_BOUNDS[knob]
        pair = dr.get(knob, list, check=functools.partial(range_pair, low=low))
        if pair[1] > high:
            raise EvalError(
                f"randomization.{knob}: high {pair[1]} is above the maximum {high}",
                key=f"randomization.{knob}",
            )
        if knob in WHOLE_DR_KNOBS:
            fractional = [v for v in pair if whole_problem(v)]
            if fractional:
                raise EvalError(
                    f"randomization.{knob}: {fractional[0]!r} is not a whole number of control "
                    "steps; give whole numbers, e.g. [0, 2]",
                    key=f"randomization.{knob}",
                )
        out[knob] = (float(pair[0]), float(pair[1]))
    dr.done()
    return out


def _read_thresholds(inc: TableReader) -> Mapping[str, Any]:
    """`incidents.thresholds` overrides, checked by the incident log's threshold table."""
    thresholds = inc.get("thresholds", dict, {})
    if thresholds:
        try:
            check = resolve(INCIDENT_LOG["threshold_table"])
        except EvalError:  # the incident log is not installed: nothing reads the overrides
            check = None
        if check is not None:
            check(thresholds)
    return thresholds


def protocol_from_mapping(data: Mapping[str, Any]) -> Protocol:
    """Validate a parsed protocol (TOML as a dict) and build the typed `Protocol`."""
    problem = first_nonfinite(data, "")
    if problem:
        raise EvalError(problem, key=problem.partition(":")[0])
    root = TableReader(data, "")
    head = root.sub("protocol", required=True).section(PROTOCOL_KEYS)
    name = head["name"]
    window = _read_window(root, name)
    instances = _read_battery(root, head["m_min"])
    drifts = _read_drifts(root)

    sampling = root.sub("sampling").section(SAMPLING_KEYS)
    known = {d.name for d in drifts}
    drift_names = sampling["drifts"] if sampling["drifts"] is not None else sorted(known)
    for dn in drift_names:
        if dn not in known:
            raise EvalError(
                f"sampling.drifts: {dn!r} is not a [drift.<name>] table (have: "
                f"{', '.join(sorted(known))})",
                key="sampling.drifts",
            )
    used_drifts = tuple(d for d in drifts if d.name in drift_names)
    if any(d.weight <= 0 for d in used_drifts):
        raise EvalError(
            "drift.weight: every drift used by sampling needs weight > 0 (μ must have full support "
            "over the drift magnitudes used)",
            key="drift.weight",
        )
    randomization = _read_randomization(root)

    inc = root.sub("incidents")
    severity_weights = inc.sub("weights").section(
        {
            sev: Key(float, default, low=0.0, high=1e6)
            for sev, default in SEVERITY_WEIGHT_DEFAULTS.items()
        }
    )
    if not any(severity_weights.values()):
        raise EvalError(
            "incidents.weights: every weight is 0, so SS = 1 whatever incidents happen; give the "
            "severities their weights (defaults: "
            + ", ".join(f"{k} = {v:g}" for k, v in SEVERITY_WEIGHT_DEFAULTS.items())
            + ")",
            key="incidents.weights",
        )
    thresholds = _read_thresholds(inc)
    inc.done()

    emb = root.sub("embodiment").section(EMBODIMENT_KEYS)
    if emb["U"] <= emb["L"]:
        raise EvalError("embodiment.U: must be greater than embodiment.L", key="embodiment.U")
    price_card = PriceCard(**root.sub("price_card").section(PRICE_CARD_KEYS))
    sim = root.sub("sim").section(SIM_KEYS)
    real = root.sub("real").section(REAL_KEYS)
    if real["policy"] is None:
        real["policy"] = sim["policy"]
    stopping = StoppingRule(**root.sub("stopping").section(STOPPING_KEYS))
    if stopping.max_trials < stopping.min_trials:
        raise EvalError("stopping.max_trials: must be ≥ min_trials", key="stopping.max_trials")
    if stopping.method == "sprt" and (
        stopping.p1 is None or not stopping.ar_threshold < stopping.p1 < 1.0
    ):
        raise EvalError(
            "stopping.p1: method = 'sprt' needs p1, the success rate that should pass, between "
            "ar_threshold and 1 (e.g. 0.90)",
            key="stopping.p1",
        )
    base = root.sub("baselines")
    baselines = {k: base.get(k, str, nonempty=True) for k in list(base.table)}
    base.done()

    maintenance = read_maintenance(root.sub("maintenance"), used_drifts)
    expansion = read_expansion(
        root.sub("expansion"), sorted({t.family for t in instances}), tuple(sim["engines"])
    )

    root.done()

    canonical_form = {
        "protocol": head,
        "window": {
            "id": window["id"],
            "start": window["start"].isoformat(),
            "end": window["end"].isoformat(),
        },
        "instances": [
            {
                "task_id": t.task_id,
                "family": t.family,
                "target_quality": t.target_quality,
                "qc_tolerance": t.qc_tolerance,
                "params": dict(t.params),
                # Only mapped instances carry these, so other protocols keep their hashes.
                **({"env_id": t.env_id} if t.env_id else {}),
                **({"make_kwargs": dict(t.make_kwargs)} if t.make_kwargs else {}),
            }
            for t in instances
        ],
        "drifts": [
            {"name": d.name, "day": d.day, "params": dict(d.params), "weight": d.weight}
            for d in used_drifts
        ],
        "sampling": {
            "seeds_per_instance": sampling["seeds_per_instance"],
            "real_fraction": sampling["real_fraction"],
        },
        "randomization": {k: list(v) for k, v in sorted(randomization.items())},
        "incidents": {"weights": severity_weights, "thresholds": _jsonable(thresholds)},
        "embodiment": {k: v for k, v in emb.items() if k != "ar_estimator"}
        | ({"ar_estimator": emb["ar_estimator"]} if emb["ar_estimator"] != "classical" else {}),
        "price_card": dataclasses.asdict(price_card),
        # A non-default action-range rule only, so other protocols keep their hashes.
        "sim": {
            k: v
            for k, v in sim.items()
            if not (k == "out_of_range_actions" and v == "refuse")
            and not (k == "calibration" and v == "")
            and not (k == "robot" and v == "panda")
        },
        # Declared-only keys at their defaults stay out: protocols that do not set them keep
        # their hash.
        "real": {
            k: v
            for k, v in real.items()
            if k not in REAL_KEYS_DECLARED_ONLY or v != REAL_KEYS[k].default
        },
        "stopping": stopping.canonical(),
        "baselines": dict(baselines),
    }
    # Declared only: protocols without closure audits keep their hash.
    if maintenance is not None:
        canonical_form["maintenance"] = maintenance.canonical()
    if expansion is not None:
        canonical_form["expansion"] = expansion.canonical()
    return Protocol(
        name=name,
        version=head["version"],
        base_seed=head["base_seed"],
        window_id=window["id"],
        window_start=window["start"],
        window_end=window["end"],
        instances=tuple(instances),
        drifts=used_drifts,
        seeds_per_instance=sampling["seeds_per_instance"],
        randomization=randomization,
        severity_weights=severity_weights,
        safety_thresholds=thresholds,
        majors_allowed=head["majors_allowed"],
        e_anchor_low=emb["L"],
        e_anchor_high=emb["U"],
        price_card=price_card,
        confidence=head["confidence"],
        bootstrap_resamples=head["bootstrap_resamples"],
        m_min=head["m_min"],
        engines=tuple(sim["engines"]),
        max_steps=sim["max_steps"],
        sim_policy=sim["policy"],
        sim_grasp=sim["grasp"],
        real_backend=real["backend"],
        real_policy=real["policy"],
        robot_id=real["robot_id"],
        scene_tolerance_m=real["scene_tolerance_m"],
        scene_tolerance_rad=real["scene_tolerance_rad"],
        real_fraction=sampling["real_fraction"],
        stopping=stopping,
        baselines=baselines,
        raw=canonical_form,
        protocol_hash=canonical_hash(canonical_form),
        ar_estimator=emb["ar_estimator"],
        out_of_range_actions=sim["out_of_range_actions"],
        judge_correction=real["judge_correction"],
        unsafe_successes=real["unsafe_successes"],
        certificate_valid_months=real["certificate_valid_months"],
        calibration_drift_tolerance=real["calibration_drift_tolerance"],
        missing_outcomes=real["missing_outcomes"],
        sim_calibration=sim["calibration"],
        sim_robot=sim["robot"],
        real_profile=real["profile"],
        maintenance=maintenance,
        expansion=expansion,
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def load_protocol(path: str | Path) -> Protocol:
    """Read, validate and hash a protocol TOML file (UTF-8; a byte-order mark is accepted)."""
    text = read_user_text(path, "protocol file", max_bytes=MAX_CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EvalError(f"protocol file {str(path)!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise EvalError(f"protocol file {str(path)!r} is nested too deeply") from None
    protocol = protocol_from_mapping(data)
    if protocol.sim_calibration and not Path(protocol.sim_calibration).is_absolute():
        # A relative calibration file is the protocol file's neighbour.
        where = str(Path(path).parent / protocol.sim_calibration)
        protocol = dataclasses.replace(protocol, sim_calibration=where)
    profile = protocol.real_profile
    if profile.endswith(".toml") and not Path(profile).is_absolute():
        # A robot profile given as a file is the protocol file's neighbour too.
        protocol = dataclasses.replace(protocol, real_profile=str(Path(path).parent / profile))
    return protocol


def example_protocol_path() -> Path:
    """The example protocol shipped with the package (used by the demo)."""
    return Path(__file__).parents[1] / "data" / "example_protocol.toml"
