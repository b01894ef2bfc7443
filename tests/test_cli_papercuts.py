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
