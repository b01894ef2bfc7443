"""Adaptive allocation over N policies: thresholds and a decision worked by hand, what runs
next, type-I error at α between equal policies (seeded simulation), and the fixed design."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.stats.allocation import (
    CONTINUE,
    UNDECIDED,
    RankingAllocation,
    winner_threshold,
    within_threshold,
)
from embodied_eval.stats.allocation_sim import (
    adaptive_oc,
    design_sd,
    judge,
    round_robin_instances,
    round_robin_oc,
)


def test_thresholds():
    # Bonferroni over the K(K − 1) one-sided tests: 3 policies at α = 0.05 → 6/0.05 = 120;
    # two policies give the two-policy test's 2/α = 40. "Within δ": 1/β = 1/0.2 = 5.
    assert winner_threshold(3, 0.05) == pytest.approx(120.0)
    assert winner_threshold(2, 0.05) == pytest.approx(40.0)
    assert within_threshold(0.8) == pytest.approx(5.0)


def test_straight_wins_decide_best_at_the_hand_computed_instance():
    # A always succeeds, B and C always fail: D_AB = D_AC = 1 on every instance. Bets (4
    # pseudo-trials at D = 0, variance 0.5; λ = min(0.8, g/(v̂ + g²)), g = max(μ̂, δ)):
    #   n=0: μ̂ 0, v̂ 0.5 → λ 0.2/0.54 = 0.370370, ln(1 + λ) = 0.3150810
    #   n=1: μ̂ 0.2, v̂ 0.4 → λ 0.454545, ln 1.454545 = 0.3746934
    #   n=2: μ̂ 1/3, v̂ 1/3 → λ 0.75, ln 1.75 = 0.5596158
    #   n≥3: λ capped at 0.8, ln 1.8 = 0.5877867 each
    # After 9 instances 0.3150810 + 0.3746934 + 0.5596158 + 6 · 0.5877867 = 4.7761104, short
    # of ln 120 = 4.7874917; after 10, 5.3638971 → "best: A" at instance 10, with all three run
    # on each (30 episodes).
    test = RankingAllocation(["A", "B", "C"], "best", delta=0.2, alpha=0.05, max_trials=100)
    for i in range(1, 11):
        chosen, _ = test.choose()
        assert set(chosen) == {"A", "B", "C"}
        decision = test.update({"A": 1, "B": 0, "C": 0})
        if i == 9:
            assert decision == CONTINUE
            assert test.state.log_wealth[0, 0, 1] == pytest.approx(4.7761104, abs=1e-6)
    assert test.decision == "best: A"
    assert test.trials == 30 and test.rows == 10
    assert test.state.log_wealth[0, 0, 1] == pytest.approx(5.3638971, abs=1e-6)
    # Two policies: the threshold is 2/α = 40 (ln 3.688879): decided at instance 8, as the
    # two-policy test on the same data.
    two = RankingAllocation(["A", "B"], "best", max_trials=100)
    while two.decision == CONTINUE:
        two.update({"A": 1, "B": 0})
    assert two.decision == "best: A" and two.rows == 8


def test_next_policies_drop_what_the_decision_no_longer_needs():
    test = RankingAllocation(["A", "B", "C"], "best", max_trials=1000)
    st = test.state
    st.direct[0, 0, 2] = True  # A is already decided better than C
    st.sums[0] = [5, 3, 0]
    st.runs[0] = [6, 6, 6]
    assert st.leader(st.better()).tolist() == [0]
    assert test.choose()[0] == ("A", "B")  # C is out: only A against B still matters
    st.direct[0, 1, 0] = True  # B beat A: B leads, and B > A > C covers C by transitivity
    assert st.leader(st.better()).tolist() == [1]
    assert test.next_policies() == []
    assert st.decision(0, test.policies) == "best: B"
    order = RankingAllocation(["A", "B", "C"], "order", max_trials=1000)
    order.state.direct[0, 0, 1] = True  # A > B decided; B and C still open
    order.state.sums[0] = [5, 3, 1]
    order.state.runs[0] = [6, 6, 6]
    assert order.choose()[0] == ("B", "C")


def test_equal_policies_end_within_delta_and_the_cap_ends_undecided():
    # D = 0 on every instance: both "no difference" e-processes grow by ln(1 + 0.2 λ_e) per
    # trial and reach 1/β = 5; the two are then "within δ".
    test = RankingAllocation(["A", "B"], "best", max_trials=400)
    while test.decision == CONTINUE:
        test.update({"A": 1, "B": 1})
    assert test.decision == "best within δ: A, B"
    capped = RankingAllocation(["A", "B", "C"], "order", max_trials=6)
    capped.update({"A": 1, "B": 0, "C": 1})
    assert capped.update({"A": 0, "B": 1, "C": 0}) == UNDECIDED


def test_task_choice_balances_the_tasks_the_chosen_policies_have_seen():
    test = RankingAllocation(["A", "B"], "best", max_trials=100)
    test.update({"A": 1, "B": 0}, task="push")
    assert test.choose(["push", "pick"])[1] == "pick"
    test.update({"A": 0, "B": 0}, task="pick")
    test.update({"A": 1, "B": 1}, task="pick")
    assert test.choose(["push", "pick"])[1] == "push"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policies": ["A"]}, "at least two"),
        ({"policies": ["A", "A"]}, "named twice"),
        ({"policies": ["A", "B"], "decide": "worst"}, "best or order"),
        ({"policies": ["A", "B"], "alpha": 0}, "alpha"),
        ({"policies": ["A", "B"], "power": 1}, "power"),
        ({"policies": ["A", "B", "C"], "max_trials": 2}, "max_trials"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(EvalError, match=message):
        RankingAllocation(**kwargs)


def test_update_refuses_unknown_policies_and_non_binary_success():
    test = RankingAllocation(["A", "B"], max_trials=10)
    with pytest.raises(EvalError, match="not one of"):
        test.update({"A": 1, "Z": 0})
    with pytest.raises(EvalError, match="0 or 1"):
        test.update({"A": 0.5, "B": 0})


def test_type_one_error_at_alpha_between_equal_policies():
    # Six equal policies (success 0.5), 300 seeded runs per decision: a "better" may be claimed
    # in at most α of them (+2 Monte Carlo SE).
    bound = 0.05 + 2 * math.sqrt(0.05 * 0.95 / 300)
    for decide in ("best", "order"):
        oc = adaptive_oc([0.5] * 6, decide, np.random.default_rng(31), reps=300,
                         max_trials=3000)  # fmt: skip
        assert oc.undecided < 0.05  # equal policies end "within δ", not at the cap
        assert oc.wrong_better <= bound
    # The simulation can see a miscalibrated rule: each of the 30 one-sided tests at the
    # two-policy threshold 2/α (no split; α' = 30/40 here) claims a best far more often.
    loose = adaptive_oc([0.5] * 6, "best", np.random.default_rng(31), reps=300,
                        max_trials=3000, alpha=30 / 40)  # fmt: skip
    assert loose.wrong_better > bound


def test_spread_policies_find_the_best_with_fewer_trials_than_round_robin():
    # Six policies 0.8, 0.6, ..., 0.2: the round-robin fixed design needs K·n episodes,
    # n = ⌈(z_(1 − 0.05/10) + z_0.8)² σ²_D / δ²⌉ with σ²_D = 0.6·0.6 + 0.4·0.4 − 0.04 = 0.48:
    # (2.575829 + 0.841621)² · 0.48 / 0.04 = 140.16 → 141 instances, 846 episodes.
    n = round_robin_instances(6, "best", 0.2, design_sd(0.2))
    assert n == 141
    rng = np.random.default_rng(7)
    oc = adaptive_oc([0.8, 0.6, 0.5, 0.4, 0.3, 0.2], "best", rng, reps=300, max_trials=4000)
    assert oc.wrong_better == 0.0 and oc.correct >= 0.6
    assert oc.mean_trials < 0.7 * 6 * n


def test_judge_reads_decisions():
    names, rates = ["A", "B", "C"], [0.8, 0.5, 0.5]
    assert judge("best: A", rates, names, 0.2) == (False, False)
    assert judge("best: B", rates, names, 0.2) == (True, False)
    assert judge("best within δ: A, B", rates, names, 0.2) == (False, True)
    assert judge("order: A > B ≈ C", rates, names, 0.2) == (False, False)
    assert judge("order: A > B > C", rates, names, 0.2) == (True, False)


def test_round_robin_fixed_design_errors():
    rng = np.random.default_rng(3)
    equal = round_robin_oc([0.5] * 4, "best", 126, rng, reps=2000)
    assert equal.wrong_better <= 0.05 and equal.mean_trials == 4 * 126
    apart = round_robin_oc([0.9, 0.5, 0.1], "order", 60, rng, reps=500)
    assert apart.wrong_better == 0.0
