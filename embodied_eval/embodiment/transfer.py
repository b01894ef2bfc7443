"""Sim-to-real agreement S2R = 1 − |AR_sim − AR_real| (seed §3.1 E "Sim-to-real agreement").

Two modes, and the report says which one was used:

* **paired** (every counted real episode has its sim partner): the 2×2 table of pairs
  (a both succeed, b sim only, c real only, d both fail) gives D = (b − c)/n with Newcombe's
  method-10 paired interval; S2R's interval is the image of D's under D ↦ 1 − |D|.
* **reweighted** (matching is imperfect): sim episodes are post-stratified to the real context
  distribution (task instance × drift), AR_sim is that reweighted rate and D = AR_sim − AR_real.
  The two sides are then not paired, so D's interval is the normal one with independent
  variances (the reweighted rate's, and AR_real's with a ½-smoothed binomial variance).

Gate bound: S2R ≥ t is |D| ≤ 1 − t, a TOST, decided on the two-sided (2·level − 1) interval of D
(90 % for a 95 % gate): the one-sided lower bound of S2R is 1 − max(|L|, |U|) of that interval.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from embodied_eval.embodiment.selection import EpisodeSets, context_stratum
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode
from embodied_eval.stats import (
    Estimate,
    paired_gap_interval,
    reweight_to_real,
    sim_to_real_agreement,
    wilson_interval,
)

PAIRED, REWEIGHTED, NONE = "paired", "reweighted", "none"


@dataclass(frozen=True)
class PairTable:
    """The paired 2×2 table: a both succeed, b sim only, c real only, d both fail."""

    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0

    @property
    def n(self) -> int:
        return self.a + self.b + self.c + self.d

    def to_json(self) -> dict[str, int]:
        return {"a": self.a, "b": self.b, "c": self.c, "d": self.d}


def episode_cause(episode: Episode) -> str:
    """Why one half of a pair ended as it did, in a technician's words: the stop or abort and its
    reason, else its quality against the target."""
    if episode.status != "ok":
        reason = f": {episode.status_reason}" if episode.status_reason else ""
        return f"{episode.status}{reason}"
    verdict = "≥" if episode.success else "<"
    return f"quality {episode.quality:.2f} {verdict} target {episode.target_quality:.2f}"


def discordant_pairs(pairs: Sequence[tuple[Episode, Episode]]) -> tuple[dict[str, Any], ...]:
    """The pairs whose sim and real halves disagree, each explained: pair, family, both
    outcomes and both causes (`episode_cause`), in pair order."""
    return tuple(
        {
            "pair_id": sim.pair_id,
            "family": sim.family,
            "sim": "success" if sim.success else "failure",
            "real": "success" if real.success else "failure",
            "sim_cause": episode_cause(sim),
            "real_cause": episode_cause(real),
        }
        for sim, real in sorted(pairs, key=lambda p: p[0].pair_id)
        if sim.success != real.success
    )


def pair_table(pairs: Sequence[tuple[Episode, Episode]]) -> PairTable:
    """Count the paired outcomes.

    Args:
        pairs: (sim, real) episodes, shape [n].

    Returns:
        PairTable with a + b = sim successes and a + c = real successes.
    """
    a = b = c = d = 0
    for s, r in pairs:
        if s.success and r.success:
            a += 1
        elif s.success:
            b += 1
        elif r.success:
            c += 1
        else:
            d += 1
    return PairTable(a, b, c, d)


def table_from_outcomes(sim_z: np.ndarray, real_z: np.ndarray) -> PairTable:
    """The paired table from the pairs' outcomes (bool arrays [n], same order)."""
    sim_z, real_z = np.asarray(sim_z, dtype=bool), np.asarray(real_z, dtype=bool)
    return PairTable(
        int(np.sum(sim_z & real_z)),
        int(np.sum(sim_z & ~real_z)),
        int(np.sum(~sim_z & real_z)),
        int(np.sum(~sim_z & ~real_z)),
    )


@dataclass(frozen=True)
class TransferResult:
    """S2R with its reported interval, its gate bound, and what it rests on.

    Attributes:
        s2r: S2R with the two-sided interval at the protocol's level.
        bound: S2R with the one-sided lower bound at the protocol's level (sided "lower").
        gap: D = AR_sim − AR_real with its two-sided interval.
        ar_sim: the sim success rate S2R compares (paired sim episodes or reweighted).
        mode: "paired", "reweighted" or "none".
        table: the paired table (paired mode), else None.
        note: why a mode was chosen or why S2R is missing.
        discordant: the pairs whose halves disagree (paired mode), each with both halves'
            outcome and cause (`discordant_pairs`).
    """

    s2r: Estimate
    bound: Estimate
    gap: Estimate
    ar_sim: Estimate
    mode: str
    table: PairTable | None
    note: str = ""
    discordant: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = self.s2r.to_json()
        out["mode"] = self.mode
        out["gap"] = self.gap.to_json()
        out["lower_bound"] = self.bound.to_json()
        if self.table is not None:
            out["table"] = self.table.to_json()
        if self.discordant:
            out["discordant"] = [dict(d) for d in self.discordant]
        if self.note:
            out["note"] = "; ".join(x for x in (out.get("note"), self.note) if x)
        return out


def _one_sided(level: float) -> float:
    # round() keeps 2·0.95 − 1 printing as 0.9.
    return round(2.0 * level - 1.0, 12)


def agreement_from_gap(gap: Estimate, method: str) -> Estimate:
    """S2R = 1 − |D| with the interval that is the image of D's interval under D ↦ 1 − |D|.

    Args:
        gap: D with its two-sided interval. method: the method name to give S2R.

    Returns:
        Estimate of S2R (value None when D is undefined).
    """
    if gap.value is None or gap.low is None or gap.high is None:
        return Estimate(None, None, None, gap.level, method, gap.n, "two", gap.note)
    lo_abs, hi_abs = abs(gap.low), abs(gap.high)
    high = 1.0 if gap.low <= 0.0 <= gap.high else 1.0 - min(lo_abs, hi_abs)
    return Estimate(
        1.0 - abs(gap.value), 1.0 - max(lo_abs, hi_abs), high, gap.level, method, gap.n, "two"
    )


def _lower_only(est: Estimate) -> Estimate:
    """Turn the (2·level − 1) two-sided interval into the one-sided lower bound at `level`."""
    level = round((1.0 + est.level) / 2.0, 12)
    return Estimate(
        est.value, est.low, 1.0, level, f"{est.method}, one-sided (TOST)", est.n, "lower", est.note
    )


def _missing(level: float, note: str) -> TransferResult:
    empty = Estimate(None, None, None, level, "S2R", 0, "two", note)
    return TransferResult(empty, empty, empty, empty, NONE, None, note)


def paired_transfer(pairs: Sequence[tuple[Episode, Episode]], level: float) -> TransferResult:
    """S2R on matched pairs with Newcombe's paired interval.

    Args:
        pairs: (sim, real) first scored attempts, shape [n]. level: confidence level.

    Returns:
        TransferResult in "paired" mode.
    """
    return transfer_from_table(pair_table(pairs), level)


def transfer_from_table(t: PairTable, level: float) -> TransferResult:
    """S2R from a paired table with Newcombe's paired interval ("paired" mode)."""
    if t.n == 0:
        return _missing(level, "no paired episodes")
    s2r = sim_to_real_agreement(t.a, t.b, t.c, t.d, level)
    bound = _lower_only(sim_to_real_agreement(t.a, t.b, t.c, t.d, _one_sided(level)))
    gap = paired_gap_interval(t.a, t.b, t.c, t.d, level)
    # The sim rate of the paired episodes, with its own score (Wilson) interval.
    ar_sim = wilson_interval(t.a + t.b, t.n, level)
    return TransferResult(s2r, bound, gap, ar_sim, PAIRED, t)


def _independent_gap(ar_sim: Estimate, real: Sequence[Episode], level: float) -> Estimate:
    """D = AR_sim(reweighted) − AR_real with a normal interval, sides independent."""
    assert ar_sim.value is not None and ar_sim.low is not None and ar_sim.high is not None
    z = float(stats.norm.ppf(0.5 + ar_sim.level / 2.0))
    # The reweighted interval is symmetric before clipping to [0, 1]: the wider side is unclipped.
    half_sim = max(ar_sim.value - ar_sim.low, ar_sim.high - ar_sim.value)
    var_sim = (half_sim / z) ** 2
    n = len(real)
    k = sum(e.success for e in real)
    p_real = k / n
    p_smooth = (k + 0.5) / (n + 1.0)
    var_real = p_smooth * (1.0 - p_smooth) / n
    gap = ar_sim.value - p_real
    half = float(stats.norm.ppf(0.5 + level / 2.0)) * math.sqrt(var_sim + var_real)
    method = "reweighted sim − real, normal approx. (sides independent)"
    return Estimate(gap, max(-1.0, gap - half), min(1.0, gap + half), level, method, n, "two")


def reweighted_transfer(
    sim: Sequence[Episode], real: Sequence[Episode], level: float
) -> TransferResult:
    """S2R with sim episodes post-stratified to the real contexts (imperfect matching).

    Args:
        sim: first scored sim attempts, shape [m]. real: first scored real attempts, shape [n].
        level: confidence level.

    Returns:
        TransferResult in "reweighted" mode, or mode "none" when a real context has no sim
        episode (it cannot be reweighted; the note names it).
    """
    if not real:
        return _missing(level, "no real episodes")
    if not sim:
        return _missing(level, "no sim episodes to compare with")
    sim_strata = [context_stratum(e) for e in sim]
    real_strata = [context_stratum(e) for e in real]
    z = [e.success for e in sim]
    note = (
        f"{len(real)} real episode(s), not all paired: sim episodes reweighted to the real "
        "context distribution (task instance × drift)"
    )
    results = []
    for lvl in (level, _one_sided(level)):
        try:
            ar_sim = reweight_to_real(sim_strata, z, real_strata, lvl)
        except EvalError as exc:
            return _missing(level, f"cannot reweight sim to real: {exc}")
        gap = _independent_gap(ar_sim, real, lvl)
        results.append((ar_sim, gap, agreement_from_gap(gap, "1 − |gap|, " + gap.method)))
    (ar_sim, gap, s2r), (_, _, s2r_gate) = results
    return TransferResult(s2r, _lower_only(s2r_gate), gap, ar_sim, REWEIGHTED, None, note)


def sim_to_real(
    pairs: Sequence[tuple[Episode, Episode]],
    sim: Sequence[Episode],
    real: Sequence[Episode],
    level: float,
) -> TransferResult:
    """S2R in paired mode when every real episode has its partner, else reweighted.

    Args:
        pairs: matched (sim, real) episodes. sim: first scored sim attempts.
        real: first scored real attempts. level: confidence level.

    Returns:
        TransferResult.
    """
    if real and len(pairs) == len(real):
        return paired_transfer(pairs, level)
    return reweighted_transfer(sim, real, level)


def transfer_overall(sets: EpisodeSets, level: float) -> TransferResult:
    """S2R over all families (paired when every counted real episode has its partner)."""
    a = sets.arrays
    real = sets.transfer_real  # pairs that started from different scenes are left out
    if real and len(sets.pairs) == len(real):
        result = transfer_from_table(table_from_outcomes(a.pair_sim_z, a.pair_real_z), level)
        return dataclasses.replace(result, discordant=discordant_pairs(sets.pairs))
    return reweighted_transfer(sets.transfer_sim, real, level)


def transfer_by_family(sets: EpisodeSets, level: float) -> dict[str, TransferResult]:
    """S2R per task family (each family decides its own mode).

    Args:
        sets: the selected episodes. level: confidence level.

    Returns:
        family → TransferResult, families sorted, only families with real episodes.
    """
    a = sets.arrays
    out = {}
    for i, family in enumerate(a.families):
        in_pairs = a.pair_family == i
        real = [e for e in sets.transfer_real if e.family == family]
        if int(in_pairs.sum()) == len(real):
            table = table_from_outcomes(a.pair_sim_z[in_pairs], a.pair_real_z[in_pairs])
            out[family] = transfer_from_table(table, level)
        else:
            sim = [e for e in sets.transfer_sim if e.family == family]
            out[family] = reweighted_transfer(sim, real, level)
    return out
