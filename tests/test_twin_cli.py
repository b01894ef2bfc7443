"""`embodied-eval twin` / `python -m real_bridge.twin`: importable without ROS, bad flags exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from embodied_eval.cli.main import main
from real_bridge.discovery import LOOPBACK_PROFILE

pytestmark = pytest.mark.timeout(120)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # The environment is passed through unchanged (the ROS wheels need LD_LIBRARY_PATH).
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=dict(os.environ), timeout=90
    )


def test_cli_module_does_not_import_rclpy():
    proc = run(
        "-c",
        "import sys, real_bridge.cli, real_bridge.manual, real_bridge.twin.process,"
        " real_bridge.ros2_backend;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'mujoco')))",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_twin_profile_command_prints_the_loopback_profile(capsys):
    assert main(["twin", "profile"]) == 0
    assert capsys.readouterr().out.strip() == str(LOOPBACK_PROFILE)


@pytest.mark.parametrize(
    ("flags", "key"),
    [
        (["--rate-hz", "0"], "state_rate_hz"),
        (["--faults", "meteor_strike"], "faults"),
        (["--domain-id", "233"], "domain_id"),
        (["--friction-scale", "-1"], "friction_scale"),
    ],
)
def test_bad_twin_flags_exit_2_with_one_line(flags, key):
    proc = run("-m", "real_bridge.twin", *flags)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and key in lines[0]
