"""The judge-corrected AR bound never claims more than the audits support
(`stats.misclassified`, `embodiment.judge`, coverage in `embodiment.judge_coverage`).

Hand values (scipy.stats.beta; α = 0.05 split in three, tail a = 1/60):
    Se = 29/30: Se_U = Beta(1 − a; 30, 1) = (59/60)^(1/30) = 0.999440
    Sp = 118/118: Sp_L = Beta(a; 118, 1) = (1/60)^(1/118) = 0.965897
    18/20: p_L = beta.ppf(1/60, 18, 3) = 0.664208
           AR_L = (0.664208 + 0.965897 − 1)/(0.999440 + 0.965897 − 1) = 0.630105/0.965337
                = 0.652731  (uncorrected exact one-sided 95 %: beta.ppf(0.05, 18, 3) = 0.717381)
    20/20: p_L = (1/60)^(1/20) = 0.814878
           AR_L = 0.780775/0.965337 = 0.808811  (uncorrected: 0.05^(1/20) = 0.860892)
    29/148 (every episode of the window audited, TP 29, FN 1, TN 118):
           p_L = beta.ppf(1/60, 29, 120) = 0.130898
           AR_L = (0.130898 + 0.965897 − 1)/0.965337 = 0.100271
           (uncorrected: beta.ppf(0.05, 29, 120) = 0.143871)

The audits are the window's own labelled episodes (`audited_success`); the shipped benchmark
table is never used for the correction.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from embodied_eval.embodiment.judge import judge_summary
from embodied_eval.embodiment.judge_coverage import (
    JudgeScenario,
    exact_coverage,
    procedure_coverage,
)
from embodied_eval.stats import clopper_pearson_interval
from embodied_eval.stats.misclassified import corrected_bound, corrected_lower_bound
from tests.conftest import make_episode
from tests.test_judge_accuracy import real_episodes

pytestmark = pytest.mark.timeout(60)

#: The issue's judge: Se 29/30, Sp 118/118.
ISSUE_ENTRY = {"true_positive": 29, "false_negative": 1, "false_positive": 0,
               "true_negative": 118, "episodes": 148, "measured_on": "test"}  # fmt: skip
PERFECT_FEW = {"true_positive": 5, "false_negative": 0, "false_positive": 0,
               "true_negative": 5, "episodes": 10, "measured_on": "test"}  # fmt: skip
CHANCE = {"true_positive": 5, "false_negative": 5, "false_positive": 6,
          "true_negative": 4, "episodes": 20, "measured_on": "test"}  # fmt: skip
NO_FAILURES_AUDITED = {"true_positive": 30, "false_negative": 0, "false_positive": 0,
                       "true_negative": 0, "episodes": 30, "measured_on": "test"}  # fmt: skip
ENTRIES = {"1": ISSUE_ENTRY, "2": PERFECT_FEW, "3": CHANCE, "4": NO_FAILURES_AUDITED}


def labelled(entry: dict[str, int], judge_: dict[str, str]) -> list:
    """Audited real episodes of the window with the entry's counts: judged success and truly
    so (TP), judged failure but a success (FN), judged success but a failure (FP), judged
    failure and truly so (TN)."""
    kinds = [(True, True)] * entry["true_positive"] + [(False, True)] * entry["false_negative"]
    kinds += [(True, False)] * entry["false_positive"] + [(False, False)] * entry["true_negative"]
    return [
        make_episode(episode_id=f"a{i:03d}-real-a1", pair_id=f"a{i:03d}", seed=1000 + i,
                     quality=0.9 if judged else 0.1, judge=dict(judge_), audited_success=truth)
        for i, (judged, truth) in enumerate(kinds)
    ]  # fmt: skip


def summary(successes: int, n: int, version: str, rng, resamples: int):
    """The judge summary of n counted episodes, with an audit of `version` whose labelled
    episodes are the judged population the correction measures Se and Sp on (every one of them
    labelled, so the proportional sample keeps them all and Se, Sp are the entry's)."""
    real = real_episodes(successes, n, judge(version))
    extra = labelled(ENTRIES[version], judge(version))
    return judge_summary(real, True, rng, resamples, 0.95, window_real=extra)


def judge(version: str) -> dict[str, str]:
    return {"kind": "detector", "name": "scene-detector", "version": version}


def test_corrected_bound_by_hand() -> None:
    low18 = corrected_bound(18, 20, 29, 30, 118, 118, 0.95)
    assert low18.corrected
    assert low18.sensitivity_high == pytest.approx(0.999440, abs=1e-6)
    assert low18.specificity_low == pytest.approx(0.965897, abs=1e-6)
    assert low18.judged_low == pytest.approx(0.664208, abs=1e-6)
    assert low18.bound == pytest.approx(0.652731, abs=1e-6)
    low20 = corrected_bound(20, 20, 29, 30, 118, 118, 0.95)
    assert low20.judged_low == pytest.approx(0.814878, abs=1e-6)
    assert low20.bound == pytest.approx(0.808811, abs=1e-6)
    # Both below the uncorrected exact bounds (0.717381, 0.860892): no overclaim.
    assert clopper_pearson_interval(18, 20, 0.95, "lower").low == pytest.approx(0.717381, abs=1e-6)
    assert low18.bound < 0.717381 and low20.bound < 0.860892


def test_the_window_bound_is_the_hand_value_within_monte_carlo_error() -> None:
    """One task instance: the cluster bootstrap's bound is the exact one up to Monte Carlo
    error, and the smaller of the two is used, so the gate bound is at most the hand value."""
    s = summary(18, 20, "1", np.random.default_rng(5), 4000)
    assert s.corrected is not None and s.corrected_bound is not None and s.corner is not None
    # Point: Rogan–Gladen (0.9 + 1 − 1)/(29/30 + 1 − 1) = 0.9 · 30/29 = 0.931034.
    assert s.corrected.value == pytest.approx(0.931034, abs=1e-6)
    assert s.corrected_bound.low <= 0.652731 + 1e-12
    # Monte Carlo: the bootstrap's 1/60-quantile of the judged rate has SE ≈ 0.006 at 4000
    # resamples (0.008 at 2000, seen over seeds); 0.03 is > 3.5 SE.
    assert s.corrected_bound.low == pytest.approx(0.652731, abs=0.03)
    assert s.corrected.low <= s.corrected_bound.low < s.corrected.value < s.corrected.high
    shown = s.to_json(0.95)["AR_corrected_bound"]
    assert shown["low"] == s.corrected_bound.low
    assert shown["corner"]["sensitivity_high"] == pytest.approx(0.999440, abs=1e-6)


def test_a_perfect_judge_from_few_audits_never_raises_the_bound() -> None:
    """Se = Sp = 1 estimated from few audits: the corrected bound is never above the exact
    uncorrected one, for every outcome of small windows."""
    for n, audits in itertools.product((5, 11, 20, 60), (1, 3, 10, 30)):
        k = np.arange(n + 1)
        bound, _ = corrected_lower_bound(k, n, audits, audits, audits, audits, 0.95)
        exact = np.array([clopper_pearson_interval(int(j), n, 0.95, "lower").low for j in k])
        assert np.all(bound <= exact + 1e-12), (n, audits)


def test_the_correction_is_not_made_without_audits_or_information() -> None:
    rng = np.random.default_rng(1)
    unaudited = judge_summary(real_episodes(12, 20, judge("1")), True, rng, 300, 0.95)
    assert unaudited.corrected is None and "no audit of scene-detector 1" in unaudited.note
    chance = summary(12, 20, "3", rng, 300)
    # Se + Sp = 0.5 + 0.4 ≤ 1.
    assert chance.corrected is None and "Se + Sp ≤ 1" in chance.note
    none = summary(12, 20, "4", rng, 300)
    assert none.corrected is None and "true successes and failures" in none.note
    # 20/20 judged, Se audited 5/5 and Sp 5/5: Sp_L = (1/60)^(1/5) = 0.4410, Se_U = 1, so
    # Se_U + Sp_L > 1 and the corrected bound is (p_L + Sp_L − 1)/Sp_L with p_L = 0.8149:
    # (0.814878 + 0.441054 − 1)/0.441054 = 0.579 < 0.8609 uncorrected.
    few = summary(20, 20, "2", rng, 300)
    assert few.corrected_bound is not None
    assert few.corrected_bound.low == pytest.approx(0.579, abs=0.005)


def test_the_report_gate_uses_the_corrected_bound() -> None:
    import tomllib

    from embodied_eval.embodiment import compute_embodiment
    from embodied_eval.protocol.reader import protocol_from_mapping
    from tests.test_embodiment_data import DATA

    raw = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    raw.setdefault("real", {})["judge_correction"] = True
    proto = protocol_from_mapping(raw)
    window = labelled(ISSUE_ENTRY, judge("1"))  # every counted episode audited: 29/148 judged
    out = compute_embodiment(window, [], [], 10.0, proto, resamples=2000).to_json()
    level = proto.confidence
    assert level == 0.95  # the hand values above are at 95 %
    assert out["judge"]["AR_corrected"]["value"] == pytest.approx(29 / 148 * 30 / 29, abs=1e-12)
    assert out["gate_bounds"]["AR"]["low"] == pytest.approx(0.100271, abs=0.03)  # MC, as above
    assert out["gate_bounds"]["AR"]["low"] <= 0.100271 + 1e-6


SMALL_GRID = list(itertools.product((0.6, 0.9), (0.85, 1.0), (0.85, 1.0), (20, 60), (10, 30)))


def test_coverage_on_a_small_grid() -> None:
    """Coverage ≥ nominal − 1 pt on every cell (2000 replications each: Monte Carlo SE ≈ 0.5 pt)
    with independent episodes; the full grid is benchmarks/coverage.py --only-judge."""
    rng = np.random.default_rng(37)
    for ar, se, sp, n, audits in SMALL_GRID:
        cell = exact_coverage(JudgeScenario(ar, se, sp, n, 1, audits, audits), 2000, rng)
        assert cell.coverage >= 0.94, (ar, se, sp, n, audits, cell)


def test_coverage_with_clustered_episodes() -> None:
    """Task instances with ICC 0.1 (20 instances × 3 episodes): the whole procedure, cluster
    bootstrap included, still covers."""
    rng = np.random.default_rng(38)
    cell = procedure_coverage(JudgeScenario(0.8, 0.95, 0.95, 20, 3, 30, 30, icc=0.1), 300, rng)
    assert cell.coverage >= 0.94 and cell.corrected_share > 0.9
