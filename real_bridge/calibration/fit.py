"""Fit declared parameters to recorded real episodes, with intervals and identifiability.

The episodes are split by episode into a fitting set and a validation set (`split_episodes`).
Object parameters the fitting episodes never exercise (`never_exercised`: the object was never
touched) are held nominal and reported as such before any fit. Coarse scans put the start in the
right valley (`real_bridge.calibration.starts`: delay and actuator lag, then payload and servo
gain); scipy's `least_squares` (trust-region reflective, bounded, soft-L1 loss) then minimises
the residual (`real_bridge.calibration.residuals`) over the declared parameters with the delay
held, the delay gets its profile, and the rest is fitted again if the delay moved. That search
runs on the scans' few episodes (its iterations are many); from its optimum a short polish on the
whole fitting set (`POLISH_EVALUATIONS`) reaches the whole set's optimum, whose Jacobian and delay
profile give the intervals. Parameters not declared stay nominal. Fitting episodes the replay
cannot follow (`episodes_not_followed`) are set aside and the fit is redone. The Jacobian is by
forward differences, its columns replayed in one batch over the worker processes; the actuator
delay's step is one control period, because a command takes effect at the controller's next
update.

Each parameter then gets a 95 % interval from the Jacobian (`jacobian_intervals`; the delay's from
its profile) and a verdict (`identifiability`): identified when its interval is narrower than ±
its resolution (`RESOLUTION`); otherwise it is reported as not identified, with the parameter it
is most correlated with, held at its nominal value and the others fitted again without it.

An actuator time constant fitted below `UNFILTERED_CHECK_S` sits where its filter hardly acts: the
residual is flat down to τ = 0 (an unfiltered actuator), so the Jacobian, which sees only the
slope where the fit stopped, cannot bound it from below. The others are then also fitted with
τ = 0 (`unfiltered_also`); when that fits as well (within the bound of τ's 95 % interval), τ's
interval reaches 0, every other interval covers both fits, and the values are the better fit's.
When τ = 0 fits better beyond that bound, the search had stopped short of it: the fit at τ = 0 is
kept with its own intervals, and τ's interval is its profile's upwards from 0.
A τ the fit put at 0 (where its slope is 0) gets its interval from its profile upwards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from embodied_eval.errors import EvalError
from real_bridge.calibration.intervals import (
    PROFILE,
    RESOLUTION,
    ParameterEstimate,
    unexercised_estimate,
)
from real_bridge.calibration.params import PARAMETERS, nominal_values
from real_bridge.calibration.recorded import RecordedEpisode
from real_bridge.calibration.residuals import (
    JOINT,
    NOT_FOLLOWED_FACTOR,
    EpisodeResidual,
    Replayer,
)
from real_bridge.calibration.solve import never_exercised, solve
from real_bridge.calibration.starts import (
    START,
    Z_95,
    Profile,
    object_start,
    profile,
    sag_start,
    scan_episodes,
    timing_start,
)

#: An actuator time constant fitted below this is also tried at 0 (`unfiltered_also`): its filter
#: then passes more than 95 % of each 20 ms controller update's step (e^(−0.02/τ) < 5 %), s.
UNFILTERED_CHECK_S = 0.02 / 3
#: Grid step and reach (in steps) of the time constant's profile upwards from 0, s.
TIME_CONSTANT_PROFILE_STEP_S = 0.001
TIME_CONSTANT_REACH = 40


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
    episode_replays: int = 0
    set_aside: list[str] = field(default_factory=list)
    set_aside_stretches: list[str] = field(default_factory=list)
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


def unfiltered_also(
    replayer: Replayer,
    fitting: Sequence[int],
    free: Sequence[str],
    fitted: dict[str, ParameterEstimate],
    values: dict[str, float],
    max_iters: int,
    rng: np.random.Generator,
) -> dict[str, float]:
    """The actuator's time constant τ near 0, where the Jacobian cannot bound it (see the module
    docstring; updates `fitted`). Fitted below `UNFILTERED_CHECK_S`: the arm's other parameters
    are fitted again with τ = 0, and when that fits as well τ's interval reaches 0 and the
    others' cover both fits. Fitted at 0 (or held there, not identified): its interval is the
    profile's upwards from 0 (`TIME_CONSTANT_PROFILE_STEP_S`), the others held. Returns the
    values of the better fit."""
    tau = "actuator_bandwidth"
    est = fitted.get(tau)
    if est is None or tau not in free:
        return values
    others = [n for n in free if n != tau and not PARAMETERS[n].needs_object]
    effect = est.design_effect if math.isfinite(est.design_effect) else 1.0
    if values[tau] <= 0.0:
        _upwards_from_zero(replayer, fitting, est, values, len(others), effect)
        return values
    if not est.identified or values[tau] >= UNFILTERED_CHECK_S:
        return values
    refit, zero, _ = solve(replayer, fitting, None, others, {**values, tau: 0.0}, max_iters, rng)
    # both on the stretches set aside by now (the refit may have set more aside)
    at_fit, at_zero = replayer.run_many([values, zero], fitting)
    costs = [float(sum(np.sum(r.stacked(JOINT) ** 2) for r in at)) for at in (at_fit, at_zero)]
    size = sum(r.stacked(JOINT).size for r in at_fit)
    bound = min(costs) * (1.0 + effect * Z_95**2 / max(1, size - len(others) - 1))
    if max(costs) > bound:
        if costs[0] <= costs[1]:
            return values  # the data tell the filter from none
        # No filter fits better by more than the bound: the fit stopped short of it.
        fitted.update({name: refit[name] for name in others})
        _upwards_from_zero(replayer, fitting, est, zero, len(others), effect)
        return zero
    est.low = 0.0
    for name in others:
        fitted[name].low = min(fitted[name].low, refit[name].low)
        fitted[name].high = max(fitted[name].high, refit[name].high)
    if costs[1] >= costs[0]:
        return values
    est.value = 0.0
    for name in others:
        fitted[name].value = refit[name].value
    return zero


def _upwards_from_zero(
    replayer: Replayer,
    fitting: Sequence[int],
    est: ParameterEstimate,
    values: dict[str, float],
    n_others: int,
    effect: float,
) -> None:
    """The actuator's time constant at 0 (updates `est`): its interval is its profile's upwards
    from 0 (`TIME_CONSTANT_PROFILE_STEP_S`, the others held at `values`)."""
    tau = est.name
    start = Profile(tau, TIME_CONSTANT_PROFILE_STEP_S, n_params=n_others + 1)
    found = profile(replayer, fitting, {**values, tau: 0.0}, start, TIME_CONSTANT_REACH, JOINT,
                    effect)  # fmt: skip
    _, _, high = found.interval(effect)
    est.low, est.high, est.method = 0.0, high, PROFILE
    est.identified = 0.5 * high <= RESOLUTION[tau]
    est.reason = "" if est.identified else (
        f"its 95 % interval ±{0.5 * high:.3g} is wider than ±{RESOLUTION[tau]:g}"
    )  # fmt: skip
    est.value = 0.0
    est.fitted = math.nan if est.identified else 0.0


def check_scenes(episodes: Sequence[RecordedEpisode]) -> None:
    """Every episode's scene is one the model can build (checked here, before any replay runs
    in a worker process).

    Raises:
        EvalError: naming the task the model has no scene for.
    """
    from sim_suites.robot_core import task_spec

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
    seed: int = 0,
) -> FitResult:
    """Fit `names` to the episodes (see the module docstring).

    Args:
        episodes: recorded real episodes, in recording order.
        names: parameters to fit (the others stay nominal).
        workers: processes to replay in.
        max_iters: residual evaluations allowed per least-squares solve, in units of one
            Jacobian (p + 1 evaluations each).
        seed: seeds the episode bootstrap of the object's parameters (`np.random.default_rng`).
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
    rng = np.random.default_rng(seed)
    with Replayer(order, workers) as replayer:
        quiet = never_exercised(replayer, fit_idx, names, start)
        free = [n for n in names if n not in quiet]
        estimates: dict[str, ParameterEstimate] = {n: unexercised_estimate(n) for n in quiet}
        values = dict(start)
        iterations = 0
        set_aside: list[str] = []
        if free:
            scan = scan_episodes(order, fit_idx)
            if "actuator_delay" in free or "actuator_bandwidth" in free:
                start = timing_start(replayer, scan, start, free)
            start = object_start(replayer, scan, sag_start(replayer, scan, start, free), free)
            fitted, values, at = solve(replayer, fit_idx, scan, free, start, max_iters, rng)
            iterations = 1
            aside = episodes_not_followed(at)
            if aside:
                fit_idx = [i for k, i in enumerate(fit_idx) if k not in set(aside)]
                scan = scan_episodes(order, fit_idx)
                start = (
                    timing_start(replayer, scan, values, free)
                    if "actuator_delay" in free
                    else values
                )
                start = object_start(replayer, scan, sag_start(replayer, scan, start, free), free)
                fitted, values, _ = solve(replayer, fit_idx, scan, free, start, max_iters, rng)
                iterations += 1
            set_aside = [fitting[k].episode_id for k in aside]
            dropped = [n for n in free if not fitted[n].identified]
            if dropped and len(dropped) < len(free):
                kept = [n for n in free if n not in dropped]
                restart = {**nominal, **{n: values[n] for n in kept}}
                refit, values, _ = solve(replayer, fit_idx, None, kept, restart, max_iters, rng)
                iterations += 1
                fitted.update(refit)
            for name in dropped:
                fitted[name].fitted = fitted[name].value
                fitted[name].value = nominal[name]
            values = unfiltered_also(replayer, fit_idx, free, fitted, values, max_iters, rng)
            estimates.update(fitted)
        estimates = {n: estimates[n] for n in names}
        values = dict(nominal)
        values.update({n: e.value for n, e in estimates.items() if e.identified})
        before, after = replayer.run_many([nominal, values], val_idx)
        evaluations = replayer.evaluations
        episode_replays = replayer.episode_replays
        stretches = [
            f"{order[i].episode_id} {start:.2f}–{end:.2f} s"
            for i, found in sorted(replayer.left_out.items())
            for start, end in found
        ]
    return FitResult(
        estimates=estimates,
        values=values,
        fitting=[e.episode_id for e in fitting if e.episode_id not in set_aside],
        set_aside=set_aside,
        set_aside_stretches=stretches,
        validation=[e.episode_id for e in validation],
        before=summarize(before),
        after=summarize(after),
        evaluations=evaluations,
        episode_replays=episode_replays,
        iterations=iterations,
        before_residuals=before,
        after_residuals=after,
    )
