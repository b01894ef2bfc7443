"""Agreement between simulation engines, reported apart from sim-to-real transfer.

Each sim engine is tuned on its own (MuJoCo's elliptic friction cone, PyBullet's folded
armature, ...), so two engines can disagree on the same manifest row. How often they agree says
how much of AR_sim is the engine rather than the policy; it is *not* S2R, which pairs sim with
the real robot. For every pair of engines, the first scored sim attempts of the evaluated policy
are matched on `pair_id`; the 2×2 table a = both succeed, b = only the first engine, c = only the
second, d = neither gives

- agreement (a + d) / n with a Wilson interval, and
- the paired success gap p_first − p_second with Newcombe's paired interval (method 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from embodied_eval.records import Episode, first_attempts
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.paired import paired_gap_interval
from embodied_eval.stats.proportions import wilson_interval


@dataclass(frozen=True)
class EngineAgreement:
    """Two sim engines on the same manifest rows (see the module docstring)."""

    table: tuple[int, int, int, int]
    agreement: Estimate
    gap: Estimate

    def to_json(self) -> dict[str, Any]:
        a, b, c, d = self.table
        return {
            "n": a + b + c + d,
            "table": {"a": a, "b": b, "c": c, "d": d},
            "agreement": self.agreement.to_json(),
            "gap": self.gap.to_json(),
        }


def cross_engine_agreement(
    sim_episodes: Sequence[Episode], level: float
) -> dict[str, EngineAgreement]:
    """Per engine pair "first~second" (alphabetical names) the agreement of their outcomes.

    Args:
        sim_episodes: the evaluated policy's sim episodes on every engine (any attempt).
        level: two-sided confidence level.
    Returns:
        {} with fewer than two engines or no shared manifest rows.
    """
    firsts = first_attempts([e for e in sim_episodes if e.side == "sim" and e.scored])
    by_engine: dict[str, dict[str, bool]] = {}
    for ep in firsts:
        by_engine.setdefault(ep.engine, {})[ep.pair_id] = ep.success
    out: dict[str, EngineAgreement] = {}
    for first, second in combinations(sorted(by_engine), 2):
        shared = sorted(set(by_engine[first]) & set(by_engine[second]))
        if not shared:
            continue
        x = [by_engine[first][p] for p in shared]
        y = [by_engine[second][p] for p in shared]
        a = sum(1 for u, v in zip(x, y, strict=True) if u and v)
        b = sum(1 for u, v in zip(x, y, strict=True) if u and not v)
        c = sum(1 for u, v in zip(x, y, strict=True) if v and not u)
        d = len(shared) - a - b - c
        out[f"{first}~{second}"] = EngineAgreement(
            (a, b, c, d),
            wilson_interval(a + d, len(shared), level),
            paired_gap_interval(a, b, c, d, level),
        )
    return out
