"""The HTML report renders in a real browser (headless Chromium), opened from disk.

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
from embodied_eval.keys import create_private_key
from tests.test_certificate import build_window, write_evidence

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
)


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
    tmp = tmp_path_factory.mktemp("browser")
    protocol, db = build_window(tmp)
    key = tmp / "k.pem"
    create_private_key(key)
    out = tmp / "bundle"
    issue_certificate(
        protocol_path=protocol, db=db, key_path=key, out=out, evidence_path=write_evidence(tmp)
    )
    return out


def test_sections_render_and_every_image_decodes(bundle: Path, tmp_path: Path) -> None:
    report = bundle / "report.html"
    dom = chromium(
        ["--virtual-time-budget=10000", "--dump-dom", report.as_uri()], tmp_path / "profile"
    )
    for section in ("technicians", "safety", "certification", "integrity"):
        assert f'id="{section}"' in dom
    images = len(re.findall(r"<img\b", dom))
    assert images == 5
    # Set by the report's own script once every image has a non-zero natural width.
    match = re.search(r'<body[^>]*data-images-loaded="(\d+)"', dom)
    assert match is not None, "images did not all load"
    assert int(match.group(1)) == images
    # Text from the incident narrative arrives as text, not as markup.
    assert "<script>alert(1)</script>" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_screenshot_is_not_blank(bundle: Path, tmp_path: Path) -> None:
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    chromium(
        [
            "--window-size=1200,3000",
            "--virtual-time-budget=10000",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            (bundle / "report.html").as_uri(),
        ],
        tmp_path / "profile",
    )
    pixels = np.asarray(imread(shot))
    assert pixels.shape[:2] == (3000, 1200)
    # A blank page is one colour; the report has text, tables, banners and plots.
    distinct = np.unique(pixels.reshape(-1, pixels.shape[-1])[::97], axis=0)
    assert distinct.shape[0] > 50
