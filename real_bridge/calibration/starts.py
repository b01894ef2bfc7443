"""Where the calibration's least-squares fit starts: coarse scans of a few episodes.

The actuator delay and a slow actuator both make the arm late, and an unknown payload and soft
servos both make it sag; a fit started at nominal can settle with one parameter of such a pair
absorbing the other. The scans put it in the right valley first. Each scan replays the first
`SCAN_EPISODES` fitting episodes and ranks candidates by the fit's own loss (`robust_cost`),
except the timing scan, which compares the changes of the joint error from one controller update
to the next (what an unknown sag hardly touches).

The delay's interval comes from a profile (`delay_profile`): a command takes effect at the
controller's next update, so the residual is flat in the delay between those moments and the
Jacobian cannot see it finer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from real_bridge.calibration.params import PARAMETERS
from real_bridge.calibration.residuals import Replayer, stacked_residuals

#: Where the fit starts: nominal, except the actuator's time constant (at τ = 0 the filter's effect
#: has zero slope, so a fit started there could never leave it).
START: dict[str, float] = {"actuator_bandwidth": 0.01}
#: Delays tried before the least-squares fit (s, up to); the step is one control period.
DELAY_SCAN_S = 0.2
#: The least-squares loss: "soft_l1" lets samples far off (a contact the replay reproduces
#: differently, the moments around a stop) weigh less than the free motion; LOSS_SCALE is where,
#: in units of the residual's scales (1 mrad, 2 mm).
LOSS = "soft_l1"
LOSS_SCALE = 3.0
#: Payloads and servo gains tried before the fit (kg; multipliers).
PAYLOAD_SCAN_KG = (0.0, 0.2, 0.5, 1.0, 2.0)
GAIN_SCAN = (0.7, 1.0, 1.3)
#: Actuator time constants tried at the scanned delay, s.
TIME_CONSTANT_SCAN_S = (0.0, 0.005, 0.01, 0.02, 0.035, 0.06)
#: Grid of the delay's profile (the physics step), s.
DELAY_PROFILE_STEP_S = 0.002
#: Episodes the scans replay (the first ones of the fitting set).
SCAN_EPISODES = 3


#: Two-sided 95 % normal quantile.
Z_95 = 1.959963984540054
#: The delay grid's step in the timing scan, s (one control period at 50 Hz).
DELAY_STEP_S = 0.02


def timing_start(
    replayer: Replayer, subset: Sequence[int], base: Mapping[str, float], names: Sequence[str]
) -> dict[str, float]:
    """Start values of the delay and the actuator's time constant from a coarse scan of a few
    episodes: a delay and a slow actuator both make the arm late, so a least-squares fit started
    far from both can settle with one absorbing the other. Delays on a grid of control periods,
    then time constants at the best delay, then delays again near it. The scan compares the
    changes of the joint error from one controller update to the next, which the static sag of an
    unknown payload or gain hardly touches."""
    out = dict(base)

    def _timing_costs(key: str, grid: Sequence[float]) -> list[float]:
        found = replayer.run_many([{**out, key: float(v)} for v in grid], subset)
        return [float(sum(np.sum(np.diff(r.joint, axis=0) ** 2) for r in rs)) for rs in found]

    step = DELAY_STEP_S
    delays = list(np.arange(0.0, DELAY_SCAN_S + 1e-9, step))

    def best_delay(grid: Sequence[float]) -> float:
        return float(grid[int(np.argmin(_timing_costs("actuator_delay", grid)))])

    if "actuator_delay" in names:
        out["actuator_delay"] = best_delay(delays)
    if "actuator_bandwidth" in names:
        taus = list(TIME_CONSTANT_SCAN_S)
        costs = _timing_costs("actuator_bandwidth", taus)
        out["actuator_bandwidth"] = max(
            START["actuator_bandwidth"] / 2, taus[int(np.argmin(costs))]
        )
        if "actuator_delay" in names:
            d = out["actuator_delay"]
            near = [x for x in (d - 2 * step, d - step, d, d + step) if 0.0 <= x <= DELAY_SCAN_S]
            out["actuator_delay"] = best_delay(near)
    return out


def sag_start(
    replayer: Replayer, subset: Sequence[int], base: Mapping[str, float], names: Sequence[str]
) -> dict[str, float]:
    """Start values of the payload and the servo gain from a coarse grid on a few episodes: both
    make the arm sag (an unknown mass at the hand; servos too soft for the nominal gravity
    feed-forward), so a fit started at nominal can settle in the valley between them."""
    out = dict(base)
    payloads = PAYLOAD_SCAN_KG if "payload" in names else (out["payload"],)
    gains = GAIN_SCAN if "actuator_gain" in names else (out["actuator_gain"],)
    if len(payloads) * len(gains) == 1:
        return out
    grid = [(p, g) for p in payloads for g in gains]
    found = stacked_residuals(
        replayer, subset, [{**out, "payload": p, "actuator_gain": g} for p, g in grid]
    )
    costs = [robust_cost(r) for r in found]
    out["payload"], out["actuator_gain"] = grid[int(np.argmin(costs))]
    return out


def robust_cost(residual: np.ndarray) -> float:
    """The fit's loss of a residual: Σ 2c²(√(1 + (r/c)²) − 1) with c = LOSS_SCALE (scipy's
    soft_l1), so the scans rank candidates as the fit does."""
    c = LOSS_SCALE
    return float(np.sum(2.0 * c * c * (np.sqrt(1.0 + (residual / c) ** 2) - 1.0)))


def delay_profile(
    replayer: Replayer,
    subset: Sequence[int],
    base: Mapping[str, float],
    step_s: float,
    half_width_s: float,
    n_params: int,
) -> tuple[float, float, float]:
    """The delay's estimate and 95 % interval from the profile of the residual.

    A command takes effect at the controller's next update, so the residual is flat in the delay
    between the moments where some command moves to another update: the Jacobian cannot see the
    delay finer than that. The residual is evaluated on a grid of `step_s` (the physics step)
    around the fitted delay, the other parameters held; the interval is every delay whose
    residual is within z₀.₉₇₅² s² of the smallest (a likelihood-ratio interval, s² = ‖r‖²/dof
    with dof = residuals − `n_params`), the estimate its middle. The grid grows outwards from
    the fitted delay, one step per side at a time, while the outermost point of a side is inside
    the interval or the lowest so far, up to ±`half_width_s`.

    Returns:
        (estimate, low, high), s.
    """
    d0 = base["actuator_delay"]
    info = PARAMETERS["actuator_delay"]
    reach = round(half_width_s / step_s)
    allowed = [k for k in range(-reach, reach + 1) if info.low <= d0 + k * step_s <= info.high]
    costs: dict[int, float] = {}
    size = 0

    def evaluate(offsets: list[int]) -> None:
        nonlocal size
        found = stacked_residuals(
            replayer, subset, [{**base, "actuator_delay": d0 + k * step_s} for k in offsets]
        )
        for k, r in zip(offsets, found, strict=True):
            costs[k], size = float(np.sum(r**2)), r.size

    def threshold() -> float:
        best = min(costs.values())
        return best + Z_95**2 * best / max(1, size - n_params)

    evaluate([k for k in (-1, 0, 1) if k in allowed])
    while True:
        limit, best = threshold(), min(costs.values())
        grow = []
        for edge, nxt in ((min(costs), min(costs) - 1), (max(costs), max(costs) + 1)):
            if nxt in allowed and (costs[edge] <= limit or costs[edge] <= best):
                grow.append(nxt)
        if not grow:
            break
        evaluate(grow)
    limit = threshold()
    inside = [d0 + k * step_s for k, c in costs.items() if c <= limit]
    low, high = float(min(inside)), float(max(inside))
    return 0.5 * (low + high), low, high
