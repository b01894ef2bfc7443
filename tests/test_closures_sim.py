"""In sim, end to end: the example protocol's drift calendar and expansion audit run on MuJoCo
through the runner, and both audits are computed from the stored episodes.

Small scale, sim side only: the maintenance audit on one family (pick-and-place) × 5 instances ×
the calendar's 3 days (0, 7, 14), with the sim success rate of the reference policy as the index
(`index = "AR_sim"`); the expansion audit on two families (push requires live tracking,
pick-and-place is the control) × 5 instances on day 0, under its three conditions. The expected values are recomputed here from the
stored episodes' outcomes with the textbook formulas (one-sided Clopper–Pearson lower bound =
the Beta(k, n − k + 1) quantile at 0.05), not with the harness's functions.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import beta

from embodied_eval.demo import demo_protocol_text
from embodied_eval.embodiment.expansion import expansion_audit
from embodied_eval.embodiment.maintenance import maintenance_audit
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import first_attempts
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.scoring.gate_checks import Verdict
from embodied_eval.store.core import Store

pytest.importorskip("sim_suites.episode")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def small_example(families: int) -> object:
    text = demo_protocol_text(families, 0.0)
    text = text.replace('index = "E"', 'index = "AR_sim"')
    text = text.replace('engines = ["mujoco", "pybullet"]', 'engines = ["mujoco"]')
    return protocol_from_mapping(tomllib.loads(text))


def run(protocol: object, policies: tuple[str | None, ...], tmp_path: Path) -> list:
    db = tmp_path / "store.db"
    for policy in policies:
        summary = run_trials(
            protocol,
            RunOptions(sides=("sim",), engines=("mujoco",), policy=policy, executor="sequential"),
            db_path=db,
            out_dir=tmp_path / f"run-{policy}",
            show_progress=False,
        )
        assert summary.complete
    with Store(db) as store:
        return store.episodes()


def test_example_calendar_maintenance_audit_from_sim_episodes(tmp_path: Path) -> None:
    protocol = small_example(1)
    assert [c.day for c in protocol.maintenance.calendar] == [0, 7, 14]
    episodes = run(protocol, (None,), tmp_path)
    assert len(episodes) == 15  # 5 instances × 3 days

    result = maintenance_audit(episodes, [], [], protocol, rng=np.random.default_rng(1))
    by_day: dict[int, list[bool]] = {0: [], 7: [], 14: []}
    names = {"nominal": 0, "day07": 7, "day14_worn": 14}
    for e in first_attempts(episodes):
        by_day[names[e.drift["name"]]].append(e.success)
    assert [d.day for d in result.days] == [0, 7, 14]

    def cp_low(k: int, n: int) -> float:
        return 0.0 if k == 0 else float(beta.ppf(0.05, k, n - k + 1))

    for d in result.days:
        k, n = sum(by_day[d.day]), len(by_day[d.day])
        assert n == 5 and d.episodes == 5
        assert d.estimate.value == pytest.approx(k / n)
        assert d.bound.low == pytest.approx(cp_low(k, n), abs=1e-9)
    base = sum(by_day[0]) / 5
    index = result.closure.checks[0]
    assert index.threshold == pytest.approx(0.8 * base)
    worst = min(cp_low(sum(by_day[d]), 5) for d in (7, 14))
    assert index.bound == pytest.approx(worst, abs=1e-9)
    # 5 episodes a day cannot show 0.8·C₀ even when every one succeeds: 0.05^(1/5) = 0.549.
    assert result.closure.verdict in (Verdict.INCONCLUSIVE, Verdict.FAIL)
    assert result.audit.drifts == ("firmware", "friction", "lighting", "payload")


def test_example_expansion_audit_from_sim_episodes(tmp_path: Path) -> None:
    text = demo_protocol_text(2, 0.0).replace(
        'engines = ["mujoco", "pybullet"]', 'engines = ["mujoco"]'
    )
    data = tomllib.loads(text)
    data["sampling"]["drifts"] = ["nominal"]
    data.pop("maintenance")
    protocol = protocol_from_mapping(data)
    plan = protocol.expansion
    episodes = run(protocol, (None, plan.pre, plan.ablated), tmp_path)
    assert len(episodes) == 30  # 10 rows × 3 conditions

    x = expansion_audit(episodes, protocol)
    rate = {
        (policy, family): np.mean(
            [e.success for e in episodes if e.policy == policy and e.family == family]
        )
        for policy in (plan.pre, plan.post, plan.ablated)
        for family in ("push", "pick_place")
    }
    did = (rate[plan.post, "push"] - rate[plan.pre, "push"]) - (
        rate[plan.post, "pick_place"] - rate[plan.pre, "pick_place"]
    )
    assert x.rows["treated_rows"] == 5 and x.rows["control_rows"] == 5
    assert x.audit.gain.value == pytest.approx(did)
    assert x.audit.ablated_difference.value == pytest.approx(
        rate[plan.ablated, "push"] - rate[plan.pre, "push"]
    )
    # Live tracking is what pushing needs: the gain is positive; on 5 + 5 rows it is decided on
    # its one-sided bound (significant when the bound is above 0).
    assert did > 0
    gain = next(c for c in x.closure.checks if c.name.startswith("gain"))
    assert gain.bound == pytest.approx(x.audit.gain.low)
    assert gain.verdict is (Verdict.PASS if gain.bound > 0 else Verdict.INCONCLUSIVE)
