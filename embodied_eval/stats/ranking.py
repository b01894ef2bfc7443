"""A leaderboard of many policies from pairwise outcomes on shared instances.

Input: `PairwiseOutcomes`, one row per comparison — two policies that ran the same instance (task,
seed, drift) and which one won or whether they tied. `rank_policies` then

1. builds the comparison graph (an edge between two policies that share at least one instance)
   and splits it into connected pieces: policies in different pieces were never compared, even
   indirectly, so their strengths are not on one scale; each piece is ranked on its own and the
   pieces are named, never merged;
2. fits Bradley–Terry strengths with ties in each piece (`stats.bradley_terry`: Davidson's model
   or ties as half wins), centred log-strengths (mean 0 within the piece);
3. resamples instances with replacement (every comparison made on an instance goes with it, so
   the dependence between the pairs of one instance is kept) and refits: percentile intervals of
   each centred log-strength, and P(best) = the share of resamples in which a policy has the
   highest strength of its piece (a bootstrap probability, not a posterior one).

Resampled data sets whose MLE does not exist (a policy that never lost in that resample, ...) are
fitted with the prior of `stats.bradley_terry.RIDGE`; their share is reported per piece.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from embodied_eval.errors import EvalError
from embodied_eval.stats._checks import check_level
from embodied_eval.stats.bradley_terry import TIE_MODELS, fit_strengths
from embodied_eval.stats.estimate import Estimate

#: Outcome codes of one comparison, from the first policy's side.
FIRST_WINS, TIE, SECOND_WINS = 1, 0, -1
MODEL_NAMES = {
    "davidson": "Bradley–Terry with Davidson's tie model (ν)",
    "half": "Bradley–Terry, a tie counted as half a win each way",
}


@dataclass(frozen=True)
class PairwiseOutcomes:
    """Comparisons between policies: row c says policy `first[c]` met policy `second[c]` on
    instance `instance[c]` with outcome `outcome[c]` (1 first wins, 0 tie, −1 second wins)."""

    policies: tuple[str, ...]
    instance: NDArray[np.int64]
    first: NDArray[np.int64]
    second: NDArray[np.int64]
    outcome: NDArray[np.int64]
    n_instances: int

    def __post_init__(self) -> None:
        k = len(self.policies)
        arrays = (self.instance, self.first, self.second, self.outcome)
        if len({a.shape for a in arrays}) != 1:
            raise EvalError("comparison arrays must have one length", key="outcomes")
        if self.first.size and (
            np.any(self.first == self.second)
            or min(self.first.min(), self.second.min()) < 0
            or max(self.first.max(), self.second.max()) >= k
            or np.any(np.abs(self.outcome) > 1)
            or self.instance.min() < 0
            or self.instance.max() >= self.n_instances
        ):
            raise EvalError("comparisons name unknown policies or instances", key="outcomes")

    @property
    def size(self) -> int:
        return int(self.first.size)

    def instance_cells(self) -> sparse.csr_matrix:
        """[instances, 2·K·K] counts: wins (i beat j at cell i·K + j) then ties (both cells)."""
        k = len(self.policies)
        w_first = self.outcome == FIRST_WINS
        w_second = self.outcome == SECOND_WINS
        tie = self.outcome == TIE
        kk = k * k
        rows = np.concatenate([self.instance[w_first], self.instance[w_second],
                               self.instance[tie], self.instance[tie]])  # fmt: skip
        cols = np.concatenate([
            self.first[w_first] * k + self.second[w_first],
            self.second[w_second] * k + self.first[w_second],
            kk + self.first[tie] * k + self.second[tie],
            kk + self.second[tie] * k + self.first[tie],
        ])  # fmt: skip
        data = np.ones(rows.size)
        return sparse.csr_matrix((data, (rows, cols)), shape=(self.n_instances, 2 * kk))


@dataclass(frozen=True)
class PairCount:
    """How often two policies met and how it went."""

    a: str
    b: str
    a_wins: int
    b_wins: int
    ties: int

    @property
    def n(self) -> int:
        return self.a_wins + self.b_wins + self.ties

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "a_wins": self.a_wins, "b_wins": self.b_wins,
                "ties": self.ties, "n": self.n}  # fmt: skip


@dataclass(frozen=True)
class RankedPolicy:
    """One leaderboard row: centred log-strength with its interval and P(best)."""

    policy: str
    rank: int
    strength: Estimate
    p_best: float
    comparisons: int

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "rank": self.rank, "strength": self.strength.to_json(),
                "p_best": self.p_best, "comparisons": self.comparisons}  # fmt: skip


@dataclass(frozen=True)
class RankedPiece:
    """One connected piece of the comparison graph, ranked on its own scale."""

    name: str
    rows: tuple[RankedPolicy, ...]
    tie_parameter: Estimate | None
    regularized: bool
    resamples_regularized: float
    instances: int

    @property
    def policies(self) -> tuple[str, ...]:
        return tuple(r.policy for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "policies": list(self.policies),
            "leaderboard": [r.to_json() for r in self.rows],
            "tie_parameter": None if self.tie_parameter is None else self.tie_parameter.to_json(),
            "regularized": self.regularized,
            "resamples_regularized": self.resamples_regularized,
            "instances": self.instances,
        }


@dataclass(frozen=True)
class Ranking:
    """Every piece's leaderboard, the comparison graph and how it was computed."""

    model: str
    pieces: tuple[RankedPiece, ...]
    graph: tuple[PairCount, ...]
    resamples: int
    level: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def connected(self) -> bool:
        return len(self.pieces) == 1

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "method": MODEL_NAMES[self.model],
            "interval": f"percentile bootstrap over instances, {self.resamples} resamples",
            "level": self.level,
            "connected": self.connected,
            "pieces": [p.to_json() for p in self.pieces],
            "comparison_graph": [g.to_json() for g in self.graph],
            "notes": list(self.notes),
        }


def comparison_graph(data: PairwiseOutcomes) -> tuple[PairCount, ...]:
    """Per pair of policies that met: wins each way and ties (pairs in name order)."""
    k = len(data.policies)
    cells = np.asarray(data.instance_cells().sum(axis=0)).ravel()
    wins, ties = cells[: k * k].reshape(k, k), cells[k * k :].reshape(k, k)
    out = []
    order = sorted(range(k), key=lambda i: data.policies[i])
    for x, i in enumerate(order):
        for j in order[x + 1 :]:
            if wins[i, j] + wins[j, i] + ties[i, j] > 0:
                out.append(PairCount(data.policies[i], data.policies[j], int(wins[i, j]),
                                     int(wins[j, i]), int(ties[i, j])))  # fmt: skip
    return tuple(out)


def graph_pieces(data: PairwiseOutcomes) -> list[list[int]]:
    """Connected pieces of the comparison graph (policy indices), largest first; a policy that
    met nobody is a piece of its own."""
    k = len(data.policies)
    adj = sparse.coo_matrix((np.ones(data.size), (data.first, data.second)), shape=(k, k))
    n, labels = connected_components(adj, directed=False)
    pieces = [sorted(np.flatnonzero(labels == c).tolist()) for c in range(n)]
    return sorted(pieces, key=lambda p: (-len(p), min(data.policies[i] for i in p)))


def instance_types(cells: sparse.csr_matrix) -> tuple[NDArray, NDArray]:
    """Group instances with identical comparisons: (distinct rows [T, cells], counts [T]).

    Resampling n instances with replacement draws each distinct kind of instance a
    Multinomial(n, counts/n) number of times, so the bootstrap works on these sufficient
    statistics (exactly, and far faster when one pair meets per instance)."""
    cells = cells.tocsr()
    cells.sort_indices()
    keys = [
        (tuple(cells.indices[a:b].tolist()), tuple(cells.data[a:b].tolist()))
        for a, b in zip(cells.indptr[:-1], cells.indptr[1:], strict=True)
    ]
    first: dict[tuple[tuple[int, ...], tuple[float, ...]], int] = {}
    label = np.array([first.setdefault(key, len(first)) for key in keys], dtype=np.int64)
    reps = np.zeros(len(first), dtype=np.int64)
    reps[label] = np.arange(label.size)  # any instance of a type stands for it: rows are equal
    return np.asarray(cells[reps].todense()), np.bincount(label, minlength=len(first))


def resample_type_counts(
    freq: NDArray, resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """[resamples, T] multiplicities of each instance type in a with-replacement resample."""
    n = int(freq.sum())
    return rng.multinomial(n, freq / n, size=resamples).astype(float)


def _piece_counts(cells: NDArray, piece: list[int], k: int) -> tuple[NDArray, NDArray]:
    """Slice aggregated [..., 2·K·K] cells to the piece's [..., m, m] wins and ties."""
    lead = cells.shape[:-1]
    wins = cells[..., : k * k].reshape((*lead, k, k))
    ties = cells[..., k * k :].reshape((*lead, k, k))
    sel = np.asarray(piece)
    return wins[..., sel[:, None], sel[None, :]], ties[..., sel[:, None], sel[None, :]]


def rank_policies(
    data: PairwiseOutcomes,
    rng: np.random.Generator,
    *,
    model: str = "davidson",
    resamples: int = 1000,
    level: float = 0.95,
) -> Ranking:
    """Rank the policies of each connected piece (see the module docstring).

    Args:
        data: the comparisons. rng: the Generator of the instance bootstrap.
        model: "davidson" or "half" (ties as half wins).
        resamples: bootstrap resamples of instances (≥ 100).
        level: interval level.

    Returns:
        Ranking (pieces largest first; rows by strength).
    """
    if model not in TIE_MODELS:
        raise EvalError(f"--ties: {model!r} is not one of {', '.join(TIE_MODELS)}", key="ties")
    level = check_level(level)
    if int(resamples) < 100:
        raise EvalError(f"resamples: {resamples} is too few (at least 100)", key="resamples")
    if data.size == 0:
        raise EvalError("no two policies share an instance: nothing to rank", key="policies")
    k = len(data.policies)
    cells_by_instance = data.instance_cells()
    point_cells = np.asarray(cells_by_instance.sum(axis=0)).ravel()
    used = np.flatnonzero(np.asarray(cells_by_instance.sum(axis=1)).ravel() > 0)
    types, freq = instance_types(cells_by_instance[used])
    boot_cells = resample_type_counts(freq, int(resamples), rng) @ types  # [resamples, 2·K·K]
    per_policy = np.bincount(np.concatenate([data.first, data.second]), minlength=k)
    tail = (1.0 - level) / 2.0
    method = f"percentile bootstrap over instances ({resamples} resamples)"
    pieces: list[RankedPiece] = []
    notes: list[str] = []
    for number, piece in enumerate(graph_pieces(data), start=1):
        if len(piece) < 2:
            continue
        w, t = _piece_counts(point_cells, piece, k)
        fit = fit_strengths(w, t, model)
        bw, bt = _piece_counts(boot_cells, piece, k)
        boot = fit_strengths(bw, bt, model, start=fit)
        lo = np.quantile(boot.theta, tail, axis=0)
        hi = np.quantile(boot.theta, 1.0 - tail, axis=0)
        best = np.bincount(np.argmax(boot.theta, axis=1), minlength=len(piece)) / resamples
        in_piece = np.isin(data.first, piece)
        n_inst = int(np.unique(data.instance[in_piece]).size)
        order = np.argsort(-fit.theta, kind="stable")
        rows = tuple(
            RankedPolicy(
                data.policies[piece[i]],
                r + 1,
                Estimate(float(fit.theta[i]), float(lo[i]), float(hi[i]), level, method, n_inst),
                float(best[i]),
                int(per_policy[piece[i]]),
            )
            for r, i in enumerate(order)
        )
        nu = None
        if fit.tie_parameter is not None and boot.tie_parameter is not None:
            nu = Estimate(float(fit.tie_parameter), float(np.quantile(boot.tie_parameter, tail)),
                          float(np.quantile(boot.tie_parameter, 1 - tail)), level, method,
                          n_inst)  # fmt: skip
        name = f"piece {number}"
        pieces.append(RankedPiece(name, rows, nu, bool(fit.regularized),
                                  float(boot.regularized.mean()), n_inst))  # fmt: skip
        if fit.regularized:
            notes.append(
                f"{name}: the maximum-likelihood strengths do not exist ("
                + _why_not(w, t, model, [data.policies[i] for i in piece])
                + "); strengths use a Gaussian prior on the log-strength (see method)"
            )
    if len(pieces) > 1:
        notes.insert(0, "the comparison graph is in " + str(len(pieces)) + " pieces that never "
                     "met, each ranked on its own scale: " + "; ".join(
                         f"{p.name}: {', '.join(sorted(p.policies))}" for p in pieces))  # fmt: skip
    return Ranking(model, tuple(pieces), comparison_graph(data), int(resamples), level,
                   tuple(notes))  # fmt: skip


def _why_not(wins: NDArray, ties: NDArray, model: str, names: list[str]) -> str:
    """Why a piece's MLE does not exist, in the users' words."""
    beaten = (wins + ties).sum(axis=0)  # times each was beaten or tied
    won = (wins + ties).sum(axis=1)
    never_lost = [names[i] for i in range(len(names)) if beaten[i] == 0]
    never_won = [names[i] for i in range(len(names)) if won[i] == 0]
    if never_lost:
        return f"{', '.join(never_lost)} never lost nor tied"
    if never_won:
        return f"{', '.join(never_won)} never won nor tied"
    if model == "davidson" and ties.sum() == 0:
        return "no ties, so Davidson's tie parameter is 0"
    if model == "davidson":
        lost = wins.sum(axis=0)
        never = [names[i] for i in range(len(names)) if lost[i] == 0]
        if never:
            return f"{', '.join(never)} never lost, and ties do not bound Davidson's strengths"
        return "the wins alone do not link every policy both ways (Davidson's model)"
    return "some policies beat every policy outside their group"
