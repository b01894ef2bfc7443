"""Every malformed input once found on main, with its exact input: each now gets one error line
(exit 2) naming the file, row or key — no traceback, no silent acceptance, no write on refusal."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from embodied_eval.cli.main import main
from embodied_eval.embodiment.gates import evidence_check
from embodied_eval.errors import EvalError
from embodied_eval.interchange.tables import episodes_from_frame, read_table
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.scoring.gate_checks import Verdict

DATA = Path(__file__).parent / "data"
PAIRS = DATA / "embodiment_pairs_ss_pos.csv"
FAULTS = DATA / "embodiment_faults_ss_pos.csv"
PROTOCOL = DATA / "embodiment_protocol.toml"
HEADER = (
    "episode_id,pair_id,side,family,task_id,seed,policy,engine,quality,target_quality,status,"
    "duration_s,interventions,energy_wh,attempt,started_at"
)
SIM = "e1,p1,sim,pick_place,pick_place/cube_0,7,pol,mujoco,0.9,0.8,ok,12.5,0,1.0,1,2026-11-02T10:00:00Z"
REAL = "e2,p1,real,pick_place,pick_place/cube_0,7,pol,ros2,0.9,0.8,ok,12.5,0,1.0,1,2026-11-02T10:00:00Z"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(args: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The command exits 2 with exactly one line on stderr holding every needle."""
    code, _out, err = run(args, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def csv_file(path: Path, *rows: str, header: str = HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("store") / "s.db"
    assert main(["import", "episodes", str(PAIRS), "--db", str(db)]) == 0
    return db


@pytest.fixture
def store(fixture_store: Path, tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    shutil.copy(fixture_store, db)
    return db


# --------------------------------------------------------------------------- gates


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ({"value": 1.7, "low": 1.6, "high": 1.8}, "evidence.P.value: 1.7"),
        (-0.5, "evidence.P: -0.5"),
        (float("nan"), "evidence.P"),
        ({"value": 0.9, "low": 0.8, "high": 1.2}, "evidence.P.high"),
        (True, "evidence.P: expected a value"),
    ],
)
def test_gate_refuses_an_out_of_range_p(item, needle):
    with pytest.raises(EvalError, match=needle.replace(".", r"\.")):
        evidence_check("P ≥ 0.7", "P", {"P": item}, 0.7)


def test_gate_still_passes_a_valid_p():
    check = evidence_check("P ≥ 0.7", "P", {"P": {"value": 0.9, "low": 0.8, "high": 0.95}}, 0.7)
    assert check.verdict is Verdict.PASS  # lower bound 0.8 ≥ 0.7


def test_metrics_refuses_p_of_1_7(store: Path, tmp_path: Path, capsys):
    ev = tmp_path / "ev.json"
    ev.write_text('{"P": {"value": 1.7, "low": 1.6, "high": 1.8}}')
    args = ["metrics", "--db", store, "--protocol", PROTOCOL, "--evidence", ev]
    refused(args, capsys, "evidence.P.value", "1.7")


# --------------------------------------------------------------------------- exact integers


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_seed_2_53_plus_1_round_trips_exactly(tmp_path: Path, capsys, ext):
    db = tmp_path / "s.db"
    src = csv_file(tmp_path / "in.csv", SIM.replace(",7,", ",9007199254740993,"))
    assert run(["import", "episodes", src, "--db", db], capsys)[0] == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT seed FROM episodes").fetchone()[0] == 9007199254740993
    out = tmp_path / f"out{ext}"
    assert run(["export", "episodes", "--out", out, "--db", db], capsys)[0] == 0
    if ext == ".csv":
        assert ",9007199254740993," in out.read_text()
    assert episodes_from_frame(read_table(out))[0].seed == 9007199254740993
    code, stdout, _ = run(["import", "episodes", out, "--db", db], capsys)
    assert code == 0 and "0 new episodes" in stdout and "1 already stored" in stdout


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("seed", "1e30", "column 'seed': expected a whole number"),
        ("seed", str(2**64), "does not fit in 64 bits"),
        ("seed", "-1", "seed: -1 is below the minimum 0"),
        ("attempt", "1e30", "column 'attempt': expected a whole number"),
        ("attempt", str(2**64), "does not fit in 64 bits"),
        ("attempt", "0", "attempt: 0 is below the minimum 1"),
    ],
)
def test_huge_or_impossible_integers_are_one_line_errors(
    tmp_path: Path, capsys, column, value, needle
):
    row = SIM.split(",")
    row[HEADER.split(",").index(column)] = value
    src = csv_file(tmp_path / "in.csv", ",".join(row))
    refused(["import", "episodes", src, "--db", tmp_path / "s.db"], capsys, "row 2", needle)
    assert not (tmp_path / "s.db").exists()  # a refused import leaves no new store


# --------------------------------------------------------------------------- protocols


def protocol_text(**replace: str) -> str:
    text = PROTOCOL.read_text(encoding="utf-8")
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ({"confidence = 0.95": "confidence = nan"}, "protocol.confidence: nan"),
        ({"L = 0.5": "L = inf"}, "embodiment.L: inf"),
        ({"[embodiment]": "[stopping]\nbeta = nan\n\n[embodiment]"}, "stopping.beta: nan"),
        ({"[embodiment]": "[drift.unused]\nfriction_scale = nan\n\n[embodiment]"}, "drift.unused"),
        ({'"pick_place/cube_0"': '""'}, "task_id: must not be empty"),
        ({"[battery.push]": '[battery.""]'}, "battery"),
        ({"[embodiment]": "[sampling]\ndrifts = []\n\n[embodiment]"}, "sampling.drifts"),
        (
            {"[embodiment]": "[sampling]\ndrifts = [[1]]\n\n[embodiment]"},
            "sampling.drifts: expected a list of names",
        ),
        (
            {"[embodiment]": "[randomization]\nfriction_scale = [-5, -1]\n\n[embodiment]"},
            "randomization.friction_scale: low -5 is below the minimum",
        ),
        ({'id = "fixture-2026-11"': 'id = ""'}, "window.id: must not be empty"),
        ({"[embodiment]": '[real]\nbackend = "teleport"\n\n[embodiment]'}, "real.backend"),
        (
            {"[embodiment]": "[incidents.thresholds]\nbogus_limit = 3\n\n[embodiment]"},
            "incidents.thresholds.bogus_limit: unknown key",
        ),
        ({"start = 2026-11-01": "start = 0001-11-01"}, "window.start"),
        ({'"push/block_0"': '"pick_place/block_0"'}, "belongs to family 'pick_place'"),
    ],
)
def test_impossible_protocol_values_name_the_key(tmp_path: Path, capsys, edit, needle):
    path = tmp_path / "p.toml"
    path.write_text(protocol_text(**edit), encoding="utf-8")
    refused(["protocol", "check", path], capsys, needle)


def test_nan_protocol_is_refused_by_metrics_too(store: Path, tmp_path: Path, capsys):
    path = tmp_path / "p.toml"
    path.write_text(protocol_text(**{"confidence = 0.95": "confidence = nan"}))
    refused(["metrics", "--db", store, "--protocol", path], capsys, "protocol.confidence: nan")


def test_a_byte_order_mark_is_accepted(tmp_path: Path, capsys):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + PROTOCOL.read_bytes())
    assert load_protocol(path).protocol_hash == load_protocol(PROTOCOL).protocol_hash
    bom_csv = tmp_path / "bom.csv"
    bom_csv.write_bytes(b"\xef\xbb\xbf" + f"{HEADER}\n{SIM}\n".encode())
    assert run(["import", "episodes", bom_csv, "--db", tmp_path / "s.db"], capsys)[0] == 0


@pytest.mark.parametrize(
    ("target", "needle"),
    [("folder", "is a folder"), ("/dev/null", "is not a regular file"), ("latin1", "not UTF-8")],
)
def test_protocol_files_that_are_not_text_files(tmp_path: Path, capsys, target, needle):
    if target == "folder":
        path = tmp_path
    elif target == "latin1":
        path = tmp_path / "p.toml"
        path.write_bytes(protocol_text().replace("fixture", "f\xe9").encode("latin-1"))
    else:
        path = Path(target)
    refused(["protocol", "check", path], capsys, needle)


# --------------------------------------------------------------------------- re-import


def test_reimport_after_faults_and_of_own_export_is_a_no_op(store: Path, tmp_path: Path, capsys):
    assert run(["import", "faults", FAULTS, "--db", store], capsys)[0] == 0
    code, out, err = run(["import", "episodes", PAIRS, "--db", store], capsys)
    assert (code, err) == (0, "")
    assert "imported 0 new episodes" in out and "(80 already stored, nothing changed)" in out
    exported = tmp_path / "out.csv"
    assert run(["export", "episodes", "--out", exported, "--db", store], capsys)[0] == 0
    code, out, _ = run(["import", "episodes", exported, "--db", store], capsys)
    assert code == 0 and "(80 already stored, nothing changed)" in out
    changed = tmp_path / "changed.csv"
    text = exported.read_text().splitlines()
    text[5] = text[5].replace(",0.9,0.8,", ",0.95,0.8,", 1)
    assert text[5] != exported.read_text().splitlines()[5]
    changed.write_text("\n".join(text) + "\n")
    before = store.read_bytes()
    refused(
        ["import", "episodes", changed, "--db", store],
        capsys,
        "row 6",
        "already stored with a different quality (stored 0.9, given 0.95)",
    )
    assert store.read_bytes() == before


# --------------------------------------------------------------------------- foreign files


def foreign_db(path: Path) -> bytes:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE episodes (a TEXT)")
        conn.execute("INSERT INTO episodes VALUES ('lab notes')")
    return path.read_bytes()


@pytest.mark.parametrize(
    "command",
    [
        ["import", "episodes", PAIRS],
        ["metrics", "--protocol", PROTOCOL],
        ["export", "episodes", "--out", "x.csv"],
    ],
)
def test_a_foreign_sqlite_file_is_refused_and_unchanged(tmp_path: Path, capsys, command):
    other = tmp_path / "other.db"
    before = foreign_db(other)
    refused([*command, "--db", other], capsys, "not an embodied-eval store", "episodes")
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_verify_with_a_foreign_db_writes_nothing(tmp_path: Path, capsys):
    from embodied_eval.certificate.bundle import write_bundle
    from embodied_eval.store.signing_keys import create_private_key, load_private_key

    key = tmp_path / "k.pem"
    create_private_key(key)
    bundle = tmp_path / "bundle"
    files = {"protocol.toml": PROTOCOL.read_bytes()}
    write_bundle(bundle, {"format": "embodied-eval-certificate/1"}, files, load_private_key(key))
    notes = tmp_path / "notes.db"
    before = foreign_db(notes)
    refused(["verify", bundle, "--db", notes], capsys, "not an embodied-eval store")
    assert notes.read_bytes() == before


def test_a_refused_import_leaves_no_new_store(tmp_path: Path, capsys):
    bad = csv_file(tmp_path / "bad.csv", SIM.replace(",ok,", ",great,"))
    refused(["import", "episodes", bad, "--db", tmp_path / "new.db"], capsys, "status")
    refused(["import", "faults", FAULTS, "--db", tmp_path / "new2.db"], capsys, "no such episode")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


# --------------------------------------------------------------------------- crashes


def deep_json(levels: int = 100_000) -> str:
    return "[" * levels + "]" * levels


def test_deep_json_in_evidence_is_refused(tmp_path: Path, capsys):
    ev = tmp_path / "ev.json"
    ev.write_text(deep_json())
    refused(["score", ev], capsys, "nested deeper than")
    ev.write_text('{"P": ' + deep_json(200) + "}")
    refused(["score", ev], capsys, "nested deeper than")


def test_deep_json_in_a_drift_cell_is_refused(tmp_path: Path, capsys):
    header = HEADER + ",drift"
    src = csv_file(tmp_path / "d.csv", SIM + ',"' + deep_json(5000) + '"', header=header)
    refused(["import", "episodes", src, "--db", tmp_path / "s.db"], capsys, "row 2", "drift")


def test_deep_json_in_incident_files_is_refused(store: Path, tmp_path: Path, capsys):
    jsonl = tmp_path / "i.jsonl"
    jsonl.write_text(
        '{"incident_id": "i1", "occurred_at": "2026-11-03T09:10:00Z", "source": "manual", '
        '"measurements": ' + deep_json(5000) + "}\n"
    )
    refused(["import", "incidents", jsonl, "--db", store], capsys, "line 1", "nested deeper")
    table = tmp_path / "i.csv"
    table.write_text(
        "incident_id,occurred_at,source,measurements\n"
        f'i1,2026-11-03T09:10:00Z,manual,"{deep_json(5000)}"\n'
    )
    refused(["import", "incidents", table, "--db", store], capsys, "measurements")


def test_non_utf8_and_folder_evidence(store: Path, tmp_path: Path, capsys):
    ev = tmp_path / "ev.json"
    ev.write_bytes('{"P": 0.9, "note": "Zürich"}'.encode("latin-1"))
    refused(["score", ev], capsys, "not UTF-8")
    base = ["metrics", "--db", store, "--protocol", PROTOCOL]
    refused([*base, "--evidence", ev], capsys, "not UTF-8")
    refused([*base, "--evidence", tmp_path], capsys, "is a folder")
    refused([*base, "--seed", "-1"], capsys, "--seed")
    refused(["score", ev, "--seed", "-1"], capsys, "--seed")


def test_artifacts_null_is_a_row_error(tmp_path: Path, capsys):
    src = csv_file(tmp_path / "a.csv", SIM + ",null", header=HEADER + ",artifacts")
    refused(
        ["import", "episodes", src, "--db", tmp_path / "s.db"],
        capsys,
        "row 2, column 'artifacts': expected a JSON list",
    )


def test_twenty_thousand_kappa_checkpoints_are_refused(tmp_path: Path, capsys):
    ev = tmp_path / "k.json"
    cps = [{"t": i, "R": i, "C": 0.5} for i in range(20_000)]
    ev.write_text(json.dumps({"schema": "embodied-eval/evidence/1", "kappa": {"checkpoints": cps}}))
    refused(["score", ev], capsys, "kappa.checkpoints: 20000 checkpoints; at most 1000")


@pytest.fixture
def signed_bundle(tmp_path: Path) -> Path:
    from embodied_eval.certificate.bundle import write_bundle
    from embodied_eval.store.signing_keys import create_private_key, load_private_key

    key = tmp_path / "k.pem"
    create_private_key(key)
    bundle = tmp_path / "bundle"
    write_bundle(
        bundle, {"format": "embodied-eval-certificate/1"}, {"a.txt": b"a"}, load_private_key(key)
    )
    return bundle


@pytest.mark.timeout(30)
def test_a_fifo_in_a_bundle_is_refused_without_hanging(signed_bundle: Path, capsys):
    os.mkfifo(signed_bundle / "pipe")
    refused(["verify", signed_bundle], capsys, "pipe", "not a regular file")


@pytest.mark.timeout(30)
def test_a_symlink_loop_in_a_bundle_is_refused(signed_bundle: Path, capsys):
    os.symlink("loop", signed_bundle / "loop")
    refused(["verify", signed_bundle], capsys, "loop", "symbolic link")
    (signed_bundle / "loop").unlink()
    (signed_bundle / "a.txt").unlink()
    os.symlink("/etc/hostname", signed_bundle / "a.txt")
    refused(["verify", signed_bundle], capsys, "a.txt", "symbolic link")


def test_deep_json_in_a_bundle_signature_is_refused(signed_bundle: Path, capsys):
    (signed_bundle / "signature").write_text(deep_json())
    refused(["verify", signed_bundle], capsys, "signature", "nested deeper")


# --------------------------------------------------------------------------- impossible rows


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (SIM.replace("2026-11-02T10:00:00Z", "9999-11-02T10:00:00Z"), "not a plausible time"),
        (SIM.replace("2026-11-02T10:00:00Z", "0001-11-02T10:00:00Z"), "not a plausible time"),
        (SIM.replace(",1,2026", ",0,2026"), "attempt: 0 is below the minimum 1"),
        (REAL.replace(",ros2,", ",mujoco,"), "'mujoco' is a simulator"),
        (SIM.replace("pick_place,pick_place/cube_0", "push,pick_place/1"), "belongs to family"),
        (SIM.replace("e1,p1", "e\x001,p1"), "control character"),
        (SIM.replace(",12.5,", ",1e12,"), "duration_s: 1000000000000.0 is above the maximum"),
    ],
)
def test_impossible_episodes_are_refused(tmp_path: Path, capsys, row, needle):
    src = csv_file(tmp_path / "e.csv", row)
    refused(["import", "episodes", src, "--db", tmp_path / "s.db"], capsys, "row 2", needle)


def test_negative_energy_cost_is_refused(tmp_path: Path, capsys):
    src = csv_file(tmp_path / "e.csv", SIM + ',"{""energy"": -1.0}"', header=HEADER + ",cost")
    refused(["import", "episodes", src, "--db", tmp_path / "s.db"], capsys, "cost.energy")


@pytest.mark.parametrize(
    ("partner", "needle"),
    [
        (REAL.replace("cube_0", "cube_1"), "task_id"),
        (REAL.replace(",7,", ",8,"), "seed"),
        (SIM.replace("e1,", "e3,"), "second sim episode on mujoco in pair 'p1'"),
    ],
)
def test_pair_partners_must_agree(tmp_path: Path, capsys, partner, needle):
    src = csv_file(tmp_path / "e.csv", SIM, partner)
    db = tmp_path / "s.db"
    refused(["import", "episodes", src, "--db", db], capsys, needle)
    # ... also when the partner arrives in a later file
    assert (
        run(["import", "episodes", csv_file(tmp_path / "a.csv", SIM), "--db", db], capsys)[0] == 0
    )
    refused(
        ["import", "episodes", csv_file(tmp_path / "b.csv", partner), "--db", db], capsys, needle
    )


def test_a_file_cut_mid_row_is_refused(tmp_path: Path, capsys):
    src = tmp_path / "cut.csv"
    src.write_text(f"{HEADER}\n{SIM}\n{REAL[:40]}")
    refused(["import", "episodes", src, "--db", tmp_path / "s.db"], capsys, "row 3 has", "cells")


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("i1,9999-11-03T09:10:00Z,minor,real,p12-real-a1,manual", "not a plausible time"),
        ("i1,2026-11-01T09:10:00Z,minor,real,p12-real-a1,manual", "before its episode"),
        ("i1,2026-11-03T09:10:00Z,minor,real,nope-real-a1,manual", "not in the store"),
        ("i1,2026-11-03T09:10:00Z,minor,real,p12-sim-a1,manual", "episode 'p12-sim-a1' is 'sim'"),
        ("i1,2026-11-03T09:10:00Z,forty,real,p12-real-a1,manual", "forty"),
    ],
)
def test_impossible_incidents_are_refused(store: Path, tmp_path: Path, capsys, row, needle):
    src = tmp_path / "i.csv"
    src.write_text(f"incident_id,occurred_at,severity,side,episode_id,source\n{row}\n")
    before = store.read_bytes()
    refused(["import", "incidents", src, "--db", store], capsys, needle)
    assert store.read_bytes() == before


def test_a_non_number_names_its_column(store: Path, tmp_path: Path, capsys):
    src = tmp_path / "i.csv"
    src.write_text(
        "incident_id,occurred_at,source,damage_cost\ni1,2026-11-03T09:10:00Z,manual,forty\n"
    )
    refused(["import", "incidents", src, "--db", store], capsys, "damage_cost", "'forty'")


def exposure_add(store: Path, start: str, end: str, hours: str = "1") -> list:
    return [
        "incidents", "exposure", "add", "--window", "fixture-2026-11", "--start", start,
        "--end", end, "--hours", hours, "--how-measured", "robot_clock", "--db", store,
    ]  # fmt: skip


def test_exposure_outside_the_window_is_refused(store: Path, capsys):
    # Without --protocol and with no run manifest of the window, its dates are unknown: refused.
    before = store.read_bytes()
    refused(
        exposure_add(store, "2027-03-01T00:00:00Z", "2027-03-02T00:00:00Z"),
        capsys,
        "dates of window 'fixture-2026-11' are unknown",
        "give --protocol",
    )
    assert store.read_bytes() == before
    # With a run manifest of the window escrowed (2026-11-01 to 2026-11-30), its dates decide.
    from tests.test_incident_cli import escrow_window_manifest

    escrow_window_manifest(store, "fixture-2026-11", "2026-11-01", "2026-11-30")
    before = store.read_bytes()
    refused(
        exposure_add(store, "2027-03-01T00:00:00Z", "2027-03-02T00:00:00Z"),
        capsys,
        "lies outside window 'fixture-2026-11' (2026-11-01 to 2026-11-30, from its run manifest)",
    )
    # The last day is included; one second past it is not.
    refused(
        exposure_add(store, "2026-11-30T23:00:00Z", "2026-12-01T00:00:01Z"),
        capsys,
        "lies outside window",
    )
    assert store.read_bytes() == before
    code, out, err = run(
        exposure_add(store, "2026-11-30T23:00:00Z", "2026-12-01T00:00:00Z"), capsys
    )
    assert code == 0 and "1 h in fixture-2026-11" in out, err


def test_autonomous_recovery_longer_than_a_shortened_episode_is_refused(
    store: Path, tmp_path: Path, capsys
):
    # p01-real-a1 lasts 1800 s, p01-sim-a1 60 s (tests/data/embodiment_pairs_ss_pos.csv).
    slow = tmp_path / "slow.csv"
    slow.write_text("episode_id,kind,recovered,repair_s\np01-sim-a1,grasp_slip,true,900\n")
    before = store.read_bytes()
    refused(["import", "faults", slow, "--db", store], capsys, "900 s", "episode (60 s)")
    assert store.read_bytes() == before
    # A correction shortening p02-real-a1 to 600 s: a 900 s autonomous recovery imported after
    # it lies outside the episode as scored.
    amend = ["store", "amend", "p02-real-a1", "--set", "duration_s=600", "--reason", "clock"]
    assert run([*amend, "--author", "amy", "--db", store], capsys)[0] == 0
    later = tmp_path / "later.csv"
    later.write_text("episode_id,kind,recovered,repair_s\np02-real-a1,grasp_slip,true,900\n")
    before = store.read_bytes()
    refused(["import", "faults", later, "--db", store], capsys, "900 s", "episode (600 s)")
    assert store.read_bytes() == before
    # And the other way round: a correction may not shorten an episode below a recovery in it.
    fits = tmp_path / "fits.csv"
    fits.write_text("episode_id,kind,recovered,repair_s\np01-real-a1,grasp_slip,true,900\n")
    assert run(["import", "faults", fits, "--db", store], capsys)[0] == 0
    before = store.read_bytes()
    refused(
        ["store", "amend", "p01-real-a1", "--set", "duration_s=600", "--reason", "clock",
         "--author", "amy", "--db", store],
        capsys,
        "900 s",
        "episode (600 s)",
    )  # fmt: skip
    assert store.read_bytes() == before


def test_a_huge_integer_in_evidence_is_refused(tmp_path: Path, capsys):
    # 5001 digits: over Python's 4300-digit limit for converting an integer's text.
    ev = tmp_path / "ev.json"
    ev.write_text('{"P": 1' + "0" * 5000 + "}")
    refused(["score", ev], capsys, "ev.json", "integer with more than 4300 digits")


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["import"], "Missing argument 'kind'"),
        (["import", "episodes", "x.csv", "--bogus"], "No such option: --bogus"),
        (["import", "things", "x.csv"], "'things'"),
        (["plan", "success", "--threshold", "0.9", "--trials", str(10**23)], "--trials"),
    ],
)
def test_usage_errors_are_one_line(capsys, args, needle):
    line = refused(args, capsys, needle)
    assert "╭" not in line and "│" not in line


def test_import_of_a_folder_or_dev_null_says_what_it_is(tmp_path: Path, capsys):
    folder = tmp_path / "dir.csv"
    folder.mkdir()
    refused(["import", "episodes", folder, "--db", tmp_path / "s.db"], capsys, "is a folder")
    dev = tmp_path / "null.csv"
    dev.symlink_to("/dev/null")
    refused(["import", "episodes", dev, "--db", tmp_path / "s.db"], capsys, "not a regular file")


def test_an_unexpected_exception_is_logged_not_shown(tmp_path: Path, capsys, monkeypatch):
    import embodied_eval.cli.data as data_cli

    def boom(*_args, **_kwargs):
        raise ZeroDivisionError("deliberate")

    monkeypatch.setenv("EMBODIED_EVAL_CRASH_DIR", str(tmp_path))
    monkeypatch.setattr(data_cli, "load_protocol", boom)
    code, _, err = run(["protocol", "check", PROTOCOL], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    logs = list(tmp_path.glob("embodied-eval-crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in err
    assert "ZeroDivisionError: deliberate" in logs[0].read_text()


def test_parquet_with_a_wrong_type_names_the_column(tmp_path: Path, capsys):
    frame = pd.read_csv(PAIRS, dtype=str).head(2)
    frame["seed"] = [1.5, 2.0]
    path = tmp_path / "e.parquet"
    frame.to_parquet(path)
    refused(["import", "episodes", path, "--db", tmp_path / "s.db"], capsys, "column 'seed'")
