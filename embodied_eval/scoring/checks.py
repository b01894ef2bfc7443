"""Small gate-check builders shared by closures, levels and the AAI-5 gates, on top of
`embodied_eval.scoring.gate_checks` (which decides "≥" and "≤" checks on confidence bounds).
"""

from __future__ import annotations

from collections.abc import Sequence

from embodied_eval.scoring.gate_checks import GateCheck, Verdict, combine_verdicts
from embodied_eval.stats.estimate import Estimate


def check_above(
    name: str, estimate: Estimate | None, threshold: float, *, detail: str = ""
) -> GateCheck:
    """Strict check "quantity > threshold" on the lower bound: pass when the lower bound exceeds
    it, inconclusive when only the point does, fail otherwise, evidence_missing without data."""
    if estimate is None or estimate.value is None:
        return GateCheck(name, Verdict.EVIDENCE_MISSING, threshold, ">", detail=detail or "no data")
    bound = estimate.low
    if bound is not None and bound > threshold:
        verdict = Verdict.PASS
    elif estimate.value > threshold:
        verdict = Verdict.INCONCLUSIVE
    else:
        verdict = Verdict.FAIL
    return GateCheck(
        name, verdict, threshold, ">", value=estimate.value, bound=bound, detail=detail
    )


def check_flag(name: str, flag: bool | None, *, detail: str = "") -> GateCheck:
    """An attested yes/no condition: True passes, False fails, None is evidence_missing."""
    if flag is None:
        return GateCheck(name, Verdict.EVIDENCE_MISSING, detail=detail or "not attested")
    return GateCheck(name, Verdict.PASS if flag else Verdict.FAIL, detail=detail)


def check_count(
    name: str, verdicts: Sequence[Verdict], required: int, *, detail: str = ""
) -> GateCheck:
    """ "At least `required` of these items pass" (e.g. κ ≥ κ* on ≥ 2 families).

    pass when enough items pass; fail when too few items could still pass (pass, inconclusive or
    missing); otherwise the combined verdict of the undecided items (evidence_missing dominates
    inconclusive).
    """
    n_pass = sum(v is Verdict.PASS for v in verdicts)
    undecided = [v for v in verdicts if v in (Verdict.INCONCLUSIVE, Verdict.EVIDENCE_MISSING)]
    text = f"{n_pass} of {len(verdicts)} pass, {required} needed"
    detail = f"{detail}; {text}" if detail else text
    if not verdicts:
        return GateCheck(
            name, Verdict.EVIDENCE_MISSING, float(required), ">=", value=0.0, detail=detail
        )
    if n_pass >= required:
        verdict = Verdict.PASS
    elif n_pass + len(undecided) < required:
        verdict = Verdict.FAIL
    else:
        verdict = combine_verdicts(undecided)
    return GateCheck(name, verdict, float(required), ">=", value=float(n_pass), detail=detail)
