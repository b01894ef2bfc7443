"""Early stopping: mixture confidence sequence, binomial SPRT, MTBF SPRT, Poisson-rate sequence."""

from __future__ import annotations

import math

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    BinomialSPRT,
    MixtureConfidenceSequence,
    MtbfSPRT,
    PoissonRateSequence,
)


def feed(seq, outcomes):
    for z in outcomes:
        seq.update(z)
    return seq


@pytest.mark.parametrize(
    ("s", "n", "low", "high"), [(27, 30, 0.6513, 0.9921), (180, 200, 0.8117, 0.9573)]
)
def test_confidence_sequence_vectors(s, n, low, high):
    cs = feed(MixtureConfidenceSequence(alpha=0.05), [True] * s + [False] * (n - s))
    est = cs.interval()
    assert est.value == pytest.approx(s / n)
    # The notes quote the outermost points of a 1e-4 grid inside the set {p : M_n(p) < 20}
    # (180/200: exact upper root 0.957376, and ln M(0.9573) − ln 20 = −0.0212 < 0 while
    # ln M(0.9574) − ln 20 = +0.0068 > 0), so compare on that grid.
    assert math.ceil(est.low * 1e4) / 1e4 == pytest.approx(low)
    assert math.floor(est.high * 1e4) / 1e4 == pytest.approx(high)
    assert cs.log_martingale(low) < math.log(20) < cs.log_martingale(low - 1e-4)
    assert cs.log_martingale(high) < math.log(20) < cs.log_martingale(high + 1e-4)
    assert est.level == pytest.approx(0.95) and est.n == n


def test_confidence_sequence_passes_at_22_straight_successes():
    # All successes: M_n(p) = B(n+1, 1)/p^n = 1/((n+1)·p^n); p = 0.75 is excluded once
    # (n+1)·0.75^n <= 0.05: n = 21 → 22·0.0023784 = 0.0523 (not yet), n = 22 → 23·0.0017838 =
    # 0.0410 (excluded) → "pass" exactly at trial 22.
    cs = MixtureConfidenceSequence()
    decisions = [cs.update(True).decide(0.75) for _ in range(22)]
    assert decisions[:21] == ["continue"] * 21
    assert decisions[21] == "pass"


def test_confidence_sequence_min_and_max_trials():
    # All failures: M_n(0.75) = 1/((n+1)·0.25^n): n = 3 → 64/4 = 16 < 20, n = 4 → 256/5 = 51.2
    # ≥ 20, so p ≥ 0.75 is excluded after 4 failures; min_trials = 5 holds the decision to 5.
    cs = MixtureConfidenceSequence(min_trials=5)
    decisions = [cs.update(False).decide(0.75) for _ in range(5)]
    assert decisions == ["continue"] * 4 + ["fail"]
    assert MixtureConfidenceSequence(min_trials=1).update(False).decide(0.75) == "continue"
    capped = feed(
        MixtureConfidenceSequence(min_trials=1, max_trials=8), [True, True, True, False] * 2
    )
    assert capped.decide(0.75) == "fail"  # undecided at the cap: not demonstrated
    assert MixtureConfidenceSequence().interval().value is None


def test_binomial_sprt_boundaries():
    # ln A = ln(0.9/0.05) = 2.8904, ln B = ln(0.1/0.95) = −2.2513; steps ln 1.2 = 0.18232 and
    # ln 0.4 = −0.91629: 15 successes = 2.7348 (continue), 16 = 2.9171 (pass);
    # 2 failures = −1.8326 (continue), 3 = −2.7489 (fail).
    sprt = feed(BinomialSPRT(0.75, 0.90, alpha=0.05, beta=0.10), [True] * 15)
    assert sprt.decide() == "continue"
    assert sprt.update(True).decide() == "pass"
    sprt = feed(BinomialSPRT(0.75, 0.90, alpha=0.05, beta=0.10), [False] * 2)
    assert sprt.decide() == "continue"
    assert sprt.update(False).decide() == "fail"
    assert feed(BinomialSPRT(0.75, 0.9, max_trials=2), [True, True]).decide() == "fail"


def test_binomial_sprt_expected_trials():
    # Wald ASN at p0: (0.05·2.890372 + 0.95·(−2.251292))/(0.75·0.182322 − 0.25·0.916291)
    # = −1.994209/−0.092332 = 21.598; at p1: (0.1·(−2.251292) + 0.9·2.890372)/0.072441 = 32.793.
    sprt = BinomialSPRT(0.75, 0.90, alpha=0.05, beta=0.10)
    assert sprt.expected_trials(0.75) == pytest.approx(21.598, abs=5e-3)
    assert sprt.expected_trials(0.90) == pytest.approx(32.793, abs=5e-3)
    with pytest.raises(EvalError):
        sprt.expected_trials(0.8)


def test_mtbf_sprt_boundaries_from_notes():
    # θ1 = 50 h, d = 3 (θ0 = 150 h), α = β = 0.1: s = 1/50 − 1/150 = 1/75,
    # slope ln 3 · 75 = 82.396, intercept ln 9 · 75 = 164.792.
    sprt = MtbfSPRT(theta0=150.0, theta1=50.0, alpha=0.1, beta=0.1)
    for r in range(4):
        assert sprt.accept_hours(r) == pytest.approx(82.40 * r + 164.79, abs=0.01 * (r + 1))
        assert sprt.reject_hours(r) == pytest.approx(82.40 * r - 164.79, abs=0.01 * (r + 1))
    assert sprt.update(164.7).decide() == "continue"
    assert sprt.update(0.2).decide() == "pass"
    # 3 failures by 80 h: reject line 3·82.396 − 164.792 = 82.40 h ≥ 80 → fail.
    assert MtbfSPRT(150.0, 50.0).update(80.0, failures=3).decide() == "fail"
    assert MtbfSPRT(150.0, 50.0, max_hours=100.0).update(100.0, 1).decide() == "fail"
    with pytest.raises(EvalError):
        MtbfSPRT(50.0, 150.0)


def test_poisson_rate_sequence_zero_events_hand():
    # Gate ≤ 1 per 100 h, mixing Gamma(1, b = 100 h): with k = 0, M_t(λ) = (b/(b+t))·e^{λt}, so
    # the upper end is ln(20·(b+t)/b)/t. At t = 100 h: ln 40/100 h = 3.688879 per 100 h.
    seq = PoissonRateSequence(max_rate=1.0)
    est = seq.update(100.0).interval()
    assert est.high == pytest.approx(math.log(40.0), abs=1e-6)
    assert est.low == 0.0 and "0 observed" in est.note
    # Pass once 100·ln(20·(1 + t/100)) ≤ t: t = 470 → 473.6 (continue), t = 500 → 478.7 (pass).
    assert PoissonRateSequence(1.0).update(470.0).decide() == "continue"
    assert PoissonRateSequence(1.0).update(500.0).decide() == "pass"


def test_poisson_rate_sequence_fails_on_many_events():
    # k = 10 in 100 h: ln M(0.01/h) = ln 100 + ln 10! − 11 ln 200 + 1 + 10 ln 100 = 8.48 ≥ ln 20,
    # so 1 per 100 h lies below the interval → fail.
    seq = PoissonRateSequence(1.0).update(100.0, events=10)
    assert seq.log_martingale(0.01) == pytest.approx(8.4798, abs=1e-3)
    assert seq.decide() == "fail"
    est = seq.interval()
    assert est.low > 1.0 and est.value == pytest.approx(10.0)
    assert PoissonRateSequence(1.0).interval().value is None


def test_bad_arguments():
    with pytest.raises(EvalError):
        MixtureConfidenceSequence(alpha=1.5)
    with pytest.raises(EvalError):
        MixtureConfidenceSequence(min_trials=10, max_trials=5)
    with pytest.raises(EvalError):
        BinomialSPRT(0.9, 0.75)
    with pytest.raises(EvalError):
        PoissonRateSequence(1.0).update(-1.0)
