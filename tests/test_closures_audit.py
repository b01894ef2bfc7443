"""Maintenance and expansion closures computed from episodes (seed §3.4, §7), on hand fixtures.

Every expected number is worked out by hand below from the seed's definitions and the project's
statistics notes:

* one-sided 95 % Clopper–Pearson lower bound of k = n successes: the Beta(n, 1) quantile
  0.05^(1/n) (its cdf is x^n): n = 20 → exp(ln 0.05 / 20) = exp(−2.995732 / 20)
  = exp(−0.149787) = 0.860892; n = 11 → exp(−0.272339) = 0.761596.
* further episodes per day for an inconclusive checkpoint (bound gap ∝ 1/√n):
  n·((value − bound)/(value − α·C₀))² − n, rounded up.
* Wilson bounds at 90 % (z = 1.644854, z² = 2.705543) for 10/10 and 0/10: lower
  10/(10 + z²) = 0.787058 and upper z²/(10 + z²) = 0.212942.
* Newcombe's paired interval (method 10) for a table with b = 10 (post only): D = 1,
  L = 1 − √((1 − 0.787058)² + 0.212942²) = 1 − √0.090688 = 0.698855, U = 1; for an all-
  concordant table: D = 0, [−0.212942, 0.212942].
* MOVER difference of two independent intervals: L = θ₁ − θ₂ − √((θ₁ − l₁)² + (u₂ − θ₂)²).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embodied_eval.embodiment.expansion import expansion_audit
from embodied_eval.embodiment.maintenance import maintenance_audit
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Episode
from embodied_eval.scoring.closures import MaintenanceAudit, maintenance_closure
from embodied_eval.scoring.gate_checks import Verdict
from embodied_eval.stats import Estimate
from embodied_eval.store.core import Store
from embodied_eval.store.patches import record_patch, window_patches

PUSH = [f"push/block_{i}" for i in range(5)]
PICK = [f"pick_place/cube_{i}" for i in range(5)]
DRIFTS = {
    "d0": {"day": 0},
    "d7": {"day": 7, "payload_kg": 0.05, "friction_scale": 0.95},
    "d10": {"day": 10, "payload_kg": 0.08},
    "d14": {"day": 14, "lighting_scale": 0.8, "firmware": "1.2"},
}


def protocol(**tables: Any) -> Any:
    base: dict[str, Any] = {
        "protocol": {"name": "closures", "version": "1", "base_seed": 5},
        "window": {"id": "w-closures", "start": "2026-11-01", "end": "2026-11-30"},
        "battery": {"push": {"instances": PUSH}, "pick_place": {"instances": PICK}},
        "drift": DRIFTS,
        "sampling": {"seeds_per_instance": 4, "drifts": list(DRIFTS)},
        "sim": {"engines": ["mujoco"]},
    }
    base.update(tables)
    return protocol_from_mapping(base)


def episode(
    task: str, drift: str, k: int, success: bool, *, side: str = "real", policy: str = "p:post"
) -> Episode:
    """One episode of manifest row (task, drift, seed k) under `policy` (its own run key)."""
    key = {"p:pre": "aaaa0001", "p:post": "aaaa0002", "p:abl": "aaaa0003"}.get(policy, "aaaa0009")
    pair = f"{key}:{task}:{drift}:s{k}"
    return Episode(
        episode_id=f"{pair}-{side}",
        pair_id=pair,
        side=side,
        family=task.split("/")[0],
        task_id=task,
        seed=k,
        policy=policy,
        engine="mujoco" if side == "sim" else "ros2",
        quality=1.0 if success else 0.0,
        target_quality=0.8,
        duration_s=10.0,
        window="w-closures",
    )


def day(drift: str, successes: int, n: int = 20) -> list[Episode]:
    """n real push episodes of one calendar day, the first `successes` of them successful."""
    rows = [(t, k) for k in range(4) for t in PUSH][:n]
    return [episode(t, drift, k, i < successes) for i, (t, k) in enumerate(rows)]


def maintenance(calendar: list[str], days: int = 14) -> Any:
    return protocol(maintenance={"days": days, "index": "AR", "calendar": calendar})


def audit(episodes: list[Episode], proto: Any, patches: Any = ()) -> Any:
    return maintenance_audit(
        episodes, [], list(patches), proto, rng=np.random.default_rng(0), policy="p:post"
    )


def checks(result: Any) -> dict[str, Any]:
    return {c.name.split(" ")[0]: c for c in result.closure.checks}


# --- maintenance: the closure on hand-given indices (the core function) -------------------------


def test_day14_at_085_of_baseline_with_a_clearing_bound_passes() -> None:
    # C₀ = 0.80, α·C₀ = 0.64. Day 14 holds 0.68 = 0.85 × 0.80 with one-sided bound 0.65 ≥ 0.64.
    base = Estimate(0.80, 0.74, 0.86, 0.95, "E")
    days = [7.0, 14.0]
    idx = [
        Estimate(0.76, 0.70, None, 0.95, "E", 60, "lower"),
        Estimate(0.68, 0.65, None, 0.95, "E", 60, "lower"),
    ]
    drifts = ("payload", "friction", "lighting", "firmware")
    result = maintenance_closure(MaintenanceAudit(base, days, idx, 0, drifts, 14.0), days=14)
    assert result.verdict is Verdict.PASS
    index = result.checks[0]
    assert index.threshold == pytest.approx(0.64)
    assert (index.value, index.bound) == (0.68, 0.65)


def test_point_clears_alpha_but_bound_does_not_gives_episodes_per_day() -> None:
    # Day 14: 0.68 ≥ 0.64 but the bound 0.60 < 0.64: inconclusive. With n = 60:
    # 60·((0.68 − 0.60)/(0.68 − 0.64))² = 60·4 = 240 episodes → 180 more per day.
    base = Estimate(0.80, 0.74, 0.86, 0.95, "E")
    idx = [
        Estimate(0.76, 0.70, None, 0.95, "E", 60, "lower"),
        Estimate(0.68, 0.60, None, 0.95, "E", 60, "lower"),
    ]
    audit_ = MaintenanceAudit(base, [7.0, 14.0], idx, 0, ("payload",), 14.0)
    result = maintenance_closure(audit_, days=14, required_drifts=("payload",))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.checks[0].remaining == {"episodes_per_day": 180.0}


# --- maintenance: computed from episodes -------------------------------------------------------


def test_maintenance_from_episodes_passes_over_the_full_calendar() -> None:
    proto = maintenance(["d0", "d7", "d14"])
    eps = day("d0", 20) + day("d7", 20) + day("d14", 20)
    result = audit(eps, proto)
    # C₀ = 20/20 = 1, α·C₀ = 0.8; days 7 and 14: 20/20 with bound 0.05^(1/20) = 0.860892.
    assert result.closure.verdict is Verdict.PASS
    assert [d.day for d in result.days] == [0, 7, 14]
    assert [d.episodes for d in result.days] == [20, 20, 20]
    index = checks(result)["index"]
    assert index.threshold == pytest.approx(0.8)
    assert index.bound == pytest.approx(0.860892, abs=1e-6)
    # d7 drifts payload and friction, d14 lighting and firmware: all four §7 kinds covered.
    assert result.audit.drifts == ("firmware", "friction", "lighting", "payload")
    assert result.audit.human_patches == 0


def test_maintenance_bound_short_of_alpha_is_inconclusive_with_a_count() -> None:
    proto = maintenance(["d0", "d7", "d14"])
    eps = day("d0", 20) + day("d7", 20) + day("d14", 11, n=11)
    result = audit(eps, proto)
    # Day 14: 11/11 = 1 ≥ 0.8 but bound 0.761596 < 0.8: inconclusive;
    # 11·((1 − 0.761596)/0.2)² − 11 = 11·1.420863 − 11 = 4.63 → 5 more episodes per day.
    assert result.closure.verdict is Verdict.INCONCLUSIVE
    index = checks(result)["index"]
    assert index.bound == pytest.approx(0.761596, abs=1e-6)
    assert index.remaining == {"episodes_per_day": 5.0}


def test_one_human_patch_fails_the_closure(tmp_path: Path) -> None:
    proto = maintenance(["d0", "d7", "d14"])
    eps = day("d0", 20) + day("d7", 20) + day("d14", 20)
    db = tmp_path / "store.db"
    with Store(db) as store:
        store.write_episodes(eps)
    record_patch(
        db,
        window="w-closures",
        kind="recalibration",
        technician="tech-a",
        text="re-zeroed the wrist force sensor",
        episode_id=eps[25].episode_id,  # a day-7 episode
    )
    patches = window_patches(db, "w-closures")
    result = audit(eps, proto, patches)
    assert result.closure.verdict is Verdict.FAIL
    check = checks(result)["zero"]
    assert check.verdict is Verdict.FAIL and check.detail == "1 human patch(es)"
    assert [d.patches for d in result.days] == [0, 1, 0]
    # A patch is a trial-ledger record: it cannot be deleted, and the store still verifies.
    import sqlite3

    from embodied_eval.store.verify_store import verify_store

    with sqlite3.connect(db) as conn, pytest.raises(sqlite3.DatabaseError):
        conn.execute("DELETE FROM episode_chain WHERE json_extract(body, '$.kind') = 'patch'")
    assert verify_store(db).ok


def test_a_ten_day_calendar_fails_y_14() -> None:
    proto = maintenance(["d0", "d7", "d10"])
    eps = day("d0", 20) + day("d7", 20) + day("d10", 20)
    result = audit(eps, proto)
    # The index holds (bound 0.860892 ≥ 0.8), but the calendar ends at day 10 < Y = 14.
    assert checks(result)["index"].verdict is Verdict.PASS
    span = checks(result)["observed"]
    assert span.verdict is Verdict.FAIL and span.value == 10.0
    assert "ends at day 10" in span.detail
    assert result.closure.verdict is Verdict.FAIL


def test_a_calendar_day_not_run_yet_is_inconclusive_with_days_remaining() -> None:
    proto = maintenance(["d0", "d7", "d14"])
    result = audit(day("d0", 20) + day("d7", 20), proto)
    span = checks(result)["observed"]
    assert span.verdict is Verdict.INCONCLUSIVE and span.remaining == {"days": 7.0}
    assert "no index yet for day(s) 14" in result.notes[0]


def test_patches_allowed_can_never_give_the_closure() -> None:
    proto = protocol(
        maintenance={"index": "AR", "calendar": ["d0", "d7", "d14"], "patches_allowed": True}
    )
    result = audit(day("d0", 20) + day("d7", 20) + day("d14", 20), proto)
    assert result.closure.verdict is Verdict.FAIL
    assert result.closure.checks[-1].name == "protocol forbids human patches"


# --- expansion ----------------------------------------------------------------------------------


def expansion_episodes(ablated_push: bool) -> list[Episode]:
    """Sim episodes of 10 push rows (treated) and 10 pick rows (control) under each condition:
    pre fails every push row and succeeds every pick row; post succeeds everywhere; the ablated
    policy fails every push row (or keeps the gain: `ablated_push`)."""
    eps = []
    for k in range(2):
        for task in PUSH:
            eps.append(episode(task, "d0", k, False, side="sim", policy="p:pre"))
            eps.append(episode(task, "d0", k, True, side="sim", policy="p:post"))
            eps.append(episode(task, "d0", k, ablated_push, side="sim", policy="p:abl"))
        for task in PICK:
            eps.append(episode(task, "d0", k, True, side="sim", policy="p:pre"))
            eps.append(episode(task, "d0", k, True, side="sim", policy="p:post"))
    return eps


def expansion_protocol(epsilon: float) -> Any:
    return protocol(
        drift={"d0": {"day": 0}},
        sampling={"seeds_per_instance": 2},
        expansion={
            "name": "live tracking",
            "kind": "perception",
            "families": ["push"],
            "pre": "p:pre",
            "post": "p:post",
            "ablated": "p:abl",
            "epsilon": epsilon,
            "side": "sim",
        },
    )


def test_significant_did_removed_by_ablation_passes() -> None:
    result = expansion_audit(expansion_episodes(False), expansion_protocol(0.35))
    a = result.audit
    # Treated post vs pre: b = 10 → D = 1, 90 % Newcombe [0.698855, 1]; control: a = 10 →
    # D = 0, [−0.212942, 0.212942]. Gain (MOVER): 1 − √(0.301145² + 0.212942²) = 0.631174.
    assert a.gain.value == 1.0 and a.gain.low == pytest.approx(0.631174, abs=1e-6)
    assert a.gain.sided == "lower" and a.gain.level == 0.95
    # Ablated vs pre on push: all fail both → D = 0, [−0.212942, 0.212942] ≤ ε = 0.35.
    assert a.ablated_difference.value == 0.0
    assert a.ablated_difference.high == pytest.approx(0.212942, abs=1e-6)
    # Ablated DiD: 0 − 0 with half-width √2 · 0.212942 = 0.301145 ≤ 0.35.
    assert a.ablated_gain.high == pytest.approx(0.301145, abs=1e-6)
    assert result.rows == {
        "treated_rows": 10,
        "control_rows": 10,
        "pre_rows": 10,
        "post_rows": 10,
        "ablated_rows": 10,
    }
    assert result.closure.verdict is Verdict.PASS


def test_ablation_that_keeps_the_gain_fails() -> None:
    result = expansion_audit(expansion_episodes(True), expansion_protocol(0.35))
    by_name = {c.name.split(" ")[0]: c for c in result.closure.checks}
    # Ablated = post on push: |C(S_abl) − C(S_pre)| = 1 > ε, the bound 1 too.
    removed = by_name["|C(S_abl)"]
    assert removed.verdict is Verdict.FAIL and removed.value == 1.0
    assert result.closure.verdict is Verdict.FAIL


def test_a_tight_epsilon_is_inconclusive_with_samples_needed() -> None:
    result = expansion_audit(expansion_episodes(False), expansion_protocol(0.1))
    removed = next(c for c in result.closure.checks if c.name.startswith("|C(S_abl)"))
    # Upper bound 0.212942 > 0.1 with |D| = 0 on 10 rows: 10·(0.212942/0.1)² − 10 = 35.3 → 36.
    assert removed.verdict is Verdict.INCONCLUSIVE
    assert removed.remaining == {"samples": 36.0}


def test_expansion_without_conditions_is_evidence_missing() -> None:
    only_post = [e for e in expansion_episodes(False) if e.policy == "p:post"]
    result = expansion_audit(only_post, expansion_protocol(0.35))
    assert result.audit is None
    assert result.closure.verdict is Verdict.EVIDENCE_MISSING
    assert "--condition" in result.notes[-1]


# --- protocol tables ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tables", "key"),
    [
        ({"maintenance": {"calendar": ["d7", "d14"]}}, "maintenance.calendar"),
        ({"maintenance": {"calendar": ["d0", "nope"]}}, "maintenance.calendar"),
        ({"maintenance": {"index": "Q"}}, "maintenance.index"),
        ({"maintenance": {"alpha": 1.5}}, "maintenance.alpha"),
        ({"maintenance": {"days": "14"}}, "maintenance.days"),
        ({"maintenance": {"spam": 1}}, "maintenance.spam"),
        (
            {
                "expansion": {
                    "name": "x",
                    "kind": "gripper",
                    "families": ["push"],
                    "pre": "a",
                    "post": "b",
                    "ablated": "c",
                }
            },
            "expansion.kind",
        ),
        (
            {
                "expansion": {
                    "name": "x",
                    "kind": "tool",
                    "families": ["drawer"],
                    "pre": "a",
                    "post": "b",
                    "ablated": "c",
                }
            },
            "expansion.families",
        ),
        (
            {
                "expansion": {
                    "name": "x",
                    "kind": "tool",
                    "families": ["push"],
                    "pre": "a",
                    "post": "b",
                    "ablated": "a",
                }
            },
            "expansion.ablated",
        ),
        (
            {
                "expansion": {
                    "name": "x",
                    "kind": "tool",
                    "families": ["push"],
                    "pre": "a",
                    "post": "b",
                    "ablated": "c",
                    "control_families": ["push"],
                }
            },
            "expansion.control_families",
        ),
    ],
)
def test_bad_closure_tables_name_the_key(tables: dict[str, Any], key: str) -> None:
    with pytest.raises(EvalError) as err:
        protocol(**tables)
    assert err.value.key == key


def test_closure_tables_enter_the_protocol_hash_only_when_declared() -> None:
    plain = protocol()
    declared = maintenance(["d0", "d7", "d14"])
    assert "maintenance" not in plain.canonical()
    assert declared.canonical()["maintenance"]["calendar"] == ["d0", "d7", "d14"]
    assert plain.protocol_hash != declared.protocol_hash


# --- technician command -----------------------------------------------------------------------


def test_trial_patch_command_records_a_patch(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("real_bridge.cli")
    from embodied_eval.cli.main import main

    db = tmp_path / "store.db"
    eps = day("d7", 1, n=1)
    with Store(db) as store:
        store.write_episodes(eps)
    args = ["trial", "patch", "--db", str(db), "--kind", "parameter_change"]
    args += ["--technician", "tech-c", "--text", "raised the grip force", "--json"]
    assert main([*args, "--episode-id", eps[0].episode_id]) == 0
    patch = json.loads(capsys.readouterr().out)
    assert patch["kind"] == "parameter_change" and patch["window"] == "w-closures"
    assert [p.episode_id for p in window_patches(db, "w-closures")] == [eps[0].episode_id]
    # Bad input: one line naming what to fix, exit 2.
    assert main([*args[:4], "--kind", "nap", *args[6:], "--episode-id", eps[0].episode_id]) == 2
    assert "kind: 'nap' is not one of" in capsys.readouterr().err
    assert main([*args, "--episode-id", "nope"]) == 2
    assert "not in the store" in capsys.readouterr().err


def test_run_condition_needs_an_expansion_table(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from embodied_eval.cli.main import main

    path = tmp_path / "p.toml"
    path.write_text(
        '[protocol]\nname = "x"\nversion = "1"\nbase_seed = 1\n'
        "[window]\nstart = 2026-11-01\nend = 2026-11-30\n"
        "[battery.push]\ninstances = " + json.dumps(PUSH) + "\n",
        encoding="utf-8",
    )
    assert (
        main(["run", str(path), "--condition", "pre", "--dry-run", "--db", str(tmp_path / "s.db")])
        == 2
    )
    assert "declares no [expansion] audit" in capsys.readouterr().err


def test_a_control_that_never_ran_keeps_the_expansion_closure_inconclusive() -> None:
    # Only the treated push rows ran: the pick-and-place control (the families the capability
    # is not needed by) has no row, so the gain would be the treated difference alone
    # (b = 10 → lower 0.698855 > 0) and pass against a control never measured.
    treated_only = [e for e in expansion_episodes(False) if e.family == "push"]
    result = expansion_audit(treated_only, expansion_protocol(0.35))
    assert result.rows["control_rows"] == 0
    check = next(c for c in result.closure.checks if c.name == "frozen control measured")
    assert check.verdict is Verdict.INCONCLUSIVE and "0 matched control row(s)" in check.detail
    assert result.closure.verdict is Verdict.INCONCLUSIVE
