"""Records inside their window: `trial record` refuses a start time outside the protocol's
window, naming the window's dates; sim episodes run by `run` carry their actual start times."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.manifest import plan_manifest, write_manifest_file
from embodied_eval.protocol.reader import (
    example_protocol_path,
    load_protocol,
    protocol_from_mapping,
)
from embodied_eval.records import parse_utc, utc_now_iso
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store
from sim_suites.episode import run_episode

pytestmark = pytest.mark.timeout(300)

FLAGS = ["--no-input", "--technician", "Ana", "--quality", "0.9", "--duration", "95s"]
FLAGS += ["--no-faults", "--no-incidents"]


def record(tmp_path: Path, protocol, *extra: str) -> int:
    manifest = write_manifest_file(plan_manifest(protocol), tmp_path)
    argv = ["trial", "record", "--db", str(tmp_path / "t.db"), "--manifest", str(manifest)]
    return main([*argv, *FLAGS, *extra])


def march_2020():
    """The example protocol with the window w-2020: 2020-03-01 to 2020-03-31 (UTC days)."""
    data = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    data["window"] = {"id": "w-2020", "start": "2020-03-01", "end": "2020-03-31"}
    return protocol_from_mapping(data)


@pytest.mark.parametrize(
    "started_at", ["2020-02-29T23:59:59Z", "2020-04-01T00:00:00Z", "2020-04-01T00:30:00+01:00"]
)
def test_a_start_time_outside_the_window_is_refused_with_its_dates(tmp_path, capsys, started_at):
    # 2020-04-01T00:30:00+01:00 is 2020-03-31T23:30:00Z: inside.
    code = record(tmp_path, march_2020(), "--started-at", started_at)
    err = capsys.readouterr().err.strip()
    if started_at.endswith("+01:00"):
        assert code == 0, err
        return
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err
    assert f"--started-at: {started_at} is outside the reporting window w-2020" in err
    assert "(2020-03-01 to 2020-03-31, UTC)" in err and "nothing was stored" in err
    with Store(tmp_path / "t.db") as store:
        assert store.episodes() == []


@pytest.mark.parametrize("started_at", ["2020-03-01T00:00:00Z", "2020-03-31T23:59:59Z"])
def test_the_first_and_last_second_of_the_window_are_inside(tmp_path, capsys, started_at):
    assert record(tmp_path, march_2020(), "--started-at", started_at) == 0
    with Store(tmp_path / "t.db") as store:
        [episode] = store.episodes()
    assert episode.started_at == started_at


def test_the_default_now_is_refused_when_the_window_is_over(tmp_path, capsys):
    assert record(tmp_path, march_2020()) == 2
    err = capsys.readouterr().err
    assert "is outside the reporting window w-2020 (2020-03-01 to 2020-03-31, UTC)" in err


def test_sim_episodes_carry_their_actual_start_times(tmp_path):
    protocol = load_protocol(Path(__file__).parent / "data" / "compare_tiny.toml")
    before = parse_utc(utc_now_iso(), key="t")
    options = RunOptions(sides=("sim",), engines=("mujoco",), executor="sequential")
    run_trials(
        protocol, options, db_path=tmp_path / "s.db", out_dir=tmp_path / "o", show_progress=False
    )
    after = parse_utc(utc_now_iso(), key="t")
    with Store(tmp_path / "s.db") as store:
        episodes = store.episodes()
    assert len(episodes) == 5
    for ep in episodes:
        # Not the window's start (2026-11-01T00:00:00Z) but when the episode ran.
        assert before <= parse_utc(ep.started_at, key="started_at") <= after
    # Called directly, the engine stays deterministic: the default start is the window's.
    spec = plan_manifest(protocol, engines=["mujoco"]).side("sim")[0]
    first = run_episode(spec, protocol, max_steps=5).episode
    assert first.started_at == "2026-11-01T00:00:00Z"
    assert run_episode(spec, protocol, max_steps=5).episode == first
