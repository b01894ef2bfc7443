"""`embodied-eval run`: options, dry run, JSON summary, one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import all_commands, main
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


def test_every_command_takes_the_protocol_as_the_protocol_option(tmp_path: Path, capsys):
    """One shape: `--protocol P` for run, protocol check, compare, metrics, certify, calibrate,
    plan and the incident commands; `run P` (the earlier form) still works and plans the same
    manifest."""
    assert main(args(tmp_path / "a", "--dry-run")) == 0
    as_option = args(tmp_path / "b", "--dry-run")
    as_option[1:2] = ["--protocol", PROTOCOL]
    assert main(as_option) == 0
    [a] = (tmp_path / "a" / "out").glob("manifest-*.json")
    [b] = (tmp_path / "b" / "out").glob("manifest-*.json")
    assert a.name == b.name and a.read_text() == b.read_text()
    capsys.readouterr()
    assert main(["protocol", "check", "--protocol", PROTOCOL, "--json"]) == 0
    assert "protocol_hash" in json.loads(capsys.readouterr().out)

    taking = [
        name
        for top, command in all_commands().items()
        for name, leaf in _commands(command, top)
        if any("--protocol" in getattr(p, "opts", ()) for p in leaf.params)
    ]
    for needed in ("run", "protocol check", "compare", "metrics", "certify", "calibrate",
                   "plan success", "incidents rates", "trial record"):  # fmt: skip
        assert needed in taking, needed


def _commands(command, name):
    """(full name, command) of `command` and every subcommand below it."""
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        yield name, command
        return
    for sub, leaf in subcommands.items():
        yield from _commands(leaf, f"{name} {sub}")


def test_two_different_protocols_are_refused_in_one_line(tmp_path: Path, capsys):
    argv = args(tmp_path, "--dry-run", "--protocol", str(tmp_path / "other.toml"))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "two protocols given" in err
    assert not (tmp_path / "out").exists()
    assert main(["run", "--db", str(tmp_path / "s.db"), "--dry-run"]) == 2
    assert "pass --protocol" in capsys.readouterr().err
