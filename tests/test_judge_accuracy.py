"""The detector's accuracy: computed from stored counts (Wilson values from the notes), the
shipped benchmark measurement (shown, never used to correct), the window's own audit (exact
intervals), and AR corrected with the audit (Rogan–Gladen) when the protocol asks."""

from __future__ import annotations

import html
import tomllib

import numpy as np
import pytest

from embodied_eval import plugins
from embodied_eval.embodiment import compute_embodiment
from embodied_eval.embodiment.detector_accuracy import (
    JudgeAccuracy,
    accuracy_table,
    counts_of,
    format_table,
    tally,
)
from embodied_eval.embodiment.judge import judge_summary, judges_of
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import protocol_from_mapping
from tests.conftest import make_episode
from tests.test_embodiment_data import DATA

pytestmark = pytest.mark.timeout(60)

DETECTOR = {"kind": "detector", "name": "scene-detector", "version": "1.0.0"}
#: Counts whose Wilson intervals are in notes/statistics.md: Se = 45/60, Sp = 9/12.
ENTRY = {
    "true_positive": 45,
    "false_negative": 15,
    "false_positive": 3,
    "true_negative": 9,
    "cannot_judge": 2,
    "episodes": 74,
    "measured_on": "test",
    "by_family": {
        "pick_place": {"true_positive": 20, "false_negative": 5, "false_positive": 1,
                       "true_negative": 4, "cannot_judge": 0},
        "push": {"true_positive": 25, "false_negative": 10, "false_positive": 2,
                 "true_negative": 5, "cannot_judge": 2},
    },
}  # fmt: skip


def lookup(name: str, version: str):
    return ENTRY if (name, version) == ("scene-detector", "1.0.0") else None


def test_sensitivity_and_specificity_come_from_the_counts():
    acc = counts_of(ENTRY)
    se, sp = acc.sensitivity(), acc.specificity()
    # notes/statistics.md: Wilson 95 % of 45/60 = [0.6277, 0.8422], of 9/12 = [0.4677, 0.9111].
    assert (se.value, se.n) == (0.75, 60)
    assert (se.low, se.high) == (pytest.approx(0.6277, abs=5e-5), pytest.approx(0.8422, abs=5e-5))
    assert (sp.value, sp.n) == (0.75, 12)
    assert (sp.low, sp.high) == (pytest.approx(0.4677, abs=5e-5), pytest.approx(0.9111, abs=5e-5))
    rows = accuracy_table(ENTRY)
    assert [r["stratum"] for r in rows] == ["all", "pick_place", "push"]
    assert rows[1]["sensitivity"]["value"] == 20 / 25 and rows[2]["specificity"]["value"] == 5 / 7
    text = format_table(rows)
    assert "0.750 [0.628, 0.842] n=60" in text and "0.750 [0.468, 0.911] n=12" in text


def test_counts_are_validated_and_tallied():
    with pytest.raises(EvalError, match="true_positive"):
        counts_of({"true_positive": -1})
    with pytest.raises(EvalError, match="false_negative"):
        counts_of({"false_negative": 1.5})
    # (detector, oracle): TP, FN, FP, TN, and one the detector could not judge.
    pairs = [(True, True), (False, True), (True, False), (False, False), (False, False), (None, True)]
    assert tally(pairs) == JudgeAccuracy(1, 1, 1, 2, 1)
    assert JudgeAccuracy(0, 0, 0, 0).sensitivity().value is None  # nothing measured: undefined


def test_the_shipped_measurement_is_counts_and_covers_every_family():
    from real_bridge.detector import DETECTOR_NAME, DETECTOR_VERSION
    from real_bridge.judge_accuracy import ACCURACY_PATH, stored_accuracy

    entry = stored_accuracy(DETECTOR_NAME, DETECTOR_VERSION)
    if entry is None:
        pytest.skip(f"no measurement of {DETECTOR_NAME} {DETECTOR_VERSION} in {ACCURACY_PATH}")
    rows = accuracy_table(entry)
    families = {r["stratum"] for r in rows[1:]}
    assert families and "all" not in families  # whichever families the benchmark ran
    for key in ("true_positive", "false_negative", "false_positive", "true_negative"):
        assert rows[0][key] == sum(r[key] for r in rows[1:])  # the totals are the families'
    judged = sum(rows[0][k] for k in ("true_positive", "false_negative", "false_positive",
                                      "true_negative"))  # fmt: skip
    assert entry["episodes"] == judged + rows[0]["cannot_judge"] >= 100
    assert rows[0]["sensitivity"]["n"] > 0 and rows[0]["specificity"]["n"] > 0


def real_episodes(successes: int, n: int, judge=DETECTOR, labels=None):
    labels = labels or {}
    return [
        make_episode(
            episode_id=f"p{i:03d}-real-a1",
            pair_id=f"p{i:03d}",
            seed=i,
            quality=0.9 if i < successes else 0.1,
            judge=dict(judge),
            audited_success=labels.get(i),
        )
        for i in range(n)
    ]


def audited_window(judge=DETECTOR):
    """80 real episodes, 48 judged successes (AR as judged 0.6); 60 labelled by the window's
    audit, the same share (3/4) of each verdict: judged successes p000–p032 true (TP 33),
    p033–p035 false (FP 3); judged failures p048–p058 true (FN 11), p059–p071 false (TN 13):
    Se = 33/44 = 0.75, Sp = 13/16 = 0.8125."""
    labels = {i: i < 33 for i in range(36)} | {i: i < 59 for i in range(48, 72)}
    return real_episodes(48, 80, judge, labels)


def test_judge_correction_by_hand(monkeypatch):
    monkeypatch.setattr(plugins, "JUDGE_ACCURACY", "tests.test_judge_accuracy:lookup")
    real = audited_window()
    s = judge_summary(real, True, np.random.default_rng(3), 2000, 0.95)
    # Rogan–Gladen: (0.6 + 0.8125 − 1)/(0.75 + 0.8125 − 1) = 0.4125/0.5625 = 0.733333 — the
    # same as 0.6 · PPV + 0.4 · (1 − NPV) = 0.6 · 33/36 + 0.4 · 11/24 (a proportional audit).
    assert s.corrected is not None and s.corrected.value == pytest.approx(0.733333, abs=1e-6)
    assert s.corrected.low < 0.733333 < s.corrected.high and s.corrected.n == 80
    # The gate's one-sided 95 % bound (α/3 per proportion) is above the two-sided one (α/6).
    bound = s.corrected_bound
    assert bound is not None and s.corrected.low <= bound.low < 0.733333
    assert s.judges == [{**DETECTOR, "episodes": 80}]
    assert len(s.audited) == 60 and s.accuracy["all"].positives == 44
    # Not asked: the accuracy is reported, AR is left alone.
    plain = judge_summary(real, False, np.random.default_rng(3), 2000, 0.95)
    assert plain.corrected is None and plain.accuracy == s.accuracy
    # The benchmark table alone (no audit of this window) never corrects, and the note says so.
    unaudited = real_episodes(48, 80)
    none = judge_summary(unaudited, True, np.random.default_rng(3), 200, 0.95)
    assert none.corrected is None and not none.accuracy and none.benchmark == ENTRY
    assert "AR not corrected: no audit of scene-detector 1.0.0 on this window" in none.note
    # A judge without an audit, or mixed judges: not corrected, and the note says why.
    other = real_episodes(12, 20, {"kind": "detector", "name": "scene-detector", "version": "9"})
    assert judge_summary(other, True, np.random.default_rng(3), 200, 0.95).corrected is None
    mixed = real[:10] + other[10:]
    note = judge_summary(mixed, True, np.random.default_rng(3), 200, 0.95).note
    assert "not all judged by one audited detector" in note
    assert [j["episodes"] for j in judges_of(mixed)] == [10, 10]


def test_protocol_judge_correction_corrects_ar_and_names_the_judge(monkeypatch):
    monkeypatch.setattr(plugins, "JUDGE_ACCURACY", "tests.test_judge_accuracy:lookup")
    raw = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    plain = protocol_from_mapping(raw)
    raw.setdefault("real", {})["judge_correction"] = True
    corrected = protocol_from_mapping(raw)
    assert corrected.judge_correction and not plain.judge_correction
    assert corrected.protocol_hash != plain.protocol_hash  # declared, so hashed
    raw["real"]["judge_correction"] = False
    assert protocol_from_mapping(raw).protocol_hash == plain.protocol_hash  # default: unchanged
    real = audited_window()
    out = compute_embodiment(real, [], [], 10.0, corrected, resamples=300).to_json()
    assert out["AR"]["value"] == pytest.approx(0.733333, abs=1e-6)
    assert out["judge"]["AR_as_judged"]["value"] == pytest.approx(0.6)
    assert out["judge"]["judges"][0]["name"] == "scene-detector"
    assert out["judge"]["accuracy"]["sensitivity"]["value"] == 0.75
    assert out["AR"]["low"] <= out["gate_bounds"]["AR"]["low"] < 0.733333
    base = compute_embodiment(real, [], [], 10.0, plain, resamples=300).to_json()
    assert base["AR"]["value"] == pytest.approx(0.6) and base["judge"]["correction"] is False
    assert base["judge"]["accuracy"]["specificity"]["n"] == 16  # named even when not corrected
    bench = base["judge"]["benchmark"]  # shown, labelled, hashed; not the window's accuracy
    assert bench["label"] == "benchmark (twin vs its oracle), not this window's audit"
    assert len(bench["sha256"]) == 64 and bench["specificity"]["method"].startswith("Wilson")


def test_the_certificate_text_names_the_judge_and_its_accuracy(monkeypatch):
    from embodied_eval.certificate.html_parts import judge_line

    monkeypatch.setattr(plugins, "JUDGE_ACCURACY", "tests.test_judge_accuracy:lookup")
    raw = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    raw.setdefault("real", {})["judge_correction"] = True
    report = compute_embodiment(audited_window(), [], [], 10.0, protocol_from_mapping(raw),
                                resamples=300).to_json()  # fmt: skip
    text = html.unescape(judge_line(report["judge"]))
    assert "detector scene-detector 1.0.0 (80 episodes)" in text
    # The window's audit, exact: scipy.stats.beta.ppf(0.025, 33, 12) = 0.5966, ppf(0.975, 34,
    # 11) = 0.8681; beta.ppf(0.025, 13, 4) = 0.5435, ppf(0.975, 14, 3) = 0.9595.
    assert "Accuracy on this window's audit (60 labelled episodes" in text
    assert "sensitivity 0.750 [0.597, 0.868] (95 % Clopper-Pearson, n=44)" in text
    assert "specificity 0.812 [0.544, 0.960] (95 % Clopper-Pearson, n=16)" in text
    # The benchmark, labelled as such (Wilson values from notes/statistics.md).
    assert "benchmark (twin vs its oracle), not this window's audit" in text
    assert "sensitivity 0.750 [0.628, 0.842] (95 % Wilson, n=60)" in text
    assert "AR corrected for the judge (Rogan–Gladen): 0.733" in text
