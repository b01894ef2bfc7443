"""The certificate's leaderboard: when the window holds episodes of two or more policies on shared
instances, they are ranked as `embodied-eval rank` ranks them (Bradley–Terry with Davidson's ties,
bootstrap intervals over instances, P(best), the comparison graph), with its own RNG stream
(`numpy.random.default_rng(seed).spawn(4)[3]`), so `verify --db` recomputes the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from embodied_eval.embodiment.policy_leaderboard import build_leaderboard
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode

#: Which child of the certificate's seed the leaderboard's bootstrap uses.
STREAM = 3


def leaderboard_section(
    episodes: Sequence[Episode], seed: int, window: str
) -> dict[str, Any] | None:
    """The leaderboard's JSON form; None with fewer than two policies scored in the window;
    {"not_ranked": why} when they cannot be ranked (e.g. they never share an instance)."""
    if len({e.policy for e in episodes if e.scored}) < 2:
        return None
    rng = np.random.default_rng(seed).spawn(STREAM + 1)[STREAM]
    try:
        return build_leaderboard(episodes, rng, window=window).to_json()
    except EvalError as exc:
        return {"not_ranked": str(exc)}
