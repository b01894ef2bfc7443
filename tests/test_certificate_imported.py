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
    # The fixture's real side (as designed in the embodiment tests): 36 of 40 first real
    # attempts succeed, AR = 36/40 = 0.9; its sim side 38/40, so S2R = 1 − |0.95 − 0.9| = 0.95.
    assert cert["embodiment"]["AR"]["value"] == pytest.approx(0.9)
    assert cert["embodiment"]["S2R"]["value"] == pytest.approx(0.95)
    assert any("without a window id" in n for n in cert["embodiment"]["notes"])
    assert main(["verify", str(out), "--db", str(db)]) == 0
