"""`plan success --with-sim`: real trials a success gate needs with and without the sim's help."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.stats.ppi import plan_success_with_sim
from embodied_eval.store.core import Store
from tests.conftest import make_episode
from tests.test_embodiment_data import DATA

Y = [1, 1, 1, 1, 0] * 2  # 10 pairs, 8 real successes; the sim predicts each pair exactly
G = [1] * 24 + [0] * 6  # 30 sim episodes without a real episode (0.8)


def test_plan_with_sim_by_hand():
    # Gate AR >= 0.7 at 95 % one-sided: z = 1.644854 (z² = 2.705543).
    # Rate: PPI++ with N = 30: λ = 1/(1 + 10/30) = 0.75; 0.75·0.8 + mean(Y − 0.75Y) = 0.8.
    # Without sim: Var(Y) = (8·0.04 + 2·0.64)/9 = 0.177778; n = 2.705543·0.177778/0.1² = 48.1 → 49.
    # With sim, planning with N = 40 sim episodes (every row, pairs included): λ = 1/(1 + 10/40)
    # = 0.8; Var(Y − 0.8Y) = 0.04·0.177778 = 0.007111; λ²·Var(f, 40 values, 32 ones) =
    # 0.64·(32·0.04 + 8·0.64)/39 = 0.64·0.164103 = 0.105026, /40 = 0.002626;
    # budget (0.1/1.644854)² − 0.002626 = 0.003696 − 0.002626 = 0.001070; n = 0.007111/0.001070
    # = 6.64 → 7.
    plan = plan_success_with_sim(0.7, Y, Y, G, 0.95)
    assert plan.rate == pytest.approx(0.8)
    assert plan.lam == pytest.approx(0.8)
    assert plan.trials_without_sim == 49
    assert plan.trials_with_sim == 7
    assert plan.agreement == 1.0 and plan.correlation == pytest.approx(1.0)


def test_useless_sim_gives_no_saving():
    # Sim predictions constant: λ = 0, both answers are the same.
    plan = plan_success_with_sim(0.7, Y, [1] * 10, [1] * 30, 0.95)
    assert plan.lam == 0.0
    assert plan.trials_with_sim == plan.trials_without_sim == 49


def test_rate_below_threshold_is_unreachable():
    plan = plan_success_with_sim(0.9, Y, Y, G, 0.95)
    assert plan.trials_without_sim is None and plan.trials_with_sim is None


def test_cli_reads_the_window(tmp_path: Path, capsys):
    eps = []
    for k, z in enumerate(Y):
        common = dict(pair_id=f"p{k}", task_id=f"push/block_{k % 5}", family="push", seed=k,
                      window="fixture-2026-11", quality=0.9 if z else 0.1)  # fmt: skip
        eps.append(make_episode(episode_id=f"p{k}-real", side="real", engine="ros2", **common))
        eps.append(make_episode(episode_id=f"p{k}-sim", side="sim", engine="mujoco", **common))
    for k, z in enumerate(G):
        eps.append(
            make_episode(
                episode_id=f"u{k}-sim", pair_id=f"u{k}", side="sim", engine="mujoco",
                task_id=f"push/block_{k % 5}", family="push", seed=100 + k,
                window="fixture-2026-11", quality=0.9 if z else 0.1,
            )
        )  # fmt: skip
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episodes(eps)
    argv = ["plan", "success", "--threshold", "0.7", "--with-sim", "--db", str(db),
            "--protocol", str(DATA / "embodiment_protocol.toml")]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["trials_without_sim"], out["trials_with_sim"]) == (49, 7)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "without sim: 49 real trial(s)" in text and "7 real trial(s)" in text
