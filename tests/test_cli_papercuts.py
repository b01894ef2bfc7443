"""CLI papercuts: usage errors name the command even for an option left without its value, the
twin's own entry point speaks in the same one-line style, and the demo says how to reach the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.demo import cli_command


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["incidents", "rates", "--protocol"], "embodied-eval incidents rates"),
        (["trial", "record", "--db"], "embodied-eval trial record"),
        (["run", "protocol.toml", "--db"], "embodied-eval run"),
        (["--db"], "embodied-eval"),
    ],
)
def test_option_without_value_names_its_command(argv, command, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {command}: ")
    assert f"(see '{command} --help')" in err


def test_twin_entry_point_errors_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "real_bridge.twin", "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: python -m real_bridge.twin: No such option: --no-such-option "
        "(see 'python -m real_bridge.twin --help')\n"
    )


def test_demo_names_the_command_and_how_to_put_it_on_path(monkeypatch, tmp_path):
    script = Path(sys.executable).with_name("embodied-eval")
    assert script.exists()
    monkeypatch.setenv("PATH", str(tmp_path))  # not on PATH: name the script and activate
    monkeypatch.chdir(script.parents[2])  # the project folder holding the virtual env
    command, reach = cli_command()
    venv_bin = script.parent.relative_to(script.parents[2])  # e.g. .venv/bin
    assert command == f"{venv_bin}/embodied-eval"
    assert f"run `. {venv_bin}/activate` once per shell" in reach
    monkeypatch.setenv("PATH", str(script.parent))  # on PATH: the bare name, nothing to add
    assert cli_command() == ("embodied-eval", "")


def test_every_level_gate_check_has_its_own_prefixed_id():
    from embodied_eval.scoring.gate_checks import slug
    from embodied_eval.scoring.levels import LevelEvidence, LevelPolicy, assign_level

    assert slug("κ ≥ κ*") == "kappa_kappa"  # Greek spelled out, not the fallback "check"
    gates = assign_level(LevelEvidence(), LevelPolicy(), embodied=True).to_json()["gates"]
    ids = [(g["level"], c["id"]) for g in gates for c in g["checks"]]
    assert len(ids) > 20
    assert all(i.startswith(f"aai{level}.") for level, i in ids), ids
    by_name = {(g["level"], c["name"]): c["id"] for g in gates for c in g["checks"]}
    # One id per check: the same condition in two gates of a level (R > 0 at AAI-2) shares it,
    # different checks never do, across every level and gate.
    assert len(set(by_name.values())) == len(by_name)
    assert len(ids) == len(by_name) + 1 and by_name[(2, "R > 0")] == "aai2.r_0"
    assert by_name[(1, "A ≥ 0.5")] == "aai1.a_0_5"
    assert by_name[(3, "κ ≥ κ*")] == "aai3.kappa_kappa"
