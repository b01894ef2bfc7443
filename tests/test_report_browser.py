"""The HTML report renders in a real browser (headless Chromium), opened from disk, at 1400 and
700 px: every section is there, the verdict banner is on the first screen in the verdict's colour
(read from the screenshot's pixels), no Python repr is in the page text, every image (plots and
camera thumbnails) decodes, and nothing is wider than the window.

Skipped when no Chromium binary is installed (CI installs Debian's `chromium`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from embodied_eval.certificate.issue import issue_certificate
from embodied_eval.certificate.report_html import render_report
from embodied_eval.store.signing_keys import create_private_key
from tests.test_certificate import build_window, write_evidence
from tests.test_report_summary import REPRS, page_text

CHROMIUM = next(
    (
        path
        for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
        if (path := shutil.which(name))
    ),
    None,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium)"
    ),
]

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)
#: The window's height; the first screen is what of it the page sees.
SCREEN_H = 900
#: The banner colours (the report's stylesheet), as the screenshot must show them.
BANNER_RGB = {"red": (198, 40, 40), "amber": (240, 163, 10), "green": (46, 125, 50)}
SECTIONS = ("summary", "timeline", "episodes", "technicians", "safety", "certification",
            "integrity")  # fmt: skip

#: Added to a copy of the report: writes the banner's box, the level paragraph's top, the
#: viewport and the page width into the body's attributes once the page has loaded, so
#: `--dump-dom` carries the layout.
PROBE = """<script>
window.addEventListener('load', function () {
  var r = document.getElementById('verdict').getBoundingClientRect();
  var l = document.getElementById('level').getBoundingClientRect();
  document.body.setAttribute('data-probe', [r.left, r.top, r.right, r.bottom, l.top,
    window.innerWidth, window.innerHeight, document.documentElement.scrollWidth].join(','));
});
</script>"""


def chromium(args: list[str], profile: Path) -> str:
    """Run headless Chromium with a throw-away profile; return its stdout."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A certified window whose 4 failed real episodes carry camera recordings."""
    tmp = tmp_path_factory.mktemp("browser")
    protocol, db = build_window(tmp, recordings=True)
    key = tmp / "k.pem"
    create_private_key(key)
    out = tmp / "bundle"
    issue_certificate(
        protocol_path=protocol, db=db, key_path=key, out=out, evidence_path=write_evidence(tmp)
    )
    return out


def with_probe(report: Path) -> Path:
    """A copy of the report beside it (so its relative links still resolve) with PROBE."""
    probe = report.with_name("probe-" + report.name)
    probe.write_text(
        report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
        encoding="utf-8",
    )
    return probe


def check_page(report: Path, width: int, tmp: Path, verdict: str, images: int) -> None:
    """Open `report` at `width` px: DOM checks, then the screenshot's banner pixels."""
    probe = with_probe(report)
    dom = chromium(
        [f"--window-size={width},{SCREEN_H}", "--virtual-time-budget=10000", "--dump-dom",
         probe.as_uri()],
        tmp / f"profile-{width}",
    )  # fmt: skip
    for section in SECTIONS:
        assert f'id="{section}"' in dom, section
    # Every image decoded with a non-zero natural width (the report's own marker).
    assert len(re.findall(r"<img\b", dom)) == images
    loaded = re.search(r'<body[^>]*data-images-loaded="(\d+)"', dom)
    assert loaded is not None and int(loaded.group(1)) == images, "an image did not load"
    text = page_text(dom)
    for pattern in REPRS:
        assert not re.search(pattern, text), pattern
    box = re.search(r'data-probe="([^"]+)"', dom)
    assert box is not None, "the page did not finish loading"
    left, top, right, bottom, level_top, inner_w, inner_h, page_w = map(
        float, box.group(1).split(",")
    )
    # Headless Chromium's viewport is the window less its (invisible) frame: 757 of 900 px.
    assert inner_w == width and 700 <= inner_h <= SCREEN_H
    # The verdict and the level's explanation are on the first screen; nothing overflows.
    assert 0 < top < bottom < inner_h and level_top < inner_h
    assert page_w <= width and right <= width
    assert f'data-verdict="{verdict}"' in dom

    from matplotlib.image import imread

    shot = tmp / f"shot-{width}.png"
    chromium(
        [f"--window-size={width},{SCREEN_H}", "--virtual-time-budget=10000",
         f"--screenshot={shot}", report.as_uri()],
        tmp / f"profile-{width}",
    )  # fmt: skip
    pixels = np.asarray(imread(shot))[..., :3]
    assert pixels.shape[:2] == (SCREEN_H, width)
    pixels = np.rint(pixels * 255).astype(int)
    # The banner's left padding (no text there): all of it in the verdict's colour.
    pad = pixels[int(top) + 3 : int(bottom) - 3, int(left) + 3 : int(left) + 10]
    assert pad.size > 0
    assert np.abs(pad - np.array(BANNER_RGB[verdict])).max() <= 3
    # The rest of the first screen is a page, not a blank: text, cards and the banner.
    assert np.unique(pixels.reshape(-1, 3)[::97], axis=0).shape[0] > 30


@pytest.mark.parametrize("width", [1400, 700])
def test_certified_report_at_two_widths(bundle: Path, tmp_path: Path, width: int) -> None:
    # 5 plots (500 h of exposure reach the rate-plot floor) + 4 failed real episodes × 4 frames.
    check_page(bundle / "report.html", width, tmp_path, "red", images=5 + 16)
    # Text from the incident narrative arrives as text, not as markup.
    html = (bundle / "report.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_amber_banner_on_screen(tmp_path: Path) -> None:
    """A window with nothing failing and one inconclusive check is amber, on screen too."""
    cert = {
        "protocol": {"name": "p", "version": "1", "window": {"id": "w", "start": "2026-11-01",
                                                             "end": "2026-11-30"}},
        "window": {"valid": True, "exposure_hours": 320.0},
        "level": {"level": 0, "assigned": "AAI-0", "procedure_name": "AAI-0 Fixed Automation"},
        "embodiment": {
            "gates": {
                "AAI-2": {
                    "name": "AAI-2 (Robotics)",
                    "checks": [
                        {"id": "aai2.e_min", "name": "E ≥ 0.6", "verdict": "pass"},
                        {"id": "aai2.ra_min", "name": "RA ≥ 0.5", "verdict": "inconclusive",
                         "remaining": {"trials": 14.0}},
                    ],
                }
            }
        },
    }  # fmt: skip
    report = tmp_path / "report.html"
    report.write_text(render_report(cert, {}), encoding="utf-8")
    check_page(report, 1400, tmp_path, "amber", images=0)
