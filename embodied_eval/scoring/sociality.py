"""Sociality/Coordination axis S (§3.1 S): headroom-normalized lift over the single agent
(m = 1), the deadlock/chatter penalty and their product.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import IDENTITY, Anchors, AxisScore, axis_from_raw
from embodied_eval.stats.estimate import Estimate

#: Default numerical guard ε of the lift (§3.1 S: ε ∈ (0, 1e-6]).
DEFAULT_EPS = 1e-12


def coordination_lift(single: float, best_multi: float, eps: float = DEFAULT_EPS) -> float:
    """Headroom-normalized lift s_t = [(max_{m>1} C_m(t) − C_1(t)) / (1 − C_1(t) + ε)]₊ (§3.1 S).

    Args:
        single: C_1(t), the single-agent capability on task t.
        best_multi: max over m > 1 of C_m(t).
        eps: ε ∈ (0, 1e-6].
    """
    if not 0.0 < eps <= 1e-6:
        raise EvalError(f"eps: {eps} must lie in (0, 1e-6]", key="eps")
    return max((best_multi - single) / (1.0 - single + eps), 0.0)


def best_concurrency(
    capabilities: Mapping[int, float], comms_per_action: Mapping[int, float] | None = None
) -> int:
    """m*(t) ∈ argmax_{m>1} C_m(t), ties broken by lower comms-per-action, then smaller m."""
    multi = [m for m in capabilities if m > 1]
    if not multi:
        raise EvalError("capabilities: no configuration with m > 1", key="capabilities")
    cpa = comms_per_action or {}
    return min(multi, key=lambda m: (-capabilities[m], cpa.get(m, math.inf), m))


def mean_coordination_lift(
    capabilities: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float] | None = None,
    eps: float = DEFAULT_EPS,
) -> tuple[float, dict[str, float]]:
    """Battery lift s̄ = Σ_t ω_t s_t (§3.1 S).

    Args:
        capabilities: per task, {m: C_m(t)} including m = 1 and at least one m > 1.
        weights: ω_t per task summing to 1 (default uniform).
        eps: ε of the lift.
    Returns:
        (s̄, {task: s_t}).
    """
    if not capabilities:
        raise EvalError("capabilities: no task given", key="capabilities")
    lifts = {}
    for task, by_m in capabilities.items():
        if 1 not in by_m:
            raise EvalError(
                f"capabilities.{task}: C_1 (m = 1) is missing", key=f"capabilities.{task}"
            )
        best = by_m[best_concurrency(by_m)]
        lifts[task] = coordination_lift(by_m[1], best, eps)
    if weights is None:
        w = dict.fromkeys(lifts, 1.0 / len(lifts))
    else:
        if set(weights) != set(lifts):
            raise EvalError("weights: one ω_t per task is needed", key="weights")
        w = {t: float(weights[t]) for t in lifts}
        if abs(sum(w.values()) - 1.0) > 1e-9 or any(v < 0 for v in w.values()):
            raise EvalError("weights: ω_t must be non-negative and sum to 1", key="weights")
    return float(sum(w[t] * lifts[t] for t in lifts)), lifts


@dataclass(frozen=True)
class Turn:
    """One turn of a multi-role episode at m*(t).

    Attributes:
        verified_action: the turn made a tool/API call, code run or environment transition that
            the task oracle validated.
        signature: normalized content of the turn (message hash or tool call), used to find
            repeated actions and near-duplicate turns.
        comm_tokens: inter-agent communication tokens spent in the turn.
    """

    verified_action: bool
    signature: str
    comm_tokens: float = 0.0


def chatter_threshold(single_agent_comms_per_action: ArrayLike) -> float:
    """τ_comm: the median communications per verified action of the m = 1 runs (§3.1 S)."""
    x = np.asarray(single_agent_comms_per_action, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise EvalError("single_agent_comms_per_action: needs finite values", key="tau_comm")
    return float(np.median(x))


def _longest_run(flags: Sequence[bool]) -> int:
    best = run = 0
    for f in flags:
        run = run + 1 if f else 0
        best = max(best, run)
    return best


def episode_indicators(
    turns: Sequence[Turn],
    *,
    conflict: bool,
    chatter_threshold: float,
    loop_turns: int = 3,
    collapse_turns: int = 3,
) -> dict[str, bool]:
    """Deadlock/chatter indicators D_e, L_e, C_e, M_e of one episode (§3.1 S).

    A turn makes progress when it performs a verified external action not seen before in the
    episode, so a repeated tool-call cycle counts as no progress.

    Args:
        turns: the episode's turns in order.
        conflict: D_e, unresolved conflict (no final commit or incompatible commits at cutoff).
        chatter_threshold: τ_comm, communication tokens per verified action.
        loop_turns: L, consecutive turns without progress that make a loop (default 3).
        collapse_turns: K, successive identical turns without progress that make a mode
            collapse (default 3).
    Returns:
        {"D": ..., "L": ..., "C": ..., "M": ...}.
    """
    seen: set[str] = set()
    no_progress = []
    for t in turns:
        new = t.verified_action and t.signature not in seen
        if t.verified_action:
            seen.add(t.signature)
        no_progress.append(not new)
    loop = _longest_run(no_progress) >= loop_turns
    same_stalled = [
        i > 0
        and no_progress[i]
        and no_progress[i - 1]
        and turns[i].signature == turns[i - 1].signature
        for i in range(len(turns))
    ]
    # a run of r "same as previous" flags spans r + 1 identical turns
    collapse = bool(turns) and _longest_run(same_stalled) + 1 >= collapse_turns
    n_verified = sum(t.verified_action for t in turns)
    tokens = float(sum(t.comm_tokens for t in turns))
    per_action = tokens / n_verified if n_verified else (math.inf if tokens > 0 else 0.0)
    return {"D": bool(conflict), "L": loop, "C": per_action > chatter_threshold, "M": collapse}


def deadlock_penalty(
    conflict: ArrayLike,
    loop: ArrayLike,
    chatter: ArrayLike,
    collapse: ArrayLike,
    *,
    alpha: float = 0.25,
    beta: float = 0.25,
) -> float:
    """Penalty π_deadlock = clip(mean 1{D ∨ L} + α mean C + β mean M, 0, 1) (§3.1 S).

    Args:
        conflict, loop, chatter, collapse: D_e, L_e, C_e, M_e per episode, shape (n_episodes,).
        alpha, beta: weights of chatter overflow and mode collapse (defaults 0.25).
    """
    arrays = [np.asarray(x, dtype=bool) for x in (conflict, loop, chatter, collapse)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or arrays[0].size == 0:
        raise EvalError("episodes: D, L, C, M need one flag per episode", key="episodes")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not 0.0 <= v <= 1.0:
            raise EvalError(f"{name}: {v} must lie in [0, 1]", key=name)
    d, lp, c, m = arrays
    pi_conflict = float(np.mean(d | lp))
    return float(np.clip(pi_conflict + alpha * np.mean(c) + beta * np.mean(m), 0.0, 1.0))


def sociality_statistic(lift: float, penalty: float) -> float:
    """Sociality Ŝ = clip(s̄ · (1 − π_deadlock), 0, 1) (§3.1 S)."""
    return float(np.clip(lift * (1.0 - penalty), 0.0, 1.0))


def sociality(
    capabilities: Mapping[str, Mapping[int, float]] | None = None,
    episodes: Sequence[Mapping[str, bool]] | None = None,
    *,
    task_weights: Mapping[str, float] | None = None,
    alpha: float = 0.25,
    beta: float = 0.25,
    eps: float = DEFAULT_EPS,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
) -> AxisScore:
    """Sociality axis S = φ_S(Ŝ) from matched solo/team capabilities and episode indicators.

    Args:
        capabilities: per task, {m: C_m(t)} under a fixed total budget.
        episodes: per episode at m*(t), {"D", "L", "C", "M"} flags (see `episode_indicators`).
        task_weights: ω_t (default uniform).
        alpha, beta: penalty weights (defaults 0.25).
        eps: ε of the lift.
        raw: pre-computed Ŝ.
        anchors: (L_S, U_S).
    Returns:
        AxisScore (point); breakdown has s̄, s_t per task, π_conflict parts and π_deadlock.
    """
    if raw is not None:
        return axis_from_raw("S", raw, anchors)
    if capabilities is None or episodes is None:
        raise EvalError("sociality: give capabilities and episodes, or raw", key="S")
    lift, per_task = mean_coordination_lift(capabilities, task_weights, eps)
    try:
        cols = {k: [bool(e[k]) for e in episodes] for k in ("D", "L", "C", "M")}
    except KeyError as exc:
        raise EvalError(
            f"episodes: every episode needs flag {exc.args[0]}", key="episodes"
        ) from None
    penalty = deadlock_penalty(cols["D"], cols["L"], cols["C"], cols["M"], alpha=alpha, beta=beta)
    point = sociality_statistic(lift, penalty)
    breakdown: dict[str, Any] = {
        "mean_lift": lift,
        "lift_by_task": per_task,
        "deadlock_penalty": penalty,
        "rates": {k: float(np.mean(v)) for k, v in cols.items()},
        "alpha": alpha,
        "beta": beta,
        "n_episodes": len(episodes),
    }
    est = Estimate(point, None, None, 0.95, "point (no interval)", len(per_task))
    return axis_from_raw("S", est, anchors, breakdown=breakdown)
