"""Runs say when they failed: instances checked against the task catalog, `protocol tasks`, a
partly failing run exits non-zero, and a spent retry budget is named with the option that
raises it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.plugins import INCIDENT_LOG, ROBOT_BACKENDS, SIM_ENGINES
from embodied_eval.protocol.reader import example_protocol_path
from embodied_eval.store.core import Store
from tests.test_runner_support import HERE

pytestmark = pytest.mark.timeout(120)

RUNNER_TINY = str(Path(__file__).parent / "data" / "runner_tiny.toml")


def typo_protocol(tmp_path: Path) -> Path:
    """The example protocol with `pick_place/steel_near` mistyped as `pick_place/steel_nearr`."""
    text = example_protocol_path().read_text(encoding="utf-8")
    assert text.count('"pick_place/steel_near"') == 1
    path = tmp_path / "typo.toml"
    path.write_text(text.replace('"pick_place/steel_near"', '"pick_place/steel_nearr"'))
    return path


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_a_typo_in_an_instance_fails_protocol_check_naming_the_valid_ids(tmp_path: Path, capsys):
    assert main(["protocol", "check", str(typo_protocol(tmp_path))]) == 2
    err = one_error_line(capsys)
    assert "battery.pick_place.instances[4]" in err
    assert "'pick_place/steel_nearr' is not in the mujoco task catalog" in err
    assert "did you mean 'pick_place/steel_near'?" in err
    for valid in ("steel_center", "steel_left", "steel_right", "steel_far", "steel_near"):
        assert f"pick_place/{valid}" in err
    assert "protocol tasks" in err


def test_a_typo_in_an_instance_makes_run_refuse_before_anything_runs(tmp_path: Path, capsys):
    db = tmp_path / "s.db"
    argv = ["run", str(typo_protocol(tmp_path)), "--side", "sim", "--db", str(db)]
    assert main([*argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "'pick_place/steel_nearr' is not in the mujoco task catalog" in one_error_line(capsys)
    assert not db.exists()


def test_the_example_protocol_passes_the_catalog_check(capsys):
    assert main(["protocol", "check", str(example_protocol_path())]) == 0


def test_protocol_tasks_lists_families_instances_and_engines(capsys):
    assert main(["protocol", "tasks", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)["families"]
    assert [f["family"] for f in listing] == [
        "drawer_open",
        "libero",
        "metaworld",
        "mobile_pick_place",
        "peg_insert",
        "pick_place",
        "push",
        "tool_use",
    ]
    suite = next(f for f in listing if f["family"] == "metaworld")
    assert suite["engines"] == ["metaworld"] and len(suite["instances"]) == 50
    assert "metaworld/pick-place-v3" in suite["instances"]
    libero = next(f for f in listing if f["family"] == "libero")
    assert libero["engines"] == ["libero"] and len(libero["instances"]) == 290
    listing = [f for f in listing if f["family"] not in ("metaworld", "libero")]
    pick = next(f for f in listing if f["family"] == "pick_place")
    assert pick["instances"] == [
        "pick_place/cube_center",
        "pick_place/cube_left",
        "pick_place/cube_right",
        "pick_place/cube_far",
        "pick_place/cube_near",
        "pick_place/steel_center",
        "pick_place/steel_left",
        "pick_place/steel_right",
        "pick_place/steel_far",
        "pick_place/steel_near",
    ]
    assert pick["engines"] == ["mujoco", "pybullet"]
    # Five instances per family, and five harder ones (the example protocol's battery) in every
    # table family but peg_insert, whose clearances already make it hard; mobile_pick_place has
    # its six (four cubes, a steel one, and the cube delivered into a person's hand).
    assert {f["family"]: len(f["instances"]) for f in listing} == {
        "drawer_open": 10, "mobile_pick_place": 6, "peg_insert": 5, "pick_place": 10, "push": 10,
        "tool_use": 10,
    }
    assert main(["protocol", "tasks"]) == 0
    text = capsys.readouterr().out
    assert "push  (engines: mujoco, pybullet)" in text and "  push/block_diagonal" in text
    assert main(["protocol", "tasks", "--engine", "nope"]) == 2
    assert "--engine 'nope' is not a registered sim engine" in one_error_line(capsys)


def test_an_engine_without_a_catalog_is_not_checked(monkeypatch, capsys):
    """A lab's own engine (here the runner tests' fake) names its own task ids."""
    monkeypatch.setitem(SIM_ENGINES, "mujoco", f"{HERE}:fake_episode")
    monkeypatch.setitem(SIM_ENGINES, "pybullet", f"{HERE}:fake_episode")
    monkeypatch.setitem(ROBOT_BACKENDS, "fake", f"{HERE}:FakeBackend")
    assert main(["protocol", "check", RUNNER_TINY]) == 0


@pytest.fixture
def raising_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sim engines that raise on attempt 1 of push/block_2's s0 pairs (2 drifts × 2 engines =
    4 of the runner_tiny protocol's 40 sim episodes)."""
    monkeypatch.setitem(SIM_ENGINES, "mujoco", f"{HERE}:raising_episode")
    monkeypatch.setitem(SIM_ENGINES, "pybullet", f"{HERE}:raising_episode")
    monkeypatch.setitem(ROBOT_BACKENDS, "fake", f"{HERE}:FakeBackend")
    monkeypatch.setitem(INCIDENT_LOG, "ingest_safety_events", f"{HERE}:recording_ingest")


def sim_run(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "run",
        RUNNER_TINY,
        "--side",
        "sim",
        "--executor",
        "sequential",
        "--db",
        str(tmp_path / "s.db"),
        "--out",
        str(tmp_path / "out"),
        "--no-progress",
        *extra,
    ]


def test_a_partly_failing_run_exits_non_zero_naming_how_many_and_the_first_error(
    tmp_path: Path, capsys, raising_engines
):
    assert main(sim_run(tmp_path, "--max-retries", "0")) == 2
    captured = capsys.readouterr()
    assert "done: 40 episode(s) recorded in this run, 4 ended `error`" in captured.out
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "4 of the 40 episode(s) settled by this run ended `error`" in err
    assert "push/block_2" in err and "RuntimeError: gripper model exploded" in err
    with Store(tmp_path / "s.db") as store:
        assert sum(ep.status == "error" for ep in store.episodes()) == 4

    # Nothing is left to run, and the re-run says why and which option runs them again.
    assert main(sim_run(tmp_path, "--max-retries", "0")) == 2
    err = one_error_line(capsys)
    assert "4 episode(s) ended `error` and used their retries (--max-retries 0)" in err
    assert "re-run with --max-retries 1 to run each once more" in err
    assert "gripper model exploded" in err

    # Raising the budget runs exactly those four again (attempt 2 succeeds): exit 0.
    assert main(sim_run(tmp_path, "--max-retries", "1")) == 0
    assert "done: 4 episode(s) recorded in this run" in capsys.readouterr().out
    with Store(tmp_path / "s.db") as store:
        assert len(store.episodes()) == 44


def test_an_error_retried_into_a_scored_episode_is_not_a_failure(
    tmp_path: Path, capsys, raising_engines
):
    assert main(sim_run(tmp_path, "--json")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["written"] == 44 and summary["settled"] == 40 and summary["failed"] == 0


def test_progress_lines_when_stdout_is_not_a_terminal(tmp_path: Path, capsys, raising_engines):
    argv = sim_run(tmp_path, "--engine", "mujoco")
    argv.remove("--no-progress")
    assert main(argv) == 0  # attempt 1 of push/block_2's s0 pairs fails, its retry succeeds
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("progress ")]
    # One line per settled manifest row: 5 instances × 2 drifts × 2 seeds = 20 MuJoCo rows, all
    # of family push.
    assert len(lines) == 20
    assert lines[0].startswith("progress sim · mujoco 1/20 · push 1/20 · ")
    assert lines[-1].startswith("progress sim · mujoco 20/20 · push 20/20 · ")
    assert all(" ok q=" in ln for ln in lines)


def test_the_run_table_fits_80_columns_without_cutting_names():
    from rich.console import Console

    from embodied_eval.runner.progress import summary_table

    rows = [
        {"side": side, "engine": engine, "family": family, "planned": 150, "done": 150,
         "scored": 150, "successes": 120, "unscored": 10, "attempts": 1500}
        for side, engine in (("sim", "pybullet"), ("real", "ros2"))
        for family in ("drawer_open", "peg_insert")
    ]  # fmt: skip
    console = Console(width=80, record=True)
    console.print(summary_table(rows))
    text = console.export_text()
    assert "drawer_open" in text and "pybullet" in text and "…" not in text
    assert "150/150" in text and "120/150" in text and "0.800" in text and "1500" in text
    assert max(len(line) for line in text.splitlines()) <= 80
