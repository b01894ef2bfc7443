"""Delegability frontier (eqs. (38)–(41)) and quality frontier F(τ) (eq. (37)) on toy inputs."""

from __future__ import annotations

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.scoring.frontier import (
    area_under_frontier,
    autonomy_bins,
    delegability_frontier,
    fraction_delegable,
    frontier_quality,
    frontier_shift,
    quality_frontier,
    quality_frontier_area,
    quality_frontier_estimate,
    quality_frontier_shift,
)

pytestmark = pytest.mark.timeout(60)

# three policies on the same two draws (rows: policies, columns: draws)
#   π1: fully autonomous (E[H] = 0), E[Q] = 0.6
#   π2: E[H] = 0.5, E[Q] = 0.8
#   π3: E[H] = 1.0, E[Q] = 0.95
QUALITY = np.array([[0.5, 0.7], [0.7, 0.9], [0.95, 0.95]])
INTERVENTIONS = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def test_frontier_on_a_toy_policy_set():
    # 4 bins at a = 0.125, 0.375, 0.625, 0.875; h_max = 1 → budgets 0.875, 0.625, 0.375, 0.125
    np.testing.assert_allclose(autonomy_bins(4), [0.125, 0.375, 0.625, 0.875])
    q_star, counts = frontier_quality([0.6, 0.8, 0.95], [0.0, 0.5, 1.0], autonomy_bins(4), 1.0)
    # budgets ≥ 0.5 admit π1, π2 (q* = 0.8); below admit π1 only (0.6); π3 never fits
    np.testing.assert_allclose(q_star, [0.8, 0.8, 0.6, 0.6])
    np.testing.assert_array_equal(counts, [2, 2, 1, 1])
    # Q* = 0.7: FD = 2/4 = 0.5; AUF = (0.1 + 0.1 + 0 + 0)/4 = 0.05
    assert fraction_delegable(q_star, 0.7) == 0.5
    assert area_under_frontier(q_star, 0.7) == pytest.approx(0.05)
    front = delegability_frontier(QUALITY, INTERVENTIONS, target=0.7, h_max=1.0, n_bins=4)
    assert front.fd.value == 0.5 and front.auf.value == pytest.approx(0.05)


def test_frontier_shift_between_two_times():
    earlier = delegability_frontier(QUALITY, INTERVENTIONS, target=0.7, h_max=1.0, n_bins=4)
    later_q = QUALITY.copy()
    later_q[0] = [0.7, 0.8]  # π1 improves to E[Q] = 0.75
    later = delegability_frontier(later_q, INTERVENTIONS, target=0.7, h_max=1.0, n_bins=4)
    # q* = [0.8, 0.8, 0.75, 0.75]: FD = 1, AUF = (0.1 + 0.1 + 0.05 + 0.05)/4 = 0.075
    assert later.fd.value == 1.0 and later.auf.value == pytest.approx(0.075)
    assert frontier_shift(later, earlier).value == pytest.approx(0.025)  # ΔF = 0.075 − 0.05


def test_frontier_bands_by_block_bootstrap():
    rng = np.random.default_rng(4)
    q = np.clip(np.array([[0.6], [0.8], [0.95]]) + 0.1 * rng.standard_normal((3, 40)), 0, 1)
    h = np.array([[0.0], [0.5], [1.0]]) + np.zeros((3, 40))
    a = delegability_frontier(
        q, h, target=0.7, h_max=1.0, n_bins=10, rng=np.random.default_rng(9), n_resamples=300
    )
    b = delegability_frontier(
        q, h, target=0.7, h_max=1.0, n_bins=10, rng=np.random.default_rng(9), n_resamples=300
    )
    assert a.auf == b.auf
    assert a.auf.low <= a.auf.value <= a.auf.high and a.fd.low <= a.fd.value <= a.fd.high
    assert np.all(np.diff(a.q_star) <= 0)  # non-increasing in autonomy demand
    c = delegability_frontier(
        q, h, target=0.7, h_max=1.0, n_bins=10, rng=np.random.default_rng(10), n_resamples=300
    )
    shift = frontier_shift(c, a)  # same data, independent resamples: a band around 0
    assert shift.value == 0.0 and shift.low < 0 < shift.high
    with pytest.raises(EvalError):
        delegability_frontier(q, h[:, :5], target=0.7, h_max=1.0)


def test_quality_frontier_eq_37():
    q = [0.9, 0.5, 0.7]
    t = ["t1", "t1", "t2"]
    # ω uniform over tasks: F(0.6) = 0.5·(1/2) + 0.5·1 = 0.75
    assert quality_frontier(q, t, 0.6) == pytest.approx(0.75)
    np.testing.assert_allclose(quality_frontier(q, t, [0.0, 0.6, 0.95]), [1.0, 0.75, 0.0])
    # area = Σ ω_t E[q] = 0.5·0.7 + 0.5·0.7 = 0.7
    assert quality_frontier_area(q, t) == pytest.approx(0.7)
    # model B: t1 [0.9, 0.8] → F(0.6) = 1 → ΔF = 1 − 0.75 = 0.25
    assert quality_frontier_shift(([0.9, 0.8, 0.7], t), (q, t), 0.6) == pytest.approx(0.25)
    # weighted tasks ω = (0.2, 0.8): F(0.6) = 0.2·0.5 + 0.8·1 = 0.9
    assert quality_frontier(q, t, 0.6, {"t1": 0.2, "t2": 0.8}) == pytest.approx(0.9)
    f, area = quality_frontier_estimate(
        q * 10, t * 10, 0.6, np.random.default_rng(1), n_resamples=200
    )
    assert f.value == pytest.approx(0.75) and f.low <= 0.75 <= f.high
    assert area.value == pytest.approx(0.7)
