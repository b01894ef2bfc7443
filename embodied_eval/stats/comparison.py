"""Sequential A/B comparison of two policies on paired trials, checked after every trial.

Each trial runs policy A and policy B on the same manifest row (task instance, seed, drift) and
records x_A, x_B in [0, 1]: success (0/1) or graded quality q (partial credit). The test works on
the paired difference D = x_A − x_B ∈ [−1, 1] with mean Δ, and stops as soon as one of

* "A better"   — an e-process for H: Δ ≤ 0 reaches 2/α,
* "B better"   — an e-process for H: Δ ≥ 0 reaches 2/α,
* "no difference ≥ δ" — e-processes for H: Δ ≥ δ and for H: Δ ≤ −δ have both reached 1/β,
  and the reported confidence sequence for Δ (level 1 − α, below) lies inside (−δ, δ),

or the trial cap is reached ("undecided"). Written from the standard betting construction of
anytime-valid tests for bounded means (Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting", JRSS-B 2023; the sequential policy comparisons of STEP, Snyder et al.,
arXiv 2503.10966, and the partial-credit tests of arXiv 2603.13616 motivate the use; their exact
boundaries are not reproduced). For H: E[D] ≤ m the wealth K_t = Π_i (1 + λ_i (D_i − m)) with a
predictable λ_i ∈ [0, 1/(1 + m)) is a nonnegative supermartingale, so by Ville's inequality
P(sup_t K_t ≥ 1/a) ≤ a. Hence, whatever the stopping and however often one peeks:

* P(declare a winner | Δ = 0) ≤ α  (α/2 per direction; P("A better" | Δ ≤ 0) ≤ α/2),
* P("no difference ≥ δ" | |Δ| ≥ δ) ≤ β  (β = 1 − the declared power; the acceptance error of
  Wald's SPRT, here anytime-valid).

Bets (predictable, from the trials before t; k0 pseudo-trials at D = 0 with variance v0 regularize
the first trials): μ̂ = ΣD/(k0 + n), v̂ = (k0 v0 + ΣD² − (ΣD)²/n)/(k0 + n). Each bet is the
Kelly fraction for a point alternative g at distance from the null, λ = g/(v̂ + g²) (exact Kelly
for ±1 outcomes, the GRAPA approximation otherwise), capped at c = 0.8:
"A better" bets on g = max(μ̂, δ), "B better" on g = max(−μ̂, δ), the two "no difference" tests on
g = δ (the alternative Δ = 0, as in an SPRT of Δ = 0 against |Δ| = δ).

The effect size is reported with a confidence sequence for Δ that inverts the same bets at every
candidate value m (running intersection, level 1 − α at every trial); at m = 0 its two wealths are
the winner e-processes, so a "A better"/"B better" decision always comes with a sequence
excluding 0.

For 0/1 success D ∈ {−1, 0, 1}, and the factor 1 + λD is exactly the likelihood ratio of one
discordant pair (A and B disagree) under "A wins it with probability θ₁ = (1 + λ)/2" against
θ = 1/2, and 1 on a concordant pair: the "A better" e-process IS the discordant-pair SPRT of STEP's
null (A-wins among n_d discordant pairs ~ Binomial(n_d, 1/2) when Δ = 0), with the plug-in
alternative θ₁ = (1 + λ)/2, λ = Δ̂/ψ̂ the Kelly bet (ψ = P(discordant)). The "no difference" side
cannot use the discordant pairs alone: Δ ≥ δ only bounds θ by 1/2 + δ/(2ψ), so it bets on D,
whose growth rate max_λ E log(1 − λ(D − δ)) is the smallest KL divergence from the truth to
{Δ ≥ δ} over every ψ (Honda–Takemura duality), the rate no test of that composite null beats.

How few trials any test can use (`fewest_expected_pairs`): for a test whose event E ("A better",
or "no difference") has probability ≥ r under P and ≤ e under every Q of the null,
E_P[N] ≥ d(r ‖ e) / inf_Q KL(P ‖ Q) (Wald's lower bound, the data-processing inequality applied at
the stopping time; d = Bernoulli relative entropy). At Δ = δ the fixed-n ratio of this floor is
2 d(1 − β ‖ α/2) / (z_{1−α/2} + z_{1−β})² ≈ 2 · 2.456 / 7.849 = 0.63 for Gaussian D (0.66 for
A 0.7 / B 0.5): no sequential test with these error rates averages under 0.6× of the fixed n when
|Δ| = δ, anytime-valid or not.

The fixed-n contrast (`fixed_n_pairs`) is the paired z-test design with the same α (two-sided)
and power at |Δ| = δ: n = ⌈(z_{1−α/2} + z_{1−β})² σ²_D / δ²⌉. It is the smaller of the standard
designs (McNemar's design, Connor 1987, n = (z_{1−α/2}√ψ + z_{1−β}√(ψ − δ²))²/δ², asks 96 pairs
instead of 91 at ψ = 0.5), so ratios against it are not flattered. The figure a comparison
reports (`design_fixed_n_pairs`) is the design's, fixed before any trial: σ²_D at its largest
over the laws of D ∈ [−1, 1] with |Δ| = δ, 1 − δ² (all pairs discordant), the only spread a
fixed-n design can assume without data and still keep its power for every pair of policies
(the sequential test keeps its error rates for every law too).

The "no difference" decision also waits for the confidence sequence to lie inside (−δ, δ): the
±δ e-processes reach 1/β (β = 0.2 at power 0.8) long before a level-1 − α sequence is that
narrow, and a "no difference" printed beside [−0.335, +0.335] at δ = 0.2 claims more than its
interval shows. The extra condition only removes "no difference" decisions, so
P("no difference" | |Δ| ≥ δ) ≤ β still holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_count, check_positive
from embodied_eval.stats.estimate import Estimate

A_BETTER, B_BETTER, NO_DIFFERENCE = "A better", "B better", "no difference"
UNDECIDED, CONTINUE = "undecided", "continue"
#: Largest bet (fraction of wealth); keeps every wealth factor ≥ 1 − 0.8 > 0.
MAX_BET = 0.8
#: Pseudo-trials and their variance regularizing the first bets.
PRIOR_TRIALS, PRIOR_VARIANCE = 4.0, 0.5


def betting_fractions(n: Any, s1: Any, s2: Any, delta: float) -> tuple[Any, Any, Any]:
    """The three bets (λ_A, λ_B, λ_E) from the trials so far (see the module docstring).

    Works on scalars or on arrays of runs (numpy broadcasting), so the simulation of many runs and
    the one-at-a-time test use the same rule.

    Args:
        n: trials so far. s1: ΣD. s2: ΣD². delta: δ.
    """
    k = PRIOR_TRIALS + n
    mu = s1 / k
    spread = s2 - np.where(n > 0, s1 * s1 / np.maximum(n, 1), 0.0)
    var = (PRIOR_TRIALS * PRIOR_VARIANCE + spread) / k
    g_a = np.maximum(mu, delta)
    g_b = np.maximum(-mu, delta)
    lam_a = np.minimum(MAX_BET, g_a / (var + g_a * g_a))
    lam_b = np.minimum(MAX_BET, g_b / (var + g_b * g_b))
    lam_e = np.minimum(MAX_BET, delta / (var + delta * delta))
    return lam_a, lam_b, lam_e


def _bets_scalar(n: int, s1: float, s2: float, delta: float) -> tuple[float, float, float]:
    """`betting_fractions` for one run, in plain floats (the per-trial hot path)."""
    k = PRIOR_TRIALS + n
    mu = s1 / k
    spread = s2 - s1 * s1 / n if n > 0 else s2
    var = (PRIOR_TRIALS * PRIOR_VARIANCE + spread) / k
    g_a = mu if mu > delta else delta
    g_b = -mu if -mu > delta else delta
    return (
        min(MAX_BET, g_a / (var + g_a * g_a)),
        min(MAX_BET, g_b / (var + g_b * g_b)),
        min(MAX_BET, delta / (var + delta * delta)),
    )


def fixed_n_pairs(delta: float, sd: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs a fixed-n paired z-test needs: ⌈(z_{1−α/2} + z_{power})² sd² / δ²⌉ (at least 2).

    Args:
        delta: the smallest difference to detect. sd: standard deviation of D = x_A − x_B.
        alpha: two-sided level. power: probability of detecting |Δ| = δ.
    """
    check_positive(delta, "delta")
    _check_unit("alpha", alpha)
    _check_unit("power", power)
    z = float(stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power))
    return max(2, math.ceil(z * z * float(sd) ** 2 / delta**2 - 1e-9))


def design_fixed_n_pairs(delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs the fixed-n paired z-test design needs before any data: `fixed_n_pairs` at the
    largest spread of D ∈ [−1, 1] with |Δ| = δ, σ²_D = 1 − δ² (see the module docstring).

    Example: δ = 0.2, α = 0.05, power 0.8: ⌈7.848876 · 0.96 / 0.04⌉ = ⌈188.37⌉ = 189.
    """
    check_positive(delta, "delta")
    return fixed_n_pairs(delta, math.sqrt(max(1.0 - float(delta) ** 2, 0.0)), alpha, power)


def bernoulli_relative_entropy(r: float, e: float) -> float:
    """d(r ‖ e) = r ln(r/e) + (1 − r) ln((1 − r)/(1 − e)), with 0 ln 0 = 0."""
    out = 0.0
    for x, y in ((r, e), (1.0 - r, 1.0 - e)):
        if x > 0.0:
            out += x * math.log(x / y)
    return out


def paired_kl_inf(p10: float, p01: float, m: float, null_above: bool) -> float:
    """Smallest KL divergence from the paired law (P(D=1) = p10, P(D=−1) = p01) to the
    laws of D ∈ [−1, 1] with mean ≤ m (null_above False) or ≥ m (True):
    max over λ of E log(1 + λ(D − m)) (resp. 1 − λ(D − m)), λ in [0, 1/(1 ± m)) (Honda–Takemura
    duality; the optimal law sits on {−1, 0, 1}, so it is also the smallest over paired binary
    laws)."""
    from scipy.optimize import minimize_scalar

    sign = -1.0 if null_above else 1.0
    top = 1.0 / (1.0 - m) if null_above else 1.0 / (1.0 + m)
    law = ((1.0, p10), (-1.0, p01), (0.0, 1.0 - p10 - p01))

    def loss(lam: float) -> float:
        return -sum(p * math.log1p(sign * lam * (x - m)) for x, p in law if p > 0.0)

    res = minimize_scalar(loss, bounds=(0.0, top * (1.0 - 1e-9)), method="bounded",
                          options={"xatol": 1e-10})  # fmt: skip
    return max(0.0, -float(res.fun))


def fewest_expected_pairs(
    p10: float,
    p01: float,
    delta: float = 0.2,
    alpha: float = 0.05,
    power: float = 0.8,
    no_difference: float | None = None,
) -> float:
    """Wald's lower bound on E[N] for ANY sequential test with this module's error rates, at the
    paired binary law P(A wins the pair) = p10, P(B wins it) = p01 (Δ = p10 − p01).

    |Δ| ≥ δ: the right winner with probability ≥ power, while every law with Δ on the other side
    of 0 gives it ≤ α/2: d(power ‖ α/2) / KL_inf(P, {Δ ≤ 0}) (mirrored for Δ < 0).
    |Δ| < δ: "no difference" with probability ≥ `no_difference` (default 1 − α), while every law
    with Δ ≥ δ (or ≤ −δ) gives it ≤ β: the larger of d(r ‖ β) / KL_inf(P, {Δ ≥ δ}) and the mirror.
    """
    _check_unit("alpha", alpha)
    beta = 1.0 - _check_unit("power", power)
    diff = p10 - p01
    if abs(diff) >= delta - 1e-12:
        hi, lo = (p10, p01) if diff > 0 else (p01, p10)
        return bernoulli_relative_entropy(power, alpha / 2.0) / paired_kl_inf(hi, lo, 0.0, False)
    r = 1.0 - alpha if no_difference is None else float(no_difference)
    if r <= beta:
        return 0.0
    need = bernoulli_relative_entropy(r, beta)
    return max(
        need / paired_kl_inf(p10, p01, delta, True), need / paired_kl_inf(p01, p10, delta, True)
    )


def _check_unit(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 < value < 1.0:
        raise EvalError(f"{name}: {value} must be between 0 and 1", key=name)
    return value


def checked_outcome(x: float | bool, name: str, graded: bool) -> float:
    """One trial's outcome as a float: a success 0/1, or with `graded` a quality in [0, 1]
    (EvalError naming `name` otherwise)."""
    v = float(x)
    if graded:
        if not 0.0 <= v <= 1.0:
            raise EvalError(f"{name}: graded quality {x!r} must be in [0, 1]", key=name)
    elif v not in (0.0, 1.0):
        raise EvalError(f"{name}: success {x!r} must be 0 or 1 (use graded for q)", key=name)
    return v


@dataclass
class SequentialComparison:
    """Anytime-valid three-way comparison of policies A and B on paired trials.

    Args:
        delta: the smallest difference that matters, δ in (0, 1).
        alpha: probability of declaring a winner between equal policies (two-sided).
        power: 1 − β, where β bounds P("no difference" | |Δ| ≥ δ).
        max_trials: the trial cap; undecided at the cap is "undecided".
        graded: False for 0/1 success, True for graded quality q in [0, 1].
    """

    delta: float = 0.2
    alpha: float = 0.05
    power: float = 0.8
    max_trials: int = 400
    graded: bool = False
    trials: int = field(default=0, init=False)
    sum_d: float = field(default=0.0, init=False)
    sum_d2: float = field(default=0.0, init=False)
    sum_a: float = field(default=0.0, init=False)
    sum_b: float = field(default=0.0, init=False)
    log_wealth: dict[str, float] = field(default_factory=dict, init=False)
    crossed: dict[str, bool] = field(default_factory=dict, init=False)
    history: list[tuple[float, float]] = field(default_factory=list, init=False)
    decision_: str = field(default=CONTINUE, init=False)
    sequence: EffectSequence = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < float(self.delta) < 1.0:
            raise EvalError(f"delta: {self.delta} must be between 0 and 1", key="delta")
        self.alpha = _check_unit("alpha", self.alpha)
        self.power = _check_unit("power", self.power)
        self.max_trials = check_count(self.max_trials, "max_trials")
        if self.max_trials < 1:
            raise EvalError("max_trials: must be at least 1", key="max_trials")
        self.log_wealth = {"A": 0.0, "B": 0.0, "E+": 0.0, "E-": 0.0}
        self.crossed = {"E+": False, "E-": False}
        self._win = math.log(2.0 / self.alpha)
        self._accept = math.log(1.0 / (1.0 - self.power))
        self.sequence = EffectSequence(1, self.alpha, float(self.delta))

    @property
    def beta(self) -> float:
        return 1.0 - self.power

    def _value(self, x: float | bool, name: str) -> float:
        return checked_outcome(x, name, self.graded)

    def update(self, a: float | bool, b: float | bool) -> str:
        """Record one paired trial (A's and B's outcome); returns the decision so far."""
        if self.decision_ not in (CONTINUE,):
            raise EvalError(f"the comparison already stopped: {self.decision_}", key="trial")
        xa, xb = self._value(a, "a"), self._value(b, "b")
        d = xa - xb
        lam_a, lam_b, lam_e = _bets_scalar(self.trials, self.sum_d, self.sum_d2, self.delta)
        w = self.log_wealth
        w["A"] += math.log1p(lam_a * d)
        w["B"] += math.log1p(-lam_b * d)
        w["E+"] += math.log1p(-lam_e * (d - self.delta))
        w["E-"] += math.log1p(lam_e * (d + self.delta))
        self.trials += 1
        self.sum_d += d
        self.sum_d2 += d * d
        self.sum_a += xa
        self.sum_b += xb
        self.history.append((xa, xb))
        self.sequence.update(np.array([d]))
        for key in ("E+", "E-"):
            self.crossed[key] = self.crossed[key] or w[key] >= self._accept
        if w["A"] >= self._win:
            self.decision_ = A_BETTER
        elif w["B"] >= self._win:
            self.decision_ = B_BETTER
        elif self.crossed["E+"] and self.crossed["E-"] and bool(self.sequence.inside()[0]):
            self.decision_ = NO_DIFFERENCE
        elif self.trials >= self.max_trials:
            self.decision_ = UNDECIDED
        return self.decision_

    @property
    def decision(self) -> str:
        """ "A better", "B better", "no difference", "undecided" (cap) or "continue"."""
        return self.decision_

    def effect(self) -> Estimate:
        """Δ = mean(x_A − x_B) with its confidence sequence at level 1 − α (this trial)."""
        return self.sequence.estimate(0)

    def fixed_n(self) -> int:
        """Pairs the fixed-n design with the same α and power needs (`design_fixed_n_pairs`)."""
        return design_fixed_n_pairs(self.delta, self.alpha, self.power)

    def to_json(self) -> dict[str, Any]:
        n = self.trials
        return {
            "decision": self.decision_,
            "trials": n,
            "max_trials": self.max_trials,
            "delta": self.delta,
            "alpha": self.alpha,
            "power": self.power,
            "outcome": "graded quality q" if self.graded else "binary success",
            "mean_a": self.sum_a / n if n else None,
            "mean_b": self.sum_b / n if n else None,
            "effect": self.effect().to_json(),
            "e_values": {k: math.exp(min(v, 700.0)) for k, v in self.log_wealth.items()},
            "fixed_n_trials": self.fixed_n(),
            "fixed_n_design": "paired z-test at |Δ| = δ with the largest spread, σ²_D = 1 − δ²",
            "method": (
                "anytime-valid betting e-processes on paired differences (winner at 2/α per "
                "direction; 'no difference' when both ±δ tests reach 1/β and the confidence "
                "sequence lies inside ±δ)"
            ),
        }


#: Grid points of candidate values m in [−1, 1] for the confidence sequence.
GRID_POINTS = 801
SEQUENCE_METHOD = "betting confidence sequence (same bets as the decision e-processes)"


class EffectSequence:
    """The running confidence sequence for Δ = E[D], D ∈ [−1, 1], of one or many runs at once.

    For every candidate m on a grid, K⁺(m) = Π(1 + λ⁺_i(m)(D_i − m)) tests Δ ≤ m and
    K⁻(m) = Π(1 − λ⁻_i(m)(D_i − m)) tests Δ ≥ m, with the predictable Kelly-type bets
    λ⁺ = g/(v̂ + g²), g = max(μ̂ − m, δ) (capped at 0.8/(1 + m)), and symmetrically for λ⁻.
    m is excluded once either wealth has reached 2/α at any trial so far (running intersection),
    so the set covers Δ at every trial with probability ≥ 1 − α. At m = 0 the two wealths are
    exactly the "A better" and "B better" e-processes, so a winner decision always excludes 0.
    The sequence is the hull of the kept grid points ± one grid step.

    Args:
        runs: independent runs tracked side by side (1 for one comparison).
        alpha: 1 − level. delta: δ of the test. grid: points of m in [−1, 1].
    """

    def __init__(self, runs: int, alpha: float, delta: float, grid: int = GRID_POINTS) -> None:
        self.alpha = _check_unit("alpha", alpha)
        self.delta = float(delta)
        self.m = np.linspace(-1.0, 1.0, grid)
        self.step = 2.0 / (grid - 1)
        self.bound = math.log(2.0 / self.alpha)
        self.up = np.zeros((runs, grid))
        self.dn = np.zeros((runs, grid))
        self.out = np.zeros((runs, grid), dtype=bool)
        self.n = np.zeros(runs)
        self.s1 = np.zeros(runs)
        self.s2 = np.zeros(runs)

    def update(self, d: NDArray[np.float64], rows: NDArray[np.intp] | None = None) -> None:
        """Add one trial's difference to each run in `rows` (default: every run)."""
        idx: Any = slice(None) if rows is None else rows
        x = np.asarray(d, dtype=float)
        before, s1, s2 = self.n[idx], self.s1[idx], self.s2[idx]
        k = PRIOR_TRIALS + before
        mu = (s1 / k)[:, None]
        spread = s2 - np.where(before > 0, s1 * s1 / np.maximum(before, 1.0), 0.0)
        var = ((PRIOR_TRIALS * PRIOR_VARIANCE + spread) / k)[:, None]
        m = self.m[None, :]
        g_up = np.maximum(mu - m, self.delta)
        g_dn = np.maximum(m - mu, self.delta)
        lam_up = np.minimum(MAX_BET / np.maximum(1.0 + m, 1e-12), g_up / (var + g_up * g_up))
        lam_dn = np.minimum(MAX_BET / np.maximum(1.0 - m, 1e-12), g_dn / (var + g_dn * g_dn))
        dev = x[:, None] - m
        up = self.up[idx] + np.log1p(lam_up * dev)
        dn = self.dn[idx] + np.log1p(-lam_dn * dev)
        self.up[idx], self.dn[idx] = up, dn
        self.out[idx] |= (up >= self.bound) | (dn >= self.bound)
        self.n[idx] += 1.0
        self.s1[idx] += x
        self.s2[idx] += x * x

    def bounds(
        self, rows: NDArray[np.intp] | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(low, high) of the runs in `rows` (default: every run); the point estimate where no
        grid point is kept."""
        idx: Any = slice(None) if rows is None else rows
        kept = ~self.out[idx]
        n, s1 = self.n[idx], self.s1[idx]
        point = np.divide(s1, n, out=np.zeros_like(s1), where=n > 0)
        lows = np.where(kept, self.m[None, :], np.inf).min(axis=1)
        highs = np.where(kept, self.m[None, :], -np.inf).max(axis=1)
        any_kept = kept.any(axis=1)
        low = np.where(any_kept, np.maximum(-1.0, lows - self.step), point)
        high = np.where(any_kept, np.minimum(1.0, highs + self.step), point)
        return low, high

    def inside(self, rows: NDArray[np.intp] | None = None) -> NDArray[np.bool_]:
        """Whether each run in `rows` (default: every run) has a sequence inside (−δ, δ)."""
        low, high = self.bounds(rows)
        n = self.n if rows is None else self.n[rows]
        return (n > 0) & (low > -self.delta) & (high < self.delta)

    def estimate(self, run: int) -> Estimate:
        """Estimate(value = mean D, low, high) of one run."""
        n = int(self.n[run])
        if n == 0:
            return Estimate(
                None, -1.0, 1.0, 1.0 - self.alpha, SEQUENCE_METHOD, 0, "two", "no trials"
            )
        point = float(self.s1[run] / n)
        low, high = (float(b[0]) for b in self.bounds(np.array([run])))
        note = "" if (~self.out[run]).any() else "grid-limited"
        return Estimate(point, low, high, 1.0 - self.alpha, SEQUENCE_METHOD, n, "two", note)


def effect_confidence_sequence(
    d: ArrayLike, alpha: float = 0.05, delta: float = 0.2, grid: int = GRID_POINTS
) -> Estimate:
    """Confidence sequence for Δ = E[D], D ∈ [−1, 1], from the same bets as the decision (see
    `EffectSequence`), after the paired differences `d` (shape [n]) in order."""
    x = np.asarray(d, dtype=float).ravel()
    sequence = EffectSequence(1, alpha, delta, grid)
    if np.any(np.abs(x) > 1.0):
        raise EvalError("d: paired differences must lie in [-1, 1]", key="d")
    for value in x:
        sequence.update(np.array([value]))
    return sequence.estimate(0)
