"""`make demo`, scaled down: one family, sim on both engines, one real episode on the twin robot.

Runs the demo as its own process (as `make demo` does), then checks its certificate bundle
independently: signature, file hashes and every number recomputed from the demo's store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", exc_type=ImportError)

from embodied_eval.certificate import recompute_check, verify_bundle
from embodied_eval.demo import FAMILIES_ENV, REAL_FRACTION_ENV, demo_protocol_text, prepare_out
from embodied_eval.errors import EvalError
from embodied_eval.protocol import protocol_from_mapping

pytestmark = pytest.mark.timeout(420)


def test_demo_protocol_scales_down() -> None:
    import tomllib

    protocol = protocol_from_mapping(tomllib.loads(demo_protocol_text(1, 0.2)))
    assert list(protocol.families) == ["pick_place"]
    assert protocol.engines == ("mujoco", "pybullet")
    assert protocol.real_fraction == 0.2
    full = protocol_from_mapping(tomllib.loads(demo_protocol_text(None, 0.2)))
    assert len(full.families) == 4
    with pytest.raises(EvalError, match="at least one family"):
        demo_protocol_text(0, 0.2)


def test_demo_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(EvalError, match="was not made by the demo"):
        prepare_out(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


@pytest.mark.slow
@pytest.mark.ros
def test_scaled_down_demo_certifies_and_verifies(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = dict(os.environ, **{FAMILIES_ENV: "1", REAL_FRACTION_ENV: "0.2"})
    done = subprocess.run(
        [sys.executable, "-m", "embodied_eval.demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    report = out / "certificate" / "report.html"
    assert f"report: {report.resolve()}" in done.stdout
    for step in range(1, 7):
        assert f"[{step}/6]" in done.stdout
    verified = verify_bundle(out / "certificate")
    recompute_check(verified, out / "store.db")
    cert = verified.certificate
    # 1 family × 5 instances × 1 seed × 2 drifts (nominal, day14_worn) = 10 pairs; 2 sim
    # engines; round(0.2 · 10) = 2 real pairs.
    assert cert["trials"]["by_side"]["sim"]["planned"] == 20
    assert cert["trials"]["by_side"]["real"]["planned"] == 2
    assert cert["trials"]["by_side"]["real"]["run"] == 2
    assert set(cert["trials"]["sim_by_engine"]) == {"mujoco", "pybullet"}
    assert cert["embodiment"]["episodes"]["real_counted"] == 2
    # A second run replaces the demo's own folder.
    assert (out / ".embodied-eval-demo").is_file()
