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
from embodied_eval.protocol.reader import protocol_from_mapping

pytestmark = [pytest.mark.timeout(420)]


def test_demo_protocol_scales_down() -> None:
    import tomllib

    protocol = protocol_from_mapping(tomllib.loads(demo_protocol_text(1, 0.2)))
    assert list(protocol.families) == ["pick_place"]
    assert protocol.engines == ("mujoco", "pybullet")
    assert protocol.real_fraction == 0.2
    full = protocol_from_mapping(tomllib.loads(demo_protocol_text(None, 0.2)))
    assert len(full.families) == 5
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
    # The level is explained: the verdict, what blocks the next level, what this harness measures.
    assert "verdict: " in done.stdout and "what blocks AAI-1" in done.stdout
    assert "can at most reach AAI-0" in done.stdout
    assert "What to do next:" in done.stdout
    # The report leads with the same verdict and explanation, and links every real recording
    # (relative to the report, so the links resolve where it was written), with a camera strip
    # for each failed or incident real episode.
    import re
    from urllib.parse import unquote

    html = report.read_text(encoding="utf-8")
    assert re.search(r'id="verdict" class="verdict-banner verdict-(red|amber|green)"', html)
    assert "Why not AAI-1" in html and 'id="next"' in html
    links = re.findall(r'<a href="([^"#][^"]*)">mcap: ', html)
    assert len(set(links)) >= 3
    for href in links:
        assert (report.parent / unquote(href)).is_file(), href
    for strip in re.findall(r'<div class="thumbs">(.*?)</div>', html):
        assert strip.count('<img src="data:image/jpeg;base64,') == 4
    verified = verify_bundle(out / "certificate")
    recompute_check(verified, out / "store.db")
    cert = verified.certificate
    # 1 family × 5 instances × 3 drift-calendar days × 1 seed = 15 pairs; 2 sim engines;
    # round(0.2 · 15) = 3 real pairs.
    assert cert["trials"]["by_side"]["sim"]["planned"] == 30
    assert cert["trials"]["by_side"]["real"]["planned"] == 3
    assert cert["trials"]["by_side"]["real"]["run"] == 3
    assert set(cert["trials"]["sim_by_engine"]) == {"mujoco", "pybullet"}
    # Every real pair counts once, through its first scored attempt. A pair whose attempts were
    # all aborted by the robot (e.g. homing blocked after a protective stop) is not counted.
    import json
    import sqlite3

    with sqlite3.connect(out / "store.db") as db:
        real = [json.loads(r) for (r,) in db.execute("SELECT record_json FROM episodes")]
    scored_pairs = {
        e["pair_id"]
        for e in real
        if e["side"] == "real" and e["status"] in ("ok", "safety_stop", "out_of_bounds")
    }
    assert 1 <= len(scored_pairs) <= 3
    # The judge was audited on the window's own episodes (the twin's oracle labelling, under a
    # name that says so), and the certificate names the audit sample it measured Se/Sp on.
    draw = re.search(r"judge audit (ADR-[0-9a-f]+): (\d+) episode\(s\) drawn", done.stdout)
    assert draw is not None, done.stdout[-3000:]
    judge = cert["embodiment"]["judge"]
    assert judge["accuracy"]["measured_on"] == "this window's audit"
    assert 1 <= len(judge["accuracy"]["audited_episodes"]) <= int(draw.group(2))
    assert f"audit sample {draw.group(1)}" in json.dumps(cert)
    # The harness's detector judged every real episode that ran to its end, from the recorded
    # camera and tracker; the twin's oracle only sits beside it. The report names the judge.
    ended = [e for e in real if e["side"] == "real" and e["status"] == "ok"]
    assert all(e["judge"]["kind"] == "detector" for e in ended)
    assert all(e["judge"]["name"] == "scene-detector" and "oracle" in e["control"] for e in ended)
    if ended:
        # Episodes a protective stop ended have no judge; the detector is listed beside them.
        judges = cert["embodiment"]["judge"]["judges"]
        assert any(j["name"] == "scene-detector" for j in judges), judges
        assert '<p id="judge">Real outcomes judged by detector scene-detector' in html
    assert cert["embodiment"]["episodes"]["real_counted"] == len(scored_pairs)
    # The maintenance closure is computed from the store over the calendar's days; the
    # expansion audit needs the push family, which one family leaves out.
    maintenance = cert["closures"]["maintenance"]
    assert maintenance["source"] == "computed"
    assert [d["drift"] for d in maintenance["calendar"]] == ["nominal", "day07", "day14_worn"]
    assert cert["closures"]["expansion"]["source"] is None
    assert "maintenance closure (computed from the store)" in done.stdout
    # A second run replaces the demo's own folder.
    assert (out / ".embodied-eval-demo").is_file()
