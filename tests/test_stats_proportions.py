"""Wilson and Clopper–Pearson intervals and demonstration trials, against the statistics notes.

Hand checks: CP one-sided lower of n/n successes is α^(1/n): 0.05^(1/11) = 0.7616 ≥ 0.75 but
0.05^(1/10) = 0.7411 < 0.75, so 11 straight successes are needed for "AR ≥ 0.75". CP upper of
0/20 at 95 % two-sided is 1 − 0.025^(1/20) = 0.1684; Wilson upper of 0/20 is z²/(n + z²) =
3.8415/23.8415 = 0.1611.
"""

from __future__ import annotations

import pytest
from statsmodels.stats.proportion import proportion_confint

from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    clopper_pearson_interval,
    trials_to_demonstrate_rate,
    wilson_interval,
)

TABLE = [
    (45, 60, (0.6277, 0.8422), (0.6214, 0.8528)),
    (9, 12, (0.4677, 0.9111), (0.4281, 0.9451)),
    (20, 20, (0.8389, 1.0), (0.8316, 1.0)),
    (0, 20, (0.0, 0.1611), (0.0, 0.1684)),
]


@pytest.mark.parametrize(("s", "n", "wilson", "cp"), TABLE)
def test_wilson_and_cp_table(s, n, wilson, cp):
    w = wilson_interval(s, n)
    assert w.value == pytest.approx(s / n)
    assert (w.low, w.high) == pytest.approx(wilson, abs=5e-5)
    c = clopper_pearson_interval(s, n)
    assert (c.low, c.high) == pytest.approx(cp, abs=5e-5)
    assert c.n == n and c.sided == "two"


@pytest.mark.parametrize(("s", "n"), [(45, 60), (9, 12), (20, 20), (0, 20), (1, 3)])
def test_agree_with_statsmodels(s, n):
    assert wilson_interval(s, n).low == pytest.approx(
        proportion_confint(s, n, method="wilson")[0], abs=1e-12
    )
    low, high = proportion_confint(s, n, method="beta")
    c = clopper_pearson_interval(s, n)
    assert (c.low, c.high) == pytest.approx((low, high), abs=1e-12)


def test_edge_cases_hand_computed():
    assert clopper_pearson_interval(0, 20).high == pytest.approx(1 - 0.025 ** (1 / 20))
    assert wilson_interval(0, 20).high == pytest.approx(3.841459 / 23.841459, abs=1e-6)


@pytest.mark.parametrize(
    ("s", "n", "bound", "passes"),
    [
        (45, 60, 0.6415, False),
        (11, 11, 0.7616, True),
        (27, 30, 0.7614, True),
        (52, 60, 0.7723, True),
    ],
)
def test_gate_lower_bounds(s, n, bound, passes):
    est = clopper_pearson_interval(s, n, sided="lower")
    assert est.low == pytest.approx(bound, abs=5e-5)
    assert est.high == 1.0 and est.sided == "lower"
    assert (est.low >= 0.75) is passes
    # One-sided 95 % lower = two-sided 90 % lower.
    assert est.low == pytest.approx(clopper_pearson_interval(s, n, level=0.90).low)


def test_one_sided_upper():
    # 0 successes in 20: upper = 1 − 0.05^(1/20) = 0.1391.
    est = clopper_pearson_interval(0, 20, sided="upper")
    assert est.low == 0.0
    assert est.high == pytest.approx(1 - 0.05 ** (1 / 20))


def test_eleven_straight_successes_needed():
    assert 0.05 ** (1 / 10) < 0.75 <= 0.05 ** (1 / 11)
    assert trials_to_demonstrate_rate(0.75, 0, 0) == 11


def test_trials_to_demonstrate_is_minimal():
    extra = trials_to_demonstrate_rate(0.75, 45, 60)
    assert extra is not None and extra > 0
    assert clopper_pearson_interval(45 + extra, 60 + extra, sided="lower").low >= 0.75
    assert clopper_pearson_interval(45 + extra - 1, 60 + extra - 1, sided="lower").low < 0.75
    assert trials_to_demonstrate_rate(0.75, 52, 60) == 0  # 0.7723 already clears
    assert trials_to_demonstrate_rate(1.0, 5, 5) is None
    assert trials_to_demonstrate_rate(0.999, 0, 0, max_extra=100) is None


def test_no_trials_gives_missing_value():
    assert wilson_interval(0, 0).value is None
    assert clopper_pearson_interval(0, 0).value is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: wilson_interval(5, 4),
        lambda: wilson_interval(-1, 4),
        lambda: clopper_pearson_interval(1, 4, sided="left"),
        lambda: clopper_pearson_interval(1, 4, level=0.0),
        lambda: trials_to_demonstrate_rate(-0.1, 1, 2),
    ],
)
def test_bad_input(call):
    with pytest.raises(EvalError):
        call()
