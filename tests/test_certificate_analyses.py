"""Every analysis choice in the ledger: stored-data `compare` and `rank` runs are chained
`analysis` records with their seeds and outcomes, and a certificate lists every one run on its
window before it was issued (two runs on the same pairs with different seeds: both listed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.certificate.analyses import episodes_digest
from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.cli.main import main
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.store.core import Store
from embodied_eval.store.signing_keys import create_private_key
from tests.test_certificate import build_window

pytestmark = pytest.mark.timeout(240)
OTHER = "tests.other:policy"


def add_other_policy(db: Path, window: str) -> None:
    """The window's real episodes again under another policy: the same task instances and
    seeds, every other one failing."""
    with Store(db) as store:
        real = store.episodes(window=window, side="real")
        store.write_episodes(
            [
                e.replace(
                    episode_id=f"{e.episode_id}-other",
                    pair_id=f"{e.pair_id}-o",
                    policy=OTHER,
                    quality=0.9 if i % 2 else 0.1,
                )
                for i, e in enumerate(real)
            ]
        )


def compare(db: Path, a: str, seed: int, capsys: pytest.CaptureFixture[str]) -> dict:
    args = ["compare", "--db", str(db), "--a", a, "--b", OTHER, "--side", "real"]
    assert main([*args, "--order-seed", str(seed), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_compare_runs_on_the_same_pairs_are_both_in_the_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol_path, db = build_window(tmp_path)
    protocol = load_protocol(protocol_path)
    add_other_policy(db, protocol.window_id)
    policy = protocol.real_policy
    first = compare(db, policy, 11, capsys)
    second = compare(db, policy, 12, capsys)
    key = tmp_path / "owner.pem"
    create_private_key(key)
    out = tmp_path / "bundle"
    issue_certificate(protocol_path=protocol_path, db=db, key_path=key, out=out)
    cert = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    runs = cert["analyses"]["runs"]
    assert [r["command"] for r in runs] == ["compare", "compare"]
    assert [r["seed"] for r in runs] == [11, 12] and all(r["seed_given"] for r in runs)
    assert [r["outcome"] for r in runs] == [first["decision"], second["decision"]]
    assert [r["trials"] for r in runs] == [first["trials"], second["trials"]]
    assert runs[0]["policies"] == [policy, OTHER] and runs[0]["side"] == "real"
    # The digest names the episodes each run used (its own pairs, in any order).
    used = [x for p in first["episodes"] for x in (p["a"], p["b"])]
    assert runs[0]["episodes_sha256"] == episodes_digest(used)
    # Runs that used the same episodes are grouped (a run stopping early uses fewer pairs).
    same = runs[0]["episodes_sha256"] == runs[1]["episodes_sha256"]
    assert len(cert["analyses"]["repeated"]) == int(same)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Analyses run on this window" in html
    # A run after issue is not the certificate's, and the certificate still verifies.
    compare(db, policy, 13, capsys)
    recompute_check(verify_bundle(out), db)


def test_rank_records_its_bootstrap_seed(tmp_path: Path, capsys) -> None:
    protocol_path, db = build_window(tmp_path)
    protocol = load_protocol(protocol_path)
    add_other_policy(db, protocol.window_id)
    args = ["rank", "--db", str(db), "--window", protocol.window_id, "--resamples", "100"]
    assert main([*args, "--seed", "5", "--json"]) == 0
    capsys.readouterr()
    from embodied_eval.certificate.analyses import window_analyses

    runs = window_analyses(db, protocol.window_id, 10**9)["runs"]
    assert [(r["command"], r["seed"]) for r in runs] == [("rank", 5)]
    assert set(runs[0]["policies"]) == {protocol.real_policy, OTHER}


def test_runs_on_the_same_data_are_grouped(tmp_path: Path) -> None:
    from embodied_eval.certificate.analyses import record_analysis, window_analyses

    _, db = build_window(tmp_path)
    common = {"command": "compare", "window": "w", "policies": ("a", "b"), "side": "real",
              "trials": 4, "episode_ids": ["e2", "e1", "e3"]}  # fmt: skip
    record_analysis(db, seed=1, seed_given=True, outcome="no difference", **common)
    record_analysis(db, seed=2, seed_given=True, outcome="A better", **common)
    record_analysis(db, seed=3, seed_given=False, outcome="A better",
                    **{**common, "episode_ids": ["e1"]})  # fmt: skip
    out = window_analyses(db, "w", 10**9)
    assert len(out["runs"]) == 3
    assert out["repeated"] == [{"command": "compare", "episodes_sha256": episodes_digest(["e1", "e2", "e3"]),
                                "runs": 2, "seeds": [1, 2],
                                "outcomes": ["no difference", "A better"]}]  # fmt: skip
    assert window_analyses(db, "other", 10**9) == {"runs": [], "repeated": []}


def test_the_adaptive_comparison_of_many_policies_records_its_seed(tmp_path: Path, capsys) -> None:
    from embodied_eval.certificate.analyses import window_analyses

    protocol_path, db = build_window(tmp_path)
    protocol = load_protocol(protocol_path)
    add_other_policy(db, protocol.window_id)
    names = f"{protocol.real_policy},{OTHER}"
    args = ["compare", "--db", str(db), "--policies", names, "--side", "real"]
    assert main([*args, "--order-seed", "21", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    runs = window_analyses(db, protocol.window_id, 10**9)["runs"]
    assert [(r["command"], r["seed"], r["seed_given"]) for r in runs] == [("compare", 21, True)]
    assert runs[0]["outcome"] == shown["decision"] and runs[0]["policies"] == names.split(",")
