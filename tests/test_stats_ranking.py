"""Bradley–Terry strengths with ties: hand-computed fixtures for both tie models, pieces of the
comparison graph, one-sided data, and bootstrap interval coverage in simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from embodied_eval.errors import EvalError
from embodied_eval.stats.bradley_terry import (
    davidson_probabilities,
    fit_strengths,
    strongly_connected,
)
from embodied_eval.stats.ranking import PairwiseOutcomes, rank_policies

# A>B 6, B>A 2, A=B 2, B>C 5, C>B 3, A>C 7, C>A 1 (the verified ecosystem note's example).
WINS = np.array([[0, 6, 7], [2, 0, 5], [1, 3, 0]], dtype=float)
TIES = np.array([[0, 2, 0], [2, 0, 0], [0, 0, 0]], dtype=float)


def _davidson_mle_by_direct_optimisation(wins, ties):
    """A separate tiny solver: maximise Davidson's likelihood written from its probabilities,
    P(i>j) = π_i/D, P(tie) = ν√(π_iπ_j)/D, D = π_i + π_j + ν√(π_iπ_j), with θ_C = 0 fixed."""
    k = wins.shape[0]

    def nll(x):
        pi = np.exp(np.r_[x[: k - 1], 0.0])
        nu = math.exp(x[-1])
        total = 0.0
        for i in range(k):
            for j in range(k):
                if i == j:
                    continue
                d = pi[i] + pi[j] + nu * math.sqrt(pi[i] * pi[j])
                total -= wins[i, j] * math.log(pi[i] / d)
                if i < j:
                    total -= ties[i, j] * math.log(nu * math.sqrt(pi[i] * pi[j]) / d)
        return total

    res = minimize(nll, np.zeros(k), method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})  # fmt: skip
    theta = np.r_[res.x[: k - 1], 0.0]
    return theta - theta.mean(), math.exp(res.x[-1])


def test_half_win_model_matches_the_verified_vector():
    # Ties as half wins: log-strengths [0.8802, −0.1070, −0.7732] (choix's three fitters and a
    # direct MLE agree, per the verified note); P(A beats B) = 0.7285.
    fit = fit_strengths(WINS, TIES, "half")
    assert fit.theta == pytest.approx([0.8802, -0.1070, -0.7732], abs=1e-4)
    assert 1 / (1 + math.exp(-(fit.theta[0] - fit.theta[1]))) == pytest.approx(0.7285, abs=1e-4)
    assert fit.tie_parameter is None and not fit.regularized


def test_davidson_model_matches_a_direct_optimisation():
    theta, nu = _davidson_mle_by_direct_optimisation(WINS, TIES)
    fit = fit_strengths(WINS, TIES, "davidson")
    assert fit.theta == pytest.approx(theta, abs=1e-5)
    assert float(fit.tie_parameter) == pytest.approx(nu, abs=1e-5)
    # And it is not the half-win answer: the tie model changes the strengths.
    assert abs(fit.theta[0] - 0.8802) > 0.05


def test_two_policies_closed_forms():
    # Two policies, A won 6, B won 2, 2 ties. Half wins: 7 vs 3 → θ_A − θ_B = ln(7/3).
    # Davidson saturates the 3-outcome multinomial: p_A : p_B : p_tie = 6 : 2 : 2, so
    # θ_A − θ_B = ln 3 and ν = t/√(w·l) = 2/√12 = 0.57735.
    w = np.array([[0, 6], [2, 0]], dtype=float)
    t = np.array([[0, 2], [2, 0]], dtype=float)
    half = fit_strengths(w, t, "half")
    assert half.theta == pytest.approx([math.log(7 / 3) / 2, -math.log(7 / 3) / 2], abs=1e-9)
    dav = fit_strengths(w, t, "davidson")
    assert dav.theta == pytest.approx([math.log(3) / 2, -math.log(3) / 2], abs=1e-9)
    assert float(dav.tie_parameter) == pytest.approx(2 / math.sqrt(12), abs=1e-9)


def test_batched_fit_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    w = rng.poisson(4, size=(5, 4, 4)).astype(float)
    t = rng.poisson(2, size=(5, 4, 4)).astype(float)
    t = t + np.swapaxes(t, -1, -2)
    both = fit_strengths(w, t, "davidson")
    for b in range(5):
        one = fit_strengths(w[b], t[b], "davidson")
        assert both.theta[b] == pytest.approx(one.theta, abs=1e-8)


def test_one_sided_data_is_flagged_and_kept_finite():
    # C never wins nor ties: the MLE sends θ_C to −∞; the fit uses the prior and says so.
    w = WINS.copy()
    w[2, :] = 0.0
    assert not strongly_connected(w, TIES)
    assert strongly_connected(WINS, TIES)
    fit = fit_strengths(w, TIES, "half")
    assert fit.regularized and np.all(np.isfinite(fit.theta))
    assert fit.theta[2] < fit.theta[1] < fit.theta[0]


def _outcomes(rows, policies=("a", "b", "c", "d", "e")):
    """rows: (instance, first, second, outcome)."""
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    return PairwiseOutcomes(tuple(policies), arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3],
                            int(arr[:, 0].max()) + 1)  # fmt: skip


def _fixture_rows(offset_inst, i, j, counts):
    """counts = (i wins, j wins, ties), one comparison per instance."""
    rows, m = [], offset_inst
    for outcome, n in zip((1, -1, 0), counts, strict=True):
        for _ in range(n):
            rows.append((m, i, j, outcome))
            m += 1
    return rows, m


def test_a_disconnected_graph_is_named_and_each_piece_ranked_on_its_own():
    rows, m = [], 0
    # Piece {a, b, c} with the fixture's counts; piece {d, e}: d won 6, e won 2, 2 ties.
    for i, j, counts in ((0, 1, (6, 2, 2)), (1, 2, (5, 3, 0)), (0, 2, (7, 1, 0)),
                         (3, 4, (6, 2, 2))):  # fmt: skip
        more, m = _fixture_rows(m, i, j, counts)
        rows += more
    ranking = rank_policies(_outcomes(rows), np.random.default_rng(1), model="half",
                            resamples=200)  # fmt: skip
    assert not ranking.connected and len(ranking.pieces) == 2
    first, second = ranking.pieces
    assert set(first.policies) == {"a", "b", "c"} and set(second.policies) == {"d", "e"}
    assert "2 pieces" in ranking.notes[0]
    assert "piece 1: a, b, c" in ranking.notes[0] and "piece 2: d, e" in ranking.notes[0]
    got = {r.policy: r.strength.value for r in first.rows}
    assert [got["a"], got["b"], got["c"]] == pytest.approx([0.8802, -0.1070, -0.7732], abs=1e-4)
    got2 = {r.policy: r.strength.value for r in second.rows}
    assert got2["d"] == pytest.approx(math.log(7 / 3) / 2, abs=1e-9)
    for piece in ranking.pieces:
        assert sum(r.p_best for r in piece.rows) == pytest.approx(1.0)
        assert [r.rank for r in piece.rows] == list(range(1, len(piece.rows) + 1))
    assert {(g.a, g.b): g.n for g in ranking.graph} == {
        ("a", "b"): 10, ("b", "c"): 8, ("a", "c"): 8, ("d", "e"): 10}  # fmt: skip


def test_bootstrap_keeps_an_instance_whole():
    # One instance where a beats b and c, b beats c: resampling instances moves the three
    # comparisons together, so every resample has a ≥ b ≥ c by counts.
    rows = []
    for m in range(30):
        rows += (
            [(m, 0, 1, 1), (m, 0, 2, 1), (m, 1, 2, 1)]
            if m % 3
            else [(m, 0, 1, 0), (m, 0, 2, 0), (m, 1, 2, 0)]
        )
    ranking = rank_policies(_outcomes(rows, ("a", "b", "c")), np.random.default_rng(2),
                            resamples=200)  # fmt: skip
    assert [r.policy for r in ranking.pieces[0].rows] == ["a", "b", "c"]
    assert ranking.pieces[0].rows[0].p_best == 1.0


def test_rank_policies_refuses_bad_arguments():
    rows, _ = _fixture_rows(0, 0, 1, (3, 2, 1))
    data = _outcomes(rows, ("a", "b"))
    with pytest.raises(EvalError, match="ties"):
        rank_policies(data, np.random.default_rng(0), model="rao-kupper")
    with pytest.raises(EvalError, match="resamples"):
        rank_policies(data, np.random.default_rng(0), resamples=10)


def _simulate(rng, theta, nu, n):
    """n instances, each with one Davidson-model comparison of every pair."""
    k = len(theta)
    pw, _ = davidson_probabilities(np.asarray(theta, float), np.log(nu))
    rows = []
    for m in range(n):
        for i in range(k):
            for j in range(i + 1, k):
                u = rng.random()
                rows.append(
                    (m, i, j, 1 if u < pw[i, j] else (-1 if u < pw[i, j] + pw[j, i] else 0))
                )
    return _outcomes(rows, ("a", "b", "c"))


def test_interval_coverage_at_the_nominal_level_in_simulation():
    # 200 simulated leaderboards of 100 instances from Davidson's model (θ = 0.6, 0, −0.6,
    # ν = 0.8); 95 % percentile intervals over 200 resamples. Pooled coverage of the three
    # centred log-strengths must be 0.95 within Monte Carlo error (±0.035 ≈ 2.5 SE at 200 runs).
    rng = np.random.default_rng(5)
    theta = np.array([0.6, 0.0, -0.6])
    hits = []
    for _ in range(200):
        ranking = rank_policies(_simulate(rng, theta, 0.8, 100), rng, resamples=200)
        est = {r.policy: r.strength for r in ranking.pieces[0].rows}
        hits += [est[p].low <= t <= est[p].high for p, t in zip("abc", theta, strict=True)]
    assert np.mean(hits) == pytest.approx(0.95, abs=0.035)
