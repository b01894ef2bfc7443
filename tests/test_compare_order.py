"""Stored-episode comparisons cannot be fooled by the order pairs are stored in: a family-
stratified random order fixed before any outcome is read, per-family effects, "no difference"
only with the confidence sequence inside ±δ, and the fixed-n figure of the design."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.manifest import manifest_row_key, plan_manifest
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.records import Episode
from embodied_eval.runner.compare import compare_stored, stratified_order
from embodied_eval.stats.comparison import (
    B_BETTER,
    CONTINUE,
    NO_DIFFERENCE,
    SequentialComparison,
    design_fixed_n_pairs,
)
from embodied_eval.store.core import Store

A = "lab.policies:candidate"
B = "lab.policies:reference"
PROTOCOL = Path(__file__).parents[1] / "embodied_eval" / "data" / "example_protocol.toml"


def episodes_of(policy: str, fails: str) -> list[Episode]:
    """One stored sim episode per manifest row of the example protocol (25 instances × 3 drifts
    = 75 pairs), all started at the window's start: success (q 0.9) except on family `fails`
    (q 0.1)."""
    protocol = load_protocol(PROTOCOL)
    manifest = plan_manifest(protocol, engines=["mujoco"], sim_policy=policy, real_policy=policy)
    return [
        spec.to_episode(
            0.1 if spec.family == fails else 0.9, status="ok", started_at="2026-11-01T00:00:00Z"
        )
        for spec in manifest.side("sim")
    ]


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fails every pick_place pair; B succeeds everywhere. Sorted by id, the 15 drawer_open
    and 15 peg_insert pairs (all concordant) come before any pick_place pair."""
    db = tmp_path_factory.mktemp("compare") / "s.db"
    with Store(db) as store:
        store.write_episodes(episodes_of(A, "pick_place") + episodes_of(B, ""))
    return db


def replay(pairs: list[tuple[float, float]]) -> SequentialComparison:
    test = SequentialComparison(delta=0.2, alpha=0.05, power=0.8, max_trials=200)
    for xa, xb in pairs:
        if test.update(xa, xb) != CONTINUE:
            break
    return test


def test_the_sorted_order_fixture_decides_like_the_live_order(store_path: Path, capsys):
    with Store(store_path) as store:
        stored = store.episodes()
    by_row = {(e.policy, manifest_row_key(e.pair_id)): e for e in stored}
    # The live comparison runs the manifest's rows in its seeded run order.
    protocol = load_protocol(PROTOCOL)
    rows = plan_manifest(protocol, engines=["mujoco"], sim_policy=A, real_policy=A).side("sim")
    live = replay(
        [
            (
                float(by_row[A, manifest_row_key(s.pair_id)].success),
                float(by_row[B, manifest_row_key(s.pair_id)].success),
            )
            for s in rows
        ]
    )
    assert live.decision == B_BETTER
    # Read in id order the same store says "no difference" with mean A 1.000: 24 concordant
    # drawer_open and peg_insert pairs put the sequence inside ±0.2 (see the gate test below).
    a_sorted = sorted((e for e in stored if e.policy == A), key=lambda e: e.episode_id)
    by_id = replay(
        [
            (float(e.success), float(by_row[B, manifest_row_key(e.pair_id)].success))
            for e in a_sorted
        ]
    )
    assert by_id.decision == NO_DIFFERENCE and by_id.trials == 24 and by_id.sum_a == 24

    assert main(["compare", "--db", str(store_path), "--a", A, "--b", B, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decision"] == live.decision == B_BETTER
    assert out["mean_a"] < 1.0 and out["effect"]["high"] < 0.0
    families = {f["family"]: f for f in out["families"]}
    assert set(families) == {"drawer_open", "peg_insert", "pick_place", "push", "tool_use"}
    pick = families["pick_place"]
    assert pick["mean_a"] == 0.0 and pick["mean_b"] == 1.0 and pick["effect"]["value"] == -1.0
    for other in ("drawer_open", "peg_insert", "push", "tool_use"):
        assert families[other]["effect"]["value"] == 0.0
    assert sum(f["pairs"] for f in out["families"]) == out["trials"]
    # Stratified: the counts per family differ by at most one whatever the stopping point
    # (15 pairs in each family).
    counts = [f["pairs"] for f in out["families"]]
    assert max(counts) - min(counts) <= 1
    assert out["pair_order"].startswith("random, stratified by family")
    assert isinstance(out["order_seed"], int) and out["pairs_available"] == 75
    assert out["fixed_n_trials"] == 189

    # The same store and seed give the same order; another seed another order, same decision.
    assert main(["compare", "--db", str(store_path), "--a", A, "--b", B, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == out["episodes"]
    argv = ["compare", "--db", str(store_path), "--a", A, "--b", B, "--order-seed", "5", "--json"]
    assert main(argv) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["order_seed"] == 5 and other["decision"] == B_BETTER


def test_the_text_report_shows_families_order_and_the_design_fixed_n(store_path: Path, capsys):
    assert main(["compare", "--db", str(store_path), "--a", A, "--b", B]) == 0
    text = capsys.readouterr().out
    assert "decision: B better" in text
    assert "  pick_place: " in text and "mean A 0.000, mean B 1.000; Δ -1.000" in text
    assert "pair order: random, stratified by family" in text
    assert "needs 189 paired trials" in text


def test_no_difference_waits_for_the_sequence_to_lie_inside_delta():
    # D = 0 every trial. Both ±δ e-processes bet λ = min(0.8, 0.2/(v̂ + 0.04)), v̂ = 2/(4 + n),
    # and gain ln(1 + 0.2 λ) per trial: 0.071459, 0.087011, 0.101783, 0.115832, 0.129212,
    # 0.141970, then ln 1.16 = 0.148420 (capped). Cumulative after 12 trials 1.537787, after 13
    # 1.686207: the first ≥ ln(1/β) = ln 5 = 1.609438 is trial 13, where the old rule said
    # "no difference" beside a 95 % sequence of [−0.335, +0.335].
    test = SequentialComparison(delta=0.2, alpha=0.05, power=0.8)
    for _ in range(13):
        test.update(1, 1)
    assert test.log_wealth["E+"] == pytest.approx(1.686207, abs=1e-5)
    assert test.crossed == {"E+": True, "E-": True}
    assert test.decision == CONTINUE
    effect = test.effect()
    assert effect.low == pytest.approx(-0.335) and effect.high == pytest.approx(0.335)
    # The sequence's test of Δ ≥ m at the grid point m = 0.1975 (bet min(0.8/(1 − m),
    # 0.2/(v̂ + 0.04)), gain ln(1 + λ m)) has ln-wealth 3.6469 after 23 trials and 3.8266 after
    # 24, first above ln(2/α) = 3.688879 at trial 24; by symmetry m = −0.1975 too. Only then do
    # the kept points lie inside (−0.1975, 0.1975), so the hull (± one 0.0025 step) is inside ±0.2.
    decisions = [test.update(1, 1) for _ in range(11)]
    assert decisions[:10] == [CONTINUE] * 10 and decisions[10] == NO_DIFFERENCE
    assert test.trials == 24
    effect = test.effect()
    assert effect.low > -0.2 and effect.high < 0.2


def test_the_fixed_n_figure_is_the_designs():
    # (z_.975 + z_.8)² (1 − δ²) / δ² = 7.848876 · 0.96 / 0.04 = 188.37 → 189, before any trial
    # and whatever the outcomes (13 concordant pairs used to give a degenerate 2).
    assert design_fixed_n_pairs(0.2, 0.05, 0.8) == 189
    # δ = 0.1, α = 0.1, power 0.9: 8.563847 · 0.99 / 0.01 = 847.8 → 848.
    assert design_fixed_n_pairs(0.1, 0.1, 0.9) == 848
    test = SequentialComparison()
    assert test.to_json()["fixed_n_trials"] == 189
    for _ in range(13):
        test.update(1, 1)
    assert test.to_json()["fixed_n_trials"] == 189


def test_stratified_order_interleaves_families_in_proportion():
    families = ["a"] * 10 + ["b"] * 5 + ["c"] * 5
    order = stratified_order(families, seed=3)
    assert sorted(order) == list(range(20))
    assert order == stratified_order(families, seed=3)
    assert order != stratified_order(families, seed=4)
    for k in range(1, 21):
        seen = [families[i] for i in order[:k]]
        # Up to any point, each family's count is within 2 of its share (rounding both ends).
        for fam, n in (("a", 10), ("b", 5), ("c", 5)):
            assert abs(seen.count(fam) - k * n / 20) < 2


def test_an_order_seed_with_a_protocol_is_refused(capsys):
    argv = ["compare", str(PROTOCOL), "--policy-a", A, "--policy-b", B, "--order-seed", "1"]
    assert main(argv) == 2
    assert "--order-seed orders stored pairs" in capsys.readouterr().err


def test_compare_stored_rejects_a_negative_seed(store_path: Path):
    from embodied_eval.errors import EvalError

    with Store(store_path) as store:
        eps = store.episodes()
    with pytest.raises(EvalError, match="--order-seed"):
        compare_stored(eps, A, B, SequentialComparison(), order_seed=-1)
