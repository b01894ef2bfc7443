"""The drift calendar as measured numbers: each drift day's calibration beside the maintenance
closure's index.

`embodied-eval calibrate --by-drift` fits each drift setting's real episodes separately and, with
a store, records every day's result as a `calibration` record of the store's trial ledger (chained
like every episode, so `store verify` notices an edit): the drift and its day, the calibration
file's `content_sha256` and each parameter's estimate, 95 % interval and identifiability. The
maintenance closure (`embodied_eval.certificate.closures`) lists them by calendar day: the
certificate and its report from the store's records only (so `verify --db` recomputes them), and
`embodied-eval metrics --calibration FILE` also from calibration files passed in (a file fitted
with `--by-drift`; it replaces the store's record of its drift).

Per day the report shows the drift kinds a maintenance audit is about: the payload (kg), the
friction multiplier and the actuator delay (s), each with its interval (`DRIFT_PARAMETERS`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.store import ledger

#: The parameters shown per drift day, in this order.
DRIFT_PARAMETERS = ("payload", "friction", "actuator_delay")
#: The ledger record kind.
KIND = "calibration"


def _parameters(content: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    params = content.get("parameters") or {}
    out = {}
    for name, entry in params.items():
        if not isinstance(entry, Mapping):
            continue
        out[str(name)] = {
            k: entry[k] for k in ("value", "low", "high", "unit", "identified") if k in entry
        }
    return out


def day_record(content: Mapping[str, Any], digest: str) -> dict[str, Any]:
    """What the ledger keeps of one drift day's calibration file `content` (hash `digest`).

    Raises:
        EvalError: the content has no drift table (it was not fitted with --by-drift).
    """
    drift = content.get("drift")
    if not isinstance(drift, Mapping) or not drift.get("name"):
        raise EvalError(
            "calibration: this file names no drift day; calibrate with --by-drift to measure "
            "each drift day"
        )
    return {
        "drift": str(drift["name"]),
        "day": drift.get("day"),
        "content_sha256": digest,
        "robot_id": str(content.get("robot_id", "")),
        "window": str(content.get("window", "")),
        "parameters": _parameters(content),
    }


def record_day_calibration(
    conn: sqlite3.Connection, window: str, content: Mapping[str, Any], digest: str
) -> dict[str, Any]:
    """Append one drift day's calibration to the trial ledger (the caller holds the write
    transaction); returns the record's data."""
    data = day_record(content, digest)
    ledger.append(
        conn, KIND, ledger.new_record_id("CAL"), data, window=window, subject=data["drift"]
    )
    return data


def stored_day_calibrations(conn: sqlite3.Connection, window: str) -> list[dict[str, Any]]:
    """The window's recorded drift-day calibrations, in chain order, each with `source` "store"
    and its ledger `seq`."""
    rows = ledger.rows(conn, "kind = ?", (KIND,))
    return [{**dict(r.data), "source": "store", "seq": r.seq} for r in rows if r.window == window]


def window_day_calibrations(db: str | os.PathLike[str], window: str) -> list[dict[str, Any]]:
    """`stored_day_calibrations` of the store at `db`."""
    from embodied_eval.store.core import Store

    with Store(Path(db), create=False) as store:
        return stored_day_calibrations(store.conn, window)


def file_day_calibrations(
    paths: Sequence[str | os.PathLike[str]], robot_id: str
) -> list[dict[str, Any]]:
    """Drift-day calibrations from calibration files (verified: hash and robot), each with
    `source` "file" and its path.

    Raises:
        EvalError: an edited file, one of another robot, or one without a drift day.
    """
    from embodied_eval.protocol.calibration_file import read_calibration

    out = []
    for path in paths:
        cal = read_calibration(Path(path), robot_id=robot_id)
        try:
            data = day_record(cal.data, cal.sha256)
        except EvalError as exc:
            raise EvalError(f"--calibration {path}: {exc}", key="calibration") from None
        out.append({**data, "source": "file", "path": str(Path(path))})
    return out


def calibration_by_day(
    calendar: Sequence[tuple[str, int]], records: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One row per calendar day (`calendar`: (drift name, day)) that has a calibration: the last
    record of its drift in `records` (store records first, then files, so a file passed in
    replaces the store's), with the `DRIFT_PARAMETERS` rounded for the report."""
    latest: dict[str, Mapping[str, Any]] = {}
    for rec in records:
        latest[str(rec.get("drift"))] = rec
    rows = []
    for drift, day in calendar:
        found = latest.get(drift)
        if found is None:
            continue
        params = found.get("parameters") or {}
        rows.append(
            {
                "day": day,
                "drift": drift,
                "source": found.get("source"),
                "content_sha256": found.get("content_sha256"),
                "parameters": {n: dict(params[n]) for n in DRIFT_PARAMETERS if n in params},
            }
        )
    return rows
