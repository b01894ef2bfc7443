"""Adaptive allocation for comparing N policies: which policies to run on the next instance, and
when the requested decision (the best policy, or the full order) is reached, anytime-valid.

Every step takes a *fresh* instance (a manifest row nobody has run yet, so no outcome on it is
known when the policies for it are chosen) and runs on it the policies whose comparisons the
decision still needs. Each pair (i, j) keeps the two winner e-processes of the two-policy test
(`stats.comparison`: betting on the paired difference D = x_i − x_j, the same predictable bets),
updated on the instances where both ran. Because E[D_ij] = μ_i − μ_j (a difference of mean
outcomes), "better" between policies is a total preorder, which the two decisions use:

Policy i is *decided better* than j once the e-process "i better than j" reaches K(K − 1)/α: a
Bonferroni split of α over the K(K − 1) one-sided tests, so whatever the allocation, in whatever
order, and however often one looks, P(any wrong "better" between some pair) ≤ α — in particular
P(declaring a best policy or an order between equal policies) ≤ α (K = 2 gives the two-policy
test's 2/α). The decided relations are closed transitively (if every direct one is right, so is
every implied one):

* **best** is reached when one policy is better than every other;
* **order** when every two neighbours in the order are ordered.

As in the two-policy test, two policies are declared *within δ* of each other once both of their
"no difference" e-processes (H: Δ ≥ δ and H: Δ ≤ −δ) have reached 1/β (β = 1 − power): per
pair, P("within δ" | |Δ| ≥ δ) ≤ β — the per-pair power a fixed design is sized with. A pair
within δ needs no winner: "best" then names the leader and the policies within δ of it ("best
within δ: A, B"), "order" marks those neighbours "≈". Between equal policies both decisions so
end in "within δ" instead of running to the cap; no "better" is ever claimed from it.

What runs next (the comparisons most uncertain and most decisive): for "best", the leader — the
highest mean among the policies no policy has yet beaten — and every policy it is not yet
resolved with (better, or within δ) and that no other such policy has beaten (beating that one
will cover it); policies out of contention stop costing trials. For
"order", the policies of every neighbouring pair in the current order that is not yet ordered.
All of them run on the same instance, so m policies give m(m − 1)/2 paired trials for m
episodes. The instance comes from the task those policies have seen least, so their trials stay
spread over the tasks as the protocol weights them; choosing the task by outcome would change
the difference being tested.

`AllocationState` holds the statistics of R independent comparisons at once (arrays with a
leading axis of runs), so the simulation of many runs and the one-at-a-time command use the same
rule; `RankingAllocation` is one comparison by policy name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodied_eval.errors import EvalError
from embodied_eval.stats.comparison import betting_fractions, checked_outcome

DECISIONS = ("best", "order")
CONTINUE, UNDECIDED = "continue", "undecided"


def winner_threshold(k: int, alpha: float) -> float:
    """Wealth a one-sided pairwise e-process must reach: K(K − 1)/α (Bonferroni over the
    K(K − 1) one-sided tests; K = 2 gives the two-policy test's 2/α)."""
    return k * (k - 1) / alpha


def within_threshold(power: float) -> float:
    """Wealth both "no difference" e-processes of a pair must reach: 1/β, β = 1 − power (as in
    the two-policy test)."""
    return 1.0 / (1.0 - power)


class AllocationState:
    """Statistics and decided relations of R comparisons of K policies (see the module
    docstring). Pair statistics live on the upper triangle (i < j, D = x_i − x_j);
    `log_wealth[r, i, j]` is run r's evidence that i is better than j (both triangles)."""

    def __init__(self, runs: int, k: int, decide: str, delta: float, alpha: float,
                 power: float) -> None:  # fmt: skip
        self.k, self.decide, self.delta = k, decide, float(delta)
        self.log_threshold = math.log(winner_threshold(k, alpha))
        self.log_within = math.log(within_threshold(power))
        shape = (runs, k, k)
        self.n, self.s1, self.s2 = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.log_wealth = np.zeros(shape)
        self.log_no_diff = np.zeros((2, *shape))  # H: Δ ≥ δ, H: Δ ≤ −δ
        self.direct = np.zeros(shape, dtype=bool)
        self.crossed = np.zeros((2, *shape), dtype=bool)
        self.sums = np.zeros((runs, k))
        self.runs = np.zeros((runs, k))
        self._upper = np.triu(np.ones((k, k), dtype=bool), 1)

    def update(self, x: NDArray, ran: NDArray) -> None:
        """One fresh instance per run: outcomes x [R, K] of the policies `ran` [R, K]."""
        pairs = ran[:, :, None] & ran[:, None, :] & self._upper
        d = np.where(pairs, x[:, :, None] - x[:, None, :], 0.0)
        lam_a, lam_b, lam_e = betting_fractions(self.n, self.s1, self.s2, self.delta)
        up = np.where(pairs, np.log1p(lam_a * d), 0.0)
        down = np.where(pairs, np.log1p(-lam_b * d), 0.0)
        self.log_wealth += up + np.swapaxes(down, 1, 2)
        self.log_no_diff[0] += np.where(pairs, np.log1p(-lam_e * (d - self.delta)), 0.0)
        self.log_no_diff[1] += np.where(pairs, np.log1p(lam_e * (d + self.delta)), 0.0)
        self.crossed |= self.log_no_diff >= self.log_within
        self.n += pairs
        self.s1 += d
        self.s2 += d * d
        self.direct |= self.log_wealth >= self.log_threshold
        self.sums += np.where(ran, x, 0.0)
        self.runs += ran

    def means(self) -> NDArray:
        """[R, K] mean outcome per policy (0.5 before any trial)."""
        return np.where(self.runs > 0, self.sums / np.maximum(self.runs, 1), 0.5)

    def better(self) -> NDArray[np.bool_]:
        """[R, K, K] decided relations, closed transitively (Floyd–Warshall on booleans)."""
        b = self.direct.copy()
        for m in range(self.k):
            b |= b[:, :, m : m + 1] & b[:, m : m + 1, :]
        b[:, np.arange(self.k), np.arange(self.k)] = False
        return b

    def within(self) -> NDArray[np.bool_]:
        """[R, K, K] symmetric: the pair is declared within δ."""
        w = self.crossed[0] & self.crossed[1]
        return w | np.swapaxes(w, 1, 2)

    def leader(self, better: NDArray[np.bool_]) -> NDArray[np.int64]:
        """[R] the highest mean among policies nobody has beaten (fewer trials, then the lower
        index, on ties)."""
        # Distinct means differ by ≥ 1/(n_i n_j) ≫ 1e-12 · runs: the runs term only breaks ties.
        score = self.means() - 1e-12 * self.runs
        beaten = np.asarray(better.any(axis=1))
        everyone = np.asarray(beaten.all(axis=1))[:, None]
        score = np.where(beaten & ~everyone, -np.inf, score)
        return np.argmax(score, axis=1)

    def order(self, better: NDArray[np.bool_]) -> NDArray[np.int64]:
        """[R, K] policies by (policies decided worse, mean outcome), best first."""
        key = better.sum(axis=2) + 0.5 * self.means()
        return np.argsort(-key, axis=1, kind="stable")

    def next_mask(self) -> NDArray[np.bool_]:
        """[R, K] the policies to run on the next instance (none: the decision is reached)."""
        b, w = self.better(), self.within()
        r = np.arange(b.shape[0])
        if self.decide == "best":
            lead = self.leader(b)
            resolved = b[r, lead] | w[r, lead]
            resolved[r, lead] = True
            open_ = ~resolved
            covered = (open_[:, :, None] & b).any(axis=1)  # beaten by another open policy
            mask = open_ & ~covered
            mask[r, lead] = open_.any(axis=1)
            return mask
        order = self.order(b)
        a, c = order[:, :-1], order[:, 1:]
        rr = r[:, None]
        open_pair = ~(b[rr, a, c] | b[rr, c, a] | w[rr, a, c])
        mask = np.zeros((b.shape[0], self.k), dtype=bool)
        mask[rr, a] |= open_pair
        mask[rr, c] |= open_pair
        return mask

    def decision(self, run: int, names: Sequence[str]) -> str:
        """Run `run`'s decision once no comparison is needed any more."""
        every = self.better()
        b, w = every[run], self.within()[run]
        if self.decide == "best":
            lead = int(self.leader(every)[run])
            tied = [j for j in range(self.k) if j != lead and w[lead, j] and not b[lead, j]]
            if not tied:
                return f"best: {names[lead]}"
            return "best within δ: " + ", ".join(names[i] for i in [lead, *tied])
        order = self.order(every)[run].tolist()
        text = names[order[0]]
        for a, c in itertools.pairwise(order):
            text += (" > " if b[a, c] else " ≈ ") + names[c]
        return "order: " + text


@dataclass
class RankingAllocation:
    """Anytime-valid adaptive comparison of N policies, one instance at a time (see the module
    docstring).

    Args:
        policies: the policy names (at least two, distinct).
        decide: "best" or "order".
        delta: smallest difference that matters (the bets, and "within δ").
        alpha: bound on P(a wrong "better").
        power: 1 − β, β bounding P("within δ") per pair δ or more apart.
        max_trials: cap on episodes run.
        graded: outcomes are quality q in [0, 1] rather than 0/1 success.
    """

    policies: Sequence[str]
    decide: str = "best"
    delta: float = 0.2
    alpha: float = 0.05
    power: float = 0.8
    max_trials: int = 400
    graded: bool = False
    trials: int = field(default=0, init=False)
    rows: int = field(default=0, init=False)
    decision_: str = field(default=CONTINUE, init=False)
    history: list[dict[str, float]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        names = list(self.policies)
        if len(names) < 2:
            raise EvalError("comparing policies needs at least two", key="policies")
        if len(set(names)) != len(names):
            raise EvalError("a policy is named twice", key="policies")
        if self.decide not in DECISIONS:
            raise EvalError(f"--decide: {self.decide!r} must be best or order", key="decide")
        for name in ("delta", "alpha", "power"):
            value = float(getattr(self, name))
            if not 0.0 < value < 1.0:
                raise EvalError(f"{name}: {value} must be between 0 and 1", key=name)
        if int(self.max_trials) < len(names):
            raise EvalError(
                f"max_trials: {self.max_trials} is fewer than one trial per policy",
                key="max_trials",
            )
        self.policies = tuple(names)
        self.state = AllocationState(1, len(names), self.decide, self.delta, self.alpha,
                                     self.power)  # fmt: skip
        self.tasks: dict[str, NDArray] = {}  # task → trials per policy

    @property
    def k(self) -> int:
        return len(self.policies)

    @property
    def decision(self) -> str:
        """ "best: NAME", "best within δ: A, B", "order: A > B ≈ C", "undecided" (cap) or
        "continue"."""
        return self.decision_

    def next_policies(self) -> list[int]:
        """Indices of the policies to run on the next instance."""
        return np.flatnonzero(self.state.next_mask()[0]).tolist()

    def choose(self, tasks: Sequence[str] = ()) -> tuple[tuple[str, ...], str | None]:
        """The policies to run together on the next instance, and the task to take it from
        (the one they have seen least; None when no tasks are given)."""
        if self.decision_ != CONTINUE:
            raise EvalError(f"the comparison already stopped: {self.decision_}", key="trial")
        chosen = tuple(self.policies[i] for i in self.next_policies())
        return chosen, self.least_seen(chosen, tasks) if tasks else None

    def least_seen(self, policies: Sequence[str], tasks: Sequence[str]) -> str:
        """Of `tasks`, the one on which these policies have had the fewest trials (the first
        given on ties)."""
        idx = [self.policies.index(p) for p in policies]
        zero = np.zeros(self.k)
        return min(dict.fromkeys(tasks), key=lambda t: float(self.tasks.get(t, zero)[idx].sum()))

    def _value(self, x: float | bool, name: str) -> float:
        return checked_outcome(x, name, self.graded)

    def update(self, outcomes: Mapping[str, float | bool], task: str | None = None) -> str:
        """Record one fresh instance's outcomes ({policy: x} of the policies run on it
        together, two or more); returns the decision so far."""
        if self.decision_ != CONTINUE:
            raise EvalError(f"the comparison already stopped: {self.decision_}", key="trial")
        index = {p: i for i, p in enumerate(self.policies)}
        unknown = [p for p in outcomes if p not in index]
        if unknown:
            raise EvalError(f"{unknown[0]!r} is not one of the compared policies", key="policy")
        if len(outcomes) < 2:
            raise EvalError("an instance needs two or more policies run on it", key="policy")
        x = np.zeros((1, self.k))
        ran = np.zeros((1, self.k), dtype=bool)
        for p, v in outcomes.items():
            x[0, index[p]] = self._value(v, p)
            ran[0, index[p]] = True
        self.state.update(x, ran)
        if task is not None:
            self.tasks[task] = self.tasks.get(task, np.zeros(self.k)) + ran[0]
        self.trials += len(outcomes)
        self.rows += 1
        self.history.append({p: float(v) for p, v in outcomes.items()})
        following = self.next_policies()
        if not following:
            self.decision_ = self.state.decision(0, self.policies)
        elif self.trials + len(following) > int(self.max_trials):
            self.decision_ = UNDECIDED
        return self.decision_

    def to_json(self) -> dict[str, Any]:
        st = self.state
        mean, b, w = st.means()[0], st.better()[0], st.within()[0]
        k = self.k
        return {
            "policies": list(self.policies),
            "decide": self.decide,
            "decision": self.decision_,
            "trials": self.trials,
            "instances": self.rows,
            "max_trials": int(self.max_trials),
            "delta": float(self.delta),
            "alpha": float(self.alpha),
            "power": float(self.power),
            "outcome": "graded quality q" if self.graded else "binary success",
            "threshold": winner_threshold(k, float(self.alpha)),
            "within_threshold": within_threshold(float(self.power)),
            "means": {
                p: (float(mean[i]) if st.runs[0, i] else None) for i, p in enumerate(self.policies)
            },
            "trials_per_policy": {p: int(st.runs[0, i]) for i, p in enumerate(self.policies)},
            "pairs": [
                {
                    "a": self.policies[i],
                    "b": self.policies[j],
                    "trials": int(st.n[0, i, j]),
                    "e_value_a_better": math.exp(min(float(st.log_wealth[0, i, j]), 700.0)),
                    "e_value_b_better": math.exp(min(float(st.log_wealth[0, j, i]), 700.0)),
                    "decided": (
                        "a better"
                        if b[i, j]
                        else "b better"
                        if b[j, i]
                        else "within delta"
                        if w[i, j]
                        else None
                    ),
                }
                for i in range(k)
                for j in range(i + 1, k)
            ],
            "method": (
                "policies whose comparisons the decision needs run together on fresh instances; "
                "pairwise anytime-valid betting e-processes at K(K-1)/alpha, closed "
                "transitively; 'within delta' at 1/beta per pair"
            ),
        }
