"""What voids a certificate, and whether a store's later records have voided it.

A certificate holds for the robot, policy and calibration it was earned with, under its protocol,
for a limited time. Its `validity` entry states:

    expires           issue date + `[real] certificate_valid_months` (default 12) months
    protocol_hash     the protocol it was earned under (any change is a new protocol)
    versions          {component: {"version", "name", "record", "seq"}} for the robot's firmware
                      and software and the policy: the last `version` record of each in the trial
                      ledger at certification (`record_version`), or null when none was recorded
    calibration       the sim calibration file's SHA-256 (from the escrowed manifest, or null),
                      the last drift-day calibration's parameter values at certification
                      (`calibrate --by-drift` records) and the drift tolerance
                      (`[real] calibration_drift_tolerance`, relative; default 0.25)
    safety_settings   {"record", "seq", "digest"} of the robot's safety settings in force at
                      certification (`store.safety_settings`), or null when none were recorded
    void_if           the same conditions as sentences, for a reader

`void_since(cert, db)` reads the trial ledger records after the certified head: the first that
breaks a condition voids the certificate from that record on — a `version` record of a component
with another version, or a `calibration` record of the robot with a parameter more than the
tolerance (relative) from its certified value, or a `safety_settings` record of the robot with
other settings (limits, workspace, deadman, safe stop); the validity period's end voids it too.
`embodied-eval verify --db` reports "void since <record>".
"""

from __future__ import annotations

import calendar
import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.errors import EvalError
from embodied_eval.store import ledger, safety_settings
from embodied_eval.store.core import Store, transaction

#: Ledger record kind of a software/firmware version change.
KIND = "version"
#: What a version record may name.
COMPONENTS = ("robot_firmware", "robot_software", "policy")
_LABEL = {
    "robot_firmware": "robot firmware",
    "robot_software": "robot software",
    "policy": "policy",
}


def record_version(
    db: str | os.PathLike[str],
    *,
    component: str,
    version: str,
    robot_id: str,
    author: str,
    name: str = "",
    recorded_at: str | None = None,
) -> str:
    """Append a version record (a robot's firmware or software, or a policy, now at `version`)
    to the store's trial ledger; returns its record id.

    Raises:
        EvalError: an unknown component or an empty version, robot or author.
    """
    if component not in COMPONENTS:
        raise EvalError(
            f"component: {component!r} is not one of {', '.join(COMPONENTS)}", key="component"
        )
    for key, value in (("version", version), ("robot", robot_id), ("author", author)):
        if not value or not value.strip():
            raise EvalError(f"{key}: required (which version, on which robot, by whom)", key=key)
    record_id = ledger.new_record_id("VER")
    data = {
        "component": component,
        "version": version.strip(),
        "name": name.strip(),
        "robot_id": robot_id.strip(),
        "author": author.strip(),
    }
    with Store(Path(db), create=False) as store, transaction(store.conn):
        ledger.append(store.conn, KIND, record_id, data, subject=robot_id.strip(), at=recorded_at)
    return record_id


def add_months(day: dt.date, months: int) -> dt.date:
    """The same day `months` calendar months later (the month's last day when it is shorter)."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _rows(db: Path, kind: str) -> list[ledger.ChainRow]:
    with Store(db, create=False) as store:
        return ledger.rows(store.conn, "kind = ?", (kind,))


def _calibration_values(row: ledger.ChainRow) -> dict[str, float]:
    params = row.data.get("parameters") or {}
    return {
        str(k): float(v["value"])
        for k, v in params.items()
        if isinstance(v, Mapping) and isinstance(v.get("value"), (int, float))
    }


def validity_section(
    inputs: WindowInputs, issued_at: str, certified_head: int | None = None
) -> dict[str, Any]:
    """The certificate's `validity` entry (module docstring), from the window's inputs, the
    certificate's issue time (ISO-8601 UTC) and the trial ledger's record count at
    certification (default: the inputs' head; `verify --db` passes the certified one)."""
    protocol = inputs.protocol
    head = certified_head
    if head is None:
        head = int((inputs.ledger or {}).get("record_count") or 0)
    robot = protocol.robot_id
    versions: dict[str, Any] = {c: None for c in COMPONENTS}
    for row in _rows(inputs.db_path, KIND):
        if row.seq <= head and row.data.get("robot_id") == robot:
            versions[str(row.data["component"])] = {
                "version": row.data["version"],
                "name": row.data.get("name", ""),
                "record": row.record_id,
                "seq": row.seq,
            }
    cal_rows = [
        r
        for r in _rows(inputs.db_path, "calibration")
        if r.seq <= head and r.data.get("robot_id") in (robot, "")
    ]
    last = cal_rows[-1] if cal_rows else None
    sims = sorted(
        {
            str(m["manifest"]["sim_calibration_sha256"])
            for m in inputs.manifests
            if (m.get("manifest") or {}).get("sim_calibration_sha256")
        }
    )
    with Store(inputs.db_path, create=False) as store:
        settings = safety_settings.certified_entry(store.conn, robot, head)
    issued = dt.datetime.fromisoformat(issued_at.replace("Z", "+00:00")).date()
    expires = add_months(issued, protocol.certificate_valid_months)
    tolerance = protocol.calibration_drift_tolerance
    void_if = [
        f"the validity period ends ({expires.isoformat()}, "
        f"{protocol.certificate_valid_months} months after issue)",
        "the protocol changes (another protocol hash)",
        *(
            f"a later {_LABEL[c]} version record names another version than {v['version']!r}"
            if v
            else f"a later {_LABEL[c]} version record (none was recorded at certification)"
            for c, v in versions.items()
        ),
        f"a later drift-day calibration of {robot} moves a parameter more than "
        f"{tolerance:g} (relative) from its certified value",
        f"a later safety-settings record of {robot} sets other limits, workspace or deadlines "
        + (
            f"than record {settings['record']}"
            if settings
            else "(none was recorded at certification)"
        ),
    ]
    return {
        "expires": expires.isoformat(),
        "valid_months": protocol.certificate_valid_months,
        "protocol_hash": protocol.protocol_hash,
        "robot_id": robot,
        "versions": versions,
        "calibration": {
            "sim_calibration_sha256": sims[0] if len(sims) == 1 else (sims or None),
            "record": None if last is None else last.record_id,
            "seq": None if last is None else last.seq,
            "parameters": {} if last is None else _calibration_values(last),
            "drift_tolerance": tolerance,
        },
        "safety_settings": settings,
        "void_if": void_if,
    }


def _moved(certified: Mapping[str, float], now: Mapping[str, float], tol: float) -> str | None:
    for name, value in sorted(certified.items()):
        if name not in now:
            continue
        scale = abs(value) if value else 1.0
        if abs(now[name] - value) > tol * scale:
            return f"{name} {now[name]:g}, certified {value:g} (tolerance {tol:g} relative)"
    return None


def void_since(
    cert: Mapping[str, Any], db: str | os.PathLike[str], now: dt.date | None = None
) -> str | None:
    """Why the certificate no longer holds, naming the first record (or date) that voided it;
    None while it holds or when it states no validity conditions (issued before they existed).

    Args:
        cert: the verified certificate. db: the store it was computed from.
        now: today's date (default: today, UTC).
    """
    validity = cert.get("validity")
    if not isinstance(validity, Mapping):
        return None
    head = int((cert.get("ledger") or {}).get("record_count") or 0)
    robot = validity.get("robot_id")
    found: list[tuple[int, str]] = []
    versions = validity.get("versions") or {}
    for row in _rows(Path(db), KIND):
        component = str(row.data.get("component"))
        if row.seq <= head or row.data.get("robot_id") != robot or component not in versions:
            continue
        certified = versions.get(component)
        was = certified.get("version") if isinstance(certified, Mapping) else None
        if row.data.get("version") != was:
            found.append(
                (
                    row.seq,
                    f"version record {row.record_id} (ledger seq {row.seq}, {row.at}): "
                    f"{_LABEL.get(component, component)} {row.data.get('version')}, certified "
                    f"with {was if was is not None else 'none recorded'}",
                )
            )
            break
    cal = validity.get("calibration") or {}
    params = cal.get("parameters") or {}
    if params:
        for row in _rows(Path(db), "calibration"):
            if row.seq <= head or row.data.get("robot_id") not in (robot, ""):
                continue
            moved = _moved(params, _calibration_values(row), float(cal["drift_tolerance"]))
            if moved:
                found.append(
                    (
                        row.seq,
                        f"calibration record {row.record_id} (ledger seq {row.seq}, "
                        f"{row.at}): {moved}",
                    )
                )
                break
    if "safety_settings" in validity:  # certificates issued before it was stated do not say
        with Store(Path(db), create=False) as store:
            changed = safety_settings.voided_by(
                store.conn, str(robot), head, validity.get("safety_settings")
            )
        if changed is not None:
            found.append(changed)
    if found:
        return min(found)[1]
    today = now or dt.datetime.now(dt.UTC).date()
    expires = dt.date.fromisoformat(str(validity.get("expires")))
    if today > expires:
        return f"{expires.isoformat()}: the validity period ended"
    return None
