"""A fitted parameter's 95 % interval and whether the data identify it.

Each parameter gets a 95 % interval from the Jacobian of the residual (`jacobian_intervals`) and a
verdict (`identifiability`): identified when its interval is narrower than ± its resolution
(`RESOLUTION`); otherwise it is reported as not identified, with the parameter it is most
correlated with (or because the recordings never exercise it).

The replay never follows a robot exactly (contacts, holds, the tracker), and what it misses lasts:
the residuals of neighbouring moments are correlated, so the i.i.d. covariance s²(JᵀJ)⁻¹ is too
narrow. Each interval is therefore widened by its parameter's design effect (`design_effects`,
from a block-robust covariance over stretches of `real_bridge.calibration.residuals.BLOCK_S` of
each episode): the ratio of the i.i.d. sample size to the effective one, never below 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from real_bridge.calibration.params import PARAMETERS
from real_bridge.calibration.starts import Z_95

#: Interval half-width beyond which a parameter counts as not identified, in its own unit.
RESOLUTION: dict[str, float] = {
    "payload": 0.1,
    "actuator_delay": 0.01,
    "actuator_gain": 0.1,
    "actuator_bandwidth": 0.01,
    "joint_damping": 0.25,
    "link_mass": 0.1,
    "object_mass": 0.25,
    "friction": 0.25,
}
#: How an interval was made (the calibration file and the report say which).
JACOBIAN = "Jacobian, widened by the design effect of residuals correlated within 0.5 s"
PROFILE = "profile likelihood on a grid, widened by the design effect"
PROFILE_BOOTSTRAP = (
    "profile likelihood on a grid, widened by the design effect, and episode bootstrap"
)
#: A Jacobian column this small relative to the largest (each scaled by its resolution) means the
#: recordings never exercise the parameter.
UNEXERCISED = 1e-6


@dataclass
class ParameterEstimate:
    """One parameter's result.

    Attributes:
        name / value: the estimate (nominal when not identified).
        low / high: the 95 % interval (nan when the data say nothing).
        identified: whether the data pin it down (see the module docstring).
        partner / correlation: the parameter it is most correlated with, and how much.
        reason: why it is not identified ("" when it is).
        fitted: when not identified, the value the fit had reached (the interval is around it);
            nan otherwise.
        design_effect: the factor its variance was multiplied by for residuals correlated in
            time (`design_effects`; 1: none).
        method: how the interval was made (JACOBIAN, PROFILE, PROFILE_BOOTSTRAP).
    """

    name: str
    value: float
    low: float
    high: float
    identified: bool
    partner: str = ""
    correlation: float = 0.0
    reason: str = ""
    fitted: float = math.nan
    design_effect: float = 1.0
    method: str = JACOBIAN


def jacobian_intervals(
    jac: np.ndarray, residual: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standard errors, 95 % half-widths and the correlation matrix of a least-squares fit.

    Gauss–Newton covariance Σ = s² (JᵀJ)⁺ with s² = ‖r‖² / (n − p) (the residuals' own spread);
    half-width = z₀.₉₇₅ √Σᵢᵢ. A direction the data do not constrain has an infinite error.

    Args:
        jac: (n, p) Jacobian of the residual at the estimate.
        residual: (n,) residual at the estimate.
    """
    n, p = jac.shape
    s2 = float(residual @ residual) / max(1, n - p)
    jtj = jac.T @ jac
    cov = s2 * np.linalg.pinv(jtj, rcond=1e-12, hermitian=True)
    var = np.diag(cov).copy()
    dead = np.diag(jtj) <= 0
    var[dead] = np.inf
    se = np.sqrt(np.maximum(var, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(se, se)
    corr[~np.isfinite(corr)] = 0.0
    np.fill_diagonal(corr, 1.0)
    return se, Z_95 * se, corr


def design_effects(jac: np.ndarray, residual: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Each parameter's design effect: how much residuals correlated within blocks inflate its
    variance over the i.i.d. Gauss–Newton one.

    Block-robust (cluster) covariance Σ_B = G/(G − 1) · A M A with A = (JᵀJ)⁺,
    M = Σ_b (J_bᵀ r_b)(J_bᵀ r_b)ᵀ over the G blocks b (rows with one block number), against the
    i.i.d. Σ = s² A, s² = ‖r‖²/(n − p); the effect is max(1, Σ_B,ii / Σ_ii) (never narrower than
    the i.i.d. interval; 1 when there are fewer than two blocks).

    Args:
        jac: (n, p) Jacobian. residual: (n,) residual. blocks: (n,) block number of each row.
    """
    n, p = jac.shape
    labels, index = np.unique(blocks, return_inverse=True)
    if labels.size < 2:
        return np.ones(p)
    scores = np.zeros((labels.size, p))
    np.add.at(scores, index, jac * residual[:, None])
    a = np.linalg.pinv(jac.T @ jac, rcond=1e-12, hermitian=True)
    g = labels.size
    robust = g / (g - 1) * a @ (scores.T @ scores) @ a
    iid = float(residual @ residual) / max(1, n - p) * a
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.diag(robust) / np.diag(iid)
    return np.where(np.isfinite(ratio), np.maximum(1.0, ratio), 1.0)


def identifiability(
    names: Sequence[str],
    values: np.ndarray,
    jac: np.ndarray,
    residual: np.ndarray,
    blocks: np.ndarray | None = None,
) -> dict[str, ParameterEstimate]:
    """Intervals and the identified / not-identified verdict of each fitted parameter; with
    `blocks`, each interval widened by √(design effect) (`design_effects`)."""
    _, half, corr = jacobian_intervals(jac, residual)
    effect = np.ones(len(names)) if blocks is None else design_effects(jac, residual, blocks)
    half = half * np.sqrt(effect)
    scaled = np.linalg.norm(jac, axis=0) * np.array([RESOLUTION[n] for n in names])
    top = float(scaled.max()) if scaled.size else 0.0
    out = {}
    for i, name in enumerate(names):
        others = [j for j in range(len(names)) if j != i]
        partner, rho = "", 0.0
        if others:
            j = max(others, key=lambda k: abs(corr[i, k]))
            if abs(corr[i, j]) > 0:
                partner, rho = names[j], float(corr[i, j])
        info = PARAMETERS[name]
        lo = max(info.low, values[i] - half[i]) if math.isfinite(half[i]) else math.nan
        hi = min(info.high, values[i] + half[i]) if math.isfinite(half[i]) else math.nan
        reason = ""
        if top <= 0 or scaled[i] <= UNEXERCISED * top:
            reason = "the recordings never exercise it" + (
                " (no object tracker, or the object was never moved)" if info.needs_object else ""
            )
            partner, rho = "", 0.0
        elif not half[i] <= RESOLUTION[name]:
            reason = f"its 95 % interval ±{half[i]:.3g} is wider than ±{RESOLUTION[name]:g}"
        out[name] = ParameterEstimate(
            name, float(values[i]), lo, hi, not reason, partner, rho, reason,
            design_effect=float(effect[i]),
        )  # fmt: skip
    return out


def unexercised_estimate(name: str) -> ParameterEstimate:
    """The result of a parameter the recordings never exercise: nominal, no interval."""
    info = PARAMETERS[name]
    reason = "the recordings never exercise it" + (
        " (no object tracker, or the object was never moved)" if info.needs_object else ""
    )
    return ParameterEstimate(
        name, info.nominal, math.nan, math.nan, False, reason=reason, method=""
    )
