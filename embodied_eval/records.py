"""The data contract: episodes, faults, incidents, exposure entries and artifacts.

Every package exchanges these records. Each is a frozen dataclass that validates itself on
construction (raising `EvalError` naming the field) and round-trips through plain JSON with
`to_dict()` / `from_dict()`.

Vocabulary (seed §3): an *episode* is one run of one policy on one (task t, seed s, drift δ) on one
side (`sim` or `real`); a *pair* is a sim and a real episode on the same (t, s, δ) with the same
policy. Success z = 1{q ≥ q*} and only when the episode ended `ok`: a safety stop or an
out-of-bounds breach forces z = 0. Aborted and errored episodes are kept as records but are
excluded from the metrics and counted separately.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from embodied_eval.errors import EvalError
from embodied_eval.record_base import (
    SEVERITIES,
    _check_enum,
    _check_mapping,
    _check_number,
    _check_sha256,
    _check_str,
    parse_utc,
)

# Re-exported: the whole project reads these helpers from the data contract.
from embodied_eval.record_base import Record as Record
from embodied_eval.record_base import iso_utc as iso_utc
from embodied_eval.record_base import severity_rank as severity_rank
from embodied_eval.record_base import utc_now_iso as utc_now_iso
from embodied_eval.safety_event import CONTACT_TYPES as CONTACT_TYPES
from embodied_eval.safety_event import SAFETY_EVENT_KINDS as SAFETY_EVENT_KINDS
from embodied_eval.safety_event import SafetyEvent as SafetyEvent

SIDES = ("sim", "real")
ENGINES = ("mujoco", "pybullet", "ros2", "mujoco_robot", "manual", "gymnasium", "external")
#: Engines that only run one side: a `real` episode cannot come from a simulator, nor a `sim`
#: one from a robot backend. Engines not named here (a lab's own) may run either side.
SIM_ONLY_ENGINES = ("mujoco", "pybullet", "gymnasium", "metaworld", "libero")
REAL_ONLY_ENGINES = ("ros2", "mujoco_robot", "manual")
#: Longest plausible episode, s (a week): longer durations are unit or typing mistakes.
MAX_EPISODE_DURATION_S = 7 * 24 * 3600.0
#: Most attempts of one manifest entry.
MAX_ATTEMPTS = 10_000
STATUSES = ("ok", "safety_stop", "out_of_bounds", "aborted", "error")
#: Statuses whose episodes count in the metrics (z is defined for them).
SCORED_STATUSES = ("ok", "safety_stop", "out_of_bounds")
INCIDENT_SOURCES = ("auto", "manual")


# --------------------------------------------------------------------------- cross-field rules


def check_side_engine(side: str, engine: str) -> None:
    """A simulator runs only the sim side and a robot backend only the real side."""
    if side == "real" and engine in SIM_ONLY_ENGINES:
        raise EvalError(
            f"engine: {engine!r} is a simulator; a real episode comes from a robot backend "
            f"({', '.join(REAL_ONLY_ENGINES)}, ...) or side must be sim",
            key="engine",
        )
    if side == "sim" and engine in REAL_ONLY_ENGINES:
        raise EvalError(
            f"engine: {engine!r} is a robot backend; a sim episode comes from a simulator "
            f"({', '.join(SIM_ONLY_ENGINES)}, ...) or side must be real",
            key="engine",
        )


def check_family_task(family: str, task_id: str) -> None:
    """A task id '<family>/<name>' belongs to its family."""
    prefix, slash, _ = task_id.partition("/")
    if slash and prefix != family:
        raise EvalError(
            f"task_id: {task_id!r} belongs to family {prefix!r}, not {family!r}", key="task_id"
        )


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Artifact(Record):
    """A file produced by an episode (recording, traceback, log), identified by its SHA-256."""

    path: str
    sha256: str
    kind: str = ""
    size_bytes: int | None = None

    def __post_init__(self) -> None:
        self._plain()
        _check_str("path", self.path)
        _check_sha256("sha256", self.sha256)
        _check_str("kind", self.kind, allow_empty=True)
        if self.size_bytes is not None:
            _check_number("size_bytes", self.size_bytes, low=0, integer=True)


@dataclass(frozen=True)
class Fault(Record):
    """One fault during an episode (from the suite's recoverable-fault taxonomy).

    `repair_s` is the time to repair/recover in seconds (0 when recovered autonomously at once).
    """

    kind: str
    recovered_autonomously: bool
    repair_s: float = 0.0
    episode_id: str = ""
    step: int | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        self._plain()
        _check_str("kind", self.kind)
        if not isinstance(self.recovered_autonomously, bool):
            raise EvalError(
                f"recovered_autonomously: expected true/false, got {self.recovered_autonomously!r}",
                key="recovered_autonomously",
            )
        _check_number("repair_s", self.repair_s, low=0.0)
        _check_str("episode_id", self.episode_id, allow_empty=True)
        if self.step is not None:
            _check_number("step", self.step, low=0, integer=True)
        _check_str("detail", self.detail, allow_empty=True)


def check_autonomous_recovery(fault: Fault, duration_s: float) -> None:
    """Refuse a fault "recovered autonomously" whose recovery time is longer than its episode.

    An autonomous recovery happens within the episode (the sim times it from injection to
    clearing), so its `repair_s` is at most the episode's `duration_s`; a longer time is an
    operator's repair, which MTTR counts only for faults *not* recovered autonomously — accepted,
    it would silently vanish from MTTR. Refused (EvalError), not capped: which of the two answers
    is wrong only the person who recorded it knows.
    """
    if fault.recovered_autonomously and fault.repair_s > duration_s * (1.0 + 1e-9) + 1e-6:
        raise EvalError(
            f"faults: {fault.kind} was recovered autonomously but its repair time "
            f"{fault.repair_s:g} s is longer than the episode ({duration_s:g} s); an autonomous "
            "recovery happens within the episode — if an operator repaired it, record it as not "
            "recovered autonomously with that repair time",
            key="repair_s",
        )


#: Who may judge a real episode's outcome (see real_bridge.judges).
JUDGE_KINDS = ("technician", "detector", "oracle")
#: Keys of `Episode.judge`: kind, name, version are required; the rest only for signed verdicts.
JUDGE_KEYS = ("kind", "name", "version", "signature", "public_key", "signed")


def _check_judge(judge: Any) -> None:
    """`Episode.judge`: empty, or {kind, name, version[, signature, public_key, signed]}."""
    _check_mapping("judge", judge)
    if not judge:
        return
    unknown = sorted(set(judge) - set(JUDGE_KEYS))
    if unknown:
        raise EvalError(
            f"judge.{unknown[0]}: unknown key (known: {', '.join(JUDGE_KEYS)})", key="judge"
        )
    if not all(isinstance(v, str) for v in judge.values()):
        raise EvalError("judge: every value must be text", key="judge")
    _check_enum("judge.kind", judge.get("kind", ""), JUDGE_KINDS)
    if not judge.get("name"):
        raise EvalError("judge.name: a judge must be named", key="judge")
    if "version" not in judge:
        raise EvalError("judge.version: missing (may be empty for a person)", key="judge")
    if judge["kind"] == "technician" and not judge.get("signature"):
        raise EvalError("judge.signature: a technician's verdict must be signed", key="judge")


@dataclass(frozen=True)
class Episode(Record):
    """One run of one policy on one (task, seed, drift) on one side.

    Units: `duration_s` seconds of exposure, `energy_wh` watt-hours, `cost` itemized in the price
    card's currency. `started_at` is ISO-8601 UTC.
    """

    _nested: ClassVar[dict[str, type[Record]]] = {"faults": Fault, "artifacts": Artifact}

    episode_id: str
    pair_id: str
    side: str
    family: str
    task_id: str
    seed: int
    policy: str
    engine: str
    quality: float
    target_quality: float
    status: str = "ok"
    duration_s: float = 0.0
    drift: Mapping[str, Any] = field(default_factory=dict)
    randomization: Mapping[str, Any] = field(default_factory=dict)
    actions: int = 0
    plan_depth: int = 0
    interventions: int = 0
    faults: tuple[Fault, ...] = ()
    control: Mapping[str, Any] = field(default_factory=dict)
    qc: float | None = None
    energy_wh: float = 0.0
    cost: Mapping[str, float] = field(default_factory=dict)
    attempt: int = 1
    started_at: str = "1970-01-01T00:00:00Z"
    artifacts: tuple[Artifact, ...] = ()
    status_reason: str = ""
    audited_success: bool | None = None
    window: str = ""
    protocol_hash: str = ""
    judge: Mapping[str, str] = field(default_factory=dict)
    scene: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._plain()
        for name in ("episode_id", "pair_id", "family", "task_id", "policy"):
            _check_str(name, getattr(self, name))
        _check_enum("side", self.side, SIDES)
        _check_str("engine", self.engine)
        check_side_engine(self.side, self.engine)
        check_family_task(self.family, self.task_id)
        _check_number("seed", self.seed, low=0, integer=True)
        _check_number("quality", self.quality, low=0.0, high=1.0)
        _check_number("target_quality", self.target_quality, low=0.0, high=1.0)
        _check_enum("status", self.status, STATUSES)
        _check_number("duration_s", self.duration_s, low=0.0, high=MAX_EPISODE_DURATION_S)
        _check_mapping("drift", self.drift)
        _check_mapping("randomization", self.randomization)
        _check_mapping("scene", self.scene)
        _check_mapping("control", self.control)
        _check_mapping("cost", self.cost)
        for key, amount in self.cost.items():
            _check_number(f"cost.{key}", amount, low=0.0)
        for name in ("actions", "plan_depth", "interventions"):
            _check_number(name, getattr(self, name), low=0, integer=True)
        _check_number("attempt", self.attempt, low=1, high=MAX_ATTEMPTS, integer=True)
        if self.qc is not None:
            _check_number("qc", self.qc, low=0.0, high=1.0)
        _check_number("energy_wh", self.energy_wh, low=0.0)
        parse_utc(self.started_at, key="started_at")
        if not isinstance(self.faults, tuple) or not all(isinstance(f, Fault) for f in self.faults):
            raise EvalError("faults: expected a list of Fault records", key="faults")
        for f in self.faults:
            if f.episode_id not in ("", self.episode_id):
                raise EvalError(
                    f"faults: fault names episode {f.episode_id!r}, not {self.episode_id!r}",
                    key="faults",
                )
        # A fault belongs to its episode: fill in the id so stored and built records compare equal.
        object.__setattr__(
            self,
            "faults",
            tuple(
                f if f.episode_id else f.replace(episode_id=self.episode_id) for f in self.faults
            ),
        )
        if not isinstance(self.artifacts, tuple) or not all(
            isinstance(a, Artifact) for a in self.artifacts
        ):
            raise EvalError("artifacts: expected a list of Artifact records", key="artifacts")
        if self.audited_success is not None and not isinstance(self.audited_success, bool):
            raise EvalError("audited_success: expected true/false or empty", key="audited_success")
        _check_str("status_reason", self.status_reason, allow_empty=True)
        _check_str("window", self.window, allow_empty=True)
        _check_str("protocol_hash", self.protocol_hash, allow_empty=True)
        _check_judge(self.judge)
        # Normalize ints stored as floats (CSV) so equality and hashing are stable.
        for name in ("seed", "actions", "plan_depth", "interventions", "attempt"):
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in ("quality", "target_quality", "duration_s", "energy_wh"):
            object.__setattr__(self, name, float(getattr(self, name)))

    @property
    def success(self) -> bool:
        """z = 1{q ≥ q*} when the episode ended `ok`; safety stops and breaches give z = 0."""
        return self.status == "ok" and self.quality >= self.target_quality

    @property
    def scored(self) -> bool:
        """True when the episode counts in the metrics (not aborted, not errored)."""
        return self.status in SCORED_STATUSES

    @property
    def duration_h(self) -> float:
        return self.duration_s / 3600.0

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["cost"] = {k: float(v) for k, v in self.cost.items()}
        return out


@dataclass(frozen=True)
class Incident(Record):
    """A safety incident as the data contract carries it between packages.

    The incident log (`incident_logging`) keeps the full record with its hash chain, reviews and
    amendments; this is what metrics and reports consume. `severity` is the severity that counts:
    the signed final severity when reviewed, else the provisional one.
    """

    incident_id: str
    occurred_at: str
    severity: str
    source: str = "manual"
    episode_id: str | None = None
    rule: str = ""
    measurements: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""
    side: str = "real"
    counts_toward_window: bool = True
    reviewed: bool = False
    window: str = ""

    def __post_init__(self) -> None:
        self._plain()
        _check_str("incident_id", self.incident_id)
        parse_utc(self.occurred_at, key="occurred_at")
        _check_enum("severity", self.severity, SEVERITIES)
        _check_enum("source", self.source, INCIDENT_SOURCES)
        if self.episode_id is not None:
            _check_str("episode_id", self.episode_id)
        _check_str("rule", self.rule, allow_empty=True)
        _check_mapping("measurements", self.measurements)
        _check_str("text", self.text, allow_empty=True)
        _check_enum("side", self.side, SIDES)
        for name in ("counts_toward_window", "reviewed"):
            if not isinstance(getattr(self, name), bool):
                raise EvalError(f"{name}: expected true/false", key=name)


@dataclass(frozen=True)
class ExposureEntry(Record):
    """Exposure hours on the real robot: one period of operation in a window.

    `how_measured` says where the hours come from (e.g. `episode_durations`, `robot_clock`,
    `operator_log`). `blind` marks a period in which a safety detector was not watching.
    """

    entry_id: str
    window: str
    start: str
    end: str
    active_hours: float
    how_measured: str
    blind: bool = False
    robot_id: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        self._plain()
        for name in ("entry_id", "window", "how_measured"):
            _check_str(name, getattr(self, name))
        start = parse_utc(self.start, key="start")
        end = parse_utc(self.end, key="end")
        if end < start:
            raise EvalError("end: the period ends before it starts", key="end")
        _check_number("active_hours", self.active_hours, low=0.0)
        span_h = (end - start).total_seconds() / 3600.0
        if self.active_hours > span_h + 1e-9:
            raise EvalError(
                f"active_hours: {self.active_hours} h is longer than the period ({span_h:.3f} h)",
                key="active_hours",
            )
        if not isinstance(self.blind, bool):
            raise EvalError("blind: expected true/false", key="blind")


def first_attempts(episodes: Iterable[Episode]) -> list[Episode]:
    """Keep, per manifest entry (pair_id, side, engine), only the lowest attempt number.

    Retries replay the same manifest entry; counting them would let retries inflate AR. A pair's
    sim side may run on several engines (MuJoCo and PyBullet): each engine's episode is its own
    entry. Filter to scored episodes first to get the first *scored* attempt.
    """
    best: dict[tuple[str, str, str], Episode] = {}
    for ep in episodes:
        key = (ep.pair_id, ep.side, ep.engine)
        if key not in best or ep.attempt < best[key].attempt:
            best[key] = ep
    return list(best.values())


@dataclass(frozen=True)
class EpisodeSpec(Record):
    """One row of the manifest (the seed escrow): what to run, with all randomness fixed.

    `seed` is derived from (protocol base seed, episode id) so a retry replays the same episode.
    `drift` holds the drift setting's parameters (applied on top of domain randomization).
    """

    episode_id: str
    pair_id: str
    side: str
    family: str
    task_id: str
    seed: int
    drift_name: str
    drift: Mapping[str, Any] = field(default_factory=dict)
    engine: str = "mujoco"
    policy: str = "sim_suites.policies:scripted"
    attempt: int = 1
    window: str = ""
    protocol_hash: str = ""
    target_quality: float = 0.8

    def __post_init__(self) -> None:
        self._plain()
        for name in ("episode_id", "pair_id", "family", "task_id", "drift_name", "policy"):
            _check_str(name, getattr(self, name))
        _check_enum("side", self.side, SIDES)
        _check_str("engine", self.engine)
        check_side_engine(self.side, self.engine)
        _check_number("seed", self.seed, low=0, integer=True)
        _check_mapping("drift", self.drift)
        _check_number("attempt", self.attempt, low=1, high=MAX_ATTEMPTS, integer=True)
        _check_number("target_quality", self.target_quality, low=0.0, high=1.0)

    def to_episode(self, quality: float, **fields: Any) -> Episode:
        """The Episode record of this manifest row, with quality q = `quality`.

        Every engine, backend and runner function that records a manifest row builds its Episode
        here, so what a record copies from its row is decided in one place.

        Args:
            quality: q in [0, 1].
            fields: the other Episode fields (status, duration_s in s, started_at, control, ...).
                The row's episode_id, pair_id, side, family, task_id, seed, policy, engine,
                target_quality, drift (a copy), attempt, window and protocol_hash are copied;
                a field given here overrides the copied value (e.g. the engine a bridge really
                ran). `drift_name` is not an Episode field and is not copied.

        Returns:
            The Episode (validated by its constructor; EvalError on a bad field).
        """
        copied: dict[str, Any] = {
            "episode_id": self.episode_id,
            "pair_id": self.pair_id,
            "side": self.side,
            "family": self.family,
            "task_id": self.task_id,
            "seed": self.seed,
            "policy": self.policy,
            "engine": self.engine,
            "target_quality": self.target_quality,
            "drift": dict(self.drift),
            "attempt": self.attempt,
            "window": self.window,
            "protocol_hash": self.protocol_hash,
        }
        return Episode(**{**copied, "quality": quality, **fields})


@dataclass(frozen=True)
class EpisodeOutcome:
    """What running one episode returns: the record plus the safety events it produced."""

    episode: Episode
    safety_events: tuple[SafetyEvent, ...] = ()
