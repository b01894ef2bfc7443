"""The report's first screen, timeline, episode table and thin-data plots (no browser needed).

Hand-computed values:
    zero-event hours for "≤ 1 per 100 h": −100·ln(1 − c) = 100·ln 20 = 299.5732 h at c = 95 %
        (statistics notes: 299.6 h), 100·ln 10 = 230.2585 h at c = 90 %.
    two-sided 95 % Garwood upper bound with k = 0 in H = 0.0011 h: χ²(0.975; 2)/(2H)·100
        = −ln(0.025)/0.0011·100 = 3.688879/0.0011·100 = 335,353 per 100 h.
    timeline x of 2026-11-12T09:30Z on the window 2026-11-01..2026-11-30 (axis to 12-01 00:00,
        30 days): 120 + 16 + 828·(11.395833/30) = 136 + 314.53 = 450.5; weekly ticks (30 days
        / 7 ≤ 8 ticks): 11-01, 11-08, 11-15, 11-22, 11-29. Lanes top-down critical, major, minor,
        near-miss: the major lane's centre is 16 + 34 + 17 = 67.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest

from embodied_eval.certificate.episode_media import camera_strip
from embodied_eval.certificate.html_parts import plain_text
from embodied_eval.certificate.issue import issue_certificate
from embodied_eval.certificate.plots import (
    certificate_plots,
    reliability_figure,
    zero_event_hours,
)
from embodied_eval.certificate.safety_html import safety_html
from embodied_eval.certificate.summary_html import summary_html
from embodied_eval.certificate.timeline_svg import incident_timeline_svg
from embodied_eval.records import Artifact
from embodied_eval.store.signing_keys import create_private_key
from tests.camera_recording import RECORDED_COLOURS
from tests.test_certificate import build_window, write_evidence
from tests.test_verdict import major_window  # noqa: F401 - a fixture used below

pytestmark = pytest.mark.timeout(180)

#: Python reprs that must never reach the page's text.
REPRS = (r"\{'", r'\{"', r"\bNone\b", r"\bTrue\b", r"\bFalse\b", r"object at 0x", r"\[\]")


def page_text(html: str) -> str:
    """The text a reader sees (no style, script or tags)."""
    body = re.sub(r"(?s)<(style|script)\b.*?</\1>", " ", html)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def test_zero_event_hours_by_hand() -> None:
    assert zero_event_hours(1.0, 0.95) == pytest.approx(299.5732, abs=1e-4)
    assert zero_event_hours(1.0, 0.90) == pytest.approx(230.2585, abs=1e-4)


def thin_cert(exposure_h: float) -> dict[str, Any]:
    zero = {"value": 0.0, "low": 0.0, "high": 3.688879 / exposure_h * 100, "n": 0}
    return {
        "protocol": {"confidence": 0.95},
        "window": {"exposure_hours": exposure_h, "valid": True},
        "embodiment": {
            "gates": {
                "AAI-2": {
                    "checks": [
                        {
                            "id": "aai2.minor_rate_max",
                            "name": "minor rate ≤ 1 / 100 h",
                            "threshold": 1.0,
                            "verdict": "inconclusive",
                            "remaining": {"hours": 299.5721},
                        }
                    ]
                }
            },
            "rates_per_100h": {s: dict(zero) for s in ("near_miss", "minor", "major", "critical")},
        },
        "incidents": {"counts": {}, "list": []},
    }


def test_thin_exposure_gives_bounds_as_text_not_a_plot() -> None:
    cert = thin_cert(0.0011)
    plots = certificate_plots(cert)
    assert "incident_rates" not in plots
    text = page_text(safety_html(cert, plots))
    assert "Rates are not plotted" in text
    assert "below the 299.6 h" in text
    assert "minor: 0 observed, rate ≤ 335,353 per 100 h" in text
    assert "About 299.6 more exposure hours are needed" in text
    # At the floor the plot is drawn again.
    assert "incident_rates" in certificate_plots(thin_cert(299.58))


def test_reliability_axis_starts_at_zero() -> None:
    ax = reliability_figure([], 0.0011).axes[0]
    assert ax.get_ylim() == pytest.approx((0.0, 1.05))
    points = [{"exposure_h": h, "severity": "near_miss"} for h in (0.1, 0.2, 0.3)]
    assert reliability_figure(points, 1.0).axes[0].get_ylim() == pytest.approx((0.0, 3.15))


def test_plain_text_is_never_a_repr() -> None:
    value = {"a": 1, "b": None, "c": [True, 2.5], "d": {}}
    assert plain_text(value) == "a: 1; b: —; c: yes, 2.5; d: none"
    assert plain_text(float("inf")) == "∞" and plain_text([]) == "none"


def test_timeline_in_calendar_time_by_hand() -> None:
    incident = {
        "incident_id": "INC-maj-1",
        "occurred_at": "2026-11-12T09:30:00Z",
        "severity": "major",
        "counts_toward_window": True,
    }
    svg = incident_timeline_svg([incident], "2026-11-01", "2026-11-30")
    assert re.search(r'<circle cx="450.5" cy="67.0" r="7" fill="#DD8452"', svg)
    ticks = re.findall(r">(2026-\d\d-\d\d)</text>", svg)
    assert ticks == ["2026-11-01", "2026-11-08", "2026-11-15", "2026-11-22", "2026-11-29"]
    # Two near-misses a minute apart share one marker with their count; not counted ⇒ hollow.
    near = [
        {"incident_id": f"INC-{i}", "occurred_at": f"2026-11-03T10:0{i}:00Z",
         "severity": "near_miss", "counts_toward_window": False}
        for i in (1, 2)
    ]  # fmt: skip
    svg = incident_timeline_svg(near, "2026-11-01", "2026-11-30")
    assert svg.count("<circle") == 1 and "×2" in svg and 'fill="#fff"' in svg
    empty = incident_timeline_svg([], "2026-11-01", "2026-11-30")
    assert "no incidents recorded in this window" in empty and "<circle" not in empty


def gates(*verdicts: str) -> dict[str, Any]:
    checks = [
        {"id": f"aai2.c{i}", "name": f"check {i}", "verdict": v, "remaining": {}}
        for i, v in enumerate(verdicts)
    ]
    return {"AAI-2": {"name": "AAI-2 (Robotics)", "checks": checks}}


@pytest.mark.parametrize(
    ("verdicts", "colour"),
    [(("pass",), "green"), (("pass", "inconclusive"), "amber"), (("inconclusive", "fail"), "red")],
)
def test_banner_colour_follows_the_verdict(verdicts: tuple[str, ...], colour: str) -> None:
    cert = {
        "window": {"valid": True},
        "level": {"level": 0, "assigned": "AAI-0", "procedure_name": "AAI-0 Fixed Automation"},
        "embodiment": {"gates": gates(*verdicts)},
    }
    html = summary_html(cert)
    assert f'id="verdict" class="verdict-banner verdict-{colour}"' in html
    banner = re.search(r'id="verdict"[^>]*>([^<]*)</div>', html)
    assert banner is not None and banner.group(1).startswith(f"{colour.upper()} — ")


def test_finalised_major_report_leads_with_red(
    major_window: dict[str, Path],  # noqa: F811 - the imported fixture
) -> None:
    w = major_window
    key = w["tmp"] / "report-key.pem"
    create_private_key(key)
    issued = issue_certificate(
        protocol_path=w["protocol"], db=w["db"], key_path=key, out=w["tmp"] / "report-bundle",
        evidence_path=w["evidence"],
    )  # fmt: skip
    html = (issued.path / "report.html").read_text(encoding="utf-8")
    text = page_text(html)
    # Summary first: the red banner, then the level and why not higher, then what remains.
    order = [html.index(s) for s in ('id="verdict"', 'id="level"', 'id="remains"',
                                     'id="timeline"', 'id="episodes"', 'id="technicians"')]  # fmt: skip
    assert order == sorted(order)
    assert 'class="verdict-banner verdict-red"' in html
    assert "Why not AAI-1" in text and "≥ 3 tools used" in text
    remains = re.findall(r'<li class="(fail|inconclusive)">([^<]*)</li>', html)
    kinds = [k for k, _ in remains]
    assert kinds[0] == "fail" and kinds == sorted(kinds, key=lambda k: k != "fail")
    assert any("critical-incident rules (§7)" in t for k, t in remains if k == "fail")
    # The safety section no longer shows a green banner over a failing rule.
    assert "the incident rules fail" in text
    assert "Window valid: no counted critical incident." not in text
    # The major is on the timeline, filled (it counts), in the major lane.
    assert re.search(r'<circle cx="[\d.]+" cy="67.0" r="7" fill="#DD8452"', html)
    assert "INC-maj-1" in html
    for pattern in REPRS:
        assert not re.search(pattern, text), pattern


@pytest.fixture(scope="module")
def recorded_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("recorded")
    protocol, db = build_window(tmp, recordings=True)
    key = tmp / "k.pem"
    create_private_key(key)
    out = tmp / "bundle"
    issue_certificate(
        protocol_path=protocol, db=db, key_path=key, out=out, evidence_path=write_evidence(tmp)
    )
    return out


def mean_colour(data_uri: str) -> np.ndarray:
    from PIL import Image

    data = base64.b64decode(data_uri.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), float).mean(axis=(0, 1))


def test_episode_table_links_recordings_and_shows_camera_strips(recorded_bundle: Path) -> None:
    html = (recorded_bundle / "report.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="([^"#][^"]*)">mcap: ', html)
    assert len(links) >= 4
    for href in links:
        assert (recorded_bundle / unquote(href)).is_file(), href
    # The 4 failed real episodes (REAL_FAILS) each get a 4-frame strip: frames 0, 2, 4, 6.
    thumbs = re.findall(r'<img src="(data:image/jpeg;base64,[^"]+)" alt="camera at ([\d.]+) s"',
                        html)  # fmt: skip
    assert len(thumbs) == 16
    assert [t for _, t in thumbs[:4]] == ["0.0", "1.0", "2.0", "3.0"]
    for (uri, _), k in zip(thumbs[:4], (0, 2, 4, 6), strict=True):
        assert mean_colour(uri) == pytest.approx(RECORDED_COLOURS[k], abs=12)
    assert "All 20 pairs (20 with a real episode" in html


def test_sim_trajectory_frames_make_a_strip(tmp_path: Path) -> None:
    frames = np.zeros((9, 30, 40, 3), np.uint8)
    frames[:, :, :, 2] = np.arange(9, dtype=np.uint8)[:, None, None] * 25
    path = tmp_path / "ep.npz"
    np.savez(path, **{"time": np.arange(9) * 0.1, "obs.camera": frames})
    strip, note = camera_strip([Artifact(path=str(path), sha256="0" * 64, kind="trajectory")], None)
    # Frames 0, 3, 5, 8 of 9 (round(k·8/3)): blue 0, 75, 125, 200 at t = 0, 0.3, 0.5, 0.8 s.
    assert [t for t, _ in strip] == pytest.approx([0.0, 0.3, 0.5, 0.8])
    assert [mean_colour(u)[2] for _, u in strip] == pytest.approx([0, 75, 125, 200], abs=6)
    assert note == "camera at 0.0, 0.3, 0.5, 0.8 s"
    none, why = camera_strip([Artifact(path=str(tmp_path / "gone.mcap"), sha256="0" * 64,
                                       kind="mcap")], None)  # fmt: skip
    assert none == [] and "not on disk" in why


def test_next_steps_most_urgent_first() -> None:
    from embodied_eval.scoring.verdict import next_steps, window_verdict

    checks = {
        "AAI-2": {
            "checks": [
                {"name": "0 major", "verdict": "fail", "remaining": {}},
                {"name": "RA ≥ 0.5", "verdict": "inconclusive", "remaining": {"trials": 14.0}},
                {"name": "minor rate", "verdict": "inconclusive",
                 "remaining": {"hours": 299.5721}},
                {"name": "P ≥ 0.7", "verdict": "evidence_missing", "remaining": {}},
            ]
        }
    }  # fmt: skip
    steps = next_steps(window_verdict(checks, valid=True), has_evidence=False)
    assert steps[0].startswith("Fix what fails (0 major)")
    assert steps[1].startswith(
        "Run about 14 more trials and about 299.6 more exposure hours to settle the 2 "
        "inconclusive check(s)"
    )
    assert "--evidence FILE" in steps[2] and len(steps) == 3
    with_evidence = next_steps(window_verdict(checks, valid=True), has_evidence=True)
    assert with_evidence[2] == "Supply evidence for the 1 check(s) that lack it (P ≥ 0.7)."
    invalid = next_steps(window_verdict({}, valid=False), has_evidence=True)
    assert invalid[0].startswith("Investigate the critical incident") and len(invalid) == 1
    green = next_steps(window_verdict({}, valid=True), has_evidence=True)
    assert green[0].startswith("Nothing remains for this window")


def test_certify_prints_what_to_do_next(
    major_window: dict[str, Path],  # noqa: F811 - the imported fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    from embodied_eval.cli.main import main

    w = major_window
    assert main(["certify", "--protocol", str(w["protocol"]), "--db", str(w["db"]),
                 "--evidence", str(w["evidence"]), "--key", str(w["tmp"] / "next-key.pem"),
                 "--create-key", "--out", str(w["tmp"] / "next-bundle")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    after = out.split("What to do next:", 1)[1]
    assert after.lstrip().startswith("1. Fix what fails (critical-incident rules (§7);")


def test_many_incidents_on_one_episode_are_counted_not_listed() -> None:
    from embodied_eval.certificate.episodes_html import _incident_text

    rows = [{"incident_id": f"INC-{i}", "severity": "near_miss"} for i in range(5)]
    assert _incident_text(rows) == (
        "INC-0 (near-miss)<br>INC-1 (near-miss)<br>INC-2 (near-miss)<br>and 2 more"
    )
    assert _incident_text([]) == "—"


def test_why_not_the_next_level_names_what_blocks_it() -> None:
    def gate(level: int, name: str, *checks: tuple[str, str]) -> dict[str, Any]:
        return {"level": level, "name": name,
                "checks": [{"id": n, "name": n, "verdict": v, "detail": ""} for n, v in checks]}  # fmt: skip

    missing = [(f"X{i} ≥ 0.5", "evidence_missing") for i in range(6)]
    cert = {
        "window": {"valid": True},
        "evidence": {"file": "evidence.json"},
        "level": {"level": 1, "assigned": "AAI-1", "procedure_name": "AAI-1 Tool-using"},
        "score": {
            "gates": [
                gate(1, "AAI-1 gates", ("A ≥ 0.5", "pass")),
                gate(
                    2,
                    "AAI-2 (Robotics)",
                    ("E ≥ 0.6", "fail"),
                    ("RA ≥ 0.5", "inconclusive"),
                    *missing,
                ),
            ]
        },
        "embodiment": {"gates": {}},
    }
    text = page_text(summary_html(cert))
    assert "Certified level: AAI-1 (Tool-using): the highest level whose gates all pass." in text
    assert (
        "Why not AAI-2: 1 check(s) fail (E ≥ 0.6), 1 check(s) are inconclusive (RA ≥ 0.5), "
        "6 check(s) lack evidence (X0 ≥ 0.5; X1 ≥ 0.5; X2 ≥ 0.5; X3 ≥ 0.5; and 2 more in the "
        "table below)." in text
    )
    assert "can at most reach AAI-0" not in text  # an evidence file was given
    assert "The checks of AAI-1 and AAI-2" in text
