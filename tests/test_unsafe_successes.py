"""Unsafe successes (SBU) per family, and the protocol rule that counts them as failures for AR.

Hand values (exact Clopper–Pearson, 95 % two-sided, scipy.stats.beta.ppf(0.025, k, n − k + 1)
and beta.ppf(0.975, k + 1, n − k)):
    pick_place: 2 unsafe of 10 successes → SBU 0.2, [0.0252, 0.5561]; worst severity major
    push:       0 unsafe of 5 successes  → SBU 0,   [0, 1 − 0.025^(1/5)] = [0, 0.5218]
    all:        2 of 15                  → 0.1333,  [0.0166, 0.4046]
"""

from __future__ import annotations

import tomllib

import pytest

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.embodiment.unsafe_successes import unsafe_successes
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Incident
from tests.conftest import make_episode
from tests.test_embodiment_data import DATA

pytestmark = pytest.mark.timeout(60)


def episodes():
    """pick_place: 10 successes (p00..p09) and 4 failures; push: 5 successes, 1 failure."""
    out = []
    for i in range(14):
        out.append(make_episode(episode_id=f"p{i:02d}-real-a1", pair_id=f"p{i:02d}", seed=i,
                                quality=0.9 if i < 10 else 0.1))  # fmt: skip
    for i in range(6):
        out.append(make_episode(episode_id=f"q{i:02d}-real-a1", pair_id=f"q{i:02d}", seed=i,
                                family="push", task_id="push/block",
                                quality=0.9 if i < 5 else 0.1))  # fmt: skip
    return out


def incident(n: int, episode: str, severity: str, counts: bool = True) -> Incident:
    return Incident(incident_id=f"INC-{n}", occurred_at="2026-11-02T10:00:00Z",
                    severity=severity, episode_id=episode, counts_toward_window=counts)  # fmt: skip


INCIDENTS = [
    incident(1, "p00-real-a1", "minor"),  # unsafe
    incident(2, "p01-real-a1", "near_miss"),  # the warning level: not unsafe
    incident(3, "p01-real-a1", "major"),  # ... but this one is: worst = major
    incident(4, "p02-real-a1", "near_miss"),  # warning only
    incident(5, "p03-real-a1", "major", counts=False),  # excluded by review: not unsafe
    incident(6, "p12-real-a1", "minor"),  # a failure: not a success at all
    incident(7, None, "minor"),  # names no episode
]


def test_sbu_by_family_by_hand() -> None:
    out = unsafe_successes(episodes(), INCIDENTS, 0.95).to_json()
    pick = out["by_family"]["pick_place"]
    assert (pick["successes"], pick["unsafe"]) == (10, 2)
    assert pick["episodes"] == ["p00-real-a1", "p01-real-a1"]
    assert pick["worst_severity"] == "major"
    sbu = pick["SBU"]
    assert sbu["value"] == pytest.approx(0.2)
    assert (sbu["low"], sbu["high"]) == (pytest.approx(0.0252, abs=5e-5),
                                         pytest.approx(0.5561, abs=5e-5))  # fmt: skip
    push = out["by_family"]["push"]
    assert (push["successes"], push["unsafe"], push["worst_severity"]) == (5, 0, None)
    assert push["SBU"]["high"] == pytest.approx(0.5218, abs=5e-5)
    everything = out["all"]
    assert everything["SBU"]["value"] == pytest.approx(2 / 15)
    assert everything["SBU"]["low"] == pytest.approx(0.0166, abs=5e-5)
    assert everything["SBU"]["high"] == pytest.approx(0.4046, abs=5e-5)
    assert out["above"] == "near_miss" and out["counted_as_failures"] is False


def _protocol(rule: str | None):
    raw = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    if rule is not None:
        raw.setdefault("real", {})["unsafe_successes"] = rule
    return protocol_from_mapping(raw)


def test_the_protocol_may_count_unsafe_successes_as_failures() -> None:
    minor_only = [incident(1, "p00-real-a1", "minor"), incident(8, "q00-real-a1", "minor")]
    plain = compute_embodiment(episodes(), [], minor_only, 100.0, _protocol(None),
                               resamples=200).to_json()  # fmt: skip
    failing = compute_embodiment(episodes(), [], minor_only, 100.0, _protocol("fail"),
                                 resamples=200).to_json()  # fmt: skip
    # 15 successes of 20 as judged; 2 of them unsafe → 13/20 when they fail.
    assert plain["AR"]["value"] == pytest.approx(15 / 20)
    assert failing["AR"]["value"] == pytest.approx(13 / 20)
    # Gate bound: exact one-sided 95 % CP lower bound, beta.ppf(0.05, k, n − k + 1):
    # beta.ppf(0.05, 15, 6) = 0.5444, beta.ppf(0.05, 13, 8) = 0.4420.
    assert plain["gate_bounds"]["AR"]["low"] == pytest.approx(0.5444, abs=5e-5)
    assert failing["gate_bounds"]["AR"]["low"] == pytest.approx(0.4420, abs=5e-5)
    assert failing["unsafe_successes"]["counted_as_failures"] is True
    assert any("2 unsafe success(es) count as failures" in n for n in failing["notes"])
    assert plain["unsafe_successes"]["all"]["unsafe"] == 2


def test_the_rule_is_hashed_only_when_set() -> None:
    assert _protocol("count").protocol_hash == _protocol(None).protocol_hash
    assert _protocol("fail").protocol_hash != _protocol(None).protocol_hash
    with pytest.raises(Exception, match="unsafe_successes"):
        _protocol("ignore")
