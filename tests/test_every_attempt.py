"""Every attempt counts: AR over each real pair's first attempt, with worst/best-case bounds for
cannot-judge attempts and policy errors as failures.

Hand values (exact Clopper–Pearson, scipy.stats.beta.ppf; 20 pairs):
    first attempts: 16 successes, 2 scored failures, 2 cannot judge (retried: both then succeed)
    AR as judged (first scored attempt per pair): 18/20 = 0.9
    worst case 16/20 = 0.8, 95 % [beta.ppf(0.025, 16, 5), beta.ppf(0.975, 17, 4)]
                                = [0.5634, 0.9427]; one-sided bound beta.ppf(0.05, 16, 5) = 0.5990
    best case 18/20 = 0.9, 95 % [0.6830, 0.9877]
    uncorrected exact gate bound of 18/20: beta.ppf(0.05, 18, 3) = 0.7174
"""

from __future__ import annotations

import tomllib

import pytest

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.embodiment.every_attempt import every_attempt
from embodied_eval.protocol.reader import protocol_from_mapping
from tests.conftest import make_episode
from tests.test_embodiment_data import DATA

pytestmark = pytest.mark.timeout(60)


def episodes(second_kind: str = "cannot_judge"):
    """20 pairs (see the module docstring); with "policy_error" the two unscored first attempts
    are policy errors instead."""
    out = []
    for i in range(20):
        pid = f"p{i:02d}"
        common = {"pair_id": pid, "seed": i, "started_at": f"2026-11-02T10:{i:02d}:00Z"}
        if i in (18, 19):
            if second_kind == "cannot_judge":
                first = {
                    "status": "aborted",
                    "status_reason": "cannot judge: no tracker pose in the last 2 s",
                }
            else:
                first = {"status": "error", "status_reason": "policy returned NaN"}
            out.append(make_episode(episode_id=f"{pid}-real-a1", quality=0.0, **first,
                                    **common))  # fmt: skip
            out.append(make_episode(episode_id=f"{pid}-real-a2", attempt=2, quality=0.9,
                                    **{**common, "started_at": f"2026-11-02T11:{i:02d}:00Z"}))  # fmt: skip
        else:
            out.append(make_episode(episode_id=f"{pid}-real-a1", quality=0.9 if i < 16 else 0.1,
                                    **common))  # fmt: skip
    return out


def test_worst_and_best_case_by_hand() -> None:
    out = every_attempt(episodes(), 0.95).to_json()
    assert out["pairs"] == 20 and out["successes"] == 16
    assert out["first_attempts"] == {"scored": 18, "policy_error": 0, "cannot_judge": 2,
                                     "aborted": 0}  # fmt: skip
    worst, best = out["worst_case"], out["best_case"]
    assert worst["value"] == pytest.approx(0.8) and best["value"] == pytest.approx(0.9)
    assert (worst["low"], worst["high"]) == (pytest.approx(0.5634, abs=5e-5),
                                             pytest.approx(0.9427, abs=5e-5))  # fmt: skip
    assert (best["low"], best["high"]) == (pytest.approx(0.6830, abs=5e-5),
                                           pytest.approx(0.9877, abs=5e-5))  # fmt: skip
    assert out["worst_case_bound"]["low"] == pytest.approx(0.5990, abs=5e-5)
    assert out["gate_uses_worst_case"] is True


def _protocol(rule: str | None):
    raw = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    if rule is not None:
        raw.setdefault("real", {})["missing_outcomes"] = rule
    return protocol_from_mapping(raw)


def test_the_gate_uses_the_worst_case_unless_the_protocol_declares_otherwise() -> None:
    worst = compute_embodiment(episodes(), [], [], 100.0, _protocol(None), resamples=200)
    out = worst.to_json()
    assert out["AR"]["value"] == pytest.approx(0.9)  # AR as judged is still reported
    assert out["gate_bounds"]["AR"]["low"] == pytest.approx(0.5990, abs=5e-5)
    assert any("every pair's first attempt counts" in n for n in out["notes"])
    judged = compute_embodiment(episodes(), [], [], 100.0, _protocol("judged"), resamples=200)
    jout = judged.to_json()
    assert jout["gate_bounds"]["AR"]["low"] == pytest.approx(0.7174, abs=5e-5)
    assert jout["AR_every_attempt"]["worst_case"]["value"] == pytest.approx(0.8)
    assert jout["AR_every_attempt"]["gate_uses_worst_case"] is False
    assert _protocol("worst").protocol_hash == _protocol(None).protocol_hash
    assert _protocol("judged").protocol_hash != _protocol(None).protocol_hash


def test_a_policy_error_is_a_failure_in_both_cases() -> None:
    out = every_attempt(episodes("policy_error"), 0.95).to_json()
    assert out["first_attempts"]["policy_error"] == 2
    # Policy errors fail in the best case too: 16/20 both ways.
    assert out["worst_case"]["value"] == pytest.approx(0.8)
    assert out["best_case"]["value"] == pytest.approx(0.8)


def test_every_first_attempt_scored_changes_nothing() -> None:
    clean = [e for e in episodes() if e.pair_id not in ("p18", "p19")]
    out = compute_embodiment(clean, [], [], 100.0, _protocol(None), resamples=200).to_json()
    # 16/18 judged = every attempt; the gate keeps the exact bound beta.ppf(0.05, 16, 3) = 0.6897.
    assert out["AR_every_attempt"]["gate_uses_worst_case"] is False
    assert out["AR_every_attempt"]["worst_case"]["value"] == pytest.approx(16 / 18)
    assert out["gate_bounds"]["AR"]["low"] == pytest.approx(0.6897, abs=5e-5)
    assert "every pair" not in out["gate_bounds"]["AR"]["method"]
