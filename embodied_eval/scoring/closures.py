"""Closure properties (§3.4): maintenance closure (hold ≥ α of the baseline index for Y days
under controlled drift with zero human patches) and expansion closure (a significant
difference-in-differences gain from a newly integrated tool/API family that vanishes under
ablation, |C(S_abl) − C(S_pre)| ≤ ε).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from embodied_eval.errors import EvalError
from embodied_eval.scoring.checks import check_above, check_flag
from embodied_eval.scoring.gate_checks import (
    GateCheck,
    GateResult,
    Verdict,
    check_at_least,
    check_at_most,
)
from embodied_eval.scoring.resampling import standard_error_from_interval, two_sided_z
from embodied_eval.scoring.revision import difference_in_differences
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.planner import pairs_to_settle

#: Defaults of the AAI-2 maintenance closure (§3.5): α = 0.8, Y = 7 days.
DEFAULT_ALPHA = 0.8
DEFAULT_DAYS = 7.0
#: Default ablation tolerance ε of the expansion closure (published ex ante per window).
DEFAULT_EPSILON = 0.01


@dataclass(frozen=True)
class MaintenanceAudit:
    """A maintenance audit: the baseline index and the index at checkpoints under drift.

    Attributes:
        baseline: baseline AAI-Index C₀ at day 0.
        days: days since the baseline of each checkpoint, shape (n,).
        indices: AAI-Index at each checkpoint (Estimates; intervals optional but needed to pass).
        human_patches: human patches applied during the audit (None: not attested).
        drifts: the controlled drift kinds applied (e.g. "ui", "dependency", "payload").
        planned_span: the last day the audit's calendar declares (None: unknown). A calendar
            that ends before Y can never show the closure: the span check then fails.
        auditor: who audited it, for an audit supplied from outside the harness ("" when the
            harness computed it from its own episodes).
    """

    baseline: Estimate
    days: Sequence[float]
    indices: Sequence[Estimate]
    human_patches: int | None
    drifts: tuple[str, ...] = ()
    planned_span: float | None = None
    auditor: str = ""

    def __post_init__(self) -> None:
        if len(self.days) != len(self.indices):
            raise EvalError(
                "maintenance: one index per checkpoint day is needed", key="checkpoints"
            )


def vacuous_baseline(base: float | None) -> str:
    """Why a baseline index C₀ cannot carry a maintenance closure ("" when it can).

    C₀ undefined, not finite or ≤ 0 makes "C(t) ≥ α·C₀" hold for any index (or for none), so
    the check shows nothing: the closure is then inconclusive with this reason, never pass.
    """
    if base is None or not math.isfinite(base):
        return "baseline index C₀ undefined: there is nothing to hold"
    if base <= 0.0:
        return (
            f"baseline index C₀ = {base:g}: 'index ≥ α·C₀ = 0' holds for any index, so it "
            "shows nothing; the closure needs a baseline above 0"
        )
    return ""


def _index_check(audit: MaintenanceAudit, base: float, alpha: float) -> GateCheck:
    """C(t) ≥ α·C₀ on the worst checkpoint's point and the smallest lower bound (C₀ > 0)."""
    threshold = alpha * base
    values = [e.value for e in audit.indices]
    if any(v is None for v in values):
        raise EvalError("maintenance: every checkpoint needs an index value", key="checkpoints")
    worst = min(range(len(values)), key=lambda i: values[i])  # type: ignore[arg-type, return-value]
    lows = [e.low for e in audit.indices]
    low = None if any(lo is None for lo in lows) else min(lows)  # type: ignore[type-var]
    worst_est = Estimate(values[worst], low, None, audit.indices[worst].level, "worst checkpoint")
    extra = [
        pairs_to_settle(e.value, e.low, threshold, e.n)
        for e in audit.indices
        if e.value is not None and e.low is not None
    ]
    more = max((x for x in extra if x is not None), default=None)
    return check_at_least(
        f"index ≥ α·C₀ = {threshold:.4g} at every checkpoint",
        worst_est,
        threshold,
        remaining={} if more is None else {"episodes_per_day": float(more)},
        detail=f"baseline C₀ = {base:.4g}; worst at day {audit.days[worst]:g}"
        + ("" if more is None else "; episodes per day approximate (bound gap ∝ 1/√n)"),
    )


def maintenance_closure(
    audit: MaintenanceAudit | None,
    *,
    alpha: float = DEFAULT_ALPHA,
    days: float = DEFAULT_DAYS,
    required_drifts: Sequence[str] = (),
) -> GateResult:
    """Maintenance closure (§3.4): C(t) ≥ α·C₀ at every checkpoint over ≥ Y days under controlled
    drift with zero human patches.

    A baseline C₀ that is undefined or 0 makes the closure inconclusive with the reason
    (`vacuous_baseline`): "index ≥ α·0" would pass on nothing. The index check uses the worst
    checkpoint: its point value and the smallest lower bound.
    When it is inconclusive, `remaining["episodes_per_day"]` is the most further episodes any
    undecided checkpoint needs (the bound's distance to the point shrinking as 1/√n, from each
    checkpoint's n). Fewer than Y days observed is inconclusive (with the days still to run)
    unless the index already fell below α·C₀ or the declared calendar ends before Y (fail).

    Args:
        audit: the audit, or None (every check evidence_missing).
        alpha: α, the fraction of the baseline to keep (default 0.8).
        days: Y in days (default 7; the robotics annex uses 14).
        required_drifts: drift kinds the audit must cover (e.g. payload, friction, lighting,
            firmware for robotics).
    Returns:
        GateResult named "maintenance closure (α=…, Y=… d)".
    """
    name = f"maintenance closure (α={alpha:g}, Y={days:g} d)"
    if not 0.0 < alpha <= 1.0:
        raise EvalError(f"alpha: {alpha} must lie in (0, 1]", key="alpha")
    if audit is None:
        return GateResult(
            name,
            (
                GateCheck(
                    "maintenance audit", Verdict.EVIDENCE_MISSING, detail="no maintenance audit"
                ),
            ),
        )
    base = audit.baseline.value
    if not audit.indices:
        return GateResult(
            name,
            (GateCheck("maintenance audit", Verdict.EVIDENCE_MISSING, detail="no checkpoints"),),
        )
    vacuous = vacuous_baseline(base)
    if vacuous:
        # "index ≥ α·C₀" holds for every index when C₀ = 0: it would pass on nothing.
        index_check = GateCheck(
            "index ≥ α·C₀ at every checkpoint", Verdict.INCONCLUSIVE, detail=vacuous
        )
    else:
        assert base is not None
        index_check = _index_check(audit, base, alpha)
    span = max(audit.days)
    short_plan = audit.planned_span is not None and audit.planned_span < days
    if span >= days:
        span_check = GateCheck(f"observed ≥ {days:g} days", Verdict.PASS, days, ">=", value=span)
    elif index_check.verdict is Verdict.FAIL or short_plan:
        detail = (
            f"the calendar ends at day {audit.planned_span:g}, before Y = {days:g}"
            if short_plan
            else ""
        )
        span_check = GateCheck(
            f"observed ≥ {days:g} days", Verdict.FAIL, days, ">=", value=span, detail=detail
        )
    else:
        span_check = GateCheck(
            f"observed ≥ {days:g} days",
            Verdict.INCONCLUSIVE,
            days,
            ">=",
            value=span,
            remaining={"days": days - span},
        )
    patches = audit.human_patches
    patch_check = check_flag(
        "zero human patches",
        None if patches is None else patches == 0,
        detail="" if patches is None else f"{patches} human patch(es)",
    )
    missing = [d for d in required_drifts if d not in audit.drifts]
    if not audit.drifts:
        drift_check = GateCheck(
            "under controlled drift", Verdict.EVIDENCE_MISSING, detail="no drift kinds declared"
        )
    elif missing:
        drift_check = GateCheck(
            "under controlled drift",
            Verdict.EVIDENCE_MISSING,
            detail=f"drift kinds not covered: {', '.join(missing)}",
        )
    else:
        drift_check = GateCheck(
            "under controlled drift", Verdict.PASS, detail=", ".join(audit.drifts)
        )
    return GateResult(name, (index_check, span_check, patch_check, drift_check))


@dataclass(frozen=True)
class ExpansionAudit:
    """An expansion audit of one newly integrated capability (§3.4).

    Attributes:
        name: the new tool/API family (or end-effector, tool, perception pipeline in robotics).
        pre, post, ablated: C(S_pre), C(S_post), C(S_abl) on the tasks requiring it.
        control_pre, control_post: the frozen control's C before and after.
        matched: same evaluation law μ, matched seeds/drifts and the same R budget (None: not
            attested).
        kind: what was integrated ("tool", "api", "end_effector", "perception", ...).
        gain: optional DiD estimate with its interval from a paired analysis upstream; when
            absent it is built from the four indices (normal approximation, independent).
        ablated_difference, ablated_gain: C(S_abl) − C(S_pre) and ΔC_DiD(S_abl) with their
            intervals from a paired analysis upstream (same optionality as `gain`).
        auditor: who audited it, for an audit supplied from outside the harness.
    """

    name: str
    pre: Estimate
    post: Estimate
    ablated: Estimate
    control_pre: Estimate
    control_post: Estimate
    matched: bool | None = None
    kind: str = "tool"
    gain: Estimate | None = field(default=None)
    ablated_difference: Estimate | None = None
    ablated_gain: Estimate | None = None
    auditor: str = ""


def _combined(value: float, parts: Sequence[Estimate], level: float, method: str) -> Estimate:
    """value ± z·sqrt(Σ se²) when every part carries an interval; else a point estimate."""
    ses = [standard_error_from_interval(p) for p in parts]
    if any(se is None for se in ses):
        return Estimate(value, None, None, level, f"{method} (point: an input has no interval)")
    se = math.sqrt(sum(s * s for s in ses))  # type: ignore[operator, misc]
    z = two_sided_z(level)
    return Estimate(value, value - z * se, value + z * se, level, f"{method}, normal, independent")


def _absolute(est: Estimate) -> Estimate:
    """|X| with the upper bound max(|low|, |high|) (for "|X| ≤ ε" checks)."""
    assert est.value is not None
    high = None if est.low is None or est.high is None else max(abs(est.low), abs(est.high))
    return Estimate(abs(est.value), None, high, est.level, est.method, est.n, note=est.note)


def _within(name: str, est: Estimate, epsilon: float) -> GateCheck:
    """ "|X| ≤ ε" on the upper bound of |X|; when undecided, the further matched samples for the
    bound to reach ε (approximate: the bound's distance to |X| shrinking as 1/√n)."""
    absolute = _absolute(est)
    remaining: dict[str, float] = {}
    if absolute.value is not None and absolute.high is not None:
        more = pairs_to_settle(-absolute.value, -absolute.high, -epsilon, est.n)
        if more is not None:
            remaining["samples"] = float(more)
    detail = "further samples approximate (bound gap ∝ 1/√n)" if remaining else ""
    return check_at_most(name, absolute, epsilon, remaining=remaining, detail=detail)


def expansion_closure(
    audit: ExpansionAudit | None, *, epsilon: float = DEFAULT_EPSILON, level: float = 0.95
) -> GateResult:
    """Expansion closure (§3.4): ΔC_DiD > 0 significantly, and ablation removes the effect:
    |C(S_abl) − C(S_pre)| ≤ ε and |ΔC_DiD(S_abl)| ≤ ε, under matched seeds, drifts and budget.

    Args:
        audit: the audit, or None (evidence_missing).
        epsilon: ε, the ablation tolerance (published ex ante).
        level: two-sided level of the intervals built here.
    Returns:
        GateResult named "expansion closure: <name>".
    """
    if not epsilon > 0:
        raise EvalError(f"epsilon: must be positive, got {epsilon}", key="epsilon")
    if audit is None:
        return GateResult(
            "expansion closure",
            (GateCheck("expansion audit", Verdict.EVIDENCE_MISSING, detail="no expansion audit"),),
        )
    parts = (audit.pre, audit.post, audit.ablated, audit.control_pre, audit.control_post)
    if any(p.value is None for p in parts):
        raise EvalError(f"expansion {audit.name!r}: every index needs a value", key="expansion")
    pre, post, abl = audit.pre.value, audit.post.value, audit.ablated.value
    cpre, cpost = audit.control_pre.value, audit.control_post.value
    assert pre is not None and post is not None and abl is not None
    assert cpre is not None and cpost is not None
    did = difference_in_differences(post, pre, cpost, cpre)
    gain = audit.gain or _combined(
        did, (audit.post, audit.pre, audit.control_post, audit.control_pre), level, "DiD"
    )
    abl_diff = audit.ablated_difference or _combined(
        abl - pre, (audit.ablated, audit.pre), level, "ablated − pre"
    )
    abl_did = audit.ablated_gain or _combined(
        difference_in_differences(abl, pre, cpost, cpre),
        (audit.ablated, audit.pre, audit.control_post, audit.control_pre),
        level,
        "ablated DiD",
    )
    checks = (
        check_above("gain ΔC_DiD > 0 (significant)", gain, 0.0, detail=f"ΔC_DiD = {did:.4g}"),
        _within(f"|C(S_abl) − C(S_pre)| ≤ ε = {epsilon:g}", abl_diff, epsilon),
        _within(f"|ΔC_DiD(S_abl)| ≤ ε = {epsilon:g}", abl_did, epsilon),
        check_flag("matched seeds, drifts and budget", audit.matched),
    )
    return GateResult(f"expansion closure: {audit.name} ({audit.kind})", checks)
