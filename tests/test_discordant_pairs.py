"""A pair whose halves disagree is listed with both halves' causes (S2R's discordant pairs)."""

from __future__ import annotations

from embodied_eval.embodiment.transfer import discordant_pairs, episode_cause
from embodied_eval.records import Episode


def episode(pair: str, side: str, quality: float, status: str = "ok", reason: str = "") -> Episode:
    return Episode(
        episode_id=f"{pair}-{side}",
        pair_id=pair,
        side=side,
        family="push",
        task_id="push/block_forward",
        seed=1,
        policy="sim_suites.policies:scripted",
        engine="mujoco" if side == "sim" else "ros2",
        quality=quality,
        target_quality=0.8,
        status=status,
        status_reason=reason,
    )


def test_discordant_pairs_name_both_causes_and_concordant_pairs_are_not_listed():
    stop = "contact with table at 171 N (net external force)"
    pairs = [
        (episode("p2", "sim", 0.95), episode("p2", "real", 0.1, "safety_stop", stop)),
        (episode("p1", "sim", 0.95), episode("p1", "real", 0.92)),  # both succeed
        (episode("p3", "sim", 0.5), episode("p3", "real", 0.85)),  # real only
        (episode("p4", "sim", 0.2), episode("p4", "real", 0.3)),  # both fail
    ]
    listed = discordant_pairs(pairs)
    assert [d["pair_id"] for d in listed] == ["p2", "p3"]
    assert listed[0] == {
        "pair_id": "p2",
        "family": "push",
        "sim": "success",
        "real": "failure",
        "sim_cause": "quality 0.95 ≥ target 0.80",
        "real_cause": f"safety_stop: {stop}",
    }
    assert listed[1]["sim_cause"] == "quality 0.50 < target 0.80"
    assert episode_cause(episode("p5", "real", 0.0, "aborted")) == "aborted"
