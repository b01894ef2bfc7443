"""What a user sees of the CLI: --version, help without placeholders, tables not cut when piped,
stable gate-check ids, no duplicated keys, and no PyBullet chatter on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from embodied_eval import __version__
from embodied_eval.cli.main import COMMANDS, GROUP_SUMMARIES, all_commands, main
from tests.test_certificate import build_window

pytestmark = pytest.mark.timeout(180)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script's code path in a fresh process, stdout piped (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "embodied_eval", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in __import__("os").environ.items() if k != "COLUMNS"},
        check=False,
    )


def test_version_flag_and_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"embodied-eval {__version__}"
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"embodied-eval {__version__}"


def test_top_level_help_lists_commands_without_importing_them() -> None:
    code = (
        "import sys; from embodied_eval.cli.main import main; rc = main(['--help']); "
        "print('LOADED', sorted(m for m in ('pandas', 'numpy', 'scipy', 'mujoco', 'pybullet', "
        "'rclpy', 'embodied_eval.store.core') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("LOADED []")
    for name in [*COMMANDS, *GROUP_SUMMARIES]:
        assert f" {name} " in done.stdout
    assert "<bool>" not in done.stdout


def _walk(cmd: object, path: str, out: list[tuple[str, object]]) -> None:
    out.append((path, cmd))
    for name, sub in getattr(cmd, "commands", {}).items():
        _walk(sub, f"{path} {name}", out)


def test_every_option_has_help_and_no_bool_placeholder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = all_commands()
    assert set(commands) == {*COMMANDS, *GROUP_SUMMARIES}
    everything: list[tuple[str, object]] = []
    for name, cmd in commands.items():
        _walk(cmd, name, everything)
    undocumented = [
        f"{path} {param.opts[0]}"  # type: ignore[attr-defined]
        for path, cmd in everything
        for param in getattr(cmd, "params", [])
        if param.param_type_name == "option" and not (param.help or "").strip()
    ]
    assert undocumented == []
    for path, cmd in everything:
        if getattr(cmd, "commands", None):
            continue
        assert main([*path.split(), "--help"]) == 0
        text = capsys.readouterr().out
        assert "<bool>" not in text, path
        assert "<list[" not in text, path  # a repeatable option shows `<str>…`


def _certify_window(tmp_path: Path) -> tuple[Path, Path]:
    protocol, db = build_window(tmp_path, near_miss=False)
    return protocol, db


def test_piped_metrics_table_is_not_cut_and_gate_checks_have_stable_ids(tmp_path: Path) -> None:
    protocol, db = _certify_window(tmp_path)
    done = run_cli("metrics", "--db", str(db), "--protocol", str(protocol), "--seed", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Rich would fold the table to 80 columns on a pipe; here the E row's whole method text
    # (longer than 80 characters by itself) stays on the row's one line.
    e_row = next(line for line in lines if "E = φ_E(Ê)" in line)
    assert (
        "joint cluster bootstrap over task instances (AR, S2R) with exact draws per resample "
        "(Clopper–Pearson beta for AR and the discordant pairs, Garwood gamma for each "
        "severity's rate over H), percentile, 300 resamples" in e_row
    )
    done = run_cli("metrics", "--db", str(db), "--protocol", str(protocol), "--json", "--seed", "3")
    gates = json.loads(done.stdout)["gates"]
    ids = {g: [c["id"] for c in gate["checks"]] for g, gate in gates.items()}
    assert ids == {
        "AAI-2": ["aai2.incident_rules", "aai2.e_min", "aai2.ra_min", "aai2.minor_rate_max",
                  "aai2.zero_major", "aai2.zero_critical", "aai2.maintenance_closure",
                  "aai2.s2r_families"],
        "AAI-3": ["aai3.incident_rules", "aai3.e_min", "aai3.ra_min", "aai3.s2r_families",
                  "aai3.mtbsi_min", "aai3.expansion_closure", "aai3.p_min", "aai3.w_min"],
        "AAI-4": ["aai4.incident_rules", "aai4.e_min", "aai4.ra_min", "aai4.serious_free_hours",
                  "aai4.s2r_min", "aai4.delivery_attestation"],
    }  # fmt: skip
    # Display names and every other key are still there.
    check = gates["AAI-2"]["checks"][1]
    assert check["name"] == "E ≥ 0.6" and {"verdict", "threshold", "bound"} <= set(check)
    rates = run_cli("incidents", "rates", "--db", str(db), "--protocol", str(protocol), "--json")
    summary = json.loads(rates.stdout)
    assert summary["exposure_hours"] == 500.0
    assert "safety_score" not in summary and "mtbsi_h" not in summary
    assert "hours" not in summary["exposure"] and "valid" not in summary["validity"]


def test_pybullet_prints_nothing_on_stdout() -> None:
    code = (
        "import sim_suites\n"
        "env = sim_suites.make_env('push/block_forward', 'pybullet')\n"
        "env.close()\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert "pybullet build time" not in done.stderr and "argv[0]" not in done.stderr
