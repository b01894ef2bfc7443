"""A store travels: a lab copies the store's folder (the store file with the run's output beside
it) to a certification team, who verify it and compute from another folder and working directory.

Artifact paths are recorded relative to the store's folder; stores written before that (paths
relative to the run's working directory) are still read, moved or not.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import embodied_eval.store.core as store_module
from embodied_eval.cli.main import main
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.artifacts import artifact_file, stored_artifact_path
from embodied_eval.store.core import Store
from embodied_eval.store.verify_store import verify_store

pytestmark = pytest.mark.timeout(240)

PROTOCOL = """
[protocol]
name = "travels"
version = "1"
base_seed = 8

[window]
id = "w-travels"
start = "2026-11-01"
end = "2026-11-30"

[battery.push]
target_quality = 0.8
instances = ["push/block_forward", "push/block_left", "push/block_right", "push/block_long",
             "push/block_diagonal"]

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 1
real_fraction = 0.0

[sim]
engines = ["mujoco"]
max_steps = 30
"""


def _run_in(lab: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the recorded sim side from `cwd` with the store and output given relative to it."""
    lab.mkdir(parents=True)
    (lab / "protocol.toml").write_text(PROTOCOL)
    monkeypatch.chdir(cwd)
    rel = lab.relative_to(cwd)
    run_trials(
        load_protocol(rel / "protocol.toml"),
        RunOptions(sides=("sim",), executor="sequential", record=True),
        db_path=rel / "store.db",
        out_dir=rel / "run",
        show_progress=False,
    )


def _hand_over(lab: Path, to: Path, monkeypatch: pytest.MonkeyPatch, cwd: Path) -> Path:
    shutil.copytree(lab, to)
    shutil.rmtree(lab)  # nothing left where the run was made
    cwd.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(cwd)
    return to / "store.db"


def _metrics(db: Path, protocol: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    code = main(["metrics", "--db", str(db), "--protocol", str(protocol), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_a_copied_store_verifies_and_computes_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_in(tmp_path / "lab" / "out", tmp_path / "lab", monkeypatch)
    db = tmp_path / "lab" / "out" / "store.db"
    with Store(db, create=False) as store:
        episodes = store.episodes()
    paths = [a.path for e in episodes for a in e.artifacts]
    assert paths and all(p.startswith("run/artifacts/") for p in paths)  # relative to the store
    before = _metrics(db, tmp_path / "lab" / "out" / "protocol.toml", capsys)

    moved = _hand_over(tmp_path / "lab" / "out", tmp_path / "team" / "w-travels",
                       monkeypatch, tmp_path / "desk")  # fmt: skip
    report = verify_store(moved)
    assert report.ok, report.summary()
    assert report.counts["artifacts"] == len(paths)  # every file found and re-hashed
    after = _metrics(moved, moved.parent / "protocol.toml", capsys)
    assert after == before
    out = tmp_path / "desk" / "dataset"
    assert main(["export", "lerobot", "--db", str(moved), "--out", str(out)]) == 0
    assert "exported 5 episode(s)" in capsys.readouterr().out


def test_a_store_written_with_working_folder_paths_is_still_read_moved_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store as written before: artifact paths relative to the run's working folder.
    monkeypatch.setattr(store_module, "stored_artifact_path", lambda path, _s: os.path.relpath(path))
    _run_in(tmp_path / "lab" / "out", tmp_path / "lab", monkeypatch)
    db = tmp_path / "lab" / "out" / "store.db"
    with Store(db, create=False) as store:
        paths = [a.path for e in store.episodes() for a in e.artifacts]
    assert paths and all(p.startswith("out/run/artifacts/") for p in paths)
    assert verify_store(db).ok  # not moved, from the working folder it was written in

    moved = _hand_over(tmp_path / "lab" / "out", tmp_path / "team" / "copy",
                       monkeypatch, tmp_path / "desk")  # fmt: skip
    report = verify_store(moved)
    assert report.ok, report.summary()
    assert report.counts["artifacts"] == len(paths)


def test_a_changed_artifact_in_a_copied_store_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_in(tmp_path / "lab" / "out", tmp_path / "lab", monkeypatch)
    moved = _hand_over(tmp_path / "lab" / "out", tmp_path / "team" / "copy",
                       monkeypatch, tmp_path / "desk")  # fmt: skip
    with Store(moved, create=False) as store:
        art = store.episodes()[0].artifacts[0]
    found = artifact_file(art.path, moved)
    assert found == moved.parent / art.path
    found.write_bytes(found.read_bytes() + b"\0")
    report = verify_store(moved)
    assert not report.ok and "changed" in report.summary()


def test_recorded_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s" / "run").mkdir(parents=True)
    (tmp_path / "s" / "run" / "a.mcap").write_bytes(b"x")
    (tmp_path / "elsewhere.mcap").write_bytes(b"y")
    store = tmp_path / "s" / "store.db"
    assert stored_artifact_path("s/run/a.mcap", store) == "run/a.mcap"
    assert stored_artifact_path(str(tmp_path / "s/run/a.mcap"), "s/store.db") == "run/a.mcap"
    # Outside the store's folder: absolute (it cannot travel with the folder).
    assert stored_artifact_path("elsewhere.mcap", store) == str(tmp_path / "elsewhere.mcap")
    # Not on this disk (an imported record): kept as given.
    assert stored_artifact_path("gone/b.mcap", store) == "gone/b.mcap"
    assert artifact_file("run/a.mcap", store) == tmp_path / "s" / "run" / "a.mcap"
    assert artifact_file("nowhere.mcap", store) is None
