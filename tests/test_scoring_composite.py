"""AAI-Index (eq. (12)), profiles, intervals, U and AAI* (eq. (35)), pinned by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import AXES, axis_from_value
from embodied_eval.scoring.composite import (
    PROFILES,
    aai_index,
    index_delta_method,
    index_gradient,
    index_resampled,
    jaggedness_adjusted_index,
    profile_weights,
    uniformity,
)
from embodied_eval.stats.estimate import Estimate

pytestmark = pytest.mark.timeout(60)


def ones_except(**overrides: float) -> dict[str, float]:
    values = dict.fromkeys(AXES, 1.0)
    values.update({("$" if k == "D" else k): v for k, v in overrides.items()})
    return values


def test_profile_weights_match_the_seed():
    assert profile_weights("default") == {
        "A": 1,
        "G": 1,
        "P": 1,
        "M": 1,
        "T": 1,
        "R": 1.5,
        "S": 1,
        "E": 0.5,
        "W": 1,
        "$": 1,
    }  # Table 1
    sw = profile_weights("software")  # §3.6: E's 0.5 moved equally to P, M, T
    assert (sw["P"], sw["M"], sw["T"], sw["E"]) == (1.25, 1.25, 1.25, 0.0)
    # the seed's stated software weights add 3 × 0.25 = 0.75 while removing E's 0.5, so they sum
    # to 10.25, not 10 ("0.5 redistributed equally" would give 1.1667 each); the stated weights win
    assert sum(PROFILES["default"].values()) == 10.0
    assert sum(sw.values()) == 10.25
    rb = profile_weights("robotics")  # §7
    assert rb == {
        "A": 1,
        "G": 1,
        "P": 1.1,
        "M": 1,
        "T": 1.1,
        "R": 1.5,
        "S": 1,
        "E": 1.25,
        "W": 1,
        "$": 1,
    }
    with pytest.raises(EvalError, match="profile"):
        profile_weights("marine")


def test_index_under_each_profile():
    v = ones_except(R=0.25)
    # only R < 1, so C = 0.25^(w_R / W)
    # default: W = 10 → 0.25^(1.5/10) = exp(−0.15 · 1.386294) = exp(−0.207944) = 0.812252
    assert aai_index(v, profile_weights("default")) == pytest.approx(0.812252, abs=1e-6)
    # software: W = 1+1+1.25·3+1.5+1+0+1+1 = 10.25 → exp(−(1.5/10.25) · 1.386294) = 0.816382
    assert aai_index(v, profile_weights("software")) == pytest.approx(0.816382, abs=1e-6)
    # robotics: W = 1+1+1.1+1+1.1+1.5+1+1.25+1+1 = 10.95 → exp(−(1.5/10.95) · 1.386294) = 0.827039
    assert aai_index(v, profile_weights("robotics")) == pytest.approx(0.827039, abs=1e-6)
    # all axes 0.5 → 0.5 under any weights
    for p in PROFILES:
        assert aai_index(dict.fromkeys(AXES, 0.5), profile_weights(p)) == pytest.approx(0.5)


def test_zero_axis_forces_zero_unless_its_weight_is_zero():
    v = ones_except(R=0.25, E=0.0)
    assert aai_index(v, profile_weights("default")) == 0.0  # property (ii): no compensation
    assert aai_index(v, profile_weights("robotics")) == 0.0
    # software: w_E = 0, so E = 0 does not enter: same 0.816382 as with E = 1
    assert aai_index(v, profile_weights("software")) == pytest.approx(0.816382, abs=1e-6)


def test_gradient_property_iv():
    v = ones_except(R=0.25)
    w = profile_weights("default")
    g = index_gradient(v, w)
    c = aai_index(v, w)
    # ∂C/∂R = w_R/(W·R)·C = 1.5/(10 · 0.25)·C = 0.6 C; ∂C/∂A = 1/(10 · 1)·C = 0.1 C
    assert g["R"] == pytest.approx(0.6 * c)
    assert g["A"] == pytest.approx(0.1 * c)
    assert index_gradient(ones_except(R=0.0), w)["R"] == math.inf


def test_uniformity_and_jaggedness_adjusted_index():
    v = ones_except(R=0.25)
    w = profile_weights("default")
    # U = min/median over the 10 included axes = 0.25/1 = 0.25
    assert uniformity(v, w) == 0.25
    # AAI* = 0.812252 · 0.25^0.5 = 0.406126
    assert jaggedness_adjusted_index(aai_index(v, w), 0.25) == pytest.approx(0.406126, abs=1e-6)
    # median of an even number of axes averages the middle two: values 0.2,0.4,…
    vals = dict(zip(AXES, [0.2, 0.4, 0.5, 0.5, 0.6, 0.6, 0.7, 0.8, 0.9, 1.0], strict=True))
    # sorted middle pair 0.6, 0.6 → median 0.6; U = 0.2/0.6 = 1/3
    assert uniformity(vals, w) == pytest.approx(1 / 3)
    # software: E (w = 0) is not an included axis; with E the minimum, U ignores it
    vals_sw = ones_except(E=0.1, R=0.5)
    assert uniformity(vals_sw, profile_weights("software")) == 0.5  # min 0.5 / median 1
    assert uniformity(vals_sw, w) == pytest.approx(0.1)  # default includes E
    assert uniformity(dict.fromkeys(AXES, 0.0), w) == 0.0
    assert jaggedness_adjusted_index(0.5, 1.0) == 0.5


def test_delta_method_interval_by_hand():
    w = profile_weights("default")
    axes = {x: axis_from_value(x, 0.5) for x in AXES}
    axes["A"] = axis_from_value("A", Estimate(0.5, 0.4, 0.6, 0.95, "reported"))
    est = index_delta_method(axes, w)
    # se_A = 0.2/(2 · 1.959964) = 0.0510213; ∂C/∂A = (1/10)/0.5 · 0.5 = 0.1
    # se_C = 0.00510213; half-width 1.959964 · 0.00510213 = 0.01 → [0.49, 0.51]
    assert est.value == pytest.approx(0.5)
    assert (est.low, est.high) == pytest.approx((0.49, 0.51))
    assert "held fixed" in est.note
    axes["R"] = axis_from_value("R", 0.0)
    zero = index_delta_method(axes, w)
    assert zero.value == 0.0 and zero.low is None


def test_resampling_interval_is_seeded_and_uses_replicates():
    w = profile_weights("software")
    axes = {x: axis_from_value(x, 0.6) for x in AXES if x != "E"}
    axes["A"] = axis_from_value("A", Estimate(0.6, 0.5, 0.7, 0.95, "reported"))
    axes["G"] = axis_from_value("G", 0.6, replicates=[0.55, 0.6, 0.65])
    e1, reps = index_resampled(axes, w, np.random.default_rng(11), n_resamples=400)
    e2, _ = index_resampled(axes, w, np.random.default_rng(11), n_resamples=400)
    assert e1 == e2 and reps.shape == (400,)
    assert e1.low < 0.6 < e1.high
    # every replicate lies between the index with A, G at their extremes (A clipped draws)
    lo = aai_index({**{x: 0.6 for x in axes}, "A": 0.0 + 1e-300, "G": 0.55}, w)
    assert np.all(reps >= lo - 1e-12)


def test_missing_axis_is_an_error_not_a_silent_pass():
    w = profile_weights("software")
    with pytest.raises(EvalError, match=r"axes\.P"):
        aai_index({x: 0.5 for x in AXES if x not in ("P", "E")}, w)
    with pytest.raises(EvalError, match=r"axes\.A"):
        aai_index({**dict.fromkeys(AXES, 0.5), "A": 1.2}, w)


def test_seed_table_3_is_not_a_geometric_mean():
    # Table 3 lists AAI-Index 0.13 (RPA Bot) and 0.40 (Agentic LLM) while both rows have R = 0.00:
    # eq. (12) gives 0 for any row with a zero axis, so the table's index column is not eq. (12).
    w = {**profile_weights("default"), "E": 0.0}  # Table 3 has no E column
    rpa = dict(
        zip(
            ["A", "G", "P", "M", "T", "R", "S", "W", "$"],
            [0.98, 0.06, 0.03, 0.12, 0.12, 0.00, 0.00, 0.32, 0.41],
            strict=True,
        )
    )
    llm = dict(
        zip(
            ["A", "G", "P", "M", "T", "R", "S", "W", "$"],
            [0.64, 0.33, 0.47, 0.43, 0.59, 0.00, 0.18, 0.58, 0.37],
            strict=True,
        )
    )
    assert aai_index(rpa, w) == 0.0 != 0.13
    assert aai_index(llm, w) == 0.0 != 0.40
