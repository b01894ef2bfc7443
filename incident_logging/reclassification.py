"""Which stored incidents the current classifier rules would classify differently.

A stored incident keeps the severity it was given: the log is append-only, and changing the
rules never rewrites history. When the rules change (`CLASSIFIER_VERSION`), `incidents verify`
lists every incident whose measurements the current rules would classify differently from the
rules stored with it, so a reviewer can amend or review it. Each incident is re-classified with
the threshold table that classified it (stored in the log).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import severity_rank
from incident_logging.classifier import CLASSIFIER_VERSION
from incident_logging.log_core import IncidentLogCore
from incident_logging.thresholds import ThresholdTable, default_table
from incident_logging.workflow import IncidentState


@dataclass(frozen=True)
class Reclassification:
    """One incident the current rules would classify differently.

    Attributes:
        incident_id: the incident. seq: its position in the chain.
        severity: the severity it holds now (kept).
        stored: the severity its stored rules gave (None: no rule fired).
        stored_rules: ids of the stored rules at that severity.
        now: the severity the current rules give (None: no rule fires, or refused).
        now_rules: ids of the current rules at that severity.
        refused: why the current rules refuse its measurements ("" when they do not).
    """

    incident_id: str
    seq: int
    severity: str
    stored: str | None
    stored_rules: tuple[str, ...]
    now: str | None
    now_rules: tuple[str, ...]
    refused: str = ""

    def note(self) -> str:
        """One line: what it holds and what the current rules would give."""
        was = f"{self.stored or 'no rule'} ({', '.join(self.stored_rules) or '—'})"
        if self.refused:
            then = f"refuse its measurements ({self.refused})"
        else:
            then = f"give {self.now or 'no rule'} ({', '.join(self.now_rules) or '—'})"
        raised = (
            " — above the severity it holds"
            if self.now is not None and severity_rank(self.now) > severity_rank(self.severity)
            else ""
        )
        return (
            f"{self.incident_id} (seq {self.seq}) keeps {self.severity}: classified {was}; the "
            f"current rules ({CLASSIFIER_VERSION}) would {then}{raised}; amend or review it"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "incident_id": self.incident_id,
            "seq": self.seq,
            "severity": self.severity,
            "stored": self.stored,
            "stored_rules": list(self.stored_rules),
            "now": self.now,
            "now_rules": list(self.now_rules),
            "refused": self.refused,
            "note": self.note(),
        }


def _top(rules: Iterable[Mapping[str, Any]]) -> tuple[str | None, tuple[str, ...]]:
    listed = list(rules)
    if not listed:
        return None, ()
    top = max((r["severity"] for r in listed), key=severity_rank)
    return top, tuple(r["rule"] for r in listed if r["severity"] == top)


def reclassifications(log: IncidentLogCore) -> list[Reclassification]:
    """Every incident whose current rules' severity differs from its stored rules' (chain
    order). The log must verify first (the caller's job)."""
    tables: dict[str, ThresholdTable] = {}
    out: list[Reclassification] = []
    for state in log.states():
        out.extend(_differs(log, state, tables))
    return out


def _differs(
    log: IncidentLogCore, state: IncidentState, tables: dict[str, ThresholdTable]
) -> list[Reclassification]:
    rec = state.current
    digest = rec.threshold_hash
    if digest and digest not in tables:
        tables[digest] = log.threshold_table(digest)
    table = tables[digest] if digest else default_table()
    stored, stored_rules = _top(rec.rules_fired)
    now: str | None = None
    now_rules: tuple[str, ...] = ()
    refused = ""
    try:
        result = rec.classify(table)
    except EvalError as exc:
        refused = str(exc)
    else:
        now, now_rules = _top(r.to_dict() for r in result.rules)
        if now == stored:
            return []
    return [
        Reclassification(
            rec.incident_id,
            state.original.sequence,
            state.severity,
            stored,
            stored_rules,
            now,
            now_rules,
            refused,
        )
    ]
