"""The guides: the CLI reference is generated from the app, the site builds in strict mode (a
broken link fails it), and every shell example marked runnable runs as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from embodied_eval.cli.reference import cli_reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
RUNNABLE = re.compile(r"<!-- runnable -->\n```sh\n(.*?)```", re.S)


def test_the_cli_reference_is_the_apps_own():
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == cli_reference(), (
        "docs/cli.md is out of date: run `python -m embodied_eval.cli.reference > docs/cli.md`"
    )


def test_the_front_door_fits_on_a_page_and_links_every_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for guide in ("technician", "safety-officer", "certification", "developer", "protocol", "cli"):
        assert f"(docs/{guide}.md)" in readme
    assert "make demo" in readme and "make test" in readme


def mkdocs_build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_strict_and_a_broken_link_fails_it(tmp_path: Path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    built = mkdocs_build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "technician.html").is_file()
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    guide = copy / "docs" / "technician.md"
    guide.write_text(guide.read_text() + "\nSee [the missing page](missing.md).\n")
    broken = mkdocs_build(copy, tmp_path / "site2")
    assert broken.returncode != 0 and "missing.md" in broken.stderr


def runnable_examples() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for k, block in enumerate(RUNNABLE.findall(page.read_text(encoding="utf-8"))):
            found.append((f"{page.name}#{k + 1}", block))
    return found


def test_the_guides_have_runnable_examples():
    pages = {name.split("#")[0] for name, _ in runnable_examples()}
    assert {"technician.md", "safety-officer.md", "certification.md"} <= pages


@pytest.mark.parametrize(("name", "block"), runnable_examples())
def test_a_runnable_example_runs_as_written(name: str, block: str, tmp_path: Path):
    # From a folder that looks like the project's (its files as a reader has them).
    (tmp_path / "embodied_eval").symlink_to(ROOT / "embodied_eval")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "EMBODIED_EVAL_DB": str(tmp_path / "embodied-eval.db"),
    }
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{name}:\n{block}\n{done.stdout}\n{done.stderr}"
