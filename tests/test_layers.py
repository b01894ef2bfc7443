"""The layers of docs/architecture.md hold: import-linter's contracts in pyproject.toml cover every
package and every room of embodied_eval, the code keeps them, and a wrong import breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("embodied_eval", "sim_suites", "real_bridge", "incident_logging")


def contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def layer_names(contract: dict) -> set[str]:
    names: set[str] = set()
    for layer in contract["layers"]:
        names.update(part.strip() for part in layer.replace(":", "|").split("|"))
    return names


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(exe), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_contracts_cover_every_package_and_every_room() -> None:
    found = contracts()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = {p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert shipped == set(PACKAGES)
    assert layer_names(found["packages"]) == set(PACKAGES)
    rooms = found["rooms"]
    assert rooms["containers"] == ["embodied_eval"] and rooms["exhaustive"] is True
    on_disk = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "embodied_eval").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert layer_names(rooms) == on_disk


def test_the_code_keeps_the_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(contracts())} kept, 0 broken" in result.stdout


# (file to append to, the wrong import, the contract it breaks)
WRONG_IMPORTS = {
    "runner imports the console": (
        "embodied_eval/runner/trials.py",
        "import embodied_eval.console.app",
        "rooms",
    ),
    "stats imports the store": (
        "embodied_eval/stats/estimate.py",
        "import embodied_eval.store.core",
        "rooms",
    ),
    "a suite imports the runner": (
        "sim_suites/suites/suite_episode.py",
        "import embodied_eval.runner.trials",
        "plugins",
    ),
    "the robot side skips the seam": (
        "real_bridge/detector.py",
        "import sim_suites.tasks",
        "robot-core",
    ),
    "embodied_eval imports the simulation": (
        "embodied_eval/certificate/trials.py",
        "import sim_suites",
        "packages",
    ),
    "a room nobody placed": ("embodied_eval/new_room.py", "import embodied_eval.errors", "rooms"),
}


@pytest.mark.parametrize("case", sorted(WRONG_IMPORTS))
def test_a_wrong_import_in_a_copy_breaks_its_contract(case: str, tmp_path: Path) -> None:
    path, line, contract = WRONG_IMPORTS[case]
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            tmp_path / package,
            ignore=lambda folder, names: [
                n for n in names if not n.endswith(".py") and not (Path(folder) / n).is_dir()
            ],
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / path
    target.write_text((target.read_text() if target.exists() else "") + f"\n{line}\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    broken = [c["name"] for c in contracts().values() if c["id"] == contract]
    flat = " ".join(result.stdout.split())
    assert f"{broken[0]} BROKEN" in flat, result.stdout
    assert "1 broken" in flat
