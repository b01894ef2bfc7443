"""Import/export of incidents: round trips, idempotence, never lowering a severity, fuzzing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embodied_eval.errors import EvalError
from embodied_eval.plugins import INCIDENT_LOG, resolve
from incident_logging.chain import TABLE
from incident_logging.interchange import export_incidents_file, import_incidents_file
from incident_logging.store import IncidentStore
from tests.test_incident_store import Team, make_record

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A log with a minor contact, a reviewed-down near-miss and an escalated major."""
    team = Team(tmp_path / "src.db")
    team.store.report(make_record("INC-A"))
    team.store.report(
        make_record(
            "INC-B",
            event_type="separation",
            measurements={"separation_m": 0.4, "protective_separation_m": 0.5},
        )
    )
    team.store.report(make_record("INC-C"))
    team.review("sam", "INC-C", "near_miss", decision="final", why="sensor spike")
    team.store.amend(
        "INC-A", {"injury_level": "days_away"}, reason="lost time", author="tom", role="technician"
    )
    team.store.close()
    return tmp_path / "src.db"


def count_rows(db: Path) -> int:
    with IncidentStore(db) as store:
        return store.head()[0]


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_export_import_round_trip(source: Path, tmp_path: Path, suffix: str):
    out = tmp_path / f"incidents{suffix}"
    assert export_incidents_file(source, out, "w1") == 3
    target = tmp_path / "dst.db"
    assert import_incidents_file(target, out) == 3
    assert import_incidents_file(target, out) == 0  # importing twice adds nothing
    with IncidentStore(target) as store:
        states = {s.incident_id: s for s in store.states("w1")}
        assert store.verify().ok
    # The amendment travelled as the current facts; the escalation with it.
    assert states["INC-A"].current.injury_level == "days_away"
    assert states["INC-A"].severity == "major"
    assert states["INC-B"].current.measurements["separation_m"] == 0.4
    # Reviews are not imported: INC-C arrives unreviewed and never below its source severity
    # floor (provisional minor there), so the downgrade must be signed again here.
    assert not states["INC-C"].reviewed and states["INC-C"].severity == "minor"


def test_export_refuses_an_unverified_log(source: Path, tmp_path: Path):
    import sqlite3

    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("DROP TRIGGER incident_chain_no_update")
    conn.execute(f"UPDATE {TABLE} SET body = replace(body, 'alice', 'bob') WHERE seq = 9")
    conn.close()
    with pytest.raises(EvalError, match="does not verify"):
        export_incidents_file(source, tmp_path / "x.jsonl", None)


def test_changed_facts_under_a_stored_id_are_refused(source: Path, tmp_path: Path):
    out = tmp_path / "x.jsonl"
    export_incidents_file(source, out, None)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows[0]["what_happened"] = "something else"
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    before = count_rows(source)
    with pytest.raises(EvalError, match="already stored with different facts"):
        import_incidents_file(source, out)
    assert count_rows(source) == before


def test_one_bad_row_writes_nothing(tmp_path: Path):
    good = {
        "incident_id": "X-1",
        "window": "w",
        "occurred_at": "2026-11-02T10:00:00Z",
        "event_type": "protective_stop",
        "source": "manual",
        "reporter": "amy",
    }
    bad = dict(good, incident_id="X-2", stop_category="7")  # IEC 60204-1 has 0, 1, 2
    frame = pd.DataFrame([good, dict(good, incident_id="X-3"), bad])
    path = tmp_path / "in.csv"
    frame.to_csv(path, index=False)
    db = tmp_path / "d.db"
    with pytest.raises(EvalError, match=r"in\.csv row 4: stop_category: expected 0, 1 or 2"):
        import_incidents_file(db, path)
    assert count_rows(db) == 0
    pd.DataFrame([dict(good, body_region="chest")]).to_csv(path, index=False)
    with pytest.raises(EvalError, match=r"in\.csv: unknown column\(s\) body_region"):
        import_incidents_file(db, path)
    frame.iloc[:2].to_csv(path, index=False)
    assert resolve(INCIDENT_LOG["import"])(db, path) == 2  # the plugin entry point


def test_no_rule_and_no_severity_is_not_an_incident(tmp_path: Path):
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps(
            {
                "incident_id": "X-1",
                "window": "w",
                "occurred_at": "2026-11-02T10:00:00Z",
                "event_type": "other",
                "source": "manual",
                "reporter": "amy",
            }
        )
        + "\n"
    )
    with pytest.raises(EvalError, match="line 1: severity: no classification rule fires"):
        import_incidents_file(tmp_path / "d.db", path)


# --------------------------------------------------------------------------- fuzzing

COLUMNS = (
    "incident_id",
    "window",
    "occurred_at",
    "event_type",
    "source",
    "reporter",
    "provisional_severity",
    "severity",
    "measurements",
    "persons",
    "damage_cost",
    "stop_category",
    "counts_toward_window",
    "side",
    "injury_level",
    "evidence",
    "detected_at",
    "bogus",
)
PLAUSIBLE = {
    "incident_id": st.sampled_from(["I-1", "I-2", "", " "]),
    "window": st.sampled_from(["w", ""]),
    "occurred_at": st.sampled_from(["2026-11-02T10:00:00Z", "2026-13-02", "yesterday", ""]),
    "event_type": st.sampled_from(["contact", "protective_stop", "other", "explosion"]),
    "source": st.sampled_from(["manual", "auto", "robot"]),
    "reporter": st.sampled_from(["amy", ""]),
    "provisional_severity": st.sampled_from(["minor", "major", "huge", ""]),
    "severity": st.sampled_from(["critical", "near_miss", "x"]),
    "measurements": st.sampled_from(
        [
            '{"contact_force_n": 150, "body_region": "chest"}',
            '{"contact_force_n": -5, "body_region": "chest"}',
            '{"body_region": "elbow", "contact_force_n": 1}',
            '{"colour": "red"}',
            "[1, 2]",
            "{not json",
            '{"contact_force_n": 1e999, "body_region": "face"}',
        ]
    ),
    "persons": st.sampled_from(['["P-1"]', '"P-1"', "[1]", "[]"]),
    "damage_cost": st.sampled_from(["10", "-1", "nan", "inf", "abc", "1e400"]),
    "stop_category": st.sampled_from(["0", "1.5", "7", "x"]),
    "counts_toward_window": st.sampled_from(["true", "false", "maybe"]),
    "side": st.sampled_from(["real", "sim", "moon"]),
    "injury_level": st.sampled_from(["none", "first_aid", "death", "bruise"]),
    "evidence": st.sampled_from(
        ['[{"path": "v.mp4", "sha256": "' + "a" * 64 + '"}]', '[{"path": 1}]', "{}"]
    ),
    "detected_at": st.sampled_from(["2026-11-02T09:00:00Z", "2026-11-02T11:00:00Z"]),
    "bogus": st.just("1"),
}


#: Values of the wrong JSON type for any column (JSON Lines carries them as they are).
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(
        st.sampled_from(["path", "sha256", "contact_force_n"]), st.integers(), max_size=2
    ),
)


@st.composite
def incident_rows(draw):
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        cols = draw(st.sets(st.sampled_from(COLUMNS), min_size=3, max_size=len(COLUMNS)))
        row = {}
        for col in cols:
            row[col] = draw(st.one_of(PLAUSIBLE[col], st.text(max_size=12), JSON_VALUES))
        rows.append(row)
    return rows


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(rows=incident_rows(), fmt=st.sampled_from([".csv", ".jsonl"]))
def test_fuzzed_import_files_give_clear_errors_and_write_nothing_on_failure(rows, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        path = tmp_path / f"in{fmt}"
        if fmt == ".csv":
            pd.DataFrame(rows).to_csv(path, index=False)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        db = tmp_path / "d.db"
        with IncidentStore(db) as store:
            before = store.head()
        try:
            added = import_incidents_file(db, path)
        except EvalError as exc:
            assert str(exc) and "\n" not in str(exc)
            with IncidentStore(db) as store:
                assert store.head() == before  # nothing half-written
        else:
            with IncidentStore(db) as store:
                assert store.head()[0] >= before[0] + added
                assert store.verify().ok
