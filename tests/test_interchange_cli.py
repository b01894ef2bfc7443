"""CSV/Parquet interchange and the CLI frame: round trips, one-line errors with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.interchange.tables import (
    EPISODE_COLUMNS,
    episodes_from_frame,
    episodes_to_frame,
    read_table,
    write_table,
)
from embodied_eval.records import STATUSES, Fault
from embodied_eval.store.core import Store
from tests.conftest import make_episode

HEADER = ",".join(EPISODE_COLUMNS)
ROW = "e1,p1,real,pick_place,pick_place/cube_center,7,scripted,ros2,0.9,0.8,ok,12.5,0,0.4,1,2026-11-02T10:00:00Z"


def write_csv(path: Path, header: str = HEADER, rows: tuple[str, ...] = (ROW,)) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_import_then_export_parquet_round_trips(tmp_path: Path, capsys):
    db = tmp_path / "s.db"
    src = write_csv(
        tmp_path / "x.csv",
        rows=(
            ROW,
            ROW.replace("e1,p1,real", "e2,p1,sim").replace("ros2", "mujoco").replace("0.9", "0.5"),
        ),
    )
    assert main(["import", "episodes", str(src), "--db", str(db)]) == 0
    assert main(["import", "episodes", str(src), "--db", str(db)]) == 0  # harmless again
    out = tmp_path / "y.parquet"
    assert main(["export", "episodes", "--out", str(out), "--db", str(db)]) == 0
    back = episodes_from_frame(read_table(out))
    with Store(db) as store:
        assert sorted(back, key=lambda e: e.episode_id) == sorted(
            store.episodes(), key=lambda e: e.episode_id
        )
    assert {e.episode_id: e.success for e in back} == {"e1": True, "e2": False}
    # and the parquet file re-imports into a fresh store
    assert main(["import", "episodes", str(out), "--db", str(tmp_path / "t.db")]) == 0


def test_faults_import_and_export(tmp_path: Path):
    db = tmp_path / "s.db"
    main(["import", "episodes", str(write_csv(tmp_path / "x.csv")), "--db", str(db)])
    faults = tmp_path / "f.csv"
    faults.write_text(
        "episode_id,kind,recovered,repair_s\ne1,grasp_slip,true,0\ne1,actuator_stall,false,300\n"
    )
    assert main(["import", "faults", str(faults), "--db", str(db)]) == 0
    out = tmp_path / "f_out.csv"
    assert main(["export", "faults", "--out", str(out), "--db", str(db)]) == 0
    frame = pd.read_csv(out)
    assert frame["kind"].tolist() == ["grasp_slip", "actuator_stall"]
    assert frame["repair_s"].tolist() == [0.0, 300.0]
    with Store(db) as store:
        ep = store.get_episode("e1")
    assert ep is not None and ep.faults[1] == Fault("actuator_stall", False, 300.0, episode_id="e1")


@pytest.mark.parametrize(
    ("header", "row", "needle"),
    [
        (
            HEADER.replace(",quality", ""),
            ROW.replace(",0.9,0.8", ",0.8"),
            "row 2 has 16 cells but the header has 15",
        ),
        (HEADER, ROW.replace(",ok,", ",great,"), "status"),
        (HEADER, ROW.replace(",0.9,0.8,", ",1.7,0.8,"), "quality"),
        (HEADER, ROW.replace(",7,", ",seven,"), "seed"),
        (HEADER, ROW.replace(",real,", ",both,"), "side"),
        (HEADER, ROW.replace(",12.5,", ",,"), "duration_s"),
    ],
)
def test_malformed_csv_gives_exit_2_and_one_line(tmp_path: Path, header, row, needle):
    db = tmp_path / "s.db"
    bad = write_csv(tmp_path / "bad.csv", header, (ROW.replace("e1", "e0"), row))
    proc = subprocess.run(
        [sys.executable, "-m", "embodied_eval", "import", "episodes", str(bad), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr
    # nothing half-written: the good first row was not stored either
    if db.exists():
        with Store(db) as store:
            assert store.episode_ids() == set()


def test_unknown_extension_and_missing_file(tmp_path: Path, capsys):
    assert main(["import", "episodes", str(tmp_path / "x.xlsx")]) == 2
    assert "use .csv or .parquet" in capsys.readouterr().err
    assert main(["import", "episodes", str(tmp_path / "absent.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_stated_success_must_match_the_derived_one(tmp_path: Path):
    frame = episodes_to_frame([make_episode(quality=0.5)])
    frame.loc[0, "success"] = True
    with pytest.raises(EvalError, match="success is derived"):
        episodes_from_frame(frame)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    quality=st.floats(0, 1, allow_nan=False),
    status=st.sampled_from(STATUSES),
    seed=st.integers(0, 2**63 - 1),
    drift=st.dictionaries(
        st.sampled_from(["payload_kg", "friction_scale"]), st.floats(0, 5, allow_nan=False)
    ),
    ext=st.sampled_from([".csv", ".parquet"]),
)
def test_hypothesis_round_trip_through_files(tmp_path: Path, quality, status, seed, drift, ext):
    ep = make_episode(
        quality=quality, status=status, seed=seed, drift=drift, qc=0.5, energy_wh=1.25
    )
    path = tmp_path / f"eps{ext}"
    write_table(episodes_to_frame([ep]), path)
    assert episodes_from_frame(read_table(path)) == [ep]


def test_protocol_check_command(capsys):
    from embodied_eval.protocol.reader import example_protocol_path

    assert main(["protocol", "check", str(example_protocol_path()), "--json"]) == 0
    assert '"protocol_hash"' in capsys.readouterr().out
