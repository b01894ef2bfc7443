"""`embodied-eval run`: options, dry run, JSON summary, one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.plugins import INCIDENT_LOG, ROBOT_BACKENDS, SIM_ENGINES
from embodied_eval.store.core import Store
from tests.test_runner_support import HERE

pytestmark = pytest.mark.timeout(120)

PROTOCOL = str(Path(__file__).parent / "data" / "runner_tiny.toml")


@pytest.fixture(autouse=True)
def fake_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SIM_ENGINES, "mujoco", f"{HERE}:fake_episode")
    monkeypatch.setitem(SIM_ENGINES, "pybullet", f"{HERE}:fake_episode")
    monkeypatch.setitem(ROBOT_BACKENDS, "fake", f"{HERE}:FakeBackend")
    monkeypatch.setitem(INCIDENT_LOG, "ingest_safety_events", f"{HERE}:recording_ingest")


def args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "run",
        PROTOCOL,
        "--db",
        str(tmp_path / "s.db"),
        "--out",
        str(tmp_path / "out"),
        "--no-progress",
        *extra,
    ]


def test_dry_run_escrows_the_manifest_and_runs_nothing(tmp_path: Path, capsys):
    assert main(args(tmp_path, "--dry-run")) == 0
    assert "dry run" in capsys.readouterr().out
    [manifest] = (tmp_path / "out").glob("manifest-*.json")
    assert len(json.loads(manifest.read_text())["episodes"]) == 48
    with Store(tmp_path / "s.db") as store:
        assert store.episodes() == [] and len(store.manifests()) == 1


def test_sim_side_with_json_summary(tmp_path: Path, capsys):
    rc = main(
        args(
            tmp_path, "--side", "sim", "--engine", "pybullet", "--executor", "sequential", "--json"
        )
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert [(r["side"], r["engine"], r["planned"], r["done"]) for r in summary["rows"]] == [
        ("sim", "pybullet", 20, 20)
    ]
    assert summary["sim_engines"] == ["pybullet"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--engine", "bogus"), "--engine 'bogus' is not a registered sim engine"),
        (("--gym-id", "NoSuchEnv-v0"), "--gym-id 'NoSuchEnv-v0' is not a registered Gymnasium"),
        (("--quality", "m:f"), "--quality needs --gym-id"),
        (("--robot-option", "p"), "expected KEY=VALUE"),
        (("--max-retries", "-1"), "--max-retries: must be 0 or more"),
        (("--policy", "no_such_module:make"), "'no_such_module:make': module 'no_such_module'"),
        (("--robot-backend", "nope"), "robot backend 'nope' is not registered"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(tmp_path: Path, capsys, extra, message):
    assert main(args(tmp_path, "--executor", "sequential", *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_a_robot_that_cannot_connect_exits_2_after_the_sim_side(tmp_path: Path, capsys):
    rc = main(args(tmp_path, "--executor", "sequential", "--robot-option", "fail_connect=true"))
    assert rc == 2
    captured = capsys.readouterr()
    assert "the real side could not run" in captured.err and "did not answer" in captured.err
    assert "paired trials" in captured.out  # the summary table was printed first
    with Store(tmp_path / "s.db") as store:
        assert len(store.episodes(side="sim")) == 40
