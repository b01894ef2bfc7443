"""`embodied-eval rank`: pairwise outcomes from stored episodes, the leaderboard in JSON and HTML,
pieces of the comparison graph, and the one-line refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.store.core import Store
from tests.conftest import make_episode


def _ep(policy: str, k: int, success: bool, *, quality: float | None = None, family="push",
        task=None, window="w1"):  # fmt: skip
    q = quality if quality is not None else (0.9 if success else 0.1)
    return make_episode(
        episode_id=f"{policy}-{k}", pair_id=f"{policy}-p{k}", policy=policy, quality=q,
        task_id=task or f"{family}/block_{k % 3}", family=family, seed=k, side="sim",
        engine="mujoco", started_at=f"2026-11-02T10:{k % 60:02d}:00Z", window=window,
    )  # fmt: skip


def _store(tmp_path: Path, episodes) -> str:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episodes(episodes)
    return str(db)


def _fixture_episodes():
    """Instances k = 0..9, each run by A, B and C, with the success table below."""
    # k:      0  1  2  3  4  5  6  7  8  9
    a = [1, 1, 1, 1, 1, 1, 0, 0, 1, 1]
    b = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    c = [0, 0, 0, 0, 1, 1, 0, 1, 0, 1]
    eps = []
    for k in range(10):
        for name, z in (("A", a), ("B", b), ("C", c)):
            eps.append(_ep(name, k, bool(z[k])))
    return eps


# Counts by hand from the table in `_fixture_episodes` (win = one succeeds, the other fails):
# A–B: A wins k0–5 (6), B wins k6,7 (2), ties k8,9 (2).
# A–C: A wins k0–3, k8 (5); C wins k7 (1); ties k4,5,6,9 (4).
# B–C: B wins k6, k8 (2); C wins k4, k5 (2); ties k0–3, k7, k9 (6).
HAND_GRAPH = {("A", "B"): (6, 2, 2), ("A", "C"): (5, 1, 4), ("B", "C"): (2, 2, 6)}


def test_rank_json_counts_and_half_win_strengths_by_hand(tmp_path: Path, capsys):
    db = _store(tmp_path, _fixture_episodes())
    assert main(["rank", "--db", db, "--ties", "half", "--resamples", "200", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    graph = {(g["a"], g["b"]): (g["a_wins"], g["b_wins"], g["ties"]) for g in
             out["comparison_graph"]}  # fmt: skip
    assert graph == HAND_GRAPH
    assert out["connected"] is True and out["model"] == "half"
    [piece] = out["pieces"]
    # Half wins: a_AB = 7, a_BA = 3, a_AC = 7, a_CA = 3, a_BC = a_CB = 5. The likelihood
    # equations Σ_j a_ij = Σ_j n_ij σ(θ_i − θ_j) give θ_B = θ_C by symmetry (B and C have
    # the same counts against A and tie 5–5 between them) and 14 = 20 σ(θ_A − θ_B), so
    # θ_A − θ_B = ln(14/6) and centred θ_A = (2/3) ln(7/3) = 0.56486, θ_B = θ_C = −0.28243.
    s = {r["policy"]: r["strength"]["value"] for r in piece["leaderboard"]}
    assert s["A"] == pytest.approx(2 / 3 * math.log(7 / 3), abs=1e-9)
    assert s["B"] == pytest.approx(-1 / 3 * math.log(7 / 3), abs=1e-9)
    assert s["C"] == pytest.approx(-1 / 3 * math.log(7 / 3), abs=1e-9)
    assert piece["leaderboard"][0]["policy"] == "A"
    row = piece["leaderboard"][0]
    assert row["strength"]["low"] < row["strength"]["value"] < row["strength"]["high"]
    assert row["comparisons"] == 20
    assert out["success_by_family"]["A"]["push"]["value"] == pytest.approx(0.8)
    assert out["success_by_family"]["C"]["push"]["n"] == 10


def test_rank_graded_uses_quality(tmp_path: Path, capsys):
    # Both fail on every instance, but A always has the higher quality: success gives ties only,
    # --graded gives A every win.
    eps = []
    for k in range(6):
        eps += [_ep("A", k, False, quality=0.5), _ep("B", k, False, quality=0.3),
                _ep("C", k, False, quality=0.3 if k % 2 else 0.4)]  # fmt: skip
    db = _store(tmp_path, eps)
    assert main(["rank", "--db", db, "--graded", "--resamples", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    graph = {(g["a"], g["b"]): (g["a_wins"], g["b_wins"], g["ties"]) for g in
             out["comparison_graph"]}  # fmt: skip
    assert graph == {("A", "B"): (6, 0, 0), ("A", "C"): (6, 0, 0), ("B", "C"): (0, 3, 3)}
    assert out["pieces"][0]["leaderboard"][0]["policy"] == "A"
    assert "never lost" in " ".join(out["notes"])


def test_rank_names_a_disconnected_graph_and_writes_html(tmp_path: Path, capsys):
    eps = _fixture_episodes()
    # D and E meet only each other, on their own instances.
    for k in range(20, 28):
        eps += [
            _ep("D", k, k % 4 != 0, task="push/block_9"),
            _ep("E", k, k % 2 == 0, task="push/block_9"),
        ]
    db = _store(tmp_path, eps)
    html = tmp_path / "board.html"
    assert main(["rank", "--db", db, "--resamples", "100", "--html", str(html), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["connected"] is False
    assert [sorted(p["policies"]) for p in out["pieces"]] == [["A", "B", "C"], ["D", "E"]]
    assert "piece 1: A, B, C; piece 2: D, E" in out["notes"][0]
    page = html.read_text()
    assert 'id="leaderboard"' in page and "2 pieces that never met" in page
    assert "<svg" in page and "Davidson" in page
    assert main(["rank", "--db", db, "--resamples", "100"]) == 0
    text = capsys.readouterr().out
    assert "piece 2: D, E" in text and "2 pieces" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "A"], "at least two policies (only 'A')"),
        (["--policies", "A,Z"], "no scored episodes of 'Z'"),
        (["--policies", "A,B,F"], "'F' shares no instance"),
        (["--policies", "F,G"], "never share an instance"),
        (["--window", "nope"], "no episodes stored in window 'nope'"),
        (["--ties", "rao"], "--ties"),
        (["--side", "moon"], "--side"),
    ],
)
def test_rank_bad_input_is_one_line(tmp_path: Path, capsys, extra, message):
    eps = _fixture_episodes()
    eps += [_ep("F", k, True, task="push/block_7") for k in range(40, 43)]
    eps += [_ep("G", k, True, task="push/block_8") for k in range(44, 47)]
    db = _store(tmp_path, eps)
    assert main(["rank", "--db", db, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
