"""Stopping real trials early: feed outcomes one at a time, ask "pass", "fail" or "continue".

* `MixtureConfidenceSequence`: Robbins' beta-binomial mixture confidence sequence for a success
  rate; anytime-valid, so it may be checked after every trial (a fixed-n Wilson interval checked
  after every trial excludes the true p at some point in ~45 % of runs; this in ≤ α).
* `BinomialSPRT`: Wald's SPRT of p = p0 against p = p1 (stops sooner, but needs a point
  alternative).
* `MtbfSPRT`: Wald's SPRT for an MTBF/MTBSI (exponential times between failures).
* `PoissonRateSequence`: gamma–Poisson mixture confidence sequence for an incident rate.

Decisions: "pass" = the gate is demonstrated, "fail" = it is refuted (or not demonstrated within
the trial/hour cap), "continue" = keep testing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import optimize, special

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_level, check_nonnegative, check_positive
from embodied_eval.stats.estimate import Estimate

PASS, FAIL, CONTINUE = "pass", "fail", "continue"


def _check_alpha(alpha: float, name: str = "alpha") -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise EvalError(f"{name}: {alpha} must be between 0 and 1 (e.g. 0.05)", key=name)
    return alpha


def _root(f: Callable[[float], float], a: float, b: float) -> float:
    return float(optimize.brentq(f, a, b, xtol=1e-13, rtol=1e-13, maxiter=500))


class MixtureConfidenceSequence:
    """Robbins beta-binomial mixture confidence sequence for a success probability p.

    With S successes in n trials and a uniform mixing prior,
    M_n(p) = B(1 + S, 1 + n − S) / (p^S (1 − p)^(n − S)) is a nonnegative martingale under p, so
    by Ville's inequality {p : M_n(p) < 1/α} covers p at *every* n simultaneously with
    probability ≥ 1 − α. Vectors: 27/30 → [0.6513, 0.9921]; 180/200 → [0.8117, 0.9573] (95 %).

    Args:
        alpha: error probability of the whole sequence (0.05 → 95 %).
        min_trials: `decide` answers "continue" before this many trials.
        max_trials: at this many trials an undecided test is "fail" (not demonstrated).
    """

    def __init__(self, alpha: float = 0.05, min_trials: int = 5, max_trials: int = 400) -> None:
        self.alpha = _check_alpha(alpha)
        self.min_trials = check_count(min_trials, "min_trials")
        self.max_trials = check_count(max_trials, "max_trials")
        if self.max_trials < max(self.min_trials, 1):
            raise EvalError("max_trials: must be >= min_trials and >= 1", key="max_trials")
        self.successes = 0
        self.trials = 0

    def update(self, success: bool) -> MixtureConfidenceSequence:
        """Record one trial's outcome (z = 1 for success); returns self for chaining."""
        self.successes += int(bool(success))
        self.trials += 1
        return self

    def log_martingale(self, p: float) -> float:
        """ln M_n(p) for 0 <= p <= 1 (0·ln 0 = 0)."""
        s, f = self.successes, self.trials - self.successes
        return float(special.betaln(1 + s, 1 + f) - special.xlogy(s, p) - special.xlog1py(f, -p))

    def interval(self, alpha: float | None = None) -> Estimate:
        """The confidence-sequence interval {p : M_n(p) < 1/α} at the current trial.

        Args:
            alpha: defaults to the sequence's alpha; use the same α at every look.

        Returns:
            Estimate(value=S/n, low, high, level=1 − α, n=trials); [0, 1] before any trial.
        """
        alpha = self.alpha if alpha is None else _check_alpha(alpha)
        method = "Robbins beta-binomial mixture confidence sequence"
        n, s = self.trials, self.successes
        if n == 0:
            return Estimate(None, 0.0, 1.0, 1.0 - alpha, method, 0, "two", "no trials")
        bound = -math.log(alpha)
        p_hat = s / n

        def g(p: float) -> float:
            return self.log_martingale(p) - bound

        # ln M is convex in p with its minimum at p̂ (where M ≤ 1 < 1/α), so each side has one
        # root; at p = 0 (S = 0) or p = 1 (S = n), M is B(1, n+1) < 1/α, so the bound is 0 or 1.
        tiny = 1e-15
        low = 0.0 if s == 0 else _root(g, tiny, p_hat)
        high = 1.0 if s == n else _root(g, p_hat, 1.0 - tiny)
        return Estimate(p_hat, low, high, 1.0 - alpha, method, n, "two")

    def decide(self, threshold: float) -> str:
        """Gate "p ≥ threshold": "pass" when the interval's low end clears it, "fail" when its high
        end is below it (or the cap is reached undecided), otherwise "continue"."""
        if self.trials < self.min_trials:
            return CONTINUE
        est = self.interval()
        if est.low is not None and est.low >= threshold:
            return PASS
        if est.high is not None and est.high < threshold:
            return FAIL
        return FAIL if self.trials >= self.max_trials else CONTINUE


class BinomialSPRT:
    """Wald's SPRT of H0: p = p0 (unacceptable) against H1: p = p1 (acceptable), p0 < p1.

    ln Λ_n = S ln(p1/p0) + (n − S) ln((1 − p1)/(1 − p0)); "pass" (accept H1) when ln Λ ≥ ln A,
    "fail" when ln Λ ≤ ln B, with A = (1 − β)/α and B = β/(1 − α).

    Args:
        p0: success rate that must be rejected (the gate threshold, e.g. 0.75).
        p1: success rate that should pass (e.g. 0.90).
        alpha: P(pass | p0). beta: P(fail | p1).
        max_trials: optional cap; undecided at the cap is "fail".
    """

    def __init__(
        self,
        p0: float,
        p1: float,
        alpha: float = 0.05,
        beta: float = 0.10,
        max_trials: int | None = None,
    ) -> None:
        if not 0.0 < p0 < p1 < 1.0:
            raise EvalError(f"p0, p1: need 0 < p0 < p1 < 1, got {p0}, {p1}", key="p1")
        self.p0, self.p1 = float(p0), float(p1)
        self.alpha, self.beta = _check_alpha(alpha), _check_alpha(beta, "beta")
        self.max_trials = None if max_trials is None else check_count(max_trials, "max_trials")
        self.log_a = math.log((1.0 - self.beta) / self.alpha)
        self.log_b = math.log(self.beta / (1.0 - self.alpha))
        self.step_success = math.log(self.p1 / self.p0)
        self.step_failure = math.log((1.0 - self.p1) / (1.0 - self.p0))
        self.successes = 0
        self.trials = 0

    def update(self, success: bool) -> BinomialSPRT:
        """Record one trial's outcome; returns self."""
        self.successes += int(bool(success))
        self.trials += 1
        return self

    @property
    def log_likelihood_ratio(self) -> float:
        """ln Λ_n of H1 against H0."""
        return (
            self.successes * self.step_success + (self.trials - self.successes) * self.step_failure
        )

    def decide(self) -> str:
        """ "pass", "fail" or "continue" from the current ln Λ."""
        llr = self.log_likelihood_ratio
        if llr >= self.log_a:
            return PASS
        if llr <= self.log_b:
            return FAIL
        if self.max_trials is not None and self.trials >= self.max_trials:
            return FAIL
        return CONTINUE

    def expected_trials(self, p: float) -> float:
        """Wald's approximate average sample number at true rate p (H0 or H1 only:
        E_i[N] = (L ln B + (1 − L) ln A)/E_i[step], L = 1 − α at p0 and β at p1)."""
        if math.isclose(p, self.p0):
            accept_h0 = 1.0 - self.alpha
        elif math.isclose(p, self.p1):
            accept_h0 = self.beta
        else:
            raise EvalError("p: expected_trials is given for p = p0 or p = p1 only", key="p")
        drift = p * self.step_success + (1.0 - p) * self.step_failure
        return (accept_h0 * self.log_b + (1.0 - accept_h0) * self.log_a) / drift


class MtbfSPRT:
    """Wald's SPRT for an MTBF (or MTBSI), exponential times between failures.

    θ0: acceptable MTBF, θ1 < θ0: unacceptable MTBF, d = θ0/θ1. After T hours with r failures,
    ln Λ = r ln d − T(1/θ1 − 1/θ0). With s = 1/θ1 − 1/θ0, A = (1 − β)/α, B = β/(1 − α):
    "pass" (accept θ0) when T ≥ (r ln d − ln B)/s, "fail" (accept θ1) when T ≤ (r ln d − ln A)/s.
    θ1 = 50 h, d = 3, α = β = 0.1: pass when T ≥ 82.40 r + 164.79 h, fail when
    T ≤ 82.40 r − 164.79 h. (MIL-HDBK-781A-style; no claim of IEC 61124 compliance.)

    Args:
        theta0: acceptable MTBF in hours. theta1: unacceptable MTBF in hours (< theta0).
        alpha: P(fail | θ0) (producer's risk). beta: P(pass | θ1) (consumer's risk).
        max_hours: optional cap; undecided at the cap is "fail".
    """

    def __init__(
        self,
        theta0: float,
        theta1: float,
        alpha: float = 0.1,
        beta: float = 0.1,
        max_hours: float | None = None,
    ) -> None:
        self.theta0 = check_positive(theta0, "theta0")
        self.theta1 = check_positive(theta1, "theta1")
        if self.theta1 >= self.theta0:
            raise EvalError("theta1: the unacceptable MTBF must be below theta0", key="theta1")
        self.alpha, self.beta = _check_alpha(alpha), _check_alpha(beta, "beta")
        self.max_hours = None if max_hours is None else check_positive(max_hours, "max_hours")
        self.slope_s = 1.0 / self.theta1 - 1.0 / self.theta0
        self.log_d = math.log(self.theta0 / self.theta1)
        self.log_a = math.log((1.0 - self.beta) / self.alpha)
        self.log_b = math.log(self.beta / (1.0 - self.alpha))
        self.hours = 0.0
        self.failures = 0

    def update(self, hours: float, failures: int = 0) -> MtbfSPRT:
        """Add operating hours and the failures that ended them (one call per failure, or per
        failure-free stretch with failures=0); returns self."""
        self.hours += check_nonnegative(hours, "hours")
        self.failures += check_count(failures, "failures")
        return self

    def accept_hours(self, failures: int) -> float:
        """Total hours at which r failures pass: (r ln d − ln B)/s."""
        return (failures * self.log_d - self.log_b) / self.slope_s

    def reject_hours(self, failures: int) -> float:
        """Total hours at or below which r failures fail: (r ln d − ln A)/s (≤ 0: not yet)."""
        return (failures * self.log_d - self.log_a) / self.slope_s

    def decide(self) -> str:
        """ "pass", "fail" or "continue" from the hours and failures so far."""
        if self.hours >= self.accept_hours(self.failures):
            return PASS
        if self.hours <= self.reject_hours(self.failures):
            return FAIL
        if self.max_hours is not None and self.hours >= self.max_hours:
            return FAIL
        return CONTINUE


class PoissonRateSequence:
    """Gamma–Poisson mixture confidence sequence for an event rate λ (events per hour).

    With k events in t hours and a Gamma(a, b) mixing density (shape a, rate b per hour),
    M_t(λ) = b^a Γ(a + k) / (Γ(a) (b + t)^(a + k)) · e^{λt} / λ^k is a nonnegative martingale
    under λ, so {λ : M_t(λ) < 1/α} is an anytime-valid confidence sequence. The default mixing
    density has mean max_rate (shape 1), where the test has to discriminate.

    Gate "rate ≤ max_rate": "pass" when the upper end is ≤ max_rate, "fail" when the lower end is
    above it (or the hour cap is reached undecided), "continue" otherwise.

    Args:
        max_rate: the gate's ceiling, in events per `per` hours.
        per: rate unit in hours (100 → per 100 h).
        alpha: error probability of the whole sequence.
        prior_shape: a of the mixing Gamma (rate b = a·per/max_rate, so its mean is max_rate).
        max_hours: optional cap on exposure hours.
    """

    def __init__(
        self,
        max_rate: float,
        per: float = 100.0,
        alpha: float = 0.05,
        prior_shape: float = 1.0,
        max_hours: float | None = None,
    ) -> None:
        self.max_rate = check_positive(max_rate, "max_rate")
        self.per = check_positive(per, "per")
        self.alpha = _check_alpha(alpha)
        self.shape = check_positive(prior_shape, "prior_shape")
        self.rate_b = self.shape * self.per / self.max_rate
        self.max_hours = None if max_hours is None else check_positive(max_hours, "max_hours")
        self.hours = 0.0
        self.events = 0

    def update(self, hours: float, events: int = 0) -> PoissonRateSequence:
        """Add exposure hours and the events seen in them; returns self."""
        self.hours += check_nonnegative(hours, "hours")
        self.events += check_count(events, "events")
        return self

    def log_martingale(self, rate_per_hour: float) -> float:
        """ln M_t(λ) for λ > 0 in events per hour."""
        a, b, k, t = self.shape, self.rate_b, self.events, self.hours
        mix = (
            a * math.log(b)
            + special.gammaln(a + k)
            - special.gammaln(a)
            - (a + k) * math.log(b + t)
        )
        return float(mix + rate_per_hour * t - k * math.log(rate_per_hour))

    def interval(self, alpha: float | None = None) -> Estimate:
        """The confidence-sequence interval of the rate, in events per `per` hours.

        Returns:
            Estimate(value=k/t·per, low, high, level=1 − α, n=events); no exposure → value None.
        """
        alpha = self.alpha if alpha is None else _check_alpha(alpha)
        method = "gamma-Poisson mixture confidence sequence"
        level = check_level(1.0 - alpha)
        k, t = self.events, self.hours
        if t == 0.0:
            return Estimate(None, 0.0, None, level, method, k, "two", "no exposure hours")
        bound = -math.log(alpha)

        def g(lam: float) -> float:
            return self.log_martingale(lam) - bound

        lam_hat = k / t
        # ln M is convex in λ, minimal at k/t (M ≤ 1 there), → ∞ as λ → ∞ (and as λ → 0 if k > 0).
        centre = lam_hat if k > 0 else 1e-300
        hi = max(centre, 1.0 / t)
        while g(hi) < 0:
            hi *= 2.0
        high = _root(g, centre, hi)
        if k == 0:
            low = 0.0
        else:
            lo = lam_hat / 2.0
            while g(lo) < 0:
                lo /= 2.0
            low = _root(g, lo, lam_hat)
        note = "0 observed" if k == 0 else ""
        return Estimate(
            lam_hat * self.per, low * self.per, high * self.per, level, method, k, "two", note
        )

    def decide(self) -> str:
        """ "pass", "fail" or "continue" for the gate rate ≤ max_rate."""
        est = self.interval()
        if est.high is not None and est.high <= self.max_rate:
            return PASS
        if est.low is not None and est.low > self.max_rate:
            return FAIL
        if self.max_hours is not None and self.hours >= self.max_hours:
            return FAIL
        return CONTINUE
