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
  parts; certify refuses assisted episodes unless the protocol declares it); `[real]` backend,
  robot_id, policy
- `[stopping]` anytime-valid stopping of the real side against an AR gate
- `[baselines]` null/expert policies for baseline calibration
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_hash
from embodied_eval.errors import EvalError

#: How simulated grasps are held: by contact friction, or by an assisting weld (declared).
GRASP_MODES = ("contact", "assisted")

#: Seed §3: an admissible battery has at least m_min instances in every family.
DEFAULT_M_MIN = 5

#: `[embodiment] ar_estimator`: which AR enters E and the AR gate ("ppi" = prediction-powered).
AR_ESTIMATORS = ("classical", "ppi")

#: Domain-randomization knobs a protocol may set, as [low, high] ranges.
DR_KNOBS = (
    "friction_scale",
    "object_mass_scale",
    "link_mass_scale",
    "joint_damping_scale",
    "actuator_gain_scale",
    "object_xy_offset_m",
    "sensor_noise_std",
    "action_latency_steps",
    "control_rate_hz",
    "lighting_scale",
    "grip_force_scale",
    "object_yaw_rad",
    "colour_jitter",
)

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

FAMILY_NAMES_HINT = "pick_place, drawer_open, peg_insert, push"


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
    ar_estimator: str = "classical"

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


# --------------------------------------------------------------------------- validation


class _Reader:
    """Reads one TOML table, checking types and ranges and remembering which keys were used."""

    def __init__(self, table: Any, path: str) -> None:
        if not isinstance(table, Mapping):
            raise EvalError(f"{path}: expected a table, got {type(table).__name__}", key=path)
        self.table = dict(table)
        self.path = path
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(
        self,
        name: str,
        kind: type | tuple[type, ...],
        default: Any = dataclasses.MISSING,
        *,
        low: float | None = None,
        high: float | None = None,
        check: Callable[[Any], str | None] | None = None,
    ) -> Any:
        self.used.add(name)
        full = self.key(name)
        if name not in self.table:
            if default is dataclasses.MISSING:
                raise EvalError(f"{full}: required key is missing", key=full)
            return default
        value = self.table[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            ok = True
            value = float(value)
        if not ok:
            names = " or ".join(k.__name__ for k in kinds)
            raise EvalError(
                f"{full}: expected {names}, got {type(value).__name__} {value!r}", key=full
            )
        if low is not None and value < low:
            raise EvalError(f"{full}: {value!r} is below the minimum {low}", key=full)
        if high is not None and value > high:
            raise EvalError(f"{full}: {value!r} is above the maximum {high}", key=full)
        if check is not None:
            problem = check(value)
            if problem:
                raise EvalError(f"{full}: {problem}", key=full)
        return value

    def sub(self, name: str, *, required: bool = False) -> _Reader:
        self.used.add(name)
        if name not in self.table:
            if required:
                raise EvalError(f"{self.key(name)}: required table is missing", key=self.key(name))
            return _Reader({}, self.key(name))
        return _Reader(self.table[name], self.key(name))

    def done(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            full = self.key(unknown[0])
            raise EvalError(
                f"{full}: unknown key (check the spelling; known keys: "
                f"{', '.join(sorted(self.used))})",
                key=full,
            )


def _range_pair(value: Any) -> str | None:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return "expected a [low, high] pair of numbers"
    if value[0] > value[1]:
        return f"low {value[0]} is greater than high {value[1]}"
    return None


def _as_date(value: Any, key: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise EvalError(f"{key}: expected a date like 2026-11-01, got {value!r}", key=key)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def protocol_from_mapping(data: Mapping[str, Any]) -> Protocol:
    """Validate a parsed protocol (TOML as a dict) and build the typed `Protocol`."""
    root = _Reader(data, "")

    head = root.sub("protocol", required=True)
    name = head.get("name", str, check=lambda v: None if v.strip() else "must not be empty")
    version = head.get("version", str)
    base_seed = head.get("base_seed", int, low=0)
    confidence = head.get("confidence", float, 0.95, low=0.5, high=0.9999)
    resamples = head.get("bootstrap_resamples", int, 2000, low=100, high=1_000_000)
    majors_allowed = head.get("majors_allowed", bool, False)
    m_min = head.get("m_min", int, DEFAULT_M_MIN, low=1)
    head.done()

    window = root.sub("window", required=True)
    window_start = _as_date(window.get("start", (str, dt.date)), "window.start")
    window_end = _as_date(window.get("end", (str, dt.date)), "window.end")
    if window_end < window_start:
        raise EvalError("window.end: the window ends before it starts", key="window.end")
    window_id = window.get("id", str, f"{name}-{window_start.isoformat()}")
    window.done()

    battery = root.sub("battery", required=True)
    instances: list[TaskInstance] = []
    if not battery.table:
        raise EvalError("battery: needs at least one family", key="battery")
    for family in sorted(battery.table):
        fam = battery.sub(family)
        fam_q = fam.get("target_quality", float, 0.8, low=0.0, high=1.0)
        fam_tol = fam.get("qc_tolerance", float, None, low=0.0)
        raw_instances = fam.get("instances", list)
        seen: set[str] = set()
        for i, item in enumerate(raw_instances):
            if isinstance(item, str):
                item = {"task_id": item}
            inst = _Reader(item, f"battery.{family}.instances[{i}]")
            task_id = inst.get("task_id", str)
            if task_id in seen or any(t.task_id == task_id for t in instances):
                raise EvalError(
                    f"{inst.key('task_id')}: task id {task_id!r} appears twice",
                    key=inst.key("task_id"),
                )
            seen.add(task_id)
            instances.append(
                TaskInstance(
                    task_id=task_id,
                    family=family,
                    target_quality=inst.get("target_quality", float, fam_q, low=0.0, high=1.0),
                    qc_tolerance=inst.get("qc_tolerance", float, fam_tol, low=0.0),
                    params=dict(inst.get("params", dict, {})),
                    env_id=inst.get("env_id", str, ""),
                    make_kwargs=dict(inst.get("make_kwargs", dict, {})),
                )
            )
            inst.done()
        if len(raw_instances) < m_min:
            raise EvalError(
                f"battery.{family}.instances: family {family!r} has {len(raw_instances)} "
                f"instance(s); an admissible battery needs at least m_min = {m_min}",
                key=f"battery.{family}.instances",
            )
        fam.done()
    battery.done()

    drift_table = root.sub("drift")
    drifts: list[DriftSetting] = []
    for dname in drift_table.table:
        d = drift_table.sub(dname)
        day = d.get("day", int, 0, low=0)
        weight = d.get("weight", float, 1.0, low=0.0)
        params: dict[str, Any] = {}
        for key in DRIFT_KEYS:
            if key in d.table:
                kind: Any = str if key == "firmware" else float
                params[key] = d.get(key, kind, low=None if key == "firmware" else 0.0)
        d.done()
        drifts.append(DriftSetting(name=dname, day=day, params=params, weight=weight))
    drift_table.done()
    if not drifts:
        drifts.append(DriftSetting(name="nominal", day=0, params={}, weight=1.0))

    sampling = root.sub("sampling")
    seeds_per_instance = sampling.get("seeds_per_instance", int, 1, low=1, high=100_000)
    drift_names = sampling.get("drifts", list, [d.name for d in drifts])
    known = {d.name for d in drifts}
    for dn in drift_names:
        if dn not in known:
            raise EvalError(
                f"sampling.drifts: {dn!r} is not a [drift.<name>] table (have: "
                f"{', '.join(sorted(known))})",
                key="sampling.drifts",
            )
    real_fraction = sampling.get("real_fraction", float, 1.0, low=0.0, high=1.0)
    sampling.done()
    used_drifts = tuple(d for d in drifts if d.name in drift_names)
    if any(d.weight <= 0 for d in used_drifts):
        raise EvalError(
            "drift.weight: every drift used by sampling needs weight > 0 (μ must have full support "
            "over the drift magnitudes used)",
            key="drift.weight",
        )

    dr = root.sub("randomization")
    randomization: dict[str, tuple[float, float]] = {}
    for knob in list(dr.table):
        if knob not in DR_KNOBS:
            raise EvalError(
                f"randomization.{knob}: unknown knob (known: {', '.join(DR_KNOBS)})",
                key=f"randomization.{knob}",
            )
        pair = dr.get(knob, list, check=_range_pair)
        randomization[knob] = (float(pair[0]), float(pair[1]))
    dr.done()

    inc = root.sub("incidents")
    weights_reader = inc.sub("weights")
    severity_weights = {
        sev: weights_reader.get(sev, float, default, low=0.0)
        for sev, default in SEVERITY_WEIGHT_DEFAULTS.items()
    }
    weights_reader.done()
    thresholds = inc.get("thresholds", dict, {})
    inc.done()

    emb = root.sub("embodiment")
    e_low = emb.get("L", float, 0.0, low=0.0, high=1.0)
    e_high = emb.get("U", float, 1.0, low=0.0, high=1.0)
    if e_high <= e_low:
        raise EvalError("embodiment.U: must be greater than embodiment.L", key="embodiment.U")
    ar_estimator = emb.get("ar_estimator", str, "classical")
    if ar_estimator not in AR_ESTIMATORS:
        raise EvalError(
            f"embodiment.ar_estimator: {ar_estimator!r} is not one of "
            f'{", ".join(AR_ESTIMATORS)} ("ppi" = prediction-powered AR in E and the AR gate)',
            key="embodiment.ar_estimator",
        )
    emb.done()

    pc = root.sub("price_card")
    price_card = PriceCard(
        currency=pc.get("currency", str, "USD"),
        energy_per_kwh=pc.get("energy_per_kwh", float, 0.30, low=0.0),
        wear_per_hour=pc.get("wear_per_hour", float, 0.0, low=0.0),
        consumables_per_task=pc.get("consumables_per_task", float, 0.0, low=0.0),
        operator_per_hour=pc.get("operator_per_hour", float, 0.0, low=0.0),
        operator_fraction=pc.get("operator_fraction", float, 1.0, low=0.0, high=1.0),
    )
    pc.done()

    sim = root.sub("sim")
    engines = tuple(
        sim.get(
            "engines",
            list,
            ["mujoco"],
            check=lambda v: (
                None
                if v and all(e in ("mujoco", "pybullet") for e in v)
                else "expected a non-empty list of mujoco / pybullet"
            ),
        )
    )
    max_steps = sim.get("max_steps", int, 400, low=1, high=1_000_000)
    sim_policy = sim.get("policy", str, "sim_suites.policies:scripted")
    sim_grasp = sim.get(
        "grasp",
        str,
        "contact",
        check=lambda v: None if v in GRASP_MODES else "expected 'contact' or 'assisted'",
    )
    sim.done()

    real = root.sub("real")
    real_backend = real.get("backend", str, "ros2")
    real_policy = real.get("policy", str, sim_policy)
    robot_id = real.get("robot_id", str, "robot-1")
    real.done()

    stop = root.sub("stopping")
    stopping = StoppingRule(
        enabled=stop.get("enabled", bool, False),
        ar_threshold=stop.get("ar_threshold", float, 0.75, low=0.0, high=1.0),
        method=stop.get(
            "method",
            str,
            "mixture",
            check=lambda v: None if v in ("mixture", "sprt") else "expected mixture or sprt",
        ),
        min_trials=stop.get("min_trials", int, 5, low=1),
        max_trials=stop.get("max_trials", int, 400, low=1),
        p1=stop.get("p1", float, None, low=0.0, high=1.0),
        beta=stop.get("beta", float, 0.10, low=0.0001, high=0.5),
    )
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
    stop.done()

    base = root.sub("baselines")
    baselines = {k: base.get(k, str) for k in list(base.table)}
    base.done()

    root.done()

    canonical_form = {
        "protocol": {
            "name": name,
            "version": version,
            "base_seed": base_seed,
            "confidence": confidence,
            "bootstrap_resamples": resamples,
            "majors_allowed": majors_allowed,
            "m_min": m_min,
        },
        "window": {
            "id": window_id,
            "start": window_start.isoformat(),
            "end": window_end.isoformat(),
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
        "sampling": {"seeds_per_instance": seeds_per_instance, "real_fraction": real_fraction},
        "randomization": {k: list(v) for k, v in sorted(randomization.items())},
        "incidents": {"weights": severity_weights, "thresholds": _jsonable(thresholds)},
        # ar_estimator enters the hash only when set away from the default.
        "embodiment": {"L": e_low, "U": e_high}
        | ({"ar_estimator": ar_estimator} if ar_estimator != "classical" else {}),
        "price_card": dataclasses.asdict(price_card),
        "sim": {
            "engines": list(engines),
            "max_steps": max_steps,
            "policy": sim_policy,
            "grasp": sim_grasp,
        },
        "real": {"backend": real_backend, "policy": real_policy, "robot_id": robot_id},
        "stopping": stopping.canonical(),
        "baselines": dict(baselines),
    }
    return Protocol(
        name=name,
        version=version,
        base_seed=base_seed,
        window_id=window_id,
        window_start=window_start,
        window_end=window_end,
        instances=tuple(instances),
        drifts=used_drifts,
        seeds_per_instance=seeds_per_instance,
        randomization=randomization,
        severity_weights=severity_weights,
        safety_thresholds=thresholds,
        majors_allowed=majors_allowed,
        e_anchor_low=e_low,
        e_anchor_high=e_high,
        price_card=price_card,
        confidence=confidence,
        bootstrap_resamples=resamples,
        m_min=m_min,
        engines=engines,
        max_steps=max_steps,
        sim_policy=sim_policy,
        real_backend=real_backend,
        real_policy=real_policy,
        robot_id=robot_id,
        real_fraction=real_fraction,
        stopping=stopping,
        baselines=baselines,
        raw=canonical_form,
        protocol_hash=canonical_hash(canonical_form),
        sim_grasp=sim_grasp,
        ar_estimator=ar_estimator,
    )


def load_protocol(path: str | Path) -> Protocol:
    """Read, validate and hash a protocol TOML file."""
    p = Path(path)
    if not p.is_file():
        raise EvalError(f"protocol file {str(p)!r} does not exist", key="protocol")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise EvalError(f"protocol file {str(p)!r} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise EvalError(f"protocol file {str(p)!r} is not UTF-8 text") from None
    return protocol_from_mapping(data)


def example_protocol_path() -> Path:
    """The example protocol shipped with the package (used by the demo)."""
    return Path(__file__).parent / "data" / "example_protocol.toml"
