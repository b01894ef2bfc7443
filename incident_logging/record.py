"""The full incident record the log keeps, and its conversion to the data contract.

What an incident carries (the project's safety notes, "Record"):

* identity — incident_id, sequence (position in the hash chain, set by the store), schema_version,
  window, protocol_hash, run_id / episode_id (+ event_ordinal for detector events), robot_id,
  software_version, safety_config_hash, side;
* times (UTC) — occurred_at, detected_at, recorded_at (set by the store);
* source — `auto` (detector_rule_id + detector_version) or `manual` (reporter, reporter_role);
* event — event_type, stop_category, safety_mode (raw), operating_mode;
* measurements — separation vs S_p, force/pressure vs the body-region limit, TCP speed vs limit
  (keys of `SafetyEvent`, see MEASUREMENT_KEYS);
* people and damage — pseudonymous person ids, injury_level, treatment, damage description + cost;
* narrative — task_before, what_happened, harm_cause, immediate_action;
* evidence — artifacts by SHA-256 (e.g. video 30 s before / 5 s after);
* classification — provisional_severity, rules_fired (with margins), threshold version + hash,
  counts_toward_window with its justification, reported_severity (what a reporter said).

`to_contract()` gives the `embodied_eval.records.Incident` that metrics consume.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from embodied_eval.errors import EvalError
from embodied_eval.records import (
    INCIDENT_SOURCES,
    SIDES,
    Artifact,
    Incident,
    Record,
    SafetyEvent,
    parse_utc,
    severity_rank,
)
from embodied_eval.validation import text_problem
from incident_logging.classifier import Classification, RuleFired, classify
from incident_logging.taxonomy import EVENT_TYPES, INJURY_LEVELS, OPERATING_MODES, SEVERITIES
from incident_logging.thresholds import ThresholdTable

SCHEMA_VERSION = 1

#: Measurement keys a record may carry (SafetyEvent fields plus reporter-stated rule-7 facts).
MEASUREMENT_KEYS = (
    "t_s",
    "step",
    "separation_m",
    "protective_separation_m",
    "tcp_speed_mps",
    "speed_limit_mps",
    "reduced_speed_required",
    "contact_force_n",
    "contact_pressure_ncm2",
    "force_limit_n",
    "body_region",
    "contact_type",
    "contact_with",
    "permitted",
    "uncontrolled_hazard",
    "standards_breach",
    "detail",
)
_FLAG_KEYS = ("uncontrolled_hazard", "standards_breach")

#: Fields the store assigns or derives; amendments may not change them.
FIXED_FIELDS = frozenset(
    {
        "incident_id",
        "sequence",
        "schema_version",
        "recorded_at",
        "source",
        "provisional_severity",
        "reported_severity",
        "rules_fired",
        "threshold_version",
        "threshold_hash",
        "injury_check_required",
        "episode_id",
        "event_ordinal",
        "side",
        "window",
    }
)
#: Fields whose change re-runs the classifier (which may escalate, never downgrade).
CLASSIFIED_FIELDS = frozenset(
    {"event_type", "stop_category", "injury_level", "damage_cost", "measurements"}
)

SIM_JUSTIFICATION = "sim-side incident: never counts toward the safety score"


def _text(name: str, value: Any, *, empty: bool = True) -> None:
    if not isinstance(value, str):
        raise EvalError(f"{name}: expected text, got {type(value).__name__}", key=name)
    if not empty and not value.strip():
        raise EvalError(f"{name}: must not be empty", key=name)
    problem = text_problem(value)
    if problem:
        raise EvalError(f"{name}: {problem}", key=name)


@dataclass(frozen=True)
class IncidentRecord(Record):
    """One incident as the log stores it (see the module docstring for the field groups)."""

    _nested: ClassVar[dict[str, type[Record]]] = {"evidence": Artifact}

    incident_id: str
    window: str
    occurred_at: str
    event_type: str
    source: str
    provisional_severity: str
    sequence: int = 0
    schema_version: int = SCHEMA_VERSION
    protocol_hash: str = ""
    run_id: str = ""
    episode_id: str | None = None
    event_ordinal: int | None = None
    robot_id: str = ""
    software_version: str = ""
    safety_config_hash: str = ""
    side: str = "real"
    detected_at: str = ""
    recorded_at: str = ""
    detector_rule_id: str = ""
    detector_version: str = ""
    reporter: str = ""
    reporter_role: str = ""
    stop_category: int | None = None
    safety_mode: str = ""
    operating_mode: str = ""
    measurements: Mapping[str, Any] = field(default_factory=dict)
    persons: tuple[str, ...] = ()
    injury_level: str = "none"
    treatment: str = ""
    damage_description: str = ""
    damage_cost: float | None = None
    task_before: str = ""
    what_happened: str = ""
    harm_cause: str = ""
    immediate_action: str = ""
    evidence: tuple[Artifact, ...] = ()
    rules_fired: tuple[Mapping[str, Any], ...] = ()
    threshold_version: str = ""
    threshold_hash: str = ""
    injury_check_required: bool = False
    reported_severity: str | None = None
    counts_toward_window: bool = True
    counts_justification: str = ""

    def __post_init__(self) -> None:
        _text("incident_id", self.incident_id, empty=False)
        _text("window", self.window)  # "" = no window recorded (imported without one)
        occurred = parse_utc(self.occurred_at, key="occurred_at")
        if self.detected_at and parse_utc(self.detected_at, key="detected_at") < occurred:
            raise EvalError("detected_at: is before occurred_at", key="detected_at")
        if self.recorded_at:
            parse_utc(self.recorded_at, key="recorded_at")
        if self.event_type not in EVENT_TYPES:
            raise EvalError(
                f"event_type: {self.event_type!r} is not one of {', '.join(EVENT_TYPES)}",
                key="event_type",
            )
        if self.source not in INCIDENT_SOURCES:
            raise EvalError(
                f"source: {self.source!r} is not one of {', '.join(INCIDENT_SOURCES)}", key="source"
            )
        severity_rank(self.provisional_severity)
        if self.reported_severity is not None:
            severity_rank(self.reported_severity)
        for name in ("sequence", "schema_version"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise EvalError(f"{name}: expected a whole number >= 0", key=name)
        if self.event_ordinal is not None and (
            isinstance(self.event_ordinal, bool)
            or not isinstance(self.event_ordinal, int)
            or self.event_ordinal < 0
        ):
            raise EvalError("event_ordinal: expected a whole number >= 0", key="event_ordinal")
        for name in (
            "protocol_hash",
            "run_id",
            "robot_id",
            "software_version",
            "safety_config_hash",
            "detector_rule_id",
            "detector_version",
            "reporter",
            "reporter_role",
            "safety_mode",
            "treatment",
            "damage_description",
            "task_before",
            "what_happened",
            "harm_cause",
            "immediate_action",
            "threshold_version",
            "threshold_hash",
            "counts_justification",
        ):
            _text(name, getattr(self, name))
        if self.episode_id is not None:
            _text("episode_id", self.episode_id, empty=False)
        if self.side not in SIDES:
            raise EvalError(f"side: {self.side!r} is not one of {', '.join(SIDES)}", key="side")
        if self.source == "auto" and not (self.detector_rule_id and self.detector_version):
            raise EvalError(
                "detector_rule_id: an automatic incident names its detector rule and version",
                key="detector_rule_id",
            )
        if self.source == "manual" and not self.reporter.strip():
            raise EvalError("reporter: a manual report names its reporter", key="reporter")
        if self.stop_category is not None and self.stop_category not in (0, 1, 2):
            raise EvalError("stop_category: expected 0, 1 or 2", key="stop_category")
        if self.operating_mode not in OPERATING_MODES:
            raise EvalError(
                f"operating_mode: {self.operating_mode!r} is not one of "
                f"{', '.join(m for m in OPERATING_MODES if m)}",
                key="operating_mode",
            )
        if self.injury_level not in INJURY_LEVELS:
            raise EvalError(
                f"injury_level: {self.injury_level!r} is not one of {', '.join(INJURY_LEVELS)}",
                key="injury_level",
            )
        if self.damage_cost is not None:
            if isinstance(self.damage_cost, bool) or not isinstance(self.damage_cost, (int, float)):
                raise EvalError("damage_cost: expected a number", key="damage_cost")
            if not (0.0 <= float(self.damage_cost) < float("inf")):
                raise EvalError("damage_cost: must be a finite number >= 0", key="damage_cost")
            object.__setattr__(self, "damage_cost", float(self.damage_cost))
        if not isinstance(self.measurements, Mapping):
            raise EvalError("measurements: expected a JSON object", key="measurements")
        unknown = sorted(set(self.measurements) - set(MEASUREMENT_KEYS))
        if unknown:
            raise EvalError(
                f"measurements: unknown key(s) {', '.join(unknown)} "
                f"(known: {', '.join(MEASUREMENT_KEYS)})",
                key="measurements",
            )
        object.__setattr__(self, "measurements", dict(self.measurements))
        self.safety_event()  # validates every measurement's type and range
        if isinstance(self.persons, str) or not isinstance(self.persons, (list, tuple)):
            raise EvalError("persons: expected a list of pseudonymous ids", key="persons")
        for person in self.persons:
            _text("persons", person, empty=False)
        object.__setattr__(self, "persons", tuple(self.persons))
        if isinstance(self.rules_fired, (str, Mapping)) or not isinstance(
            self.rules_fired, (list, tuple)
        ):
            raise EvalError("rules_fired: expected a list of rules", key="rules_fired")
        rules = tuple(RuleFired.from_dict(r).to_dict() for r in self.rules_fired)
        for rule in rules:
            severity_rank(rule["severity"])
        object.__setattr__(self, "rules_fired", rules)
        if not isinstance(self.evidence, tuple) or not all(
            isinstance(a, Artifact) for a in self.evidence
        ):
            raise EvalError("evidence: expected a list of artifacts (path, sha256)", key="evidence")
        for name in ("injury_check_required", "counts_toward_window"):
            if not isinstance(getattr(self, name), bool):
                raise EvalError(f"{name}: expected true/false", key=name)
        if self.side == "sim" and self.counts_toward_window:
            raise EvalError(
                "counts_toward_window: sim-side incidents never count toward the window",
                key="counts_toward_window",
            )
        if not self.counts_toward_window and not self.counts_justification.strip():
            raise EvalError(
                "counts_justification: say why this incident does not count toward the window",
                key="counts_justification",
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (lists for tuples); written out field by field because appends call it
        for every record."""
        out = {name: getattr(self, name) for name in _FIELD_NAMES}
        out["measurements"] = dict(self.measurements)
        out["persons"] = list(self.persons)
        out["evidence"] = [a.to_dict() for a in self.evidence]
        out["rules_fired"] = [dict(r) for r in self.rules_fired]
        return out

    # ------------------------------------------------------------------ classification

    def safety_event(self) -> SafetyEvent:
        """The record's measurements as a `SafetyEvent` (what the classifier reads)."""
        values = {k: v for k, v in self.measurements.items() if k not in _FLAG_KEYS}
        kind = self.event_type if self.event_type != "other" else "contact"
        try:
            return SafetyEvent(
                kind=kind,
                stop_category=self.stop_category,
                damage_cost=self.damage_cost,
                injury_level=None if self.injury_level == "none" else self.injury_level,
                **values,
            )
        except TypeError as exc:
            raise EvalError(f"measurements: {exc}", key="measurements") from None
        except EvalError as exc:
            raise EvalError(f"measurements.{exc}", key=exc.key) from None

    def classify(self, table: ThresholdTable | None = None) -> Classification:
        """Run the classifier over this record's measurements and facts."""
        flags = {k: self.measurements.get(k, False) for k in _FLAG_KEYS}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise EvalError(f"measurements.{name}: expected true/false", key=name)
        return classify(
            self.safety_event(),
            table,
            kind=self.event_type,
            uncontrolled_hazard=flags["uncontrolled_hazard"],
            standards_breach=flags["standards_breach"],
            damage_reported=bool(self.damage_description.strip()),
        )

    def with_classification(
        self, result: Classification, *, floor: str | None = None
    ) -> IncidentRecord:
        """A copy whose provisional severity is max(classifier, reported severity, floor).

        Args:
            result: the classifier's answer for this record.
            floor: a severity the record may not go below (e.g. from an imported file).

        Raises EvalError when no rule fires and no severity was reported (then it is not an
        incident by the rules; report it with `--severity` if you judge otherwise).
        """
        candidates = [s for s in (result.severity, self.reported_severity, floor) if s is not None]
        if not candidates:
            raise EvalError(
                "severity: no classification rule fires for these measurements; give the "
                "severity you judge (--severity) or the measurements that make it an incident",
                key="severity",
            )
        return dataclasses.replace(
            self,
            provisional_severity=max(candidates, key=severity_rank),
            rules_fired=tuple(r.to_dict() for r in result.rules),
            threshold_version=result.threshold_version,
            threshold_hash=result.threshold_hash,
            injury_check_required=result.injury_check_required,
        )

    # ------------------------------------------------------------------ contract

    @property
    def top_rule(self) -> str:
        """Ids of the fired rules that gave the provisional severity, comma-separated."""
        return ",".join(
            r["rule"] for r in self.rules_fired if r["severity"] == self.provisional_severity
        )

    def to_contract(self, *, final_severity: str | None = None, reviewed: bool = False) -> Incident:
        """The data-contract `Incident`: severity = the signed final severity when reviewed,
        else the provisional one.

        Args:
            final_severity: the safety officer's signed final severity (None when unreviewed).
            reviewed: True when `final_severity` is signed and still current.
        """
        if reviewed and final_severity is None:
            raise EvalError("final_severity: a reviewed incident needs its final severity")
        severity = final_severity if reviewed and final_severity else self.provisional_severity
        if severity not in SEVERITIES:
            severity_rank(severity)
        measurements: dict[str, Any] = dict(self.measurements)
        measurements["rules_fired"] = [dict(r) for r in self.rules_fired]
        if self.injury_level != "none":
            measurements["injury_level"] = self.injury_level
        if self.damage_cost is not None:
            measurements["damage_cost"] = self.damage_cost
        return Incident(
            incident_id=self.incident_id,
            occurred_at=self.occurred_at,
            severity=severity,
            source=self.source,
            episode_id=self.episode_id,
            rule=self.top_rule or "judged (reported or reviewed; no rule at this severity)",
            measurements=measurements,
            text=self.what_happened,
            side=self.side,
            counts_toward_window=self.counts_toward_window,
            reviewed=reviewed,
            window=self.window,
        )


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(IncidentRecord))


def parse_field_text(name: str, text: str) -> Any:
    """Convert a command-line value for field `name` to the field's type (for amendments).

    `measurements.<key>` values are read as JSON when they parse (150 → 150, true → True),
    else as text; `persons` is a comma-separated list; `none` or an empty value clears an
    optional number.
    """
    text = text.strip()
    if name.startswith("measurements."):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    if name == "persons":
        return [p.strip() for p in text.split(",") if p.strip()]
    if name in ("stop_category", "damage_cost"):
        if text.lower() in ("", "none", "null"):
            return None
        try:
            number = float(text)
        except ValueError:
            raise EvalError(f"{name}: expected a number, got {text!r}", key=name) from None
        if not math.isfinite(number):
            raise EvalError(f"{name}: expected a finite number, got {text!r}", key=name)
        if name == "stop_category":
            if not number.is_integer():
                raise EvalError(f"{name}: expected 0, 1 or 2, got {text!r}", key=name)
            return int(number)
        return number
    if name == "counts_toward_window":
        lowered = text.lower()
        if lowered in ("true", "yes", "1"):
            return True
        if lowered in ("false", "no", "0"):
            return False
        raise EvalError(f"{name}: expected true or false, got {text!r}", key=name)
    return text
