"""The leaderboard of many policies from stored episodes (`embodied-eval rank`).

Per policy: success per family (plain Wilson interval over first scored attempts, as the report's
technician view). Between policies: on every shared instance — same side, engine (sim), task,
seed and drift; first scored attempts — each pair of policies that ran it meets once: a win when
one succeeds and the other fails, a tie otherwise (`graded`: the higher quality q wins, equal q
ties). The comparisons go to `stats.ranking.rank_policies`.

Refused with a one-line error: fewer than two policies, a policy name not in the window, and a
policy that shares no instance with any other (its strength would rest on nothing).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.embodiment.window_rates import instance_key, success_by
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode, first_attempts
from embodied_eval.stats.bradley_terry import TIE_MODELS
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.ranking import (
    FIRST_WINS,
    SECOND_WINS,
    TIE,
    PairwiseOutcomes,
    Ranking,
    rank_policies,
)

#: Quality differences below this are ties in graded comparisons.
GRADED_TIE = 1e-9


def pair_outcome(x_first: float, x_second: float) -> int:
    """1 when the first policy's outcome is higher, −1 when lower, 0 (tie) when equal."""
    if x_first - x_second > GRADED_TIE:
        return FIRST_WINS
    if x_second - x_first > GRADED_TIE:
        return SECOND_WINS
    return TIE


def select_policies(episodes: Sequence[Episode], wanted: Sequence[str] | None) -> list[str]:
    """The policies to rank: `wanted` (each must have episodes) or every stored one."""
    stored = sorted({e.policy for e in episodes})
    if wanted:
        names = list(dict.fromkeys(p.strip() for p in wanted if p.strip()))
        missing = [p for p in names if p not in stored]
        if missing:
            raise EvalError(
                f"--policies: no scored episodes of {', '.join(repr(m) for m in missing)} in "
                f"this window (stored: {', '.join(stored) or 'none'})",
                key="policies",
            )
    else:
        names = stored
    if len(names) < 2:
        only = f" (only {names[0]!r})" if names else ""
        raise EvalError(
            f"rank needs episodes of at least two policies{only}: store more policies' "
            "episodes or widen --window",
            key="policies",
        )
    return names


def pairwise_outcomes(
    episodes: Sequence[Episode], policies: Sequence[str], graded: bool = False
) -> PairwiseOutcomes:
    """Every pair of the policies on every instance both ran (first scored attempts)."""
    index = {p: i for i, p in enumerate(policies)}
    by_instance: dict[tuple[str, ...], dict[int, Episode]] = defaultdict(dict)
    for e in sorted(episodes, key=lambda e: (e.started_at, e.episode_id)):
        if e.policy in index:
            by_instance[instance_key(e)].setdefault(index[e.policy], e)
    inst, first, second, outcome = [], [], [], []
    n_inst = 0
    for met in by_instance.values():
        if len(met) < 2:
            continue
        ids = sorted(met)
        x = {i: float(met[i].quality) if graded else float(met[i].success) for i in ids}
        for a_pos, i in enumerate(ids):
            for j in ids[a_pos + 1 :]:
                inst.append(n_inst)
                first.append(i)
                second.append(j)
                outcome.append(pair_outcome(x[i], x[j]))
        n_inst += 1

    def ints(v: list[int]) -> np.ndarray:
        return np.asarray(v, dtype=np.int64)

    return PairwiseOutcomes(
        tuple(policies), ints(inst), ints(first), ints(second), ints(outcome), n_inst
    )


def success_by_family(
    episodes: Sequence[Episode], policies: Sequence[str], level: float = 0.95
) -> dict[str, dict[str, Estimate]]:
    """policy → family → success (Wilson) over its first scored attempts."""
    return {
        p: success_by((e for e in episodes if e.policy == p), lambda e: e.family, level)
        for p in policies
    }


@dataclass(frozen=True)
class Leaderboard:
    """`rank`'s result: the ranking, per-family success and what it was computed from."""

    ranking: Ranking
    success: dict[str, dict[str, Estimate]]
    policies: tuple[str, ...]
    outcome: str
    window: str | None
    side: str | None
    episodes: int

    def to_json(self) -> dict[str, Any]:
        out = self.ranking.to_json()
        out.update({
            "policies": list(self.policies),
            "outcome": self.outcome,
            "window": self.window,
            "side": self.side,
            "episodes": self.episodes,
            "success_by_family": {
                p: {f: est.to_json() for f, est in fams.items()}
                for p, fams in self.success.items()
            },
        })  # fmt: skip
        return out


def build_leaderboard(
    episodes: Sequence[Episode],
    rng: np.random.Generator,
    *,
    policies: Sequence[str] | None = None,
    window: str | None = None,
    side: str | None = None,
    graded: bool = False,
    model: str = "davidson",
    resamples: int = 1000,
    level: float = 0.95,
) -> Leaderboard:
    """The leaderboard of stored episodes (see the module docstring).

    Args:
        episodes: the window's episodes (any policies, any status).
        rng: Generator of the bootstrap.
        policies: names to rank (default: every policy with scored episodes).
        window, side: recorded in the result (side also filters: "sim" or "real").
        graded: compare quality q rather than success.
        model, resamples, level: as `stats.ranking.rank_policies`.
    """
    if model not in TIE_MODELS:
        raise EvalError(f"--ties: {model!r} is not one of {', '.join(TIE_MODELS)}", key="ties")
    if side is not None and side not in ("sim", "real"):
        raise EvalError(f"--side: {side!r} must be sim or real", key="side")
    scored = first_attempts([e for e in episodes if e.scored and (side is None or e.side == side)])
    names = select_policies(scored, policies)
    chosen = [e for e in scored if e.policy in names]
    data = pairwise_outcomes(chosen, names, graded)
    met = set(data.first.tolist()) | set(data.second.tolist())
    alone = [p for i, p in enumerate(names) if i not in met]
    if len(alone) == len(names):
        raise EvalError(
            f"policies {', '.join(names)} never share an instance (task, seed, drift): run them "
            "on the same manifest rows",
            key="policies",
        )
    if alone:
        raise EvalError(
            f"{', '.join(repr(p) for p in alone)} "
            f"{'shares' if len(alone) == 1 else 'share'} no instance (task, seed, drift) with "
            "the other policies: run them on the same manifest rows or leave them out with "
            "--policies",
            key="policies",
        )
    ranking = rank_policies(data, rng, model=model, resamples=resamples, level=level)
    return Leaderboard(
        ranking,
        success_by_family(chosen, names, level),
        tuple(names),
        "graded quality q (higher q wins)" if graded else "success (one succeeds, one fails)",
        window,
        side,
        len(chosen),
    )
