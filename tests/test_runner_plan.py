"""The manifest (seed escrow): seeds, ids, pairing, real-side selection, hash and file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.manifest import (
    derive_seed,
    episode_id_for,
    next_attempt,
    plan_manifest,
    verify_manifest_file,
    write_manifest_file,
)
from tests.test_runner_support import tiny_protocol


def test_derive_seed_is_the_first_four_bytes_of_sha256():
    # Computed outside Python with coreutils:
    #   printf '%s' '20261122:pick_place/cube_center:s0' | sha256sum  -> f3b61caf...
    #   0xf3b61caf = 4088798383
    #   printf '%s' '7:push/a:s1' | sha256sum                        -> a8093a7f...
    #   0xa8093a7f = 2819177087
    assert derive_seed(20261122, "pick_place/cube_center:s0") == 4088798383
    assert derive_seed(7, "push/a:s1") == 2819177087


def test_factorial_manifest_counts_and_pairing():
    proto = tiny_protocol(sampling={"seeds_per_instance": 3, "real_fraction": 0.5})
    m = plan_manifest(proto)
    # 5 instances x 2 drifts x 3 seeds = 30 pairs; 2 engines -> 60 sim specs;
    # one family, two drifts: floor(0.5 * 15 + 0.5) = 8 real specs per (family, drift) = 16.
    assert m.header["pairs"] == 30
    assert len(m.side("sim")) == 60
    assert len(m.side("real")) == 16
    assert Counter(s.drift_name for s in m.side("real")) == {"nominal": 8, "worn": 8}
    assert Counter(s.engine for s in m.side("sim")) == {"mujoco": 30, "pybullet": 30}
    # Every pair has both engines; real ones share (t, s, δ) with their sims.
    by_pair: dict[str, list] = {}
    for spec in m.specs:
        by_pair.setdefault(spec.pair_id, []).append(spec)
    assert len(by_pair) == 30
    for specs in by_pair.values():
        assert len({(s.task_id, s.seed, s.drift_name, tuple(s.drift.items())) for s in specs}) == 1
        assert sorted(s.engine for s in specs if s.side == "sim") == ["mujoco", "pybullet"]
    # The seed depends on (base seed, task, seed index) only: drifts use common random numbers.
    spec = m.specs[0]
    k = spec.pair_id.rsplit(":s", 1)[1]
    assert spec.seed == derive_seed(7, f"{spec.task_id}:s{k}")
    same_task = {s.seed for s in m.specs if s.task_id == spec.task_id}
    assert len(same_task) == 3  # three seed indices, shared by both drifts
    assert all(s.attempt == 1 and s.window == "w-test" for s in m.specs)
    assert all(s.protocol_hash == proto.protocol_hash for s in m.specs)
    assert all(s.target_quality == 0.5 for s in m.specs)


def test_real_pairs_are_chosen_per_family():
    proto = tiny_protocol(
        battery={
            "push": {"instances": [f"push/b{i}" for i in range(5)]},
            "pick": {"instances": [f"pick/c{i}" for i in range(5)]},
        },
        drift={"nominal": {"day": 0}},
        sampling={"seeds_per_instance": 1, "real_fraction": 0.5},
    )
    m = plan_manifest(proto)
    # 5 pairs per family; floor(0.5 * 5 + 0.5) = 3 real pairs in each family.
    assert Counter(s.family for s in m.side("real")) == {"push": 3, "pick": 3}


def test_same_protocol_same_manifest_other_seed_other_manifest():
    a, b = plan_manifest(tiny_protocol()), plan_manifest(tiny_protocol())
    assert a.manifest_hash == b.manifest_hash
    assert [s.to_dict() for s in a.specs] == [s.to_dict() for s in b.specs]
    c = plan_manifest(tiny_protocol(protocol={"base_seed": 8}))
    assert c.manifest_hash != a.manifest_hash
    assert {s.seed for s in c.specs}.isdisjoint({s.seed for s in a.specs})


def test_ids_name_pair_side_engine_attempt_and_policies_do_not_collide():
    m = plan_manifest(tiny_protocol())
    spec = m.side("sim")[0]
    assert spec.episode_id == f"{spec.pair_id}-sim-{spec.engine}-a1"
    retry = next_attempt(spec)
    assert retry.attempt == 2 and retry.seed == spec.seed
    assert retry.episode_id == episode_id_for(spec.pair_id, "sim", spec.engine, 2)
    assert len({s.episode_id for s in m.specs}) == len(m.specs)
    other = plan_manifest(tiny_protocol(), sim_policy="tests.test_runner_support:other")
    assert {s.episode_id for s in other.specs}.isdisjoint({s.episode_id for s in m.specs})
    # ... while the seeds a second policy sees are the same draws.
    assert sorted(s.seed for s in other.specs) == sorted(s.seed for s in m.specs)


def test_run_order_is_a_permutation_of_all_pairs():
    m = plan_manifest(tiny_protocol())
    pairs = list(dict.fromkeys(s.pair_id for s in m.specs))
    assert len(pairs) == 20
    # Pair k's specs are contiguous: sim engines first, then real.
    sides = [[s.side for s in m.specs if s.pair_id == p] for p in pairs]
    assert all(x[:2] == ["sim", "sim"] and x[2:] in ([], ["real"]) for x in sides)


def test_manifest_file_round_trips_and_detects_tampering(tmp_path: Path):
    m = plan_manifest(tiny_protocol())
    path = write_manifest_file(m, tmp_path)
    assert path.name == f"manifest-{m.manifest_hash[:12]}.json"
    assert verify_manifest_file(path).manifest_hash == m.manifest_hash
    data = json.loads(path.read_text())
    data["episodes"][0]["seed"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(EvalError, match="hash mismatch"):
        verify_manifest_file(path)


def test_duplicate_engine_is_rejected():
    with pytest.raises(EvalError, match="twice"):
        plan_manifest(tiny_protocol(), engines=["mujoco", "mujoco"])


def test_sprt_stopping_needs_its_alternative_p1():
    with pytest.raises(EvalError, match=r"stopping\.p1"):
        tiny_protocol(stopping={"enabled": True, "method": "sprt"})
    with pytest.raises(EvalError, match=r"stopping\.p1"):
        tiny_protocol(stopping={"enabled": True, "method": "sprt", "p1": 0.7})  # below 0.75
    ok = tiny_protocol(stopping={"enabled": True, "method": "sprt", "p1": 0.9})
    assert ok.stopping.p1 == 0.9 and ok.stopping.beta == 0.10
    # p1 and beta enter the hash only for sprt: mixture protocols keep their hashes.
    assert "p1" not in tiny_protocol(stopping={"enabled": True}).canonical()["stopping"]
