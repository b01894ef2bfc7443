"""The certificate of a window holding several policies carries their leaderboard, its report
shows it, and `verify --db` recomputes it from the store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from embodied_eval.certificate import issue_certificate, recompute_check, verify_bundle
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.store.core import Store
from embodied_eval.store.signing_keys import create_private_key
from tests.test_certificate import build_window, write_evidence

pytestmark = pytest.mark.timeout(300)


def test_window_with_three_policies_has_a_verified_leaderboard(tmp_path: Path) -> None:
    protocol_path, db = build_window(tmp_path, near_miss=False)
    protocol = load_protocol(protocol_path)
    with Store(db) as store:
        sim = store.episodes(window=protocol.window_id, side="sim")
        extra = []
        for name, quality in (("rival_a", 0.1), ("rival_b", 0.9)):
            for k, ep in enumerate(sim):
                extra.append(replace(ep, episode_id=f"{name}-{ep.episode_id}",
                                     pair_id=f"{name}-{ep.pair_id}", policy=name,
                                     quality=quality if k % 3 else 0.5))  # fmt: skip
        store.write_episodes(extra)
    key = tmp_path / "k.pem"
    create_private_key(key)
    issued = issue_certificate(protocol_path=protocol_path, db=db, key_path=key,
                               out=tmp_path / "bundle", evidence_path=write_evidence(tmp_path))  # fmt: skip
    board = issued.certificate["leaderboard"]
    assert board["connected"] is True and board["model"] == "davidson"
    assert sorted(board["policies"]) == sorted(["rival_a", "rival_b", protocol.sim_policy])
    rows = board["pieces"][0]["leaderboard"]
    assert rows[-1]["policy"] == "rival_a"  # fails two of every three instances
    assert sum(r["p_best"] for r in rows) == pytest.approx(1.0)
    html = (issued.path / "report.html").read_text(encoding="utf-8")
    assert '<section id="leaderboard"><h2>Leaderboard</h2>' in html and "rival_b" in html
    recompute_check(verify_bundle(issued.path), db)
