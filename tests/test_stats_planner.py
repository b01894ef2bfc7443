"""Demonstration-test planner and the `embodied-eval plan` commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    fixed_duration_plan,
    fixed_plan_risks,
    plan_mtbf_gate,
    plan_rate_gate,
    plan_success_gate,
    remaining_hours_for_mtbf,
    remaining_hours_for_rate,
    remaining_trials,
)


@pytest.mark.parametrize(
    ("alpha", "beta", "ratio", "c", "duration"),
    # MIL-HDBK-781A XI-D, XV-D, XVII-D (quoted 21.5, 9.3, 4.3 in units of θ1).
    [(0.2, 0.2, 1.5, 17, 21.44), (0.1, 0.1, 3.0, 5, 9.27), (0.2, 0.2, 3.0, 2, 4.28)],
)
def test_fixed_duration_plans(alpha, beta, ratio, c, duration):
    plan = fixed_duration_plan(alpha, beta, ratio)
    got_c, got_t = plan  # unpacks as (c, T)
    assert got_c == c
    assert got_t == pytest.approx(duration, abs=5e-3)
    producer, consumer = fixed_plan_risks(got_c, got_t, ratio)
    assert consumer == pytest.approx(beta)
    assert producer <= alpha
    # One fewer allowed failure would break the producer's risk (c is the smallest).
    t_prev = stats.chi2.ppf(1 - beta, 2 * c) / 2
    assert stats.poisson.sf(c - 1, t_prev / ratio) > alpha


def test_fixed_plan_bad_ratio():
    with pytest.raises(EvalError):
        fixed_duration_plan(0.1, 0.1, 1.0)
    with pytest.raises(EvalError):
        fixed_duration_plan(0.0, 0.1, 2.0)


def test_rate_plan_remaining_hours():
    # ≤ 1 per 100 h with 0 events in 120 h: 299.57 − 120 = 179.57 h.
    plan = plan_rate_gate(1.0, 0, 120.0)
    assert plan.total_hours == pytest.approx(299.573, abs=1e-3)
    assert plan.remaining_hours == pytest.approx(179.573, abs=1e-3)
    assert not plan.demonstrated
    # Upper bound so far: 2.9957/120·100 = 2.4964 per 100 h.
    assert plan.bound.high == pytest.approx(2.4964, abs=5e-5)
    done = plan_rate_gate(1.0, 1, 500.0)  # 474.4 h needed
    assert done.demonstrated and done.remaining_hours == 0.0


def test_mtbsi_and_success_plans():
    plan = plan_mtbf_gate(50.0, 1, 100.0)
    assert plan.remaining_hours == pytest.approx(237.193 - 100.0, abs=1e-3)
    assert plan.gate == "MTBSI >= 50 h"
    plan = plan_success_gate(0.75, 0, 0)
    assert plan.remaining_trials == 11 and not plan.demonstrated
    assert plan_success_gate(0.75, 52, 60).demonstrated


def test_remaining_shortcuts():
    assert remaining_trials(0.75, 0, 0) == 11
    assert remaining_hours_for_rate(1.0, 0, 120.0) == pytest.approx(179.573, abs=1e-3)
    # MTBSI ≥ 50 h, 3 incidents: 387.7 h in all; after 400 h nothing remains.
    assert remaining_hours_for_mtbf(50.0, 3, 400.0) == 0.0


def test_cli_plan_rate_prints_remaining(capsys):
    assert main(["plan", "rate", "--max-per-100h", "1", "--observed", "0", "--hours", "120"]) == 0
    out = capsys.readouterr().out
    assert "299.6" in out and "remaining: 179.6 h" in out


def test_cli_plan_json(capsys):
    assert (
        main(["plan", "mtbsi", "--min-hours", "50", "--observed", "2", "--hours", "100", "--json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["total_hours"] == pytest.approx(314.8, abs=0.05)
    assert data["remaining_hours"] == pytest.approx(214.8, abs=0.05)
    assert main(["plan", "mtbsi", "--min-hours", "50", "--observed", "2"]) == 2  # events, 0 h
    assert main(["plan", "success", "--threshold", "0.75", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["remaining_trials"] == 11
    assert main(["plan", "fixed", "--alpha", "0.1", "--beta", "0.1", "--ratio", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_failures"] == 5
    assert data["duration_theta1"] == pytest.approx(9.27, abs=5e-3)
    # 90 %: χ²(0.90; 8)/2 · 100 = 13.3616/2 · 100 = 668.08 h in all, 568.08 h after 100 h.
    args = ["plan", "rate", "--max-per-100h", "1", "--observed", "3", "--hours", "100"]
    assert main([*args, "--level", "0.9"]) == 0
    assert "668.1 h" in capsys.readouterr().out


def test_cli_plan_success_text(capsys):
    assert (
        main(["plan", "success", "--threshold", "0.75", "--successes", "45", "--trials", "60"]) == 0
    )
    out = capsys.readouterr().out
    assert "0.6415" in out and "remaining" in out


def test_cli_user_error_exits_2():
    exe = Path(sys.executable).with_name("embodied-eval")
    res = subprocess.run(
        [str(exe), "plan", "success", "--threshold", "0.75", "--successes", "70", "--trials", "60"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: successes")
    assert len(res.stderr.strip().splitlines()) == 1
