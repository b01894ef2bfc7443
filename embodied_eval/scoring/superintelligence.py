"""AAI-5 (Superintelligence) gates (§3.10, eqs. (19)–(29)): standardized superhuman margins per
family, coverage Γ, innovation rate I, and the six gates G1–G6.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import as_array
from embodied_eval.scoring.checks import check_count, check_flag
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict, check_at_least
from embodied_eval.scoring.links import step_target
from embodied_eval.stats.estimate import Estimate

#: Default ζ: m(F) ≥ 2 for a ~95 % two-sided criterion (eq. (20)).
DEFAULT_ZETA = 2.0


def standardized_margin(agent: ArrayLike, expert: ArrayLike) -> float:
    """Standardized margin m(F) = (q̄_A(F) − q̄_H(F)) / σ_Δ(F), σ_Δ = sd({q_A(t) − q_H(t)})/√|F|,
    eq. (19) (paired over the family's tasks, sd with n − 1).

    Args:
        agent: q_A(t) per task of the family, shape (n,), n ≥ 2.
        expert: q_H(t) of the expert ensemble on the same tasks, shape (n,).
    Returns:
        m(F); ±inf when every paired difference is identical and non-zero, 0 when all are 0.
    """
    a = as_array(agent, "agent", min_size=2)
    h = as_array(expert, "expert", min_size=2)
    if a.size != h.size:
        raise EvalError("expert: one quality per agent task is needed (paired)", key="expert")
    diff = a - h
    mean = float(np.mean(diff))
    sd = float(np.std(diff, ddof=1))
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / (sd / math.sqrt(diff.size))


def superhuman_coverage(margins: Mapping[str, float], zeta: float = DEFAULT_ZETA) -> float:
    """Coverage Γ = (1/N) Σ_i χ(F_i), χ(F_i) = 1{m(F_i) ≥ ζ}, eqs. (20)–(21)."""
    if not margins:
        raise EvalError("margins: no family given", key="margins")
    if not zeta > 0:
        raise EvalError(f"zeta: ζ must be positive, got {zeta}", key="zeta")
    return float(np.mean([m >= zeta for m in margins.values()]))


def innovation_rate(
    tool_rate: float, revision_rate: float, tool_weight: float, revision_weight: float
) -> float:
    """Innovation I = min(1, α_tool λ_tool + α_rev λ_rev), eq. (22).

    Args:
        tool_rate: λ_tool, validated new tool/API family integrations per month.
        revision_rate: λ_rev, autonomous revision events with ΔC_r > 0 per month.
        tool_weight, revision_weight: calibration constants α_tool, α_rev > 0.
    """
    if tool_weight <= 0 or revision_weight <= 0:
        raise EvalError("alpha_tool and alpha_rev must be positive", key="alpha_tool")
    if tool_rate < 0 or revision_rate < 0:
        raise EvalError("lambda_tool and lambda_rev must be non-negative", key="lambda_tool")
    return min(1.0, tool_weight * tool_rate + revision_weight * revision_rate)


@dataclass(frozen=True)
class SuperintelligenceEvidence:
    """Inputs of the AAI-5 gates; a missing field makes its gate evidence_missing.

    Attributes:
        margins: m(F_i) per family (eq. (19)).
        zeta: ζ.
        curvatures: δκ̃ per family with intervals (eq. (14)).
        gamma: γ of the curvature gate.
        innovation: I (eq. (22)).
        innovation_audited: auditable logs and successful ablations for I.
        capability_aai4: C at the AAI-4 milestone; `step_delta`, `step_link` give Step_{Δ,g}.
    """

    margins: Mapping[str, float] = field(default_factory=dict)
    zeta: float = DEFAULT_ZETA
    curvatures: Mapping[str, Estimate] = field(default_factory=dict)
    gamma: float | None = None
    innovation: float | None = None
    innovation_audited: bool | None = None
    capability_aai4: float | None = None
    step_delta: float | None = None
    step_link: str = "surprisal"


def superintelligence_gates(
    evidence: SuperintelligenceEvidence,
    *,
    axes: Mapping[str, Estimate],
    capability: Estimate | None,
    embodied: bool,
) -> GateResult:
    """AAI-5 gates G1–G6, eqs. (24)–(29).

    G1 Γ ≥ 0.95 with m(F_i) ≥ ζ for all i; G2 δκ̃ ≥ 0 on ≥ 80 % of families and ≥ −γ elsewhere;
    G3 S ≥ 0.9, E ≥ 0.9 (if embodied), W ≥ 0.9; G4 $ ≥ 0.9; G5 I ≥ 0.8 with auditable logs and
    successful ablations; G6 C ≥ Step_{Δ,g}(Step_{Δ,g}(C_AAI-4)).

    Args:
        evidence: margins, curvatures, innovation and the step milestone.
        axes: normalized axis Estimates by symbol (S, E, W, $ used).
        capability: current AAI-Index C.
        embodied: whether E applies (its weight in the profile is positive).
    Returns:
        GateResult "AAI-5 (Superintelligence)".
    """
    ev = evidence
    checks: list[GateCheck] = []
    if ev.margins:
        gamma_cov = superhuman_coverage(ev.margins, ev.zeta)
        below = [f for f, m in ev.margins.items() if m < ev.zeta]
        ok = gamma_cov >= 0.95 and not below
        checks.append(
            GateCheck(
                f"G1 superhuman coverage Γ ≥ 0.95, m(F) ≥ ζ = {ev.zeta:g} on all families (eq. 24)",
                Verdict.PASS if ok else Verdict.FAIL,
                0.95,
                ">=",
                value=gamma_cov,
                detail=f"below ζ: {', '.join(below)}" if below else f"{len(ev.margins)} families",
            )
        )
    else:
        checks.append(
            GateCheck(
                "G1 superhuman coverage (eq. 24)",
                Verdict.EVIDENCE_MISSING,
                detail="no family margins",
            )
        )
    if ev.curvatures and ev.gamma is not None:
        nonneg = [check_at_least(f"δκ̃ ≥ 0 [{f}]", e, 0.0).verdict for f, e in ev.curvatures.items()]
        floor = [
            check_at_least(f"δκ̃ ≥ −γ [{f}]", e, -ev.gamma).verdict for f, e in ev.curvatures.items()
        ]
        need = math.ceil(0.8 * len(nonneg) - 1e-9)
        checks.append(check_count("G2 δκ̃ ≥ 0 on ≥ 80 % of families (eq. 25)", nonneg, need))
        checks.append(
            check_count(f"G2 δκ̃ ≥ −{ev.gamma:g} on every family (eq. 25)", floor, len(floor))
        )
    else:
        checks.append(
            GateCheck(
                "G2 curvature (eq. 25)",
                Verdict.EVIDENCE_MISSING,
                detail="no per-family curvature or no γ",
            )
        )
    g3 = ["S", "E", "W"] if embodied else ["S", "W"]
    checks += [check_at_least(f"G3 {x} ≥ 0.9 (eq. 26)", axes.get(x), 0.9) for x in g3]
    checks.append(check_at_least("G4 $ ≥ 0.9 (eq. 27)", axes.get("$"), 0.9))
    inn = None if ev.innovation is None else Estimate(ev.innovation, None, None, 0.95, "reported")
    g5 = check_at_least("G5 innovation I ≥ 0.8 (eq. 28)", inn, 0.8)
    if g5.verdict is Verdict.INCONCLUSIVE:  # I is a rate over the window, not a sampled estimate
        g5 = GateCheck(g5.name, Verdict.PASS, 0.8, ">=", value=g5.value)
    checks.append(g5)
    checks.append(check_flag("G5 auditable logs and successful ablations", ev.innovation_audited))
    if ev.capability_aai4 is None or ev.step_delta is None:
        checks.append(
            GateCheck(
                "G6 link-step leaps (eq. 29)",
                Verdict.EVIDENCE_MISSING,
                detail="no AAI-4 milestone or Δ",
            )
        )
    else:
        target = step_target(ev.capability_aai4, ev.step_delta, ev.step_link, steps=2)
        checks.append(
            check_at_least(
                f"G6 C ≥ Step²(C_AAI-4) = {target:.4g} ({ev.step_link}, Δ = {ev.step_delta:g}) (eq. 29)",
                capability,
                target,
            )
        )
    return GateResult("AAI-5 (Superintelligence)", tuple(checks))
