"""Metrics of mobile manipulation episodes: success, time to goal, SPL, collisions per metre and
the minimum separation to the person — each one named function with its source.

Per-episode values go into the episode's `control` record (`sim_suites.mobile_env`); the
functions taking arrays aggregate over episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def success_rate(successes: Sequence[bool] | np.ndarray) -> float:
    """Share of successful episodes, S̄ = (1/N) Σ S_i (Anderson et al., "On Evaluation of
    Embodied Navigation Agents", arXiv:1807.06757, 2018, §4: success S_i ∈ {0, 1}).

    Args:
        successes: (N,) whether each episode succeeded.
    """
    s = np.asarray(successes, dtype=float)
    if s.size == 0:
        raise ValueError("success_rate: no episodes")
    return float(s.mean())


def spl(
    successes: Sequence[bool] | np.ndarray,
    shortest_m: Sequence[float] | np.ndarray,
    taken_m: Sequence[float] | np.ndarray,
) -> float:
    """Success weighted by (normalized inverse) Path Length, as Habitat reports it:

        SPL = (1/N) Σ_i S_i · l_i / max(p_i, l_i)

    (Anderson et al. 2018, arXiv:1807.06757, eq. 1; Habitat-Lab's `SPL` measure), with S_i the
    episode's success, l_i the shortest-path length from the start to the goal and p_i the length
    of the path the agent took. Here the goal is reached through the pick stand-off, so l_i is
    the shortest path start → pick stand-off → place stand-off (`sim_suites.room`).

    Args:
        successes: (N,) 0/1. shortest_m: (N,) l_i > 0, m. taken_m: (N,) p_i ≥ 0, m.
    """
    s = np.asarray(successes, dtype=float)
    lengths = np.asarray(shortest_m, dtype=float)
    taken = np.asarray(taken_m, dtype=float)
    if s.size == 0 or not s.shape == lengths.shape == taken.shape:
        raise ValueError("spl: needs N ≥ 1 successes, shortest and taken lengths")
    return float(np.mean(s * lengths / np.maximum(taken, lengths)))


def time_to_goal_s(completed_step: int | None, control_dt_s: float) -> float | None:
    """Simulated time from the start to the first control step at which the task was complete
    (placed within tolerance, released, at rest), s; None when it never was.

    Args:
        completed_step: the first complete control step (counted from 1), or None.
        control_dt_s: control period, s.
    """
    return None if completed_step is None else completed_step * control_dt_s


def collisions_per_metre(collisions: int, path_m: float) -> float:
    """Collisions per metre driven: C / p, with C the robot's contacts with walls, furniture or
    the person (each onset counted once) and p the path length taken, m (the "collisions per
    meter" of the iGibson / BEHAVIOR navigation metrics, Shen et al., iGibson 1.0, IROS 2021);
    0 when the robot did not move.
    """
    return 0.0 if path_m <= 0 else collisions / path_m


def min_separation_m(separations_m: Sequence[float] | np.ndarray) -> float | None:
    """The smallest robot–person separation over an episode (m; the distance between the whole
    robot's collision geometry and the person's, ISO/TS 15066 speed and separation
    monitoring), None without a person.

    Args:
        separations_m: (T,) the separation at every control step.
    """
    s = np.asarray(separations_m, dtype=float)
    return None if s.size == 0 else float(s.min())


def navigation_record(
    success: bool,
    path_m: float,
    shortest_m: float | None,
    collisions: int,
    completed_step: int | None,
    control_dt_s: float,
) -> dict[str, Any]:
    """One episode's navigation metrics for its `control` record: path length p, shortest path
    l (None when the goal cannot be reached), its SPL term S·l/max(p, l) (`spl`; 0 without a
    path), collisions and collisions per metre, time to goal."""
    return {
        "path_length_m": round(path_m, 6),
        "shortest_path_m": None if shortest_m is None else round(shortest_m, 6),
        "spl": round(success * shortest_m / max(path_m, shortest_m), 9) if shortest_m else 0.0,
        "collisions": collisions,
        "collisions_per_m": round(collisions_per_metre(collisions, path_m), 9),
        "time_to_goal_s": time_to_goal_s(completed_step, control_dt_s),
    }
