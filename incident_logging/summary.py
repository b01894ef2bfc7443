"""The safety summary of one window: counts, rates per 100 h, SS, MTBSI, validity, integrity.

Built only on a log that verifies (`IncidentStore.require_verified`). Exposure H excludes blind
periods (see `embodied_eval.embodiment.safety_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embodied_eval.embodiment.safety_metrics import (
    counted_incidents,
    exposure_hours,
    incident_rate_upper_bounds,
    incident_rates,
    mtbsi,
    mtbsi_lower_bound,
    safety_score_estimate,
    severity_counts,
    unassigned_incident_notes,
    unreviewed_serious,
    window_validity,
)
from embodied_eval.errors import EvalError
from embodied_eval.store.core import UNASSIGNED_WINDOW, Store
from embodied_eval.store.verify_store import require_store_verified
from incident_logging.store import IncidentStore

#: `how_measured` of H when it comes from episode durations (no ledger entry).
EPISODE_DURATIONS = "episode_durations"


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

    Exposure H: the ledger's hours outside blind periods; with no ledger entry for the window,
    the summed durations of the window's real episodes in the same store. When no episode is
    stored under `window`, records stored without a window id are read as its own
    (`Store.window_scope`).

    Returns:
        dict with exposure_hours, exposure (blind hours, entries, how measured), counts,
        rates_per_100h (two-sided exact), upper_bounds_per_100h (one-sided, what gates use; the
        zero-event bound included), SS (with its weights), MTBSI_h, mtbsi_lower_bound_h, valid,
        invalid_reason, validity (reason, major_fail, majors_allowed), unreviewed_serious,
        threshold_tables, window_close, changed_after_close and integrity. Each number appears
        once, under the name `embodied-eval metrics --json` uses for it.
    """
    require_store_verified(store.path, what="the window summary is")
    verified = store.require_verified()
    with Store(store.path) as episode_store:
        scope = episode_store.window_scope(window)
        window_episodes = [e for w in scope for e in episode_store.episodes(window=w)]
    real = [e for e in window_episodes if e.side == "real"]
    states = [s for w in scope for s in store.states(w)]
    loose_notes: list[str] = []
    if UNASSIGNED_WINDOW not in scope:
        # Incidents stored without a window id belong here when they name one of its episodes.
        ids = {e.episode_id for e in window_episodes}
        loose = store.states(UNASSIGNED_WINDOW)
        tied = [s for s in loose if s.current.episode_id in ids]
        states += tied
        loose_notes = unassigned_incident_notes(len(tied), len(loose) - len(tied), window)
    incidents = [s.to_contract() for s in states]
    entries = [e for w in scope for e in store.exposure(w)]
    covered, blind = exposure_hours(entries)
    how_measured = sorted({e.how_measured for e in entries})
    if not entries:
        # No ledger: H is the summed duration of the window's real episodes, as in the
        # embodiment report (every policy, attempt and status: the robot was exposed in all).
        covered = sum(e.duration_s for e in real) / 3600.0
        how_measured = [EPISODE_DURATIONS] if real else []
    if covered <= 0:
        raise EvalError(
            f"window {window!r} has no exposure hours (blind periods excluded); record them with "
            "`incidents exposure add` or store the window's real episodes",
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
        "exposure_hours": covered,
        "exposure": {
            "blind_hours": blind,
            "entries": len(entries),
            "how_measured": how_measured,
            "note": "blind periods are excluded from H"
            if entries
            else "no exposure-ledger entries: H = summed real episode durations",
        },
        "notes": loose_notes,
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
        "SS": {**ss.to_json(), "weights": dict(weights) if weights else None},
        "MTBSI_h": mtbsi(counts, covered, level).to_json(),
        "mtbsi_lower_bound_h": mtbsi_lower_bound(counts, covered, level).to_json(),
        "valid": validity.valid,
        "invalid_reason": None if validity.valid else validity.reason,
        "validity": {
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
