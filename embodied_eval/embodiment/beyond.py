"""Checks beyond the seed, computed when the data allows.

* **Success-detector correction** (Rogan–Gladen): when a human audited some real episodes
  (`Episode.audited_success`), the detector's sensitivity Se = P(z = 1 | truly succeeded) and
  specificity Sp = P(z = 0 | truly failed) on the audited sample correct AR:
  AR_RG = (AR + Sp − 1)/(Se + Sp − 1), clipped to [0, 1]. Interval: parametric bootstrap of the
  three binomial proportions (AR over all n real episodes, Se over the audited successes, Sp over
  the audited failures), percentile. Undefined when Se + Sp ≤ 1 (a detector no better than chance).
* **Baseline calibration**: per family and side, the success rate (Wilson) of each baseline named
  in the protocol (`[baselines]`, e.g. null, expert) beside the evaluated policy's; a warning
  where the null baseline does not separate from the expert or from the evaluated policy (their
  intervals overlap): that family cannot tell a good policy from a bad one.
* **Policy-level sim↔real agreement**: with ≥ 3 policies run on both sides, MMRV (sim rates
  first, violations weighted by real gaps), Pearson and Spearman of the per-policy rates, with
  Fisher-z intervals and episode-level bootstrap intervals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.embodiment.resampling import percentile_estimate
from embodied_eval.embodiment.window_rates import success_by
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode
from embodied_eval.stats import (
    Estimate,
    pearson_agreement,
    policy_agreement_bootstrap,
    spearman_agreement,
    wilson_interval,
)

#: Fewest policies (run on both sides) for the policy-level agreement statistics.
MIN_POLICIES = 3


def rogan_gladen(observed: Any, sensitivity: Any, specificity: Any) -> Any:
    """Prevalence corrected for an imperfect detector: (p + Sp − 1)/(Se + Sp − 1), clipped.

    Args:
        observed: detected success rate p; scalar or array [R].
        sensitivity, specificity: Se and Sp of the detector; same shape as `observed`.

    Returns:
        The corrected rate in [0, 1]; NaN where Se + Sp ≤ 1.
    """
    p, se, sp = (np.asarray(x, dtype=float) for x in (observed, sensitivity, specificity))
    den = se + sp - 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, np.clip((p + sp - 1.0) / den, 0.0, 1.0), np.nan)
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class DetectorCorrection:
    """Rogan–Gladen corrected AR with the audit's Se and Sp."""

    corrected: Estimate
    sensitivity: Estimate
    specificity: Estimate
    audited: int

    def to_json(self) -> dict[str, Any]:
        return {
            "AR_corrected": self.corrected.to_json(),
            "sensitivity": self.sensitivity.to_json(),
            "specificity": self.specificity.to_json(),
            "audited": self.audited,
        }


def detector_correction(
    real: Sequence[Episode], rng: np.random.Generator, resamples: int, level: float
) -> DetectorCorrection | None:
    """Rogan–Gladen correction of AR from the human-audited real episodes.

    Args:
        real: first scored real attempts, shape [n] (some with `audited_success`).
        rng, resamples, level: parametric bootstrap settings.

    Returns:
        DetectorCorrection, or None when no episode was audited.
    """
    audited = [e for e in real if e.audited_success is not None]
    if not audited:
        return None
    n = len(real)
    k = sum(e.success for e in real)
    pos = [e for e in audited if e.audited_success]
    neg = [e for e in audited if not e.audited_success]
    tp = sum(e.success for e in pos)
    tn = sum(not e.success for e in neg)
    se = wilson_interval(tp, len(pos), level)
    sp = wilson_interval(tn, len(neg), level)
    method = f"Rogan-Gladen, parametric bootstrap (percentile, {resamples} resamples)"
    if not pos or not neg:
        note = "the audit needs both true successes and true failures to estimate Se and Sp"
        empty = Estimate(None, None, None, level, method, n, "two", note)
        return DetectorCorrection(empty, se, sp, len(audited))
    point = rogan_gladen(k / n, tp / len(pos), tn / len(neg))
    if not np.isfinite(point):
        note = "Se + Sp ≤ 1: the detector is no better than chance; AR cannot be corrected"
        empty = Estimate(None, None, None, level, method, n, "two", note)
        return DetectorCorrection(empty, se, sp, len(audited))
    p_b = rng.binomial(n, k / n, resamples) / n
    se_b = rng.binomial(len(pos), tp / len(pos), resamples) / len(pos)
    sp_b = rng.binomial(len(neg), tn / len(neg), resamples) / len(neg)
    corrected = percentile_estimate(point, rogan_gladen(p_b, se_b, sp_b), level, method, n)
    return DetectorCorrection(corrected, se, sp, len(audited))


# --------------------------------------------------------------------------- baselines


def _rates_by_family_side(
    first_scored: Sequence[Episode], level: float
) -> dict[str, dict[str, Estimate]]:
    cells = success_by(first_scored, lambda e: (e.family, e.side), level)
    out: dict[str, dict[str, Estimate]] = defaultdict(dict)
    for (family, side), est in cells.items():
        out[family][side] = est
    return dict(out)


def _separated(low_est: Estimate, high_est: Estimate) -> bool:
    """True when `low_est`'s upper bound is below `high_est`'s lower bound."""
    if low_est.high is None or high_est.low is None:
        return False
    return low_est.high < high_est.low


@dataclass(frozen=True)
class BaselineCalibration:
    """Per-family success rates of the baselines and the evaluated policy, with warnings."""

    rates: dict[str, dict[str, dict[str, Estimate]]]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "rates": {
                name: {
                    fam: {side: e.to_json() for side, e in sides.items()}
                    for fam, sides in fams.items()
                }
                for name, fams in self.rates.items()
            },
            "warnings": list(self.warnings),
        }


def baseline_calibration(
    first_scored: Mapping[str, Sequence[Episode]],
    protocol: Protocol,
    policy: str | None,
    level: float,
) -> BaselineCalibration | None:
    """Per-family AR of each protocol baseline beside the evaluated policy (see module docstring).

    Args:
        first_scored: policy → its first scored attempts (`selection.first_scored_by_policy`).
        protocol: its `[baselines]`. policy: the evaluated policy. level: Wilson level.

    Returns:
        BaselineCalibration, or None when the protocol names no baselines.
    """
    if not protocol.baselines:
        return None
    rates: dict[str, dict[str, dict[str, Estimate]]] = {}
    warnings: list[str] = []
    for name, target in sorted(protocol.baselines.items()):
        rates[name] = _rates_by_family_side(first_scored.get(target, []), level)
        if not rates[name]:
            warnings.append(f"baseline {name!r} ({target}) has no scored episodes")
    if policy is not None:
        rates["evaluated"] = _rates_by_family_side(first_scored.get(policy, []), level)
    comparisons = [("null", "expert"), ("null", "evaluated")]
    for low_name, high_name in comparisons:
        if low_name not in rates or high_name not in rates:
            continue
        for family, sides in sorted(rates[low_name].items()):
            for side, low_est in sorted(sides.items()):
                high_est = rates[high_name].get(family, {}).get(side)
                if high_est is None or _separated(low_est, high_est):
                    continue
                warnings.append(
                    f"family {family} ({side}): {low_name} {low_est.format(2)} does not "
                    f"separate from {high_name} {high_est.format(2)}"
                )
    return BaselineCalibration(rates, warnings)


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class PolicyAgreement:
    """Policy-level sim↔real agreement across the policies run on both sides."""

    policies: list[dict[str, Any]]
    mmrv: Estimate
    pearson: Estimate
    spearman: Estimate
    pearson_bootstrap: Estimate
    spearman_bootstrap: Estimate

    def to_json(self) -> dict[str, Any]:
        return {
            "policies": self.policies,
            "MMRV": self.mmrv.to_json(),
            "pearson": self.pearson.to_json(),
            "spearman": self.spearman.to_json(),
            "pearson_bootstrap": self.pearson_bootstrap.to_json(),
            "spearman_bootstrap": self.spearman_bootstrap.to_json(),
        }


def policy_agreement(
    first_scored: Mapping[str, Sequence[Episode]],
    rng: np.random.Generator,
    resamples: int,
    level: float,
) -> PolicyAgreement | None:
    """MMRV, Pearson and Spearman between per-policy sim and real success rates.

    Args:
        first_scored: policy → its first scored attempts (`selection.first_scored_by_policy`).
        rng, resamples, level: bootstrap settings.

    Returns:
        PolicyAgreement, or None with fewer than MIN_POLICIES policies run on both sides.
    """
    counts: dict[str, dict[str, list[int]]] = {}
    for policy, eps in first_scored.items():
        counts[policy] = {"sim": [0, 0], "real": [0, 0]}
        for e in eps:
            cell = counts[policy][e.side]
            cell[0] += e.success
            cell[1] += 1
    both = sorted(p for p, c in counts.items() if c["sim"][1] > 0 and c["real"][1] > 0)
    if len(both) < MIN_POLICIES:
        return None
    ss, sn, rs, rn = (
        np.array([counts[p][side][i] for p in both])
        for side, i in (("sim", 0), ("sim", 1), ("real", 0), ("real", 1))
    )
    sim_p, real_p = ss / sn, rs / rn
    boot = {
        stat: policy_agreement_bootstrap(ss, sn, rs, rn, rng, stat, resamples, level)
        for stat in ("mmrv", "pearson", "spearman")
    }
    policies = [
        {"policy": p, "sim": {"successes": int(a), "episodes": int(b)},
         "real": {"successes": int(c), "episodes": int(d)}}
        for p, a, b, c, d in zip(both, ss, sn, rs, rn, strict=True)
    ]  # fmt: skip
    return PolicyAgreement(
        policies,
        boot["mmrv"],
        pearson_agreement(sim_p, real_p, level),
        spearman_agreement(sim_p, real_p, level),
        boot["pearson"],
        boot["spearman"],
    )
