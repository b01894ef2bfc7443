"""A fitted parameter's 95 % interval and whether the data identify it.

Each parameter gets a 95 % interval from the Jacobian of the residual (`jacobian_intervals`) and a
verdict (`identifiability`): identified when its interval is narrower than ± its resolution
(`RESOLUTION`); otherwise it is reported as not identified, with the parameter it is most
correlated with (or because the recordings never exercise it).
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


def identifiability(
    names: Sequence[str], values: np.ndarray, jac: np.ndarray, residual: np.ndarray
) -> dict[str, ParameterEstimate]:
    """Intervals and the identified / not-identified verdict of each fitted parameter."""
    _, half, corr = jacobian_intervals(jac, residual)
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
            name, float(values[i]), lo, hi, not reason, partner, rho, reason
        )
    return out


def unexercised_estimate(name: str) -> ParameterEstimate:
    """The result of a parameter the recordings never exercise: nominal, no interval."""
    info = PARAMETERS[name]
    reason = "the recordings never exercise it" + (
        " (no object tracker, or the object was never moved)" if info.needs_object else ""
    )
    return ParameterEstimate(name, info.nominal, math.nan, math.nan, False, reason=reason)
