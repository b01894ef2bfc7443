"""`embodied-eval compare --policies`: the adaptive N-policy comparison from the store (worked by
hand) and in sim (fresh shared rows, resumable), and its one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.store.core import Store
from tests.conftest import make_episode

pytestmark = pytest.mark.timeout(180)

PROTOCOL = str(Path(__file__).parent / "data" / "compare_tiny.toml")
SCRIPTED = "sim_suites.policies:scripted"
NOISY = "sim_suites.policies:degraded?action_noise=0.8"


def _store(tmp_path: Path, outcomes: dict[str, list[int]]) -> str:
    eps = []
    for policy, zs in outcomes.items():
        for k, z in enumerate(zs):
            eps.append(
                make_episode(
                    episode_id=f"{policy}-{k}", pair_id=f"{policy}-p{k}", policy=policy,
                    quality=0.9 if z else 0.1, task_id=f"push/block_{k % 5}", family="push",
                    seed=k, side="sim", engine="mujoco",
                    started_at=f"2026-11-02T10:{k % 60:02d}:00Z",
                )
            )  # fmt: skip
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episodes(eps)
    return str(db)


def test_stored_best_found_at_the_hand_computed_instance(tmp_path: Path, capsys):
    # A succeeds on every instance, B and C fail on every one: each instance gives D = 1 for
    # A–B and A–C, and the "A better" wealth reaches K(K − 1)/α = 120 at instance 10 (worked in
    # tests/test_stats_allocation.py). All three run on each instance until then: 30 episodes.
    db = _store(tmp_path, {"A": [1] * 20, "B": [0] * 20, "C": [0] * 20})
    assert main(["compare", "--db", db, "--policies", "A,B,C", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decision"] == "best: A"
    assert out["instances"] == 10 and out["trials"] == 30
    assert out["threshold"] == pytest.approx(120.0)
    assert out["instances_available"] == 20 and out["episodes_reused"] == 30
    # Every instance is used once, each by all three policies on the same task and seed.
    seeds = [(u["task"], u["seed"]) for u in out["instances_used"]]
    assert len(set(seeds)) == 10
    for used in out["instances_used"]:
        assert sorted(used["episodes"]) == ["A", "B", "C"]
        assert {e.split("-")[1] for e in used["episodes"].values()} == {str(used["seed"])}
    # The same store gives the same order (the seed comes from names and keys, not outcomes).
    assert main(["compare", "--db", db, "--policies", "A,B,C", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["instances_used"] == out["instances_used"]


def test_stored_order_and_running_out(tmp_path: Path, capsys):
    db = _store(tmp_path, {"A": [1] * 6, "B": [0] * 6, "C": [1, 0] * 3})
    assert main(["compare", "--db", db, "--policies", "A,B,C", "--decide", "order"]) == 0
    text = capsys.readouterr().out
    assert "decision: continue" in text and "not decided with the 6 instance(s)" in text


def test_in_sim_runs_the_chosen_policies_on_fresh_shared_rows_and_resumes(tmp_path: Path, capsys):
    db = str(tmp_path / "s.db")
    argv = ["compare", PROTOCOL, "--policies", f"{SCRIPTED},{NOISY}", "--engine", "mujoco",
            "--max-trials", "4", "--db", db, "--out", str(tmp_path / "out"), "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trials"] <= 4 and out["decision"] in ("undecided", "best: " + SCRIPTED)
    with Store(db) as store:
        eps = {e.episode_id: e for e in store.episodes()}
    assert len(eps) == out["trials"]
    rows = set()
    for used in out["instances_used"]:
        got = [eps[i] for i in used["episodes"].values()]
        assert {e.policy for e in got} == {SCRIPTED, NOISY}
        assert len({(e.task_id, e.seed, json.dumps(dict(e.drift), sort_keys=True))
                    for e in got}) == 1  # fmt: skip
        rows.add((used["task"], used["seed"]))
    assert len(rows) == len(out["instances_used"])  # never the same row twice
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["episodes_reused"] == again["trials"] == out["trials"]
    assert again["instances_used"] == out["instances_used"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "A"], "at least two"),
        (["--policies", "A,A"], "named twice"),
        (["--policies", "A,Z"], "no stored episodes of 'Z'"),
        (["--policies", "A,B", "--decide", "worst"], "best or order"),
        (["--policies", "A,B", "--a", "A"], "drop --policy-a/-b and --a/--b"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, capsys, extra, message):
    db = _store(tmp_path, {"A": [1] * 3, "B": [0] * 3})
    assert main(["compare", "--db", db, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
