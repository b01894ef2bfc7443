"""A success rate judged by an imperfect judge, corrected without overclaiming.

A judge with sensitivity Se (true successes it calls successes) and specificity Sp (true
failures it calls failures) turns a true success rate AR into the judged rate
p = AR·Se + (1 − AR)(1 − Sp), so AR = (p + Sp − 1)/(Se + Sp − 1) (Rogan–Gladen), defined when
Se + Sp > 1. Se and Sp are themselves estimated from audited episodes (true_positive of
`positives` audited true successes, true_negative of `negatives` audited true failures), so
a bound on AR must carry their uncertainty as well as p's.

The bound here is the corner of the three exact confidence sets (Bonferroni, α split in three):

    p_L   = one-sided Clopper–Pearson lower bound of k/n at tail α/3 (or lower: the caller may
            pass a clustered bound, e.g. a task-instance cluster bootstrap at the same tail)
    Se_U  = one-sided CP upper bound of TP/positives at tail α/3
    Sp_L  = one-sided CP lower bound of TN/negatives at tail α/3
    AR_L  = clip((p_L + Sp_L − 1)/(Se_U + Sp_L − 1), 0, 1)

Why it holds: with probability ≥ 1 − α all three bounds hold at once. Rogan–Gladen rises with p,
falls with Se (its numerator is AR·(Se + Sp − 1) ≥ 0) and rises with Sp wherever Se ≥ p, so
AR = RG(p, Se, Sp) ≥ RG(p_L, Se, Sp) ≥ RG(p_L, Se_U, Sp) ≥ RG(p_L, Se_U, Sp_L) = AR_L. With a
perfect judge estimated perfect (Se = Sp = 1 from few audits) AR_L ≤ p_L, which is below the
uncorrected bound (its tail is α/3, not α): the correction never claims more than the audits
support. The two-sided interval takes each end at α/2 the same way (upper end: p_U, Se_L, Sp_U).

The correction is not made — the uncorrected exact bound of k/n is returned, flagged — when
there are no audited true successes or failures, the point estimate has Se + Sp ≤ 1, the
corner's Se_U + Sp_L ≤ 1, or p_L > Se_U (the judged rate is above what the judge's measured
sensitivity allows: the audits and the window disagree).

Coverage is simulated over a grid of (AR, Se, Sp, n, audits) in `coverage_judge` (fast grid in
the tests, full grid in benchmarks/coverage.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from embodied_eval.stats._checks import check_level

#: The three proportions that share α (judged rate, sensitivity, specificity).
SPLIT = 3


def cp_lower(k: ArrayLike, n: ArrayLike, tail: float) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson lower bound with tail probability `tail`, elementwise:
    Beta(tail; k, n − k + 1), 0 where k = 0 (NaN where n = 0)."""
    k_, n_ = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float))
    out = np.zeros(k_.shape)
    some = k_ > 0
    out[some] = special.betaincinv(k_[some], n_[some] - k_[some] + 1.0, tail)
    out[n_ <= 0] = np.nan
    return out


def cp_upper(k: ArrayLike, n: ArrayLike, tail: float) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson upper bound with tail probability `tail`, elementwise:
    Beta(1 − tail; k + 1, n − k), 1 where k = n (NaN where n = 0)."""
    k_, n_ = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float))
    out = np.ones(k_.shape)
    some = k_ < n_
    out[some] = special.betaincinv(k_[some] + 1.0, n_[some] - k_[some], 1.0 - tail)
    out[n_ <= 0] = np.nan
    return out


def _rg(p: NDArray, se: NDArray, sp: NDArray) -> NDArray:
    den = se + sp - 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, np.clip((p + sp - 1.0) / den, 0.0, 1.0), np.nan)


def _arrays(*values: ArrayLike) -> list[NDArray]:
    return [np.asarray(v, float) for v in np.broadcast_arrays(*(np.asarray(v) for v in values))]


def corrected_lower_bound(
    successes: ArrayLike,
    n: ArrayLike,
    true_positive: ArrayLike,
    positives: ArrayLike,
    true_negative: ArrayLike,
    negatives: ArrayLike,
    level: float,
    *,
    judged_low: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """One-sided lower confidence bound of the true success rate (module docstring), elementwise.

    Args:
        successes, n: judged successes and episodes (arrays broadcast together; shape [...]).
        true_positive, positives: audited true successes the judge called successes, of all
            audited true successes. true_negative, negatives: the same for true failures.
        level: one-sided confidence level (0.95: α = 0.05, α/3 per proportion).
        judged_low: a lower bound of the judged rate at tail α/3 that accounts for clustering;
            the smaller of it and the exact CP bound is used.

    Returns:
        (bound, corrected): the bound [...] and whether the correction was made there; where it
        was not, the bound is the uncorrected one-sided CP bound of successes/n at `level`.
    """
    alpha = 1.0 - check_level(level)
    k, m, tp, pos, tn, neg = _arrays(
        successes, n, true_positive, positives, true_negative, negatives
    )
    tail = alpha / SPLIT
    p_low = cp_lower(k, m, tail)
    if judged_low is not None:
        p_low = np.fmin(p_low, np.asarray(judged_low, float))
    se_high, sp_low = cp_upper(tp, pos, tail), cp_lower(tn, neg, tail)
    with np.errstate(invalid="ignore", divide="ignore"):
        point_ok = tp / pos + tn / neg > 1.0
    ok = (pos > 0) & (neg > 0) & point_ok & (se_high + sp_low > 1.0) & (p_low <= se_high)
    bound = np.where(ok, _rg(p_low, se_high, sp_low), cp_lower(k, m, alpha))
    return bound, ok


def corrected_upper_bound(
    successes: ArrayLike,
    n: ArrayLike,
    true_positive: ArrayLike,
    positives: ArrayLike,
    true_negative: ArrayLike,
    negatives: ArrayLike,
    level: float,
    *,
    judged_high: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """One-sided upper confidence bound of the true success rate: the corner (p_U, Se_L, Sp_U)
    at tail α/3 each; 1 where Se_L < p_U or Se_L + Sp_U ≤ 1 (no finite corner). Arguments as
    `corrected_lower_bound` (`judged_high`: a clustered upper bound of the judged rate)."""
    alpha = 1.0 - check_level(level)
    k, m, tp, pos, tn, neg = _arrays(
        successes, n, true_positive, positives, true_negative, negatives
    )
    tail = alpha / SPLIT
    p_high = cp_upper(k, m, tail)
    if judged_high is not None:
        p_high = np.fmax(p_high, np.asarray(judged_high, float))
    se_low, sp_high = cp_lower(tp, pos, tail), cp_upper(tn, neg, tail)
    finite = (se_low >= p_high) & (se_low + sp_high > 1.0)
    return np.where(finite, _rg(p_high, se_low, sp_high), 1.0)


@dataclass(frozen=True)
class CorrectedBound:
    """The corrected bound of one window, with the corner it was taken at.

    Attributes:
        bound: the one-sided lower bound of AR. corrected: False when the uncorrected exact
            bound was used (see `corrected_lower_bound`). tail: α/3.
        judged_low: p_L used (the smaller of exact and clustered). judged_low_exact: the CP one.
        sensitivity_high, specificity_low: Se_U and Sp_L.
    """

    bound: float
    corrected: bool
    tail: float
    judged_low: float
    judged_low_exact: float
    sensitivity_high: float
    specificity_low: float

    def to_json(self) -> dict[str, Any]:
        return {
            "corrected": self.corrected,
            "tail": self.tail,
            "judged_low": self.judged_low,
            "judged_low_exact": self.judged_low_exact,
            "sensitivity_high": self.sensitivity_high,
            "specificity_low": self.specificity_low,
        }


def corrected_bound(
    successes: int,
    n: int,
    true_positive: int,
    positives: int,
    true_negative: int,
    negatives: int,
    level: float,
    judged_low: float | None = None,
) -> CorrectedBound:
    """`corrected_lower_bound` of one window, with its corner (scalars)."""
    tail = (1.0 - check_level(level)) / SPLIT
    bound, ok = corrected_lower_bound(
        successes, n, true_positive, positives, true_negative, negatives, level,
        judged_low=judged_low,
    )  # fmt: skip
    exact = float(cp_lower(successes, n, tail))
    return CorrectedBound(
        bound=float(bound),
        corrected=bool(ok),
        tail=tail,
        judged_low=exact if judged_low is None else min(exact, float(judged_low)),
        judged_low_exact=exact,
        sensitivity_high=float(cp_upper(true_positive, positives, tail)),
        specificity_low=float(cp_lower(true_negative, negatives, tail)),
    )
