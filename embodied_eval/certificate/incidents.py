"""The safety officers' view of a window: incident counts and zero-event bounds, the incident
list with the rules fired and their margins, amendments, signed reviews, threshold tables, the
reliability curve (incidents against cumulative exposure) and the incident log's integrity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embodied_eval.certificate.compute import Results
from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.embodiment.safety_metrics import counted_incidents
from embodied_eval.records import Episode, ExposureEntry, Incident, parse_utc


def _hours_before(entries: Sequence[ExposureEntry], when: str) -> float:
    """Exposure hours accumulated before `when`: each non-blind period contributes its active
    hours in proportion to the part of the period already elapsed."""
    t = parse_utc(when, key="occurred_at")
    total = 0.0
    for entry in entries:
        if entry.blind:
            continue
        start, end = parse_utc(entry.start, key="start"), parse_utc(entry.end, key="end")
        span = (end - start).total_seconds()
        if t >= end:
            total += entry.active_hours
        elif t > start and span > 0:
            total += entry.active_hours * (t - start).total_seconds() / span
    return total


def reliability_points(
    incidents: Sequence[Incident], exposure: Sequence[ExposureEntry], episodes: Sequence[Episode]
) -> list[dict[str, Any]]:
    """Counted incidents in time order with the exposure hours accumulated when each occurred.

    With no exposure ledger the hours come from real episode durations (episodes started before
    the incident count whole), matching how the embodiment report measures H then.
    """
    counted = sorted(counted_incidents(incidents), key=lambda i: (i.occurred_at, i.incident_id))
    points = []
    real = [e for e in episodes if e.side == "real"]
    for incident in counted:
        if exposure:
            hours = _hours_before(exposure, incident.occurred_at)
        else:
            t = parse_utc(incident.occurred_at, key="occurred_at")
            hours = sum(
                e.duration_h for e in real if parse_utc(e.started_at, key="started_at") <= t
            )
        points.append(
            {
                "incident_id": incident.incident_id,
                "severity": incident.severity,
                "exposure_h": hours,
            }
        )
    return points


def _incident_row(incident: Incident) -> dict[str, Any]:
    measurements = dict(incident.measurements)
    rules = measurements.pop("rules_fired", [])
    return {
        "incident_id": incident.incident_id,
        "occurred_at": incident.occurred_at,
        "severity": incident.severity,
        "source": incident.source,
        "side": incident.side,
        "episode_id": incident.episode_id,
        "rule": incident.rule,
        "rules_fired": list(rules) if isinstance(rules, list) else [],
        "measurements": measurements,
        "reviewed": incident.reviewed,
        "counts_toward_window": incident.counts_toward_window,
        "text": incident.text,
    }


def _amendment_rows(amendments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for a in amendments:
        changes = a.get("changes") or []
        escalation = a.get("escalation")
        for change in changes:
            rows.append(
                {
                    "incident_id": a.get("incident_id"),
                    "field": change.get("field"),
                    "old": change.get("old"),
                    "new": change.get("new"),
                    "reason": a.get("reason"),
                    "author": a.get("author"),
                    "role": a.get("role"),
                    "at": a.get("at"),
                }
            )
        if escalation:
            rows.append(
                {
                    "incident_id": a.get("incident_id"),
                    "field": "severity (automatic escalation)",
                    "old": escalation.get("from"),
                    "new": escalation.get("to"),
                    "reason": a.get("reason"),
                    "author": a.get("author"),
                    "role": a.get("role"),
                    "at": a.get("at"),
                }
            )
    return rows


def _review_rows(reviews: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "incident_id": r.get("incident_id"),
            "decision": r.get("decision"),
            "severity": r.get("severity"),
            "reviewer": r.get("reviewer"),
            "role": r.get("role"),
            "rationale": r.get("rationale"),
            "signer": r.get("signer"),
            "at": r.get("at"),
        }
        for r in reviews
    ]


def incidents_section(inputs: WindowInputs, results: Results) -> dict[str, Any]:
    """Incident counts, the zero-event bounds, the incident list with the rules fired and their
    margins, amendments, reviews, threshold tables and the log's integrity block."""
    emb = results.embodiment
    inc = emb.get("incidents", {})
    counts = inc.get("counts", {})
    upper = inc.get("upper_bounds_per_100h", {})
    zero_bounds = {sev: est for sev, est in upper.items() if counts.get(sev, 0) == 0}
    return {
        "counts": counts,
        "counted": sum(counts.values()),
        "total": len(inputs.incidents),
        "excluded": inc.get("excluded", {}),
        "zero_event_bounds": zero_bounds,
        "unreviewed_serious": [
            i.incident_id
            for i in counted_incidents(inputs.incidents)
            if i.severity in ("major", "critical") and not i.reviewed
        ],
        "list": [
            _incident_row(i)
            for i in sorted(inputs.incidents, key=lambda i: (i.occurred_at, i.incident_id))
        ],
        "amendments": _amendment_rows(inputs.amendments),
        "reviews": _review_rows(inputs.reviews),
        "threshold_tables": [{"version": v, "hash": h} for v, h in inputs.threshold_tables],
        "reliability": reliability_points(inputs.incidents, inputs.exposure, inputs.episodes),
        "chain": dict(inputs.chain),
    }
