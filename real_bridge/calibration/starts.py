"""Where the calibration's least-squares fit starts: coarse scans of a few episodes.

The actuator delay and a slow actuator both make the arm late, and an unknown payload and soft
servos both make it sag; a fit started at nominal can settle with one parameter of such a pair
absorbing the other. The scans put it in the right valley first. Each scan replays the first
`SCAN_EPISODES` fitting episodes (`scan_episodes`: one of each recorded task in turn, the cleanest
first) and ranks candidates by the fit's own loss (`robust_cost`),
except the timing scan, which compares the changes of the joint error from one controller update
to the next (what an unknown sag hardly touches).

The delay's interval, and the object's friction and mass, come from profiles (`profile`): a
command takes effect at the controller's next update, so the residual is flat in the delay between
those moments and the Jacobian cannot see it finer; the object's track changes by steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from real_bridge.calibration.params import PARAMETERS
from real_bridge.calibration.recorded import RecordedEpisode
from real_bridge.calibration.residuals import ALL, JOINT, Replayer, stacked_residuals

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
GAIN_SCAN = (0.5, 0.7, 1.0, 1.4, 2.0)
#: Actuator time constants tried at the scanned delay, s.
TIME_CONSTANT_SCAN_S = (0.0, 0.005, 0.01, 0.02, 0.035, 0.06)
#: Resamples of the episode bootstrap of a profile's minimiser.
BOOTSTRAP_RESAMPLES = 2000
#: Grid of the delay's profile (the physics step), s.
DELAY_PROFILE_STEP_S = 0.002
#: Episodes the scans (and the least-squares search) replay (`scan_episodes`).
SCAN_EPISODES = 4
#: Object friction and mass multipliers tried before the fit (the contacts make their effect on
#: the object's track far from linear).
FRICTION_SCAN = (0.5, 0.7, 1.0, 1.4, 2.0)
OBJECT_MASS_SCAN = (0.5, 1.0, 2.0)


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


def scan_episodes(episodes: Sequence[RecordedEpisode], fitting: Sequence[int]) -> list[int]:
    """The `SCAN_EPISODES` fitting episodes the scans and the search replay: one of each recorded
    task in turn (so every task's physics is in the search), and within a task the cleanest
    first: the robot applied every command and never held or stopped, then the longest."""

    def flaws(i: int) -> tuple[int, int, float]:
        e = episodes[i]
        held = e.not_applied + len(e.holds_s) + int(math.isfinite(e.stopped_s))
        return (held > 0, held, -(min(float(e.state_t[-1]), e.stopped_s)))

    by_task: dict[str, list[int]] = {}
    for i in sorted(fitting, key=flaws):
        by_task.setdefault(episodes[i].task_id, []).append(i)
    queues = [by_task[t] for t in sorted(by_task, key=lambda t: flaws(by_task[t][0]))]
    out: list[int] = []
    while len(out) < min(SCAN_EPISODES, len(fitting)):
        for queue in queues:
            if queue and len(out) < SCAN_EPISODES:
                out.append(queue.pop(0))
    return sorted(out)


def object_start(
    replayer: Replayer, subset: Sequence[int], base: Mapping[str, float], names: Sequence[str]
) -> dict[str, float]:
    """Start values of the object's friction and mass from coarse grids on a few episodes: a
    part that slides or sticks, a drawer that moves or not, changes its track by steps a
    least-squares fit started at nominal cannot see past."""
    out = dict(base)
    for name, grid in (("friction", FRICTION_SCAN), ("object_mass", OBJECT_MASS_SCAN)):
        if name in names:
            found = stacked_residuals(replayer, subset, [{**out, name: v} for v in grid])
            out[name] = grid[int(np.argmin([robust_cost(r) for r in found]))]
    return out


def sag_start(
    replayer: Replayer, subset: Sequence[int], base: Mapping[str, float], names: Sequence[str]
) -> dict[str, float]:
    """Start values of the payload and the servo gain from a coarse grid on a few episodes: both
    make the arm sag (an unknown mass at the hand; servos too soft for the nominal gravity
    feed-forward), so a fit started at nominal can settle in the valley between them. Ranked on
    the joint tracking, which the arm's parameters are fitted to."""
    out = dict(base)
    payloads = PAYLOAD_SCAN_KG if "payload" in names else (out["payload"],)
    gains = GAIN_SCAN if "actuator_gain" in names else (out["actuator_gain"],)
    if len(payloads) * len(gains) == 1:
        return out
    grid = [(p, g) for p in payloads for g in gains]
    found = stacked_residuals(
        replayer, subset, [{**out, "payload": p, "actuator_gain": g} for p, g in grid], JOINT
    )
    costs = [robust_cost(r) for r in found]
    out["payload"], out["actuator_gain"] = grid[int(np.argmin(costs))]
    return out


def robust_cost(residual: np.ndarray) -> float:
    """The fit's loss of a residual: Σ 2c²(√(1 + (r/c)²) − 1) with c = LOSS_SCALE (scipy's
    soft_l1), so the scans rank candidates as the fit does."""
    c = LOSS_SCALE
    return float(np.sum(2.0 * c * c * (np.sqrt(1.0 + (residual / c) ** 2) - 1.0)))


@dataclass
class Profile:
    """A parameter's profile: the residual's sum of squares at points of a grid, the others held.

    Attributes:
        name / step: the parameter and the grid's step (in its unit).
        origin: the grid's anchor (the value the first growth started from).
        held: the other parameters' values the costs were computed at.
        per_episode: each episode's share of the cost, by grid point.
        costs: sum of squares by grid point (value rounded to the step's multiple).
        size: entries of the residual; n_params: parameters fitted (dof = size − n_params).
    """

    name: str
    step: float
    costs: dict[float, float] = field(default_factory=dict)
    size: int = 0
    n_params: int = 1
    origin: float | None = None
    held: dict[str, float] = field(default_factory=dict)
    per_episode: dict[float, np.ndarray] = field(default_factory=dict)

    def threshold(self, effect: float = 1.0) -> float:
        """The interval's cost bound: min + z₀.₉₇₅² s² × `effect`, s² = min / dof."""
        best = min(self.costs.values())
        return best + effect * Z_95**2 * best / max(1, self.size - self.n_params)

    def interval(self, effect: float = 1.0) -> tuple[float, float, float]:
        """(estimate, low, high): the estimate is the grid point of least cost (of equal ones, the
        nearest to the grid's origin: the data cannot tell them apart); the interval
        spans the grid points within the bound and reaches half a step past the outermost of
        them (its ends lie between them and the next points of the grid), within the
        parameter's range."""
        limit = self.threshold(effect)
        inside = [v for v, c in self.costs.items() if c <= limit]
        low, high = float(min(inside)), float(max(inside))
        info = PARAMETERS[self.name]
        origin = self.origin if self.origin is not None else 0.0
        return (
            # least cost; among equal costs (a plateau) the one nearest where the growth began
            float(min(self.costs, key=lambda v: (self.costs[v], abs(v - origin)))),
            max(info.low, low - 0.5 * self.step),
            min(info.high, high + 0.5 * self.step),
        )


def episode_bootstrap(
    found: Profile, rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float, bool]:
    """A percentile interval of the profile's minimiser over episodes resampled with replacement
    (a block bootstrap whose blocks are whole episodes: what one episode's contacts did to the
    cost, it does to all of its grid points).

    Each resample weighs every episode's cost shares by how often it was drawn; its minimiser is
    the grid point of least weighted cost. Returns (low, high, at_edge): the 2.5th and 97.5th
    percentiles of the minimisers ± half a step, and whether more than 2.5 % of them sat on the
    outermost evaluated point of a side (the grid should grow there).
    """
    grid = sorted(found.per_episode)
    shares = np.array([found.per_episode[v] for v in grid])  # (points, episodes)
    draws = rng.multinomial(shares.shape[1], np.full(shares.shape[1], 1 / shares.shape[1]),
                            size=resamples)  # fmt: skip
    best = np.argmin(draws @ shares.T, axis=1)
    values = np.array(grid)[best]
    low, high = np.quantile(values, [0.025, 0.975])
    edge = max(np.mean(best == 0), np.mean(best == len(grid) - 1)) > 0.025
    return float(low) - 0.5 * found.step, float(high) + 0.5 * found.step, bool(edge)


def profile(
    replayer: Replayer,
    subset: Sequence[int],
    base: Mapping[str, float],
    found: Profile,
    reach: int,
    part: str = ALL,
    effect: float = 1.0,
    grow: bool = False,
) -> Profile:
    """Grow `found` (the profile of `found.name`, first around its value in `base`) until it holds the
    95 % interval (`Profile.interval`; a likelihood-ratio interval, with `effect` the design
    effect of residuals correlated in time).

    The grid of `found.step` grows outwards from the value in `base`, one step per side at a
    time, while the outermost point of a side is inside the bound or the lowest so far, up to
    `reach` steps; points already in `found` are not replayed again (unless the other parameters
    in `base` moved since). `grow` adds one step on each side first, whatever the costs.

    A command takes effect at the controller's next update, so the residual is flat in the delay
    between the moments where some command moves to another update: the Jacobian cannot see the
    delay finer than that, and its interval comes from its profile on the physics step. The
    object's friction and mass change its track by steps (a part slides or sticks), so theirs
    come from their profiles too.
    """
    name, step = found.name, found.step
    info = PARAMETERS[name]
    held = {k: float(v) for k, v in base.items() if k != name}
    if found.held != held:  # the others moved: the costs so far are of another profile
        found.costs.clear()
        found.per_episode.clear()
        found.origin, found.held = None, held
    if found.origin is None:
        found.origin = float(base[name])
    center = found.origin
    allowed = {
        k for k in range(-reach, reach + 1) if info.low - 1e-12 <= center + k * step <= info.high
    }

    def key(k: int) -> float:
        return round(center + k * step, 9)

    def evaluate(offsets: list[int]) -> None:
        todo = [k for k in offsets if key(k) not in found.costs]
        results = replayer.run_many([{**base, name: key(k)} for k in todo], subset)
        for k, episodes in zip(todo, results, strict=True):
            share = np.array([float(np.sum(r.stacked(part) ** 2)) for r in episodes])
            found.per_episode[key(k)] = share
            found.costs[key(k)] = float(share.sum())
            found.size = sum(r.stacked(part).size for r in episodes)

    evaluate([k for k in (-1, 0, 1) if k in allowed])
    if grow:
        known = [k for k in allowed if key(k) in found.costs]
        evaluate([k for k in (min(known) - 1, max(known) + 1) if k in allowed])
    done: set[int] = set()
    while True:
        limit = found.threshold(effect)
        best = min(found.costs.values())
        wider = []
        for side in (-1, 1):
            if side in done:
                continue
            edge = max((k for k in allowed if key(k) in found.costs and k * side >= 0),
                       key=lambda k: k * side)  # fmt: skip
            cost = found.costs[key(edge)]
            if edge + side in allowed and (cost <= limit or cost <= best):
                wider.append(edge + side)
            else:
                done.add(side)
        if not wider:
            return found
        evaluate(wider)
