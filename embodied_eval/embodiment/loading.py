"""Load a window's episodes, faults, incidents and exposure for the embodiment report.

Episodes and faults come from the store. Incidents and the exposure ledger come from the incident
log through `embodied_eval.plugins.INCIDENT_LOG` ("window_incidents", "window_exposure"),
resolved at call time; when the incident log is not installed the window has no incidents and no
ledger, and the notes say so.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_eval.embodiment.audit_sample import audit_note, audit_records
from embodied_eval.embodiment.safety_metrics import split_by_episode, unassigned_incident_notes
from embodied_eval.errors import EvalError
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.record_base import parse_utc
from embodied_eval.records import Episode, ExposureEntry, Fault, Incident
from embodied_eval.store.core import UNASSIGNED_WINDOW, Store, default_db_path
from embodied_eval.store.verify_store import require_store_verified


@dataclass(frozen=True)
class WindowData:
    """Everything `compute_embodiment` reads for one window."""

    episodes: list[Episode]
    faults: list[Fault]
    incidents: list[Incident]
    exposure: list[ExposureEntry]
    notes: list[str] = field(default_factory=list)
    #: Audits and corrections from the trial ledger applied to the episodes (`ledger.ScoredView`).
    amendments_used: list[dict[str, Any]] = field(default_factory=list)
    #: The whole-store verification the data was read after (one line).
    verification: str = ""


def _incident_log_installed() -> bool:
    module = INCIDENT_LOG["window_incidents"].partition(":")[0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package itself is absent
        return False


def load_window(
    db: str | os.PathLike[str] | None, protocol: Protocol, window: str | None = None
) -> WindowData:
    """Read one window from the store and the incident log.

    Args:
        db: the SQLite store (default: `$EMBODIED_EVAL_DB` or ./embodied-eval.db).
        protocol: the protocol the window was run under (its hash is checked).
        window: the window id (default: the protocol's).

    Returns:
        WindowData. When no episode is stored under the window, records stored without a window
        id (imported from files without a `window` column) are read as the window's, and the
        notes say so (`Store.window_scope`). Otherwise incidents stored without a window id
        count when they name one of the window's episodes; the notes say how many do not.

    Raises:
        EvalError: the store is missing or does not verify (`store_verify`: nothing is computed
            from a tampered store), the window has no episodes, or its episodes were run under
            another protocol. Episodes are read as scored: chained audits and corrections
            applied, listed in `amendments_used` and the notes.
    """
    path = Path(db) if db is not None else default_db_path()
    window_id = window if window is not None else protocol.window_id
    if not path.exists():
        raise EvalError(
            f"store {str(path)!r} does not exist (run a trial or import episodes first, or pass "
            "--db)",
            key="db",
        )
    verified = require_store_verified(path, what="metrics and certificates are")
    with Store(path, create=False) as store:
        scope = store.window_scope(window_id)
        episodes = []
        used: list[dict[str, Any]] = []
        for w in scope:
            view = store.scored_episodes(window=w)
            episodes += view.episodes
            used += view.used
        faults = [f for w in scope for f in store.faults(window=w)]
        audits = [audit_records(store.conn, w) for w in scope]
    if not episodes:
        raise EvalError(
            f"window {window_id!r}: no episodes in store {str(path)!r} (run or import trials, or "
            "pass --window)",
            key="window",
        )
    notes: list[str] = []
    if used:
        notes.append(
            f"{len(used)} chained audit(s)/correction(s) applied: "
            + ", ".join(f"{u['record_id']} ({u['episode_id']})" for u in used)
        )
    notes += [audit_note(a) for a in audits if a["draws"] or a["labels"]]
    if len(scope) > 1:
        notes.append(
            f"{len(episodes)} episode(s) stored without a window id (imported without a `window` "
            f"column) are read as window {window_id!r}"
        )
    foreign = sorted(
        {e.protocol_hash for e in episodes if e.protocol_hash} - {protocol.protocol_hash}
    )
    if foreign:
        raise EvalError(
            f"window {window_id!r}: episodes were run under protocol hash {foreign[0][:12]}…, not "
            f"{protocol.name!r} ({protocol.protocol_hash[:12]}…); pass that protocol with --protocol",
            key="protocol",
        )
    incidents: list[Incident] = []
    exposure: list[ExposureEntry] = []
    if _incident_log_installed():
        for w in scope:
            incidents += resolve(INCIDENT_LOG["window_incidents"])(path, w)
            exposure += resolve(INCIDENT_LOG["window_exposure"])(path, w)
        if UNASSIGNED_WINDOW not in scope:
            loose = resolve(INCIDENT_LOG["window_incidents"])(path, UNASSIGNED_WINDOW)
            tied, untied = split_by_episode(loose, {e.episode_id for e in episodes})
            incidents += tied
            notes += unassigned_incident_notes(len(tied), len(untied), window_id)
    else:
        notes.append("incident log not installed: no incidents counted and no exposure ledger read")
    if window_id == protocol.window_id:
        check_exposure_dates(exposure, protocol)
    return WindowData(episodes, faults, incidents, exposure, notes, used, verified.summary())


def check_exposure_dates(
    exposure: list[ExposureEntry], protocol: Protocol, *, fix: str = "amend the entry"
) -> None:
    """Every exposure period of the protocol's window lies within its dates (start to end,
    both days included); a period outside is refused naming the entry and what to do (`fix`)."""
    first = dt.datetime.combine(protocol.window_start, dt.time(), tzinfo=dt.UTC)
    after = dt.datetime.combine(protocol.window_end + dt.timedelta(days=1), dt.time(), dt.UTC)
    for entry in exposure:
        start, end = parse_utc(entry.start, key="start"), parse_utc(entry.end, key="end")
        if start < first or end > after:
            raise EvalError(
                f"exposure {entry.entry_id}: {entry.start} to {entry.end} lies outside window "
                f"{protocol.window_id!r} ({protocol.window_start.isoformat()} to "
                f"{protocol.window_end.isoformat()}); {fix}",
                key="exposure",
            )
