"""Paired sim−real gap (Newcombe method 10), S2R, TOST, McNemar and post-stratification."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    gap_equivalence_test,
    mcnemar_test,
    paired_gap_interval,
    reweight_to_real,
    sim_to_real_agreement,
)
from embodied_eval.stats.proportions import wilson_bounds


def test_newcombe_first_check():
    # a=59, b=6, c=16, d=80: n = 161, D = (65 − 75)/161 = −0.0621.
    est = paired_gap_interval(59, 6, 16, 80)
    assert est.value == pytest.approx(-10 / 161)
    assert (est.low, est.high) == pytest.approx((-0.1186, -0.0046), abs=5e-5)
    assert est.n == 161


def test_newcombe_second_check_95_and_90():
    # a=70, b=12, c=4, d=14: D = (82 − 74)/100 = 0.08.
    est = paired_gap_interval(70, 12, 4, 14)
    assert est.value == pytest.approx(0.08)
    assert (est.low, est.high) == pytest.approx((0.0001, 0.1611), abs=5e-5)
    est90 = paired_gap_interval(70, 12, 4, 14, level=0.90)
    assert (est90.low, est90.high) == pytest.approx((0.0131, 0.1477), abs=5e-5)


def test_paired_interval_is_narrower_than_independent():
    # Treating the sides as independent (Newcombe's square-and-add with φ = 0, on Wilson bounds
    # of 82/100 and 74/100) gives [−0.0352, 0.1929] per the notes; the paired one is inside it.
    l1, u1 = wilson_bounds(82, 100)
    l2, u2 = wilson_bounds(74, 100)
    low = 0.08 - math.sqrt((0.82 - l1) ** 2 + (u2 - 0.74) ** 2)
    high = 0.08 + math.sqrt((0.74 - l2) ** 2 + (u1 - 0.82) ** 2)
    assert (low, high) == pytest.approx((-0.0352, 0.1929), abs=5e-5)
    est = paired_gap_interval(70, 12, 4, 14)
    assert est.low > low and est.high < high


def test_no_pairs():
    assert paired_gap_interval(0, 0, 0, 0).value is None


def test_s2r_interval_when_gap_excludes_zero():
    # Gap [0.0001, 0.1611] excludes 0 → S2R in [1 − 0.1611, 1 − 0.0001], value 1 − 0.08.
    est = sim_to_real_agreement(70, 12, 4, 14)
    assert est.value == pytest.approx(0.92)
    assert (est.low, est.high) == pytest.approx((0.8389, 0.9999), abs=5e-5)
    # Negative gap [−0.1186, −0.0046] → [1 − 0.1186, 1 − 0.0046].
    est = sim_to_real_agreement(59, 6, 16, 80)
    assert est.value == pytest.approx(1 - 10 / 161)
    assert (est.low, est.high) == pytest.approx((0.8814, 0.9954), abs=5e-5)


def test_s2r_interval_when_gap_contains_zero():
    gap = paired_gap_interval(70, 5, 5, 20)  # D = 0
    assert gap.low < 0 < gap.high
    est = sim_to_real_agreement(70, 5, 5, 20)
    assert est.value == 1.0 and est.high == 1.0
    assert est.low == pytest.approx(1 - max(abs(gap.low), abs(gap.high)))


def test_tost_uses_the_90_percent_interval():
    # 90 % interval [0.0131, 0.1477]: inside ±0.15, not inside ±0.14.
    res = gap_equivalence_test(70, 12, 4, 14, margin=0.15)
    assert res.equivalent is True
    assert res.interval.level == pytest.approx(0.90)
    assert res.interval.high == pytest.approx(0.1477, abs=5e-5)
    assert gap_equivalence_test(70, 12, 4, 14, margin=0.14).equivalent is False
    assert gap_equivalence_test(0, 0, 0, 0, margin=0.5).equivalent is False
    assert res.to_json()["equivalent"] is True


def test_mcnemar_exact_and_chi_square():
    # Exact: 2·P(X ≤ 4 | 16, ½) = 2·(1 + 16 + 120 + 560 + 1820)/65536 = 5034/65536.
    res = mcnemar_test(70, 12, 4, 14)
    assert res.exact is True
    assert res.pvalue == pytest.approx(5034 / 65536)
    # Chi-square with continuity correction: (|30 − 10| − 1)²/40 = 9.025.
    res = mcnemar_test(100, 30, 10, 50)
    assert res.exact is False
    assert res.statistic == pytest.approx(9.025)
    assert res.pvalue == pytest.approx(stats.chi2.sf(9.025, 1))
    assert mcnemar_test(5, 0, 0, 5).pvalue == 1.0


def test_reweight_to_real_hand_example():
    # Sim: stratum a 8/10, stratum b 15/30; real: 50 % a, 50 % b.
    # Value = 0.5·0.8 + 0.5·0.5 = 0.65; weights a: 0.5/0.25 = 2, b: 0.5/0.75 = 2/3.
    # Var = 0.25·(8.5/11)(2.5/11)/10 + 0.25·(15.5/31)(15.5/31)/30 = 0.0043905 + 0.0020833
    # = 0.0064738; half-width 1.959964·0.0804601 = 0.157699 → [0.4923, 0.8077].
    sim_strata = ["a"] * 10 + ["b"] * 30
    sim_success = [1] * 8 + [0] * 2 + [1] * 15 + [0] * 15
    est = reweight_to_real(sim_strata, sim_success, ["a"] * 50 + ["b"] * 50)
    assert est.value == pytest.approx(0.65)
    assert (est.low, est.high) == pytest.approx((0.4923, 0.8077), abs=5e-5)
    assert est.extra["weights"] == pytest.approx({"a": 2.0, "b": 2 / 3})
    assert "post-stratified" in est.method


def test_reweight_errors():
    with pytest.raises(EvalError, match="no sim episodes"):
        reweight_to_real(["a", "a"], [1, 0], ["a", "c"])
    with pytest.raises(EvalError):
        reweight_to_real(["a"], [1, 0], ["a"])
    with pytest.raises(EvalError):
        reweight_to_real(["a", "a"], [1, 2], ["a"])


def test_bad_table():
    with pytest.raises(EvalError):
        paired_gap_interval(1, -1, 0, 0)
