"""Anytime-valid stopping of the real side against the protocol's AR gate (`[stopping]`).

After each real episode that counts (scored; the first scored attempt of its manifest row) the
sequential test from `embodied_eval.stats.sequential` is updated with z and asked for a decision:

- `mixture` (default): the Robbins beta-binomial mixture confidence sequence at α = 1 − confidence;
  "pass" when its lower end reaches ar_threshold, "fail" when its upper end is below it or
  max_trials is reached undecided. Valid however often it is looked at.
- `sprt`: Wald's binomial SPRT of p = ar_threshold against p = p1 (α = 1 − confidence, β from the
  protocol). Stops sooner near p1 but needs the point alternative.

No decision is taken before min_trials. The real trials must arrive in the manifest's seeded run
order (the runner guarantees it); the decision, the trial count and the interval go into the run
summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from embodied_eval.protocol.reader import StoppingRule


@dataclass(frozen=True)
class StopDecision:
    """What the sequential test said after the last real trial it saw.

    Attributes:
        decision: "pass", "fail" or "continue".
        trials / successes: real trials counted and their successes.
        reason: one line for the technician.
        detail: numbers the decision rests on (interval or log-likelihood ratio), for the summary.
    """

    decision: str
    trials: int
    successes: int
    reason: str
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "trials": self.trials,
            "successes": self.successes,
            "reason": self.reason,
            **self.detail,
        }


class RealSideStopping:
    """Feeds real outcomes to the protocol's sequential test and reports its decision.

    Args:
        rule: the protocol's `[stopping]` rule (must be enabled).
        confidence: the protocol's confidence; α = 1 − confidence.
    """

    def __init__(self, rule: StoppingRule, confidence: float) -> None:
        from embodied_eval.stats.sequential import BinomialSPRT, MixtureConfidenceSequence

        self.rule = rule
        self.alpha = 1.0 - confidence
        self.successes = 0
        self.trials = 0
        self._mixture: MixtureConfidenceSequence | None = None
        self._sprt: BinomialSPRT | None = None
        if rule.method == "sprt":
            assert rule.p1 is not None  # the protocol loader requires p1 for sprt
            self._sprt = BinomialSPRT(
                rule.ar_threshold, rule.p1, self.alpha, rule.beta, max_trials=rule.max_trials
            )
        else:
            self._mixture = MixtureConfidenceSequence(
                self.alpha, min_trials=rule.min_trials, max_trials=rule.max_trials
            )

    def observe(self, success: bool) -> StopDecision:
        """Add one real trial's z and return the decision after it."""
        self.trials += 1
        self.successes += int(bool(success))
        if self._sprt is not None:
            self._sprt.update(success)
        if self._mixture is not None:
            self._mixture.update(success)
        return self.decision()

    def decision(self) -> StopDecision:
        """The decision on the trials seen so far ("continue" before min_trials)."""
        rule = self.rule
        gate = f"AR ≥ {rule.ar_threshold:g}"
        counts = f"{self.successes}/{self.trials} real successes"
        if self._mixture is not None:
            est = self._mixture.interval()
            detail: dict[str, Any] = {
                "method": "mixture",
                "interval": [est.low, est.high],
                "level": est.level,
            }
            decision = self._mixture.decide(rule.ar_threshold)
            bounds = f"[{est.low:.4f}, {est.high:.4f}]"
            level = f"{100 * est.level:g} % confidence sequence"
            if decision == "pass":
                reason = f"{gate} demonstrated: {counts}, {level} {bounds} clears it"
            elif decision == "fail" and est.high is not None and est.high < rule.ar_threshold:
                reason = f"{gate} refuted: {counts}, {level} {bounds} lies below it"
            elif decision == "fail":
                reason = (
                    f"{gate} not demonstrated within max_trials = {rule.max_trials}: {counts}, "
                    f"{level} {bounds}"
                )
            else:
                reason = f"undecided: {counts}, {level} {bounds}"
            return StopDecision(decision, self.trials, self.successes, reason, detail)

        assert self._sprt is not None
        llr = self._sprt.log_likelihood_ratio
        detail = {
            "method": "sprt",
            "p0": rule.ar_threshold,
            "p1": rule.p1,
            "log_likelihood_ratio": llr,
            "log_a": self._sprt.log_a,
            "log_b": self._sprt.log_b,
        }
        decision = self._sprt.decide() if self.trials >= rule.min_trials else "continue"
        sprt = f"SPRT p0 = {rule.ar_threshold:g} vs p1 = {rule.p1:g}: ln Λ = {llr:.3f}"
        if decision == "pass":
            reason = f"{gate} demonstrated: {counts}, {sprt} ≥ ln A = {self._sprt.log_a:.3f}"
        elif decision == "fail" and llr <= self._sprt.log_b:
            reason = f"{gate} refuted: {counts}, {sprt} ≤ ln B = {self._sprt.log_b:.3f}"
        elif decision == "fail":
            reason = f"{gate} not demonstrated within max_trials = {rule.max_trials}: {counts}"
        else:
            reason = f"undecided: {counts}, {sprt}"
        return StopDecision(decision, self.trials, self.successes, reason, detail)
