"""`embodied-eval compare`: interleaved A/B in real sim physics, replay from the store, errors;
and the degraded reference policy it is demonstrated with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embodied_eval.cli.main import main
from embodied_eval.store.core import Store
from sim_suites.policies import DegradedPolicy, load_policy, scripted
from tests.conftest import make_episode

pytestmark = pytest.mark.timeout(180)

PROTOCOL = str(Path(__file__).parent / "data" / "compare_tiny.toml")
A = "sim_suites.policies:scripted"
B = "sim_suites.policies:degraded?action_noise=0.8"


def test_compare_in_sim_interleaves_and_stops_at_the_cap(tmp_path: Path, capsys):
    db = str(tmp_path / "s.db")
    argv = ["compare", PROTOCOL, "--policy-a", A, "--policy-b", B, "--engine", "mujoco",
            "--max-trials", "3", "--db", db, "--out", str(tmp_path / "out"), "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decision"] in ("A better", "B better", "no difference", "undecided")
    assert 1 <= out["trials"] <= 3 and out["max_trials"] == 3
    assert out["first_in_pair"] == ["A", "B", "A"][: out["trials"]]
    with Store(db) as store:
        eps = {e.episode_id: e for e in store.episodes()}
    assert len(eps) == 2 * out["trials"]
    for pair in out["episodes"]:
        ea, eb = eps[pair["a"]], eps[pair["b"]]
        assert (ea.policy, eb.policy) == (A, B)
        # Same manifest row for both policies: instance, seed and drift.
        assert (ea.task_id, ea.seed, dict(ea.drift)) == (eb.task_id, eb.seed, dict(eb.drift))
        assert ea.engine == eb.engine == "mujoco"
    # Running the same command again reads the stored episodes back instead of re-running.
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["episodes_reused"] == 2 * again["trials"]
    assert again["decision"] == out["decision"]


def test_compare_from_the_store_hand_checked(tmp_path: Path, capsys):
    # 10 paired trials in which A succeeds and B fails: "A better" at trial 8 (worked by hand in
    # tests/test_stats_comparison.py::test_straight_wins_decide_at_the_hand_computed_trial).
    eps = []
    for k in range(10):
        for pol, q in (("pa", 0.9), ("pb", 0.1)):
            eps.append(
                make_episode(
                    episode_id=f"{pol}-{k}", pair_id=f"{pol}-p{k}", policy=pol, quality=q,
                    task_id=f"push/block_{k % 5}", family="push", seed=k, side="sim",
                    engine="mujoco", started_at=f"2026-11-02T10:{k:02d}:00Z",
                )
            )  # fmt: skip
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episodes(eps)
    assert main(["compare", "--db", str(db), "--a", "pa", "--b", "pb", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decision"] == "A better" and out["trials"] == 8
    # Pairs are matched on instance, seed and drift, read in a family-stratified random order
    # (every D = 1 here, so the order does not change the trial of the decision).
    assert all(p["b"] == p["a"].replace("pa-", "pb-") for p in out["episodes"])
    assert len({p["a"] for p in out["episodes"]}) == 8 and isinstance(out["order_seed"], int)
    assert out["effect"]["low"] > 0.0 and out["pairs_available"] == 10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare"], "needs a PROTOCOL"),
        (["compare", PROTOCOL, "--policy-a", A], "--policy-b"),
        (["compare", PROTOCOL, "--policy-a", A, "--policy-b", A], "same policy"),
        (["compare", PROTOCOL, "--policy-a", A, "--policy-b", "nope.mod:x"], "policy_b"),
        (["compare", PROTOCOL, "--policy-a", A, "--policy-b", B, "--delta", "0"], "delta"),
    ],
)
def test_compare_errors_are_one_line(tmp_path: Path, capsys, argv, message):
    assert main([*argv, "--db", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_degraded_policy_knobs():
    obs = {
        "tcp_pos": np.array([0.4, 0.0, 0.3]),
        "tcp_target": np.array([0.4, 0.0, 0.3]),
        "object_visible": np.array([1.0]),
        "object_pos": np.array([0.5, 0.1, 0.02]),
        "gripper_width": np.array([0.08]),
        "grasped": np.array([0.0]),
        "goal_pos": np.array([0.5, -0.1, 0.02]),
        "obstacle": np.array([0.0]),
    }
    task = "push/block_forward"
    ref = scripted(task)
    neutral = DegradedPolicy(scripted(task), 0.0, 0.0, 1.0)
    noisy = load_policy("sim_suites.policies:degraded?action_noise=0.5", task)
    slow = load_policy("sim_suites.policies:degraded?action_noise=0&slowdown=0.5", task)
    for p in (ref, neutral, noisy, slow):
        p.reset(3)
    a_ref, a_neutral = ref.act(obs), neutral.act(obs)
    assert np.array_equal(a_ref, a_neutral)
    assert not np.allclose(noisy.act(obs)[:3], a_ref[:3])
    assert np.allclose(slow.act(obs)[:3], np.clip(a_ref[:3] * 0.5, -1, 1), atol=1e-6)
    # Same seed, same noise.
    n2 = load_policy("sim_suites.policies:degraded?action_noise=0.5", task)
    noisy.reset(11)
    n2.reset(11)
    assert np.array_equal(noisy.act(obs), n2.act(obs))
