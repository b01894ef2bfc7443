"""A lab that imports its trials from a CSV file (no window or protocol hash columns) certifies."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from embodied_eval.cli.main import main

DATA = Path(__file__).parent / "data"


def test_imported_csv_without_window_column_certifies_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = pd.read_csv(DATA / "embodiment_pairs_ss_pos.csv", dtype=str, keep_default_na=False)
    frame = frame.drop(columns=["window"])
    episodes = tmp_path / "episodes.csv"
    frame.to_csv(episodes, index=False)
    db = tmp_path / "lab.db"
    assert main(["import", "episodes", str(episodes), "--db", str(db)]) == 0
    protocol = DATA / "embodiment_protocol.toml"
    out = tmp_path / "bundle"
    key = tmp_path / "k.pem"
    args = ["certify", "--protocol", str(protocol), "--db", str(db), "--key", str(key)]
    assert main([*args, "--create-key", "--out", str(out)]) == 0
    capsys.readouterr()
    cert = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    # the fixture's real side: every real episode has q ≥ q*, so the counted AR equals the
    # fraction of real successes in the file
    real = frame[frame["side"] == "real"]
    successes = sum(
        float(q) >= float(t) and s == "ok"
        for q, t, s in zip(real["quality"], real["target_quality"], real["status"], strict=True)
    )
    assert cert["embodiment"]["AR"]["value"] == pytest.approx(successes / len(real))
    assert any("without a window id" in n for n in cert["embodiment"]["notes"])
    assert main(["verify", str(out), "--db", str(db)]) == 0
