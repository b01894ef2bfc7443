"""The safety summary of one window: counts, rates per 100 h, SS, MTBSI, validity, integrity.

Built only on a log that verifies (`IncidentStore.require_verified`). Exposure H excludes blind
periods (see `embodied_eval.safety_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.safety_metrics import (
    counted_incidents,
    exposure_hours,
    incident_rate_upper_bounds,
    incident_rates,
    mtbsi,
    mtbsi_lower_bound,
    safety_score_estimate,
    severity_counts,
    unreviewed_serious,
    window_validity,
)
from incident_logging.store import IncidentStore


def window_summary(
    store: IncidentStore,
    window: str,
    *,
    weights: Mapping[str, float] | None = None,
    majors_allowed: bool = False,
    level: float = 0.95,
) -> dict[str, Any]:
    """Everything the safety officer's rates section needs for `window`, as plain JSON.

    Args:
        store: an open incident log (verified here first; EvalError if it does not verify).
        window: the window id.
        weights: severity weights w_x (protocol `[incidents.weights]`; default 0.25/1/5/20).
        majors_allowed: the protocol's `majors_allowed`.
        level: confidence level of every interval.

    Returns:
        dict with exposure, counts, rates_per_100h (two-sided exact), upper_bounds_per_100h
        (one-sided, what gates use; the zero-event bound included), safety_score, mtbsi_h,
        mtbsi_lower_bound_h, validity, unreviewed_serious, threshold_tables, window_close,
        changed_after_close and integrity.
    """
    verified = store.require_verified()
    states = store.states(window)
    incidents = [s.to_contract() for s in states]
    entries = store.exposure(window)
    covered, blind = exposure_hours(entries)
    if covered <= 0:
        raise EvalError(
            f"window {window!r} has no exposure hours (blind periods excluded); record them with "
            "`incidents exposure add`",
            key="window",
        )
    counts = severity_counts(incidents)
    counted = counted_incidents(incidents)
    validity = window_validity(incidents, majors_allowed)
    close = store.window_close(window)
    changed_after = 0
    if close is not None:
        changed_after = sum(
            1
            for s in states
            for e in (*s.amendments, *s.reviews)
            if int(e["seq"]) > int(close["seq"])
        )
    tables = sorted(
        {(s.current.threshold_version, s.current.threshold_hash) for s in states} - {("", "")}
    )
    ss = safety_score_estimate(counts, covered, weights, level)
    return {
        "window": window,
        "level": level,
        "exposure": {
            "hours": covered,
            "blind_hours": blind,
            "entries": len(entries),
            "how_measured": sorted({e.how_measured for e in entries}),
            "note": "blind periods are excluded from H",
        },
        "incidents": len(incidents),
        "counted": len(counted),
        "not_counted": len(incidents) - len(counted),
        "counts": counts,
        "rates_per_100h": {
            s: e.to_json() for s, e in incident_rates(incidents, covered, level).items()
        },
        "upper_bounds_per_100h": {
            s: e.to_json() for s, e in incident_rate_upper_bounds(incidents, covered, level).items()
        },
        "safety_score": {**ss.to_json(), "weights": dict(weights) if weights else None},
        "mtbsi_h": mtbsi(counts, covered, level).to_json(),
        "mtbsi_lower_bound_h": mtbsi_lower_bound(counts, covered, level).to_json(),
        "validity": {
            "valid": validity.valid,
            "reason": validity.reason,
            "major_fail": validity.major_fail,
            "majors_allowed": majors_allowed,
        },
        "unreviewed_serious": unreviewed_serious(incidents),
        "threshold_tables": [{"version": v, "hash": h} for v, h in tables],
        "window_close": close,
        "changed_after_close": changed_after,
        "integrity": {
            "verified": verified.ok,
            "records": verified.records,
            "head_hash": verified.head_hash,
            "signatures_checked": verified.signatures_checked,
            "key_fingerprints": list(verified.key_fingerprints),
        },
    }
