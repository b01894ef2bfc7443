"""The calibration's least-squares search: where the parameters go, and their Jacobian there.

`solve` fits the declared parameters from a start: scipy's `least_squares` (trust-region
reflective, bounded, soft-L1 loss) over the smooth parameters with the delay held, the delay's
profile (`real_bridge.calibration.starts.delay_profile`), the smooth parameters again when the
delay moved. The search runs on a few of the fitting episodes (its iterations are many); at its
optimum the stretches of the whole fitting set the replay does not follow are set aside
(`stretches_not_followed`: a contact that goes another way for a hair's change would steer the
fit; when some lie in the searched episodes the search runs again without them, the better
optimum kept, `_search`); a short polish (`POLISH_EVALUATIONS`) reaches the whole set's optimum.

The Jacobian is by forward differences (`finite_difference_jacobian`), its columns replayed in one
batch over the workers; the delay's step is one control period (a command takes effect at the
controller's next update); the actuator time constant's is a quarter of its value (`fd_step`):
e^(−Δt/τ) is far from linear over a fixed step when τ is small. The polish's last Jacobian is
kept for the intervals.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from real_bridge.calibration.intervals import (
    PROFILE,
    PROFILE_BOOTSTRAP,
    RESOLUTION,
    UNEXERCISED,
    ParameterEstimate,
    design_effects,
    identifiability,
    jacobian_intervals,
)
from real_bridge.calibration.params import PARAMETERS
from real_bridge.calibration.residuals import (
    ALL,
    JOINT,
    NOT_FOLLOWED_FACTOR,
    EpisodeResidual,
    Replayer,
    stacked_blocks,
    stacked_residuals,
    stretches_not_followed,
)
from real_bridge.calibration.starts import (
    DELAY_PROFILE_STEP_S,
    LOSS,
    LOSS_SCALE,
    Profile,
    episode_bootstrap,
    profile,
    robust_cost,
)

#: Finite-difference steps of the Jacobian, in each parameter's unit (delay: one control period;
#: the actuator's time constant: at most this, see `fd_step`). The arm's are small: a servo 2 %
#: stiffer already moves the joints several times what a 0.5 % one does, times four.
FD_STEP: dict[str, float] = {
    "payload": 0.005,
    "actuator_delay": 0.02,
    "actuator_gain": 0.005,
    "actuator_bandwidth": 0.004,
    "joint_damping": 0.01,
    "link_mass": 0.005,
    "object_mass": 0.05,
    "friction": 0.05,
}
#: The parameters whose response `smooth_rows` checks (the time constant's is curved by nature).
SMOOTHNESS_CHECKED = ("payload", "actuator_gain", "joint_damping", "link_mass")
#: The time constant's step is this fraction of its value (at least `MIN_TIME_CONSTANT_STEP_S`).
TIME_CONSTANT_STEP_FRACTION = 0.25
MIN_TIME_CONSTANT_STEP_S = 1e-4
#: Least-squares stopping tolerances (scipy's xtol, ftol): the payload–gain valley is long and
#: shallow, so the fit must not stop at the first small step along it.
XTOL = 1e-6
FTOL = 1e-7
#: A least-squares run stopped by its step tolerance that still lowered the loss by more than
#: this fraction starts again where it stopped, afresh, while evaluations remain (`_fit`).
RESTART_GAIN = 0.01
#: Residual evaluations of the least-squares polish on the whole fitting set, after the search on
#: a few of its episodes: from the search's optimum one Gauss–Newton step reaches the whole set's.
POLISH_EVALUATIONS = 2
#: How far the profiles may grow from the fitted value, in grid steps: the delay's ± one control
#: period on the physics step; the object's friction and mass ± 8 finite-difference steps.
DELAY_REACH = 10
OBJECT_REACH = 8


@dataclass
class _Point:
    """Where the least squares last evaluated: values, the episodes' residuals there and (when
    computed there) the Jacobian of the smooth parameters (joint tracking)."""

    values: dict[str, float]
    residuals: list[EpisodeResidual]
    jac: np.ndarray | None = None


def fd_step(name: str, value: float) -> float:
    """The finite-difference step of `name` at `value` (`FD_STEP`; the actuator's time constant's
    is a quarter of its value, between `MIN_TIME_CONSTANT_STEP_S` and its `FD_STEP`)."""
    if name == "actuator_bandwidth":
        return min(
            FD_STEP[name],
            max(MIN_TIME_CONSTANT_STEP_S, TIME_CONSTANT_STEP_FRACTION * value),
        )
    return FD_STEP[name]


def values_of(base: Mapping[str, float], names: Sequence[str], x: np.ndarray) -> dict[str, float]:
    """`base` with `names` set to `x`."""
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
    part: str = ALL,
) -> np.ndarray:
    """Forward differences of the residual (`part` of it), one `FD_STEP` per parameter
    (backwards at its upper bound); the delay's step is one control period (see the module
    docstring). The moved parameter sets are replayed in one batch, spread over the workers."""
    steps = []
    moved = []
    for j, name in enumerate(names):
        h = fd_step(name, float(x[j]))
        if x[j] + h > PARAMETERS[name].high:
            h = -h
        xj = x.copy()
        xj[j] += h
        steps.append(h)
        moved.append(values_of(base, names, xj))
    found = stacked_residuals(replayer, subset, moved, part)
    jac = np.empty((f0.size, len(names)))
    for j, (h, f) in enumerate(zip(steps, found, strict=True)):
        jac[:, j] = (f - f0) / h
    return jac


def _joint(residuals: Sequence[EpisodeResidual]) -> np.ndarray:
    return np.concatenate([r.stacked(JOINT) for r in residuals])


def _fit(
    replayer: Replayer,
    subset: Sequence[int],
    names: Sequence[str],
    base: Mapping[str, float],
    max_nfev: int,
) -> _Point:
    """Least squares of the joint tracking over `names` (the delay, if among them, stays at its
    value in `base`); the Jacobian is `finite_difference_jacobian` at the point scipy last
    evaluated."""
    from scipy.optimize import least_squares

    lower = np.array([PARAMETERS[n].low for n in names])
    upper = np.array([PARAMETERS[n].high for n in names])
    x0 = np.clip(np.array([base[n] for n in names], dtype=float), lower, upper)
    last: dict[bytes, _Point] = {}  # the latest few points (the accepted one among them)

    def fun(x: np.ndarray) -> np.ndarray:
        if x.tobytes() in last:
            return _joint(last[x.tobytes()].residuals)
        values = values_of(base, names, x)
        found = replayer.run(values, subset)
        last[x.tobytes()] = _Point(values, found)
        while len(last) > 3:
            del last[next(iter(last))]
        return _joint(found)

    def jac(x: np.ndarray) -> np.ndarray:
        if x.tobytes() not in last:
            fun(x)
        point = last[x.tobytes()]
        f0 = _joint(point.residuals)
        point.jac = finite_difference_jacobian(replayer, subset, names, base, x, f0, JOINT)
        return point.jac

    x, used = x0, 0
    while True:
        before = robust_cost(fun(x))
        with contextlib.redirect_stdout(io.StringIO()):
            res = least_squares(
                fun, x, jac=jac, bounds=(lower, upper),
                x_scale=np.array([RESOLUTION[n] for n in names]), max_nfev=max_nfev - used,
                method="trf", xtol=XTOL, ftol=FTOL, loss=LOSS, f_scale=LOSS_SCALE,
            )  # fmt: skip
        used += res.nfev
        x = np.clip(res.x, lower, upper)
        # a trust region shrunk to nothing while gaining: mispredicted steps, not an optimum
        gained = 2.0 * res.cost < (1.0 - RESTART_GAIN) * before
        if res.status != 3 or not gained or used >= max_nfev:
            break
    point = last.get(x.tobytes())
    if point is None:
        values = values_of(base, names, x)
        point = _Point(values, replayer.run(values, subset))
    return point


def _locate(
    replayer: Replayer,
    subset: Sequence[int],
    names: Sequence[str],
    start: Mapping[str, float],
    max_nfev: int,
) -> tuple[_Point, Profile | None]:
    """The arm's parameters among `names` to the joint tracking: least squares over the smooth
    ones with the delay held, the delay's profile, the smooth ones again when the delay moved.
    Returns where it ended and the delay's profile when the delay is among `names`."""
    smooth = [n for n in names if n != "actuator_delay"]
    if smooth:
        point = _fit(replayer, subset, smooth, start, max_nfev)
    else:
        point = _Point(dict(start), replayer.run(start, subset))
    found = None
    if "actuator_delay" in names:
        values = dict(point.values)
        before = values["actuator_delay"]
        found = Profile("actuator_delay", DELAY_PROFILE_STEP_S, n_params=len(names))
        found = profile(replayer, subset, values, found, DELAY_REACH, JOINT)
        values["actuator_delay"] = found.interval()[0]
        if smooth and abs(values["actuator_delay"] - before) > DELAY_PROFILE_STEP_S:
            point = _fit(replayer, subset, smooth, values, max_nfev)
        elif values["actuator_delay"] != before:
            point = _Point(values, replayer.run(values, subset))
    return point, found


def _search(
    replayer: Replayer,
    fitting: Sequence[int],
    search: Sequence[int],
    names: Sequence[str],
    start: Mapping[str, float],
    budget: int,
) -> dict[str, float]:
    """The arm's parameters from the `search` episodes (`_locate` from `start`), and the
    stretches of the whole fitting set the replay does not follow there set aside
    (`leave_out_not_followed`). When some of those stretches are in the search episodes, the
    search's optimum was shaped by them (a contact that went another way near it makes the cost
    jump, and the least squares stops beside the jump): it is searched again from `start`
    without them, and of the two optima the one of least loss on the search episodes
    (`robust_cost`, without the stretches set aside) is kept. Returns its values."""
    first = _locate(replayer, search, names, start, budget)[0].values
    before = {i: len(replayer.left_out.get(i, ())) for i in search}
    leave_out_not_followed(replayer, fitting, first)
    if all(len(replayer.left_out.get(i, ())) == n for i, n in before.items()):
        return first
    again = _locate(replayer, search, names, start, budget)[0].values
    costs = [
        sum(robust_cost(r.stacked(JOINT)) for r in found)
        for found in replayer.run_many([first, again], search)
    ]
    if costs[1] >= costs[0]:
        return first
    leave_out_not_followed(replayer, fitting, again)
    return again


def _object_estimates(
    replayer: Replayer,
    fitting: Sequence[int],
    names: Sequence[str],
    values: dict[str, float],
    n_params: int,
    rng: np.random.Generator,
) -> dict[str, ParameterEstimate]:
    """The object's parameters from their profiles on the whole residual (the arm's held;
    updates `values`). Each interval covers both the likelihood-ratio interval of the profile,
    widened by the design effect of its finite-difference column, and the episode bootstrap of
    its minimiser (`episode_bootstrap`): the contacts make the object's track, and so the
    profile, jump between neighbouring values by more than the residual's spread says."""
    out: dict[str, ParameterEstimate] = {}
    profiles = {}
    for name in names:
        found = profile(replayer, fitting, values, Profile(name, FD_STEP[name], n_params=n_params),
                        OBJECT_REACH)  # fmt: skip
        values[name] = found.interval()[0]
        profiles[name] = found
    at = replayer.run(values, fitting)
    f0 = np.concatenate([r.stacked() for r in at])
    x = np.array([values[n] for n in names])
    jac = finite_difference_jacobian(replayer, fitting, names, values, x, f0)
    effects = design_effects(jac, f0, stacked_blocks(at))
    _, _, corr = jacobian_intervals(jac, f0)
    for i, name in enumerate(names):
        found = profile(replayer, fitting, values, profiles[name], OBJECT_REACH, ALL, effects[i])
        reach = OBJECT_REACH
        while True:
            b_low, b_high, at_edge = episode_bootstrap(found, rng)
            if not at_edge or reach >= 2 * OBJECT_REACH:
                break
            reach += 2
            found = profile(replayer, fitting, values, found, reach, ALL, effects[i], grow=True)
        _, low, high = found.interval(float(effects[i]))
        info = PARAMETERS[name]
        low, high = max(info.low, min(low, b_low)), min(info.high, max(high, b_high))
        half = 0.5 * (high - low)
        partner, rho = "", 0.0
        if len(names) > 1:
            j = 1 - i
            partner, rho = names[j], float(corr[i, j])
        reason = "" if half <= RESOLUTION[name] else (
            f"its 95 % interval ±{half:.3g} is wider than ±{RESOLUTION[name]:g}"
        )  # fmt: skip
        out[name] = ParameterEstimate(
            name, values[name], low, high, not reason, partner, rho, reason,
            design_effect=float(effects[i]), method=PROFILE_BOOTSTRAP,
        )  # fmt: skip
    return out


def solve(
    replayer: Replayer,
    fitting: Sequence[int],
    search: Sequence[int] | None,
    names: Sequence[str],
    start: Mapping[str, float],
    max_iters: int,
    rng: np.random.Generator,
) -> tuple[dict[str, ParameterEstimate], dict[str, float], list[EpisodeResidual]]:
    """Fit `names` from `start` (see the module docstring): the arm's parameters on the `search`
    episodes first, then the polish on the whole fitting set (`search` None: `start` is already
    near the optimum, only the polish runs; `search` as large as the fitting set: the search
    runs on all of it); then the object's from their profiles. Returns the estimates with their
    intervals, the values, and the fitting episodes' residuals there.

    Args:
        max_iters: residual evaluations allowed per least-squares search, in units of one
            Jacobian (p + 1 evaluations each).
        rng: the episode bootstrap of the object's parameters.
    """
    arm = [n for n in names if not PARAMETERS[n].needs_object]
    objects = [n for n in names if PARAMETERS[n].needs_object]
    smooth = [n for n in arm if n != "actuator_delay"]
    budget = max_iters * (len(smooth) + 1)
    values = dict(start)
    if search is None:
        budget = POLISH_EVALUATIONS
    elif 0 < len(search) < len(fitting):
        values = _search(replayer, fitting, search, arm, values, budget)
        budget = POLISH_EVALUATIONS
        if "actuator_delay" in arm:
            # A few episodes leave the delay on a plateau (each one's commands arrive at one
            # phase of the control period): the whole set places it before the polish.
            first = Profile("actuator_delay", DELAY_PROFILE_STEP_S, n_params=len(arm))
            first = profile(replayer, fitting, values, first, DELAY_REACH, JOINT)
            values["actuator_delay"] = first.interval()[0]
    point, delay = _locate(replayer, fitting, arm, values, budget)
    values = point.values
    estimates: dict[str, ParameterEstimate] = {}
    if arm:
        estimates.update(_arm_estimates(replayer, fitting, arm, point, delay))
    if objects:
        estimates.update(_object_estimates(replayer, fitting, objects, values, len(names), rng))
    at = point.residuals if not objects else replayer.run(values, fitting)
    return {n: estimates[n] for n in names}, values, at


def _arm_estimates(
    replayer: Replayer,
    fitting: Sequence[int],
    names: Sequence[str],
    point: _Point,
    delay: Profile | None,
) -> dict[str, ParameterEstimate]:
    """The arm's parameters' intervals from the Jacobian of the joint tracking (the smooth
    columns the polish computed at this point, the delay's added), widened by their design
    effects; the delay's from its profile, widened alike."""
    values = point.values
    smooth = [n for n in names if n != "actuator_delay"]
    x = np.array([values[n] for n in names])
    f0 = _joint(point.residuals)
    if point.jac is not None and smooth:
        columns = dict(zip(smooth, point.jac.T, strict=True))
        rest = [n for n in names if n not in columns]
        if rest:
            extra = finite_difference_jacobian(
                replayer, fitting, rest, values, np.array([values[n] for n in rest]), f0, JOINT
            )
            columns.update(zip(rest, extra.T, strict=True))
        jac = np.column_stack([columns[n] for n in names])
    else:
        jac = finite_difference_jacobian(replayer, fitting, names, values, x, f0, JOINT)
    keep = smooth_rows(replayer, fitting, names, point, jac)
    blocks = stacked_blocks(point.residuals, JOINT)
    estimates = identifiability(names, x, jac[keep], f0[keep], blocks[keep])
    if delay is not None:
        est = estimates["actuator_delay"]
        grown = profile(replayer, fitting, values, delay, DELAY_REACH, JOINT, est.design_effect)
        _, est.low, est.high = grown.interval(est.design_effect)
        est.method = PROFILE
        half = 0.5 * (est.high - est.low)
        # The verdict follows the interval reported: the profile's, not the Jacobian's.
        est.identified = half <= RESOLUTION["actuator_delay"]
        est.reason = "" if est.identified else (
            f"its 95 % interval ±{half:.3g} is wider than ±{RESOLUTION['actuator_delay']:g}"
        )  # fmt: skip
    return estimates


def smooth_rows(
    replayer: Replayer,
    fitting: Sequence[int],
    names: Sequence[str],
    point: _Point,
    jac: np.ndarray,
) -> np.ndarray:
    """Which rows of the joint tracking's Jacobian at `point` describe a smooth response: the
    stretches (`EpisodeResidual.blocks`) where a step of one of `SMOOTHNESS_CHECKED` backwards
    changes the residual about as much as the step forwards, in the opposite direction. Where
    the two differ by more than half their difference, and by more than the median stretch's
    response, a contact went another way for a step (a jump, not a slope): such stretches would
    pin the Jacobian. They are left out of the intervals and, from now on, of every residual
    (`Replayer.leave_out`). Returns the rows kept (bool)."""
    values = point.values
    checked, steps, moved = [], [], []
    for j, name in enumerate(names):
        if name not in SMOOTHNESS_CHECKED:
            continue
        h = fd_step(name, values[name])
        if values[name] + h > PARAMETERS[name].high:
            h = -h
        if not PARAMETERS[name].low <= values[name] - h <= PARAMETERS[name].high:
            continue
        checked.append(j)
        steps.append(h)
        moved.append({**values, name: values[name] - h})
    keep = np.ones(jac.shape[0], dtype=bool)
    if not moved:
        return keep
    backwards = replayer.run_many(moved, fitting)
    flagged: set[tuple[int, int]] = set()  # (position in fitting, block)
    for j, h, found in zip(checked, steps, backwards, strict=True):
        rows, offset = [], 0
        for pos, (r0, r1) in enumerate(zip(point.residuals, found, strict=True)):
            size = r0.stacked(JOINT).size
            ahead = h * jac[offset : offset + size, j]
            behind = r1.stacked(JOINT) - r0.stacked(JOINT)
            blocks = r0.blocks(JOINT)
            for k in np.unique(blocks):
                inside = blocks == k
                bend = float(np.linalg.norm(ahead[inside] + behind[inside]))
                slope = float(np.linalg.norm(ahead[inside] - behind[inside]))
                rows.append((pos, int(k), bend, slope))
            offset += size
        typical = float(np.median([slope for *_, slope in rows]))
        flagged.update(
            (pos, k) for pos, k, bend, slope in rows if bend > 0.5 * slope and bend > typical
        )
    offset = 0
    for pos, r in enumerate(point.residuals):
        blocks = r.blocks(JOINT)
        stretches = r.stretches(JOINT)
        out = [k for k in range(len(stretches)) if (pos, k) in flagged]
        for k in out:
            keep[offset : offset + blocks.size][blocks == k] = False
        replayer.leave_out(fitting[pos], [stretches[k] for k in out])
        offset += blocks.size
    return keep


def leave_out_not_followed(
    replayer: Replayer, fitting: Sequence[int], values: Mapping[str, float]
) -> None:
    """Set aside, from now on, the stretches of the fitting episodes the replay does not follow
    at `values` (`stretches_not_followed`)."""
    found = stretches_not_followed(replayer.run(values, fitting), NOT_FOLLOWED_FACTOR)
    for episode, stretches in zip(fitting, found, strict=True):
        if stretches:
            replayer.leave_out(episode, stretches)


def never_exercised(
    replayer: Replayer, fitting: Sequence[int], names: Sequence[str], values: Mapping[str, float]
) -> list[str]:
    """The object parameters among `names` that the fitting episodes never exercise: moving one
    by its finite-difference step changes no residual (the object was never touched). They are
    held nominal before any fit (`unexercised_estimate`) instead of being carried through it."""
    candidates = [n for n in names if PARAMETERS[n].needs_object]
    if not candidates:
        return []
    moved = [{**values, n: values[n] + FD_STEP[n]} for n in candidates]
    f0, *found = stacked_residuals(replayer, fitting, [dict(values), *moved])
    scale = max(1.0, float(np.abs(f0).max()))
    return [
        n for n, f in zip(candidates, found, strict=True)
        if float(np.abs(f - f0).max()) <= UNEXERCISED * scale
    ]  # fmt: skip
