"""Fit declared parameters to recorded real episodes, with intervals and identifiability.

The episodes are split by episode into a fitting set and a validation set (`split_episodes`).
Coarse scans put the start in the right valley (`real_bridge.calibration.starts`: delay and
actuator lag, then payload and servo gain); scipy's `least_squares` (trust-region reflective,
bounded, soft-L1 loss) then minimises the fitting set's residual
(`real_bridge.calibration.residuals`) over the declared parameters with the delay held, the
delay gets its profile, and the rest is fitted again if the delay moved; parameters not declared
stay nominal. Fitting episodes the replay cannot follow (`episodes_not_followed`) are set aside
and the fit redone. The Jacobian is by finite differences; the actuator delay's step is one
control period, because a command takes effect at the controller's next update.

Each parameter then gets a 95 % interval from the Jacobian (`jacobian_intervals`; the delay's from
its profile) and a verdict (`identifiability`): identified when its interval is narrower than ±
its resolution (`RESOLUTION`); otherwise it is reported as not identified, with the parameter it
is most correlated with, held at its nominal value and the others fitted again without it.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from embodied_eval.errors import EvalError
from real_bridge.calibration.params import PARAMETERS, nominal_values
from real_bridge.calibration.recorded import RecordedEpisode
from real_bridge.calibration.residuals import EpisodeResidual, Replayer, stacked_residual
from real_bridge.calibration.starts import (
    DELAY_PROFILE_STEP_S,
    LOSS,
    LOSS_SCALE,
    SCAN_EPISODES,
    START,
    Z_95,
    delay_profile,
    sag_start,
    timing_start,
)

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
#: Finite-difference steps of the Jacobian, in each parameter's unit (delay: one control period).
FD_STEP: dict[str, float] = {
    "payload": 0.02,
    "actuator_delay": 0.02,
    "actuator_gain": 0.02,
    "actuator_bandwidth": 0.004,
    "joint_damping": 0.05,
    "link_mass": 0.02,
    "object_mass": 0.05,
    "friction": 0.05,
}
#: Least-squares stopping tolerances (scipy's xtol, ftol): the payload–gain valley is long and
#: shallow, so the fit must not stop at the first small step along it.
XTOL = 1e-6
FTOL = 1e-7
#: A fitting episode whose RMS residual exceeds this many times the median episode's is set aside.
NOT_FOLLOWED_FACTOR = 4.0
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


@dataclass
class FitResult:
    """A calibration's numbers: estimates, split, residuals before and after."""

    estimates: dict[str, ParameterEstimate]
    values: dict[str, float]
    fitting: list[str]
    validation: list[str]
    before: dict[str, float]
    after: dict[str, float]
    evaluations: int
    iterations: int
    set_aside: list[str] = field(default_factory=list)
    before_residuals: list[EpisodeResidual] = field(default_factory=list)
    after_residuals: list[EpisodeResidual] = field(default_factory=list)


def split_episodes(
    episodes: Sequence[RecordedEpisode],
) -> tuple[list[RecordedEpisode], list[RecordedEpisode]]:
    """Fitting and validation sets, by episode: in recording order, every third episode
    (the 3rd, 6th, …) validates, the others fit; two episodes give one of each.

    Raises:
        EvalError: fewer than two episodes.
    """
    if len(episodes) < 2:
        raise EvalError(
            f"calibrate: {len(episodes)} recorded real episode(s); record at least 2 (one to fit, "
            "one to validate)"
        )
    if len(episodes) == 2:
        return [episodes[0]], [episodes[1]]
    fitting = [e for i, e in enumerate(episodes) if i % 3 != 2]
    validation = [e for i, e in enumerate(episodes) if i % 3 == 2]
    return fitting, validation


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


def _values_of(base: Mapping[str, float], names: Sequence[str], x: np.ndarray) -> dict[str, float]:
    out = dict(base)
    out.update({n: float(v) for n, v in zip(names, x, strict=True)})
    return out


def finite_difference_jacobian(
    replayer: Replayer,
    subset: Sequence[int],
    names: Sequence[str],
    base: Mapping[str, float],
    x: np.ndarray,
    f0: np.ndarray,
) -> np.ndarray:
    """Forward differences of the residual, one `FD_STEP` per parameter (backwards at its upper
    bound); the delay's step is one control period (see the module docstring)."""
    jac = np.empty((f0.size, len(names)))
    for j, name in enumerate(names):
        h = FD_STEP[name]
        if x[j] + h > PARAMETERS[name].high:
            h = -h
        moved = x.copy()
        moved[j] += h
        jac[:, j] = (stacked_residual(replayer, subset, _values_of(base, names, moved)) - f0) / h
    return jac


def _fit(
    replayer: Replayer,
    fitting: Sequence[int],
    names: Sequence[str],
    base: Mapping[str, float],
    max_nfev: int,
) -> np.ndarray:
    """Least squares over `names` (the delay, if among them, stays at its value in `base`)."""
    from scipy.optimize import least_squares

    lower = np.array([PARAMETERS[n].low for n in names])
    upper = np.array([PARAMETERS[n].high for n in names])
    x0 = np.clip(np.array([base[n] for n in names], dtype=float), lower, upper)
    step = np.array([FD_STEP[n] for n in names])

    def fun(x: np.ndarray) -> np.ndarray:
        return stacked_residual(replayer, fitting, _values_of(base, names, x))

    # diff_step is relative to max(1, |x|); the steps here are absolute.
    rel = step / np.maximum(1.0, np.abs(x0) + step)
    with contextlib.redirect_stdout(io.StringIO()):
        res = least_squares(
            fun, x0, jac="2-point", bounds=(lower, upper), diff_step=rel,
            x_scale=np.array([RESOLUTION[n] for n in names]), max_nfev=max_nfev,
            method="trf", xtol=XTOL, ftol=FTOL, loss=LOSS, f_scale=LOSS_SCALE,
        )  # fmt: skip
    return np.clip(res.x, lower, upper)


def _solve(
    replayer: Replayer,
    fitting: Sequence[int],
    names: Sequence[str],
    start: Mapping[str, float],
    max_iters: int,
) -> tuple[dict[str, ParameterEstimate], dict[str, float]]:
    """Fit `names` from `start`: least squares over the smooth parameters with the delay held,
    the delay's profile, the smooth parameters again when the delay moved; then the Jacobian of
    all of them (the delay's column a one-control-period difference) gives the intervals."""
    smooth = [n for n in names if n != "actuator_delay"]
    values = dict(start)
    if smooth:
        x = _fit(replayer, fitting, smooth, values, max_iters * (len(smooth) + 1))
        values = _values_of(values, smooth, x)
    profile = None
    if "actuator_delay" in names:
        f = stacked_residual(replayer, fitting, values)
        dof = max(1, f.size - len(names))
        before = values["actuator_delay"]
        profile = delay_profile(
            replayer, fitting, values, DELAY_PROFILE_STEP_S, FD_STEP["actuator_delay"], dof
        )
        values["actuator_delay"] = profile[0]
        if smooth and abs(profile[0] - before) > DELAY_PROFILE_STEP_S:
            x = _fit(replayer, fitting, smooth, values, max_iters * (len(smooth) + 1))
            values = _values_of(values, smooth, x)
    x = np.array([values[n] for n in names])
    f0 = stacked_residual(replayer, fitting, values)
    jac = finite_difference_jacobian(replayer, fitting, names, values, x, f0)
    estimates = identifiability(names, x, jac, f0)
    if profile is not None:
        delay = estimates["actuator_delay"]
        delay.low, delay.high = profile[1], profile[2]
        half = 0.5 * (profile[2] - profile[1])
        if delay.identified and half > RESOLUTION["actuator_delay"]:
            delay.identified = False
            delay.reason = (
                f"its 95 % interval ±{half:.3g} is wider than ±{RESOLUTION['actuator_delay']:g}"
            )
    return estimates, values


def summarize(residuals: Sequence[EpisodeResidual]) -> dict[str, float]:
    """RMS joint tracking error (mrad) and object track error (mm) over episodes."""
    joint = np.concatenate([r.joint.ravel() for r in residuals]) if residuals else np.zeros(0)
    obj = np.concatenate([r.object.ravel() for r in residuals]) if residuals else np.zeros(0)
    out = {"joint_rms_mrad": float(np.sqrt(np.mean(joint**2)) * 1e3) if joint.size else math.nan}
    out["object_rms_mm"] = float(np.sqrt(np.mean(obj**2)) * 1e3) if obj.size else math.nan
    return out


def episodes_not_followed(residuals: Sequence[EpisodeResidual]) -> list[int]:
    """Fitting episodes the replay cannot follow at the first fit's values: their RMS residual is
    more than `NOT_FOLLOWED_FACTOR` × the median episode's (a contact that went another way, a
    grasp that held in one world and slipped in the other). They are set aside and the fit is
    redone without them (when they are fewer than half). Returns their positions in `residuals`.
    """
    rms = np.array([float(np.sqrt(np.mean(r.stacked() ** 2))) for r in residuals])
    if rms.size < 3:
        return []
    far = [k for k, v in enumerate(rms) if v > NOT_FOLLOWED_FACTOR * float(np.median(rms))]
    return far if len(far) < rms.size / 2 else []


def check_scenes(episodes: Sequence[RecordedEpisode]) -> None:
    """Every episode's scene is one the model can build (checked here, before any replay runs
    in a worker process).

    Raises:
        EvalError: naming the task the model has no scene for.
    """
    from sim_suites.tasks import task_spec

    for task_id in sorted({e.task_id for e in episodes}):
        try:
            task_spec(task_id)
        except EvalError as exc:
            raise EvalError(
                f"calibrate: cannot build the scene of {task_id!r} to replay in ({exc}); "
                "calibrate from episodes of the sim's task catalog"
            ) from None


def calibrate_episodes(
    episodes: Sequence[RecordedEpisode],
    names: Sequence[str],
    *,
    workers: int = 1,
    max_iters: int = 12,
) -> FitResult:
    """Fit `names` to the episodes (see the module docstring).

    Args:
        episodes: recorded real episodes, in recording order.
        names: parameters to fit (the others stay nominal).
        workers: processes to replay in.
        max_iters: residual evaluations allowed per least-squares solve, in units of one
            Jacobian (p + 1 evaluations each).
    """
    object_names = [n for n in names if PARAMETERS[n].needs_object]
    if object_names and not any(e.has_object_track for e in episodes):
        raise EvalError(
            f"calibrate: {', '.join(object_names)} need the object tracker; record the "
            "`object_pose` stream or leave them out of --params"
        )
    fitting, validation = split_episodes(episodes)
    check_scenes(episodes)
    order = list(episodes)
    fit_idx = [order.index(e) for e in fitting]
    val_idx = [order.index(e) for e in validation]
    nominal = nominal_values()
    start = {**nominal, **{n: v for n, v in START.items() if n in names}}
    with Replayer(order, workers) as replayer:
        free = list(names)
        scan = fit_idx[:SCAN_EPISODES]
        if "actuator_delay" in free or "actuator_bandwidth" in free:
            start = timing_start(replayer, scan, start, free)
        start = sag_start(replayer, scan, start, free)
        estimates, values = _solve(replayer, fit_idx, free, start, max_iters)
        iterations = 1
        aside = episodes_not_followed(replayer.run(values, fit_idx))
        if aside:
            fit_idx = [i for k, i in enumerate(fit_idx) if k not in set(aside)]
            scan = fit_idx[:SCAN_EPISODES]
            start = (
                timing_start(replayer, scan, values, free) if "actuator_delay" in free else values
            )
            start = sag_start(replayer, scan, start, free)
            estimates, values = _solve(replayer, fit_idx, free, start, max_iters)
            iterations += 1
        set_aside = [fitting[k].episode_id for k in aside]
        dropped = [n for n in free if not estimates[n].identified]
        if dropped and len(dropped) < len(free):
            kept = [n for n in free if n not in dropped]
            restart = {**nominal, **{n: values[n] for n in kept}}
            refit, values = _solve(replayer, fit_idx, kept, restart, max_iters)
            iterations += 1
            estimates.update(refit)
        for name in dropped:
            estimates[name].fitted = estimates[name].value
            estimates[name].value = nominal[name]
        values = dict(nominal)
        values.update({n: e.value for n, e in estimates.items() if e.identified})
        before = replayer.run(nominal, val_idx)
        after = replayer.run(values, val_idx)
        evaluations = replayer.evaluations
    return FitResult(
        estimates=estimates,
        values=values,
        fitting=[e.episode_id for e in fitting if e.episode_id not in set_aside],
        set_aside=set_aside,
        validation=[e.episode_id for e in validation],
        before=summarize(before),
        after=summarize(after),
        evaluations=evaluations,
        iterations=iterations,
        before_residuals=before,
        after_residuals=after,
    )
