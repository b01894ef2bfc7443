"""Event rates, MTBF/MTBSI and demonstration hours against the statistics notes' vectors.

Hand arithmetic (chi-square quantiles from tables, 95 %):
    χ²(0.95; 2) = 5.9915 → 0 events, upper rate = 5.9915/2/100 h = 2.9957 per 100 h.
    χ²(0.975; 2) = 7.3778 → 0 events in 100 h, two-sided upper = 7.3778/200·100 = 3.6889.
    χ²(0.95; 8) = 15.507 → 3 events in 250 h: MTBF lower bound = 500/15.507 = 32.243 h.
    χ²(0.95; 6) = 12.592 → failure-terminated: 500/12.592 = 39.709 h.
"""

from __future__ import annotations

import math

import pytest
from statsmodels.stats.rates import confint_poisson

from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    hours_to_demonstrate_mtbf,
    hours_to_demonstrate_rate,
    mtbf_interval,
    mtbf_lower_bound,
    poisson_rate_interval,
    poisson_rate_upper,
)

# (k, H, two-sided rate/100 h, one-sided upper, MTBF time-terminated CI, lower time, lower failure)
RATE_TABLE = [
    (0, 100.0, (0.0, 3.6889), 2.9957, (27.109, math.inf), 33.381, None),
    (3, 250.0, (0.2475, 3.5069), 3.1015, (28.515, 404.091), 32.243, 39.709),
    (1, 500.0, (0.0051, 1.1143), 0.9488, (89.740, 19748.9), 105.399, 166.904),
    (12, 1000.0, (0.6201, 2.0962), 1.9443, (47.706, 161.275), 51.434, 54.922),
]


@pytest.mark.parametrize(("k", "hours", "two", "upper", "mtbf", "lower_t", "lower_f"), RATE_TABLE)
def test_rate_and_mtbf_table(k, hours, two, upper, mtbf, lower_t, lower_f):
    est = poisson_rate_interval(k, hours)
    assert est.value == pytest.approx(k / hours * 100)
    assert est.low == pytest.approx(two[0], abs=5e-5)
    assert est.high == pytest.approx(two[1], abs=5e-5)
    assert est.sided == "two" and est.n == k and est.level == 0.95

    up = poisson_rate_upper(k, hours)
    assert up.high == pytest.approx(upper, abs=5e-5)
    assert up.low == 0.0 and up.sided == "upper"

    ci = mtbf_interval(k, hours)
    assert ci.low == pytest.approx(mtbf[0], abs=5e-4)
    if math.isinf(mtbf[1]):
        assert math.isinf(ci.high)
    else:
        assert ci.high == pytest.approx(mtbf[1], abs=5e-2 if mtbf[1] > 1e4 else 5e-4)
    assert "time-terminated" in ci.method

    lb = mtbf_lower_bound(k, hours)
    assert lb.low == pytest.approx(lower_t, abs=5e-4)
    assert lb.sided == "lower" and math.isinf(lb.high)
    if lower_f is not None:
        lbf = mtbf_lower_bound(k, hours, terminated="failure")
        assert lbf.low == pytest.approx(lower_f, abs=5e-4)
        assert "failure-terminated" in lbf.method


def test_zero_events_report_upper_bound_and_note():
    est = poisson_rate_interval(0, 100.0)
    assert est.value == 0.0 and est.low == 0.0
    assert "0 observed" in est.note
    up = poisson_rate_upper(0, 500.0)
    # −ln(0.05)/500 h · 100 = 2.9957/5 = 0.5991 per 100 h: "0 majors in 500 h shows ≤ 0.599".
    assert up.high == pytest.approx(0.5991, abs=5e-5)
    assert "0 observed" in up.note
    mtbf = mtbf_lower_bound(0, 100.0)
    assert math.isinf(mtbf.value) and "0 observed" in mtbf.note


def test_two_minors_in_400_h_not_demonstrated():
    # point 2/400·100 = 0.5; upper χ²(0.95; 6)/800·100 = 12.5916/8 = 1.5740 > 1.
    est = poisson_rate_upper(2, 400.0)
    assert est.value == pytest.approx(0.5)
    assert est.high == pytest.approx(1.574, abs=5e-4)
    assert est.high > 1.0


@pytest.mark.parametrize(("k", "hours"), [(0, 100.0), (3, 250.0), (1, 500.0), (12, 1000.0)])
def test_rates_agree_with_statsmodels_exact_c(k, hours):
    low, high = confint_poisson(k, hours, alpha=0.05, method="exact-c")
    est = poisson_rate_interval(k, hours, per=1.0)
    assert est.low == pytest.approx(low, rel=1e-9, abs=1e-12)
    assert est.high == pytest.approx(high, rel=1e-9)


def test_level_and_per_scale_consistently():
    # At 90 % two-sided, the upper bound equals the 95 % one-sided upper bound.
    assert poisson_rate_interval(3, 250.0, level=0.90).high == pytest.approx(
        poisson_rate_upper(3, 250.0).high
    )
    assert poisson_rate_upper(3, 250.0, per=1000.0).high == pytest.approx(31.015, abs=5e-4)


@pytest.mark.parametrize(
    ("k", "rate_hours", "mtbsi_hours"),
    # χ²(0.95; 2k+2)/2 = 2.9957, 4.7439, 6.2958, 7.7537 → ×100 for ≤1/100 h, ×50 for MTBSI ≥ 50 h.
    [(0, 299.6, 149.8), (1, 474.4, 237.2), (2, 629.6, 314.8), (3, 775.4, 387.7)],
)
def test_hours_to_demonstrate(k, rate_hours, mtbsi_hours):
    assert hours_to_demonstrate_rate(1.0, k) == pytest.approx(rate_hours, abs=0.05)
    assert hours_to_demonstrate_mtbf(50.0, k) == pytest.approx(mtbsi_hours, abs=0.05)


def test_demonstration_hours_make_the_bound_exactly_clear():
    hours = hours_to_demonstrate_rate(1.0, 2)
    assert poisson_rate_upper(2, hours).high == pytest.approx(1.0)
    hours = hours_to_demonstrate_mtbf(50.0, 3)
    assert mtbf_lower_bound(3, hours).low == pytest.approx(50.0)


def test_no_exposure_is_evidence_missing():
    est = poisson_rate_interval(0, 0.0)
    assert est.value is None and est.high is None
    assert mtbf_interval(0, 0.0).value is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: poisson_rate_interval(-1, 10.0),
        lambda: poisson_rate_interval(1.5, 10.0),
        lambda: poisson_rate_interval(1, -10.0),
        lambda: poisson_rate_interval(2, 0.0),
        lambda: poisson_rate_upper(1, 10.0, level=1.5),
        lambda: mtbf_interval(1, 10.0, terminated="sometime"),
        lambda: mtbf_lower_bound(0, 10.0, terminated="failure"),
        lambda: hours_to_demonstrate_rate(0.0, 1),
        lambda: hours_to_demonstrate_mtbf(-5.0, 1),
    ],
)
def test_bad_input_raises_eval_error(call):
    with pytest.raises(EvalError):
        call()
