"""Continuous score Λ (eq. (31)) and the escape-velocity bounds (§3.13).

Λ is non-normative telemetry: it never changes a level gate.
"""

from __future__ import annotations

import math

from embodied_eval.errors import EvalError
from embodied_eval.scoring.links import link


def saturation_position(
    capability: float, link_name: str = "surprisal", eps0: float = 0.01
) -> float:
    """Position on the link U(C) = g(C) / g(1 − ε₀), ε₀ ∈ (0, 1/2] (§3.13).

    U ∈ (0, 1) for the surprisal link and C < 1 − ε₀. With the logit link g(C) < 0 for C < 0.5,
    so U is negative there (the seed's "∈ (0, 1)" holds for logit only above 0.5).
    """
    if not 0.0 < eps0 <= 0.5:
        raise EvalError(f"eps0: ε₀ = {eps0} must lie in (0, 1/2]", key="eps0")
    if link_name == "identity":
        raise EvalError("link: U(C) needs the logit or surprisal link", key="link")
    return float(link(capability, link_name)) / float(link(1.0 - eps0, link_name))


def slope_reward(link_rate: float, reference_rate: float, sharpness: float = 1.0) -> float:
    """M(κ̃) = tanh(η log(1 + κ̃/κ*)) (§3.13).

    For κ̃ ≤ −κ* the logarithm is undefined; M takes its limit −1 there.
    """
    if not reference_rate > 0 or not sharpness > 0:
        raise EvalError("kappa_star and eta must be positive", key="kappa_star")
    ratio = 1.0 + link_rate / reference_rate
    if ratio <= 0:
        return -1.0
    return math.tanh(sharpness * math.log(ratio))


def acceleration_reward(
    curvature: float, reference_curvature: float, sharpness: float = 1.0
) -> float:
    """K(δκ̃) = tanh(η′ δκ̃ / γ*) ∈ (−1, 1) (§3.13)."""
    if not reference_curvature > 0 or not sharpness > 0:
        raise EvalError("gamma_star and eta_prime must be positive", key="gamma_star")
    return math.tanh(sharpness * curvature / reference_curvature)


def continuous_score(
    capability: float,
    link_rate: float,
    curvature: float = 0.0,
    *,
    kappa_star: float,
    gamma_star: float = 1.0,
    link_name: str = "surprisal",
    eps0: float = 0.01,
    eta: float = 1.0,
    eta_prime: float = 1.0,
    weights: tuple[float, float, float] = (0.5, 0.5, 0.0),
    nonnegative: bool = False,
) -> float:
    """Continuous score Λ = w_C U(C) + w_κ M(κ̃) + w_δ K(δκ̃), eq. (31).

    With w_δ = 0 this is the two-term Λ = α U + (1 − α) M of §3.13. `nonnegative` replaces K by
    K⁺ = (K + 1)/2 so Λ stays in (0, 1) whatever the curvature sign.

    Args:
        capability: C.
        link_rate: κ̃ = d g(C)/dR.
        curvature: δκ̃ (only used when w_δ > 0).
        kappa_star: reference link-slope κ* > 0.
        gamma_star: reference curvature scale γ* > 0.
        link_name: g.
        eps0: ε₀ of U.
        eta, eta_prime: sharpness η, η′.
        weights: (w_C, w_κ, w_δ), non-negative, summing to 1.
    """
    if any(w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-9:
        raise EvalError(f"weights {weights} must be non-negative and sum to 1", key="weights")
    w_c, w_k, w_d = weights
    u = saturation_position(capability, link_name, eps0)
    m = slope_reward(link_rate, kappa_star, eta)
    k = acceleration_reward(curvature, gamma_star, eta_prime) if w_d > 0 else 0.0
    if nonnegative:
        k = (k + 1.0) / 2.0
    return w_c * u + w_k * m + w_d * k


def escape_resource_bound(
    capability: float, target_shortfall: float, escape_velocity: float, link_name: str = "surprisal"
) -> float:
    """Resource needed to reach 1 − ε under κ̃ ≥ v_esc (§3.13 "Escape velocity"):

        R_ε^min ≤ (g(1 − ε) − g(C(R₀))) / v_esc,   0 when C(R₀) ≥ 1 − ε already.

    Args:
        capability: C(R₀).
        target_shortfall: ε ∈ (0, 1).
        escape_velocity: v_esc > 0 (link units per R-unit).
        link_name: g.
    """
    if not 0.0 < target_shortfall < 1.0:
        raise EvalError(f"epsilon: {target_shortfall} must lie in (0, 1)", key="epsilon")
    if not escape_velocity > 0:
        raise EvalError(f"v_esc: must be positive, got {escape_velocity}", key="v_esc")
    gap = float(link(1.0 - target_shortfall, link_name)) - float(link(capability, link_name))
    return max(gap, 0.0) / escape_velocity


def escape_time_bound(
    capability: float,
    target_shortfall: float,
    escape_velocity: float,
    min_resource_rate: float,
    link_name: str = "surprisal",
) -> float:
    """Time to reach 1 − ε with r(t) ≥ r_min > 0 (§3.13): T_ε ≤ (g(1 − ε) − g(C(t₀))) / (v_esc r_min)."""
    if not min_resource_rate > 0:
        raise EvalError(f"r_min: must be positive, got {min_resource_rate}", key="r_min")
    return (
        escape_resource_bound(capability, target_shortfall, escape_velocity, link_name)
        / min_resource_rate
    )
