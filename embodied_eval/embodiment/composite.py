"""The embodiment axis: Ê = (AR·SS·S2R)^(1/3) and E = φ_E(Ê), with a joint bootstrap interval.

Joint bootstrap (what the E interval means). Each resample draws task-instance clusters with
replacement (one set of multiplicities shared by AR and the paired gap, so they move together as
they do in the data) and then, inside the resample, each part from the exact distributions of its
counts (`resampling`), at one uniform per part and resample:

* AR: Beta(S, F + 1) on the lower side and Beta(S + 1, F) on the upper side, S and F the
  resample's real successes and failures (Clopper–Pearson's beta distributions);
* S2R = 1 − |D| on paired episodes: the shares of sim-only (b) and real-only (c) pairs are drawn
  the same way and |D| is taken at its largest, max(b_hi − c_lo, c_hi − b_lo), on the lower side
  (at its smallest on the upper side), so concordant pairs alone do not make S2R certain; in
  reweighted mode D = reweighted sim rate − the AR draws;
* SS: each severity's rate ν_x is drawn from Garwood's exact construction over the fixed exposure
  H — Gamma(N_x + 1, 1)/H on the lower-SS side, Gamma(N_x, 1)/H (0 when N_x = 0) on the upper
  side — independently across severities, and SS = 1 − min(1, Σ w_x ν_x). Zero incidents are
  not a zero rate: a few incident-free minutes draw rates in the hundreds per 100 h, so SS and
  E's bound are then near 0 (SS's own interval is [0, 1] there too).

Ê and E are computed per resample from the lower-side draws and from the upper-side draws; the
two-sided interval is [α/2-quantile of the lower-side E, (1 − α/2)-quantile of the upper-side E]
and the gate bound the α-quantile of the lower-side E. With one task instance and one part
uncertain, the bound is that part's exact bound (e.g. AR's one-sided Clopper–Pearson α^(1/n) for
n/n). Every draw is monotone in its counts for fixed clusters and uniforms (the parts use their
own child generators), so one more real failure whose sim partner also failed, or one more
incident, never raises E's bound. A critical incident forces SS = 0 and E = 0 (interval [0, 0]:
a rule, §7). With `ar_estimator = "ppi"` (above its validity floor) AR per resample is AR_ppi
recomputed on the drawn task instances.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.embodiment.beyond import rogan_gladen
from embodied_eval.embodiment.prediction import resampled_ppi
from embodied_eval.embodiment.resampling import (
    event_rate_draws,
    resampled_ratio,
    success_rate_draws,
    two_sided_estimate,
)
from embodied_eval.embodiment.safety_metrics import PER_HOURS
from embodied_eval.embodiment.safety_report import SafetySummary
from embodied_eval.embodiment.selection import CLUSTER_UNIT, EpisodeSets, context_stratum
from embodied_eval.embodiment.transfer import PAIRED, REWEIGHTED, TransferResult
from embodied_eval.errors import EvalError
from embodied_eval.records import SEVERITIES
from embodied_eval.stats import Estimate, cluster_weights


def embodiment_raw(ar: ArrayLike, ss: ArrayLike, s2r: ArrayLike) -> Any:
    """Raw embodiment score, seed §3.1 E "Composite and reporting": Ê = (AR·SS·S2R)^(1/3).

    The geometric mean is non-compensatory: any part at 0 gives Ê = 0.

    Args:
        ar, ss, s2r: AR, SS and S2R in [0, 1]; scalars or arrays of one shape [R].

    Returns:
        Ê, a float for scalar inputs, else an array [R].
    """
    out = np.cbrt(np.asarray(ar, dtype=float) * np.asarray(ss, dtype=float) * np.asarray(s2r))
    return float(out) if np.ndim(out) == 0 else out


def embodiment_score(raw: ArrayLike, low_anchor: float = 0.0, high_anchor: float = 1.0) -> Any:
    """Normalized embodiment E = φ_E(Ê), eq. (1): φ(r) = clip((r − L)/(U − L), 0, 1).

    Args:
        raw: Ê, scalar or array [R]. low_anchor: L_E (protocol default 0). high_anchor: U_E
            (> L_E; protocol default 1).

    Returns:
        E, a float for scalar inputs, else an array [R].
    """
    if not (math.isfinite(low_anchor) and math.isfinite(high_anchor)) or high_anchor <= low_anchor:
        raise EvalError(
            f"anchors: need finite L < U, got L={low_anchor}, U={high_anchor}", key="anchors"
        )
    out = np.clip((np.asarray(raw, dtype=float) - low_anchor) / (high_anchor - low_anchor), 0, 1)
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class EmbodimentEstimates:
    """Ê and E with two-sided intervals, and E's one-sided lower bound (the gate bound)."""

    raw: Estimate
    score: Estimate
    bound: Estimate
    replicates: int = 0


def _cluster_parts(sets: EpisodeSets, transfer: TransferResult) -> dict[str, NDArray]:
    """Per-task-instance sums for AR and the gap, shape [C] each."""
    a = sets.arrays
    parts = {
        "real_n": a.per_task(a.real_task),
        "real_s": a.per_task(a.real_task, a.real_z.astype(float)),
    }
    zeros = np.zeros(len(a.tasks))
    parts.update(pair_n=zeros, pair_b=zeros, pair_c=zeros, rw=zeros)
    if transfer.mode == PAIRED:
        sim_z, real_z = a.pair_sim_z.astype(bool), a.pair_real_z.astype(bool)
        parts["pair_n"] = a.per_task(a.pair_task)
        parts["pair_b"] = a.per_task(a.pair_task, (sim_z & ~real_z).astype(float))
        parts["pair_c"] = a.per_task(a.pair_task, (~sim_z & real_z).astype(float))
    elif transfer.mode == REWEIGHTED:
        # Σ over the cluster's real episodes of the sim success rate of their stratum: strata
        # nest in task instances, so resampling clusters reweights strata exactly.
        sim_n: dict[str, int] = defaultdict(int)
        sim_s: dict[str, int] = defaultdict(int)
        for e in sets.sim:
            key = context_stratum(e)
            sim_n[key] += 1
            sim_s[key] += e.success
        rates = np.asarray(
            [sim_s[k] / sim_n[k] for k in (context_stratum(e) for e in sets.real)], dtype=float
        )
        parts["rw"] = a.per_task(a.real_task, rates)
    return parts


def _ss_draws(
    safety: SafetySummary, weights: Mapping[str, float], rng: np.random.Generator, r: int
) -> tuple[NDArray, NDArray]:
    """SS per resample from Garwood draws of every severity's rate (lower side, upper side)."""
    uniforms = rng.random((len(SEVERITIES), r))
    low_sum, high_sum = np.zeros(r), np.zeros(r)
    for sev, u in zip(SEVERITIES, uniforms, strict=True):
        rate_low, rate_high = event_rate_draws(safety.counts[sev], safety.exposure_h, u, PER_HOURS)
        low_sum += weights[sev] * rate_high
        high_sum += weights[sev] * rate_low
    return 1.0 - np.minimum(1.0, low_sum), 1.0 - np.minimum(1.0, high_sum)


def _paired_agreement_draws(
    w: NDArray, cp: Mapping[str, NDArray], rng: np.random.Generator
) -> tuple[NDArray, NDArray]:
    """S2R = 1 − |D| per resample from exact draws of the discordant shares (lower, upper side)."""
    u_b, u_c = rng.random((2, w.shape[0]))
    b_low, b_high = success_rate_draws(w, cp["pair_b"], cp["pair_n"], u_b)
    c_low, c_high = success_rate_draws(w, cp["pair_c"], cp["pair_n"], u_c)
    largest = np.maximum(b_high - c_low, c_high - b_low)
    smallest = np.maximum(0.0, np.maximum(b_low - c_high, c_low - b_high))
    return 1.0 - largest, 1.0 - smallest


def _reweighted_agreement_draws(
    rw: NDArray, ar_low: NDArray, ar_high: NDArray
) -> tuple[NDArray, NDArray]:
    """S2R = 1 − |rw − AR| over AR's two sides: its smallest and largest value per resample."""
    g1, g2 = rw - ar_low, rw - ar_high
    largest = np.maximum(np.abs(g1), np.abs(g2))
    straddles = (np.minimum(g1, g2) <= 0.0) & (np.maximum(g1, g2) >= 0.0)
    smallest = np.where(straddles, 0.0, np.minimum(np.abs(g1), np.abs(g2)))
    return 1.0 - largest, 1.0 - smallest


def embodiment_estimates(
    sets: EpisodeSets,
    ar: Estimate,
    safety: SafetySummary,
    transfer: TransferResult,
    *,
    weights: Mapping[str, float],
    anchors: tuple[float, float],
    rng: np.random.Generator,
    resamples: int,
    level: float,
    ar_ppi: tuple[Mapping[str, Any], float] | None = None,
    judge_accuracy: tuple[np.ndarray, np.ndarray] | None = None,
) -> EmbodimentEstimates:
    """Ê and E with the joint bootstrap described in the module docstring.

    Args:
        sets: the selected episodes. ar: AR (point). safety: the safety summary (SS, counts, H).
        transfer: S2R and its mode. weights: severity weights. anchors: (L_E, U_E).
        rng: generator. resamples: R. level: confidence level.
        ar_ppi: when the protocol uses AR_ppi for AR (`ar_estimator = "ppi"`): its per-task
            sums and λ (`prediction.PredictionPoweredAR.parts`, `result.lam`); each resample
            then recomputes AR_ppi on the drawn task instances (λ held fixed) instead of AR.
        judge_accuracy: with the protocol's judge correction, R resamples of the detector's
            (Se, Sp) (`embodiment.judge`): each resample's AR is corrected with them
            (Rogan–Gladen; undefined → 0).

    Returns:
        EmbodimentEstimates; values None when AR, SS or S2R is undefined.
    """
    low_a, high_a = anchors
    method = (
        f"joint cluster bootstrap over {CLUSTER_UNIT}s (AR, S2R) with exact draws per resample "
        "(Clopper–Pearson beta for AR and the discordant pairs, Garwood gamma for each "
        f"severity's rate over H), percentile, {resamples} resamples"
    )
    n = len(sets.real)
    if safety.counts["critical"] > 0:
        note = "critical incident in the window: SS = 0 so Ê = E = 0"
        zero = Estimate(0.0, 0.0, 0.0, level, "critical-incident rule (§7)", n, "two", note)
        bound = dataclasses.replace(zero, sided="lower")
        return EmbodimentEstimates(zero, zero, bound)
    ar_v, ss_v, s2r_v = ar.value, safety.ss.value, transfer.s2r.value
    if ar_v is None or ss_v is None or s2r_v is None:
        missing = ", ".join(
            name for name, p in (("AR", ar_v), ("SS", ss_v), ("S2R", s2r_v)) if p is None
        )
        empty = Estimate(None, None, None, level, method, n, "two", f"undefined: no {missing}")
        return EmbodimentEstimates(empty, empty, dataclasses.replace(empty, sided="lower"))
    raw_value = embodiment_raw(ar_v, ss_v, s2r_v)
    score_value = embodiment_score(raw_value, low_a, high_a)
    cp = _cluster_parts(sets, transfer)
    # One child generator per part: the clusters, AR, the gap and SS draw independently of
    # each other, so a change in one part's counts leaves the others' draws as they were.
    g_w, g_ar, g_gap, g_ss = rng.spawn(4)
    w = cluster_weights(cp["real_n"].size, g_w, resamples)
    if ar_ppi is None:
        ar_low, ar_high = success_rate_draws(w, cp["real_s"], cp["real_n"], g_ar.random(resamples))
    else:
        ar_low = ar_high = resampled_ppi(w, dict(ar_ppi[0]), ar_ppi[1])
        method = method.replace("(AR, S2R)", "(AR_ppi, S2R)").replace("beta for AR and", "beta for")
    if judge_accuracy is not None:
        # Rogan–Gladen is increasing in the observed rate (Se + Sp > 1): both ends correct.
        ar_low = np.nan_to_num(rogan_gladen(ar_low, *judge_accuracy), nan=0.0)
        ar_high = np.nan_to_num(rogan_gladen(ar_high, *judge_accuracy), nan=0.0)
        method += "; AR corrected for the judge (Rogan-Gladen)"
    if transfer.mode == PAIRED:
        s2r_low, s2r_high = _paired_agreement_draws(w, cp, g_gap)
    else:
        method = method.replace("AR and the discordant pairs", "AR, S2R against the reweighted sim")
        rw = resampled_ratio(w, cp["rw"], cp["real_n"])
        s2r_low, s2r_high = _reweighted_agreement_draws(rw, ar_low, ar_high)
    ss_low, ss_high = _ss_draws(safety, weights, g_ss, resamples)
    raw_low = embodiment_raw(ar_low, ss_low, s2r_low)
    raw_high = embodiment_raw(ar_high, ss_high, s2r_high)
    score_low = embodiment_score(raw_low, low_a, high_a)
    score_high = embodiment_score(raw_high, low_a, high_a)
    raw = two_sided_estimate(raw_value, raw_low, raw_high, level, method, n)
    score = two_sided_estimate(score_value, score_low, score_high, level, method, n)
    bound = two_sided_estimate(
        score_value, score_low, score_high, level, method + ", one-sided", n, sided="lower"
    )
    bound = dataclasses.replace(bound, high=1.0)
    return EmbodimentEstimates(raw, score, bound, resamples)
