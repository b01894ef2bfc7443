"""Coverage of the judge-corrected AR bound (`embodiment.judge`, `stats.misclassified`), by
simulation.

Scenario (`JudgeScenario`): `instances` task instances with `per_instance` real episodes each;
instance success rates p_c ~ Beta with mean AR and intra-cluster correlation `icc` (0: every
p_c = AR); a true outcome is judged a success with probability Se (true success) or 1 − Sp (true
failure), so an instance's judged successes are Binomial(m, p_c·Se + (1 − p_c)(1 − Sp)). The
judge's accuracy is audited on `positives` true successes and `negatives` true failures:
TP ~ Binomial(positives, Se), TN ~ Binomial(negatives, Sp), independent of the window.

Coverage = P(bound ≤ AR), where the bound is whatever the gate would use: the corrected bound, or
the uncorrected exact one where the correction is not made. Two versions:

* "exact" (`exact_coverage`): the judged rate's exact Clopper–Pearson bound only, vectorised
  over replications. The procedure's bound is the smaller of this and the cluster bootstrap's,
  so with independent episodes (icc = 0) the procedure covers at least as often as this.
* "procedure" (`procedure_coverage`): the whole procedure, cluster bootstrap included (one
  bootstrap per replication; slower), for clustered episodes.

Claim (checked in the tests on a small grid and printed in full by benchmarks/coverage.py):
coverage ≥ nominal − 1 pt for every AR, Se, Sp ≥ 0.8, n ≥ 20 and audits ≥ 10 per class; it is
conservative (Bonferroni). The uncorrected exact bound is shown beside it: it overclaims when
Sp < 1 (false successes raise the judged rate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodied_eval.embodiment.resampling import success_rate_draws
from embodied_eval.stats import cluster_weights
from embodied_eval.stats.misclassified import SPLIT, corrected_lower_bound, cp_lower


@dataclass(frozen=True)
class JudgeScenario:
    """One grid cell: true AR, the judge's Se and Sp, the window's layout and the audit sizes."""

    ar: float
    se: float
    sp: float
    instances: int
    per_instance: int = 1
    positives: int = 30
    negatives: int = 30
    icc: float = 0.0

    @property
    def n(self) -> int:
        return self.instances * self.per_instance


@dataclass(frozen=True)
class JudgeCoverage:
    """Coverage of one scenario: the corrected bound's, the uncorrected exact bound's, the share
    of replications where the correction was made, the mean corrected bound, and reps."""

    coverage: float
    uncorrected: float
    corrected_share: float
    mean_bound: float
    reps: int


def _draw(
    s: JudgeScenario, reps: int, rng: np.random.Generator
) -> tuple[NDArray, NDArray, NDArray]:
    """Judged successes per instance [reps, C], TP [reps], TN [reps]."""
    shape = (reps, s.instances)
    if s.icc > 0:
        scale = (1.0 - s.icc) / s.icc
        rates = rng.beta(s.ar * scale, (1.0 - s.ar) * scale, shape)
    else:
        rates = np.full(shape, s.ar)
    judged = rates * s.se + (1.0 - rates) * (1.0 - s.sp)
    k = rng.binomial(s.per_instance, judged)
    return k, rng.binomial(s.positives, s.se, reps), rng.binomial(s.negatives, s.sp, reps)


def exact_coverage(
    s: JudgeScenario, reps: int, rng: np.random.Generator, level: float = 0.95
) -> JudgeCoverage:
    """Coverage of the bound with the judged rate's exact bound only (see the module docstring)."""
    k, tp, tn = _draw(s, reps, rng)
    return _coverage(s, k, tp, tn, level, None)


def procedure_coverage(
    s: JudgeScenario,
    reps: int,
    rng: np.random.Generator,
    level: float = 0.95,
    resamples: int = 300,
) -> JudgeCoverage:
    """Coverage of the whole procedure: the judged rate's bound is the smaller of the exact one
    and the task-instance cluster bootstrap's (exact draws), at tail α/3, as `judge_summary`."""
    k, tp, tn = _draw(s, reps, rng)
    tail = (1.0 - level) / SPLIT
    counts = np.full(s.instances, s.per_instance)
    clustered = np.empty(reps)
    for r in range(reps):
        w = cluster_weights(s.instances, rng, resamples)
        low, _ = success_rate_draws(w, k[r], counts, rng.random(resamples))
        clustered[r] = np.nanquantile(low, tail)
    return _coverage(s, k, tp, tn, level, clustered)


def _coverage(
    s: JudgeScenario,
    k: np.ndarray,
    tp: np.ndarray,
    tn: np.ndarray,
    level: float,
    judged_low: np.ndarray | None,
) -> JudgeCoverage:
    """Coverage of the corrected and the plain exact bound over simulated windows.

    Args:
        k: (reps, instances) judged successes. tp, tn: (reps,) audited true positives and
            negatives. judged_low: (reps,) a clustered bound of the judged rate, or None.
    """
    total = k.sum(axis=1)
    bound, ok = corrected_lower_bound(
        total, s.n, tp, s.positives, tn, s.negatives, level, judged_low=judged_low
    )
    plain = cp_lower(total, s.n, 1.0 - level)
    return JudgeCoverage(
        float(np.mean(bound <= s.ar)),
        float(np.mean(plain <= s.ar)),
        float(np.mean(ok)),
        float(np.mean(bound)),
        len(total),
    )
