"""Monotone links g: (0, 1) → ℝ (§3.7) and the link-step operators of the level progression
(eqs. (17)–(18)).

* logit g(c) = log(c / (1 − c)): additive steps multiply the odds.
* surprisal g(c) = −log(1 − c): additive steps shrink the shortfall 1 − c by a constant factor.
* identity: the raw scale (for curvature "on the raw scale", §3.7).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError

LINKS = ("logit", "surprisal", "identity")


def check_link(link: str) -> str:
    """Return `link` if it is a known link name, else raise EvalError."""
    if link not in LINKS:
        raise EvalError(f"link: {link!r} is not one of {', '.join(LINKS)}", key="link")
    return link


def link(c: ArrayLike, name: str) -> NDArray[np.float64] | float:
    """The link g(c): logit log(c/(1−c)), surprisal −log(1−c), or identity (§3.7).

    Args:
        c: capability value(s): in (0, 1) for logit, [0, 1) for surprisal, any for identity.
        name: "logit", "surprisal" or "identity".
    Returns:
        g(c), same shape as `c` (a float for scalars).
    """
    check_link(name)
    x = np.asarray(c, dtype=float)
    if name == "logit" and (np.any(x <= 0.0) or np.any(x >= 1.0)):
        raise EvalError("the logit link needs capability values strictly inside (0, 1)", key="C")
    if name == "surprisal" and (np.any(x < 0.0) or np.any(x >= 1.0)):
        raise EvalError("the surprisal link needs capability values in [0, 1)", key="C")
    if name == "logit":
        out = np.log(x / (1.0 - x))
    elif name == "surprisal":
        out = -np.log1p(-x)
    else:
        out = x
    return float(out) if out.ndim == 0 else out


def inverse_link(y: ArrayLike, name: str) -> NDArray[np.float64] | float:
    """g⁻¹(y): logistic 1/(1 + e^(−y)) for logit, 1 − e^(−y) for surprisal (y ≥ 0)."""
    check_link(name)
    v = np.asarray(y, dtype=float)
    if name == "logit":
        out = 1.0 / (1.0 + np.exp(-v))
    elif name == "surprisal":
        if np.any(v < 0):
            raise EvalError("the surprisal link's inverse needs y ≥ 0", key="y")
        out = -np.expm1(-v)
    else:
        out = v
    return float(out) if out.ndim == 0 else out


def link_step(c: float, delta: float, name: str) -> float:
    """Link-step operator Step_{Δ,g}(c) = g⁻¹(g(c) + Δ), Δ > 0, eq. (17).

    With g = logit and Δ = log M the odds are multiplied by M; with g = surprisal and Δ = log A
    the shortfall 1 − c is divided by A (e.g. c = 0.50, A = e: 1 − 0.5/e ≈ 0.816).
    """
    if not delta > 0:
        raise EvalError(f"delta: Δ must be positive, got {delta}", key="delta")
    return float(inverse_link(float(link(c, name)) + delta, name))


def multiplicative_link_step(c: float, factor: float, name: str = "surprisal") -> float:
    """Multiplicative link step Step^(×)_{A,g}(c) = g⁻¹(A · g(c)) (§3.8 alternative to eq. (17)).

    With the surprisal link, 1 − Step = (1 − c)^A (e.g. c = 0.50, A = e: 1 − 0.5^e ≈ 0.848).
    """
    if not factor > 1:
        raise EvalError(f"factor: A must exceed 1, got {factor}", key="A")
    g = float(link(c, name))
    if name == "logit" and g <= 0:
        raise EvalError("the multiplicative logit step needs c > 0.5 (g(c) > 0)", key="C")
    return float(inverse_link(factor * g, name))


def step_target(c_prev: float, delta: float, name: str, steps: int = 1) -> float:
    """The target C_prev must reach after `steps` link steps: Step^steps_{Δ,g}(C_prev) (eq. (18),
    §3.9, and the double leap of eq. (29))."""
    if steps < 1:
        raise EvalError(f"steps: must be at least 1, got {steps}", key="steps")
    c = c_prev
    for _ in range(steps):
        c = link_step(c, delta, name)
    return c


def meets_step(c_next: float, c_prev: float, delta: float, name: str, steps: int = 1) -> bool:
    """Progression check C_{n+1} ≥ Step_{Δ,g}(C_n), eq. (18) (iterated `steps` times)."""
    return not math.isnan(c_next) and c_next >= step_target(c_prev, delta, name, steps)
