"""Import and export incidents as CSV, Parquet or JSON Lines (format by file extension).

Export writes one row per incident as it stands now (amendments applied), every record field
(lists and objects as JSON text in CSV/Parquet) plus the derived columns `severity` (final if
reviewed, else provisional), `final_severity`, `reviewed`, `record_hash` and `amendments`.

Import validates every row first and appends all of them in one transaction, or none. Rules:

* required columns: incident_id, occurred_at, source (+ reporter for manual, detector_rule_id and
  detector_version for auto); every other record field is optional. A file written in the data
  contract's columns (`embodied_eval.records.Incident`: incident_id, episode_id, occurred_at,
  severity, source, rule, measurements, text, side, counts_toward_window, reviewed, window) is
  accepted as it is: `rule` is the detector rule id, `text` the narrative (what_happened), a
  missing `event_type` is `other`, a missing reporter or detector version is recorded as
  `unrecorded`, and a missing `window` is the window of the episode the incident names (when
  that episode is stored), else none (read as the window's when no episode is stored under it);
* the derived export columns are accepted and used only as a floor: importing never lowers a
  severity. Reviews and amendments are not imported — they are signed in the store they came
  from — so imported incidents arrive unreviewed and need review here;
* each row is re-classified with this log's threshold table; provisional severity =
  max(classifier, reported_severity, the file's provisional/severity/final_severity);
* `sequence`, `recorded_at` and the classification columns are reassigned;
* a row whose incident is already stored (same id, or the same detector event) is skipped when
  its facts match, and refused when they differ (amend the stored one instead). Importing the
  same file twice adds nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from embodied_eval.canonical import atomic_write_bytes, canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.input_files import parse_json, read_user_text
from embodied_eval.interchange.tables import finite_number, read_table, whole_number, write_table
from embodied_eval.record_base import parse_utc
from embodied_eval.records import Artifact, Episode, severity_rank
from embodied_eval.store.core import UNASSIGNED_WINDOW, Store, default_db_path
from incident_logging.record import IncidentRecord
from incident_logging.store import IncidentStore
from incident_logging.thresholds import ThresholdTable, default_table
from incident_logging.workflow import IncidentState

RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(IncidentRecord))
REQUIRED_COLUMNS = ("incident_id", "occurred_at", "source")
DERIVED_COLUMNS = ("severity", "final_severity", "reviewed", "record_hash", "amendments")
EXPORT_COLUMNS = (*RECORD_FIELDS, *DERIVED_COLUMNS)
#: Data-contract column names (`embodied_eval.records.Incident`) → record fields.
CONTRACT_ALIASES = {"rule": "detector_rule_id", "text": "what_happened"}
#: What an import records for a required fact the file does not carry.
UNRECORDED = "unrecorded"

_JSON_FIELDS = {"measurements", "persons", "evidence", "rules_fired"}
_INT_FIELDS = {"sequence", "schema_version", "event_ordinal", "stop_category", "amendments"}
_FLOAT_FIELDS = {"damage_cost"}
_BOOL_FIELDS = {"counts_toward_window", "injury_check_required", "reviewed"}
_OPTIONAL_TEXT = {"episode_id", "reported_severity", "final_severity"}
#: Columns that are reassigned on import (the file's values are not kept).
_REASSIGNED = {
    "sequence",
    "recorded_at",
    "rules_fired",
    "threshold_version",
    "threshold_hash",
    "injury_check_required",
    "provisional_severity",
}
#: Fields that are facts (compared when the incident is already stored).
_FACTS = tuple(f for f in RECORD_FIELDS if f not in _REASSIGNED and f != "reported_severity")


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".parquet", ".pq"):
        return "table"
    raise EvalError(
        f"{str(path)!r}: unknown file type {suffix or '(none)'}; use .csv, .parquet or .jsonl",
        key="file",
    )


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _cell(column: str, value: Any) -> Any:
    """Convert one raw cell (CSV text, Parquet or JSON value) to the field's type."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if column in _JSON_FIELDS:
        if isinstance(value, str):
            value = parse_json(value, "JSON text")
        return value
    if column in _INT_FIELDS:
        return whole_number(value, "value", column)
    if column in _FLOAT_FIELDS:
        return finite_number(value, "value", column)
    if column in _BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "t", "y"):
            return True
        if text in ("0", "false", "no", "f", "n"):
            return False
        raise EvalError(f"expected true/false, got {value!r}", key=column)
    if not isinstance(value, str):
        raise EvalError(f"expected text, got {value!r}", key=column)
    return value


def _raw_rows(path: Path) -> list[dict[str, Any]]:
    if _format(path) == "jsonl":
        out = []
        lines = read_user_text(path, "file").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            item = parse_json(line, f"{path.name} line {number}")
            if not isinstance(item, dict):
                raise EvalError(f"line {number}: expected a JSON object", key="file")
            out.append(item)
        return out
    frame = read_table(path)
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _no_window(episode_id: str | None) -> str:
    return ""


def _record_from_row(
    raw: Mapping[str, Any],
    table: ThresholdTable,
    window_of: Callable[[str | None], str] = _no_window,
) -> IncidentRecord:
    raw = _contract_columns(raw)
    unknown = sorted(set(raw) - set(EXPORT_COLUMNS))
    if unknown:
        raise EvalError(
            f"unknown column(s) {', '.join(unknown)} (known: {', '.join(EXPORT_COLUMNS)})",
            key=unknown[0],
        )
    values: dict[str, Any] = {}
    for column, value in raw.items():
        if _missing(value):
            if column in REQUIRED_COLUMNS:
                raise EvalError(f"column {column!r}: value is missing", key=column)
            continue
        try:
            values[column] = _cell(column, value)
        except EvalError as exc:
            raise EvalError(f"column {column!r}: {exc}", key=column) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in values]
    if missing:
        raise EvalError(f"column(s) {', '.join(missing)} missing", key=missing[0])
    _fill_contract_defaults(values, window_of)
    floors: list[str] = [
        str(values[c])
        for c in ("provisional_severity", "severity", "final_severity")
        if values.get(c) is not None
    ]
    for floor in floors:
        severity_rank(floor)
    for name in (*DERIVED_COLUMNS, *_REASSIGNED):
        values.pop(name, None)
    if "evidence" in values:
        if not isinstance(values["evidence"], list):
            raise EvalError("column 'evidence': expected a JSON list", key="evidence")
        values["evidence"] = tuple(Artifact.from_dict(a) for a in values["evidence"])
    record = IncidentRecord(provisional_severity="near_miss", **values)
    lowest_allowed = max(floors, key=severity_rank) if floors else None
    return record.with_classification(record.classify(table), floor=lowest_allowed)


def _contract_columns(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Rename data-contract columns (`rule`, `text`) to record fields; a record field given too
    wins when both are present and the alias is empty."""
    out = dict(raw)
    for alias, name in CONTRACT_ALIASES.items():
        if alias not in out:
            continue
        value = out.pop(alias)
        if name in out and not _missing(out[name]):
            if not _missing(value) and value != out[name]:
                raise EvalError(
                    f"columns {alias!r} and {name!r} disagree ({value!r} vs {out[name]!r})",
                    key=alias,
                )
            continue
        out[name] = value
    return out


def _fill_contract_defaults(values: dict[str, Any], window_of: Callable[[str | None], str]) -> None:
    """Defaults for facts a data-contract file does not carry (see the module docstring)."""
    if "window" not in values:
        values["window"] = window_of(values.get("episode_id"))
    values.setdefault("event_type", "other")
    if values.get("source") == "auto":
        values.setdefault("detector_rule_id", UNRECORDED)
        values.setdefault("detector_version", UNRECORDED)
    elif values.get("source") == "manual":
        values.setdefault("reporter", UNRECORDED)


def read_incidents_file(
    file: str | os.PathLike[str],
    table: ThresholdTable | None = None,
    window_of: Callable[[str | None], str] = _no_window,
) -> list[IncidentRecord]:
    """Validate and classify every row of an incidents file (EvalError naming the row).

    Args:
        file: .csv, .parquet or .jsonl. table: the threshold table (default: the defaults).
        window_of: the window of a row without one, from its episode id (default: none).
    """
    path = Path(file)
    table = table if table is not None else default_table()
    records = []
    seen: set[str] = set()
    raw_rows = _raw_rows(path)
    if _format(path) == "table" and raw_rows:
        unknown = sorted(set(raw_rows[0]) - set(EXPORT_COLUMNS) - set(CONTRACT_ALIASES))
        if unknown:  # a table's columns are the same in every row: name the header
            raise EvalError(
                f"{path.name}: unknown column(s) {', '.join(unknown)} (known: "
                f"{', '.join(EXPORT_COLUMNS)})",
                key=unknown[0],
            )
    for number, raw in enumerate(raw_rows, start=2 if _format(path) == "table" else 1):
        where = f"row {number}" if _format(path) == "table" else f"line {number}"
        try:
            record = _record_from_row(raw, table, window_of)
        except EvalError as exc:
            raise EvalError(f"{path.name} {where}: {exc}", key=exc.key) from None
        except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as exc:
            raise EvalError(f"{path.name} {where}: unreadable value ({exc})") from None
        if record.incident_id in seen:
            raise EvalError(
                f"{path.name} {where}: incident_id {record.incident_id!r} appears twice",
                key="incident_id",
            )
        seen.add(record.incident_id)
        records.append(record)
    return records


def check_incident_episodes(
    records: list[IncidentRecord],
    episode: Callable[[str], Episode | None],
    where: str,
    *,
    episodes_stored: bool = True,
) -> None:
    """An incident that names an episode must name a stored one, on the same side, and cannot
    have occurred before that episode started.

    While the store holds no episodes at all, incidents may come first (they count once their
    episode is imported; until then the reports say how many do not).
    """
    for record in records:
        if record.episode_id is None:
            continue
        ep = episode(record.episode_id)
        prefix = f"{where}: incident {record.incident_id!r}"
        if ep is None and not episodes_stored:
            continue
        if ep is None:
            raise EvalError(
                f"{prefix} names episode {record.episode_id!r}, which is not in the store "
                "(import the episodes first)",
                key="episode_id",
            )
        if record.side != ep.side:
            raise EvalError(
                f"{prefix} is on side {record.side!r} but episode {ep.episode_id!r} is {ep.side!r}",
                key="side",
            )
        if parse_utc(record.occurred_at, key="occurred_at") < parse_utc(
            ep.started_at, key="started_at"
        ):
            raise EvalError(
                f"{prefix} occurred at {record.occurred_at}, before its episode "
                f"{ep.episode_id!r} started ({ep.started_at})",
                key="occurred_at",
            )


def _facts(record: IncidentRecord) -> dict[str, Any]:
    data = record.to_dict()
    return {k: data[k] for k in _FACTS}


def import_incidents_file(db_path: str | os.PathLike[str] | None, file: Path) -> int:
    """Import an incidents file into the log, all rows or none; returns how many are new."""
    db = Path(db_path) if db_path is not None else default_db_path()
    table = default_table()
    with Store(db) as episodes:

        def window_of(episode_id: str | None) -> str:
            episode = episodes.get_episode(episode_id) if episode_id else None
            return episode.window if episode is not None else UNASSIGNED_WINDOW

        records = read_incidents_file(file, table, window_of)
        check_incident_episodes(
            records,
            episodes.get_episode,
            Path(file).name,
            episodes_stored=bool(episodes.episode_count()),
        )
    with IncidentStore(db) as store:
        fresh = []
        for record in records:
            try:
                state = store.state(record.incident_id)
            except EvalError:
                fresh.append(record)
                continue
            if _facts(record) not in (_facts(state.original), _facts(state.current)):
                raise EvalError(
                    f"incident {record.incident_id!r} is already stored with different facts; "
                    "amend the stored incident instead of importing it again",
                    key="incident_id",
                )
        return len(store.append_incidents(fresh, table=table))


def export_row(state: IncidentState) -> dict[str, Any]:
    """One export row: the current record plus the derived columns (native types)."""
    row = state.current.to_dict()
    row["severity"] = state.severity
    row["final_severity"] = state.final_severity
    row["reviewed"] = state.reviewed
    row["record_hash"] = state.record_hash
    row["amendments"] = len(state.amendments)
    return row


def export_incidents_file(
    db_path: str | os.PathLike[str] | None, out: Path, window: str | None = None
) -> int:
    """Export incidents (one window, or all) to CSV, Parquet or JSON Lines; returns the count.

    Refused when the log does not verify. The file is written atomically.
    """
    db = Path(db_path) if db_path is not None else default_db_path()
    out = Path(out)
    fmt = _format(out)
    with IncidentStore(db, create=False, read_only=True) as store:
        store.require_verified()
        rows = [export_row(s) for s in store.states(window)]
    if fmt == "jsonl":
        text = "".join(canonical_json(r) + "\n" for r in rows)
        atomic_write_bytes(out, text.encode("utf-8"))
        return len(rows)
    flat = []
    for row in rows:
        flat.append(
            {k: (json.dumps(v, sort_keys=True) if k in _JSON_FIELDS else v) for k, v in row.items()}
        )
    write_table(pd.DataFrame(flat, columns=list(EXPORT_COLUMNS)), out)
    return len(rows)
