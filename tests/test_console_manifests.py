"""A stored window with several manifests: the console shows every one of them, each named, and
its per-family counts are the certificate's (`metrics --json` "trials").

The window of tests/console_support.py (the run: 36 real rows planned, 31 run, 30 scored with 27
successes; sim 4 scored with 3 successes) plus two more manifests planned for other policies, as
an expansion audit's arms are, with sim episodes only: 6 (2 successes) and 3 (3 successes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.console.window import window_view
from embodied_eval.embodiment.window_rates import manifest_name
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.store.core import Store
from tests.console_support import stored_window


def several_manifests(tmp_path: Path):
    protocol, db, run_hash = stored_window(tmp_path)
    arms = {
        "tests.policies:arm_pre": [0.9, 0.9, 0.1, 0.1, 0.1, 0.1],
        "tests.policies:arm_post": [0.9] * 3,
    }
    hashes = []
    with Store(db) as store:
        for k, (policy, qualities) in enumerate(arms.items()):
            arm = plan_manifest(protocol, sim_policy=policy, real_policy=policy)
            store.write_manifest(
                arm.manifest_hash, protocol.protocol_hash, protocol.window_id, arm.to_dict()
            )
            hashes.append(arm.manifest_hash)
            sims = [s for s in arm.specs if s.side == "sim"]
            for i, (spec, q) in enumerate(zip(sims, qualities, strict=False)):
                started = f"2026-11-03T{10 + k:02d}:{i:02d}:00Z"
                store.write_episode(spec.to_episode(q, duration_s=5.0, started_at=started))
    return protocol, db, [run_hash, *hashes]


def test_the_console_names_every_manifest_and_counts_what_metrics_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    protocol, db, hashes = several_manifests(tmp_path)
    view = window_view(db, protocol, max_retries=0)
    assert [m["manifest_hash"] for m in view["manifests"]] == hashes
    assert [m["name"] for m in view["manifests"]] == [
        "run",
        "run of tests.policies:arm_pre",
        "run of tests.policies:arm_post",
    ]
    # The arms stored sim episodes only: the page shows their sim rows, not 0-of-N real rows.
    assert [m["sides"] for m in view["manifests"]] == [["sim", "real"], ["sim"], ["sim"]]
    real = [r for r in view["rows"] if r["side"] == "real"]
    assert {r["manifest"] for r in real} == {"run"}
    assert view["sides"]["real"] == {**view["sides"]["real"], "planned": 36, "done": 31}
    assert view["sides"]["sim"]["done"] == 4 + 6 + 3
    for name in ("run of tests.policies:arm_pre", "run of tests.policies:arm_post"):
        assert name in view["html"]["manifests"] and name in view["html"]["progress"]

    # By hand: the evaluated policy's first scored attempts. Real 27/30, Wilson 95 %:
    # centre (0.9 + 1.96²/60)/(1 + 1.96²/30) = 0.85461, half-width 0.11081 → [0.7438, 0.9654];
    # sim 3/4: centre 0.62753, half-width 0.32689 → [0.3006, 0.9544]. Real rows planned: the
    # run's 36 (the arms' planned real rows are not the evaluated policy's), 31 run.
    (family,) = view["families"]
    assert (family["family"], family["real_planned"], family["real_run"]) == ("pick_place", 36, 31)
    assert family["real"]["n"] == 30 and family["real"]["value"] == pytest.approx(0.9)
    assert [family["real"]["low"], family["real"]["high"]] == pytest.approx(
        [0.7438, 0.9654], abs=5e-5
    )
    assert family["sim"]["n"] == 4 and family["sim"]["value"] == pytest.approx(0.75)
    assert [family["sim"]["low"], family["sim"]["high"]] == pytest.approx(
        [0.3006, 0.9544], abs=5e-5
    )

    protocol_file = str(tmp_path / "protocol.toml")
    assert main(["metrics", "--db", str(db), "--protocol", protocol_file, "--json"]) == 0
    trials = json.loads(capsys.readouterr().out)["trials"]
    certified = [{k: v for k, v in row.items() if k != "s2r"} for row in trials["by_family"]]
    assert certified == view["families"]
    assert trials["by_side"]["real"]["planned"] == 36


def test_an_expansion_audits_arms_are_named_as_such():
    protocol = load_protocol(example_protocol_path())
    plan = protocol.expansion
    assert plan is not None and plan.post == protocol.sim_policy  # the run is the post arm
    assert manifest_name({"sim_policy": protocol.sim_policy}, protocol) == "run"
    assert manifest_name({"sim_policy": plan.pre}, protocol) == "expansion audit: pre arm (sim)"
    assert manifest_name({"sim_policy": plan.ablated}, protocol) == (
        "expansion audit: ablated arm (sim)"
    )
    assert manifest_name({"sim_policy": "x:y"}, protocol) == "run of x:y"
