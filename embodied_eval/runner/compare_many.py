"""Adaptive comparison of N policies: in sim on the protocol's manifest, or on stored episodes.

Both feed `stats.allocation.RankingAllocation`, which after every instance says which policies
to run together on the next *fresh* instance (one no policy has run yet in this comparison) and
from which task; the comparison stops at the decision ("best", "best within δ", "order"), at the
trial cap ("undecided"), or when no fresh instance is left ("continue").

`compare_many_in_sim` plans the manifest once per policy (the same rows for every policy: the
seed rule does not depend on the policy), takes the next unused row of the chosen task in the
manifest's order and runs the chosen policies on it, rotating which goes first. Every episode is
written to the store as it finishes and read back on a rerun (the choices depend only on earlier
outcomes, so a rerun makes the same choices and reuses the stored episodes).

`compare_many_stored` uses stored instances (side, engine, task, seed, drift; first scored
attempts) in a random order stratified by task, fixed before any outcome is read (the seed is
recorded): the next instance is the first unused one on which every chosen policy has an
episode, from the task they have seen least among those that still have one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_eval.embodiment.window_rates import instance_key
from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest
from embodied_eval.plugins import SIM_ENGINES
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, first_attempts
from embodied_eval.runner.compare import (
    _check_policy,
    _run_one,
    default_order_seed,
    outcome,
    stratified_order,
)
from embodied_eval.runner.work import SimContext
from embodied_eval.stats.allocation import CONTINUE, RankingAllocation
from embodied_eval.store.core import Store


@dataclass
class ManyComparisonRun:
    """The adaptive test and the instances it used, in order."""

    test: RankingAllocation
    source: str
    instances: list[dict[str, Any]] = field(default_factory=list)
    reused: int = 0
    available: int = 0
    order_seed: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.test.to_json()
        out.update({
            "source": self.source,
            "instances_used": self.instances,
            "episodes_reused": self.reused,
            "instances_available": self.available,
            "order_seed": self.order_seed,
        })  # fmt: skip
        return out


def _check_policies(policies: Sequence[str]) -> None:
    if len(policies) < 2:
        raise EvalError("--policies: name at least two policies", key="policies")
    if len(set(policies)) != len(policies):
        raise EvalError("--policies: a policy is named twice", key="policies")


def compare_many_in_sim(
    protocol: Protocol,
    policies: Sequence[str],
    test: RankingAllocation,
    *,
    db_path: str | Path,
    out_dir: str | Path,
    engine: str | None = None,
    max_retries: int = 1,
    on_instance: Callable[[int, dict[str, float], str], None] | None = None,
) -> ManyComparisonRun:
    """Run the adaptive N-policy comparison in sim (see the module docstring).

    Args:
        protocol: the protocol whose manifest gives the instances.
        policies: "module:factory[?key=value]" of each policy (distinct; the test's names).
        test: a fresh `RankingAllocation` over these policies.
        db_path: the store. out_dir: artifacts of errored episodes.
        engine: sim engine (default: the protocol's first).
        max_retries: retries of an errored/aborted episode.
        on_instance: called after each instance with (instance number, outcomes, decision).
    """
    _check_policies(policies)
    for i, p in enumerate(policies):
        _check_policy(p, f"policies[{i}]")
    engine = engine or protocol.engines[0]
    if engine not in SIM_ENGINES:
        raise EvalError(
            f"--engine {engine!r} is not a registered sim engine (known: "
            f"{', '.join(sorted(SIM_ENGINES))})",
            key="engine",
        )
    manifests = [
        plan_manifest(protocol, engines=[engine], sim_policy=p, real_policy=p) for p in policies
    ]
    rows = [m.side("sim") for m in manifests]
    for specs in zip(*rows, strict=True):
        if len({(s.task_id, s.seed, s.drift_name) for s in specs}) != 1:
            raise EvalError("the policies' manifests do not list the same rows", key="manifest")
    unused: dict[str, list[int]] = {}
    for r, row in enumerate(rows[0]):
        unused.setdefault(row.task_id, []).append(r)
    context = SimContext(
        protocol=protocol,
        engine_targets={engine: SIM_ENGINES[engine]},
        out_dir=str(Path(out_dir).resolve()),
        max_steps=protocol.max_steps,
    )
    run = ManyComparisonRun(test, f"sim ({engine}), adaptive on fresh manifest rows")
    run.available = len(rows[0])
    index = {p: i for i, p in enumerate(policies)}
    with Store(db_path) as store:
        for m in manifests:
            store.write_manifest(
                m.manifest_hash, protocol.protocol_hash, protocol.window_id, m.to_dict()
            )
        while test.decision == CONTINUE:
            open_tasks = [t for t, left in unused.items() if left]
            if not open_tasks:
                break
            chosen, task = test.choose(open_tasks)
            assert task is not None
            r = unused[task].pop(0)
            turn = len(run.instances) % len(chosen)
            got: dict[str, Episode] = {}
            for p in [*chosen[turn:], *chosen[:turn]]:
                got[p], reused = _run_one(store, context, rows[index[p]][r], max_retries)
                run.reused += reused
            x = {p: outcome(got[p], test.graded) for p in chosen}
            decision = test.update(x, task)
            run.instances.append({
                "task": task,
                "seed": rows[0][r].seed,
                "drift": rows[0][r].drift_name,
                "episodes": {p: got[p].episode_id for p in chosen},
                "first": chosen[turn],
            })  # fmt: skip
            if on_instance is not None:
                on_instance(test.rows, x, decision)
    return run


def compare_many_stored(
    episodes: Sequence[Episode],
    policies: Sequence[str],
    test: RankingAllocation,
    side: str | None = None,
    order_seed: int | None = None,
) -> ManyComparisonRun:
    """Replay the adaptive comparison on stored episodes (see the module docstring).

    Args:
        episodes: episodes of the store (any policies). policies: the names compared.
        test: a fresh `RankingAllocation` over these names.
        side: "sim" or "real" (default: real when every policy has real episodes, else sim).
        order_seed: seed of the task-stratified instance order (default: from the names and
            the instance keys, never the outcomes).
    """
    _check_policies(policies)
    stored = {e.policy for e in episodes}
    missing = [p for p in policies if p not in stored]
    if missing:
        raise EvalError(
            f"--policies: no stored episodes of {', '.join(repr(m) for m in missing)} (stored: "
            f"{', '.join(sorted(stored)) or 'none'})",
            key="policies",
        )
    scored = first_attempts([e for e in episodes if e.scored and e.policy in policies])
    if side is None:
        real = {e.policy for e in scored if e.side == "real"}
        side = "real" if set(policies) <= real else "sim"
    if side not in ("sim", "real"):
        raise EvalError(f"--side: {side!r} must be sim or real", key="side")
    if order_seed is not None and not 0 <= order_seed < 2**63:
        raise EvalError("--order-seed: must be an integer in [0, 2**63)", key="order_seed")
    by_key: dict[tuple[str, ...], dict[str, Episode]] = {}
    for e in sorted(scored, key=lambda e: (e.started_at, e.episode_id)):
        if e.side == side:
            by_key.setdefault(instance_key(e), {}).setdefault(e.policy, e)
    keys = sorted(k for k, eps in by_key.items() if len(eps) >= 2)
    if not keys:
        raise EvalError(
            f"no two of the policies have {side} episodes on a shared task instance, seed and "
            "drift",
            key="policies",
        )
    seed = default_order_seed(",".join(policies), side, keys) if order_seed is None else order_seed
    order = [keys[i] for i in stratified_order([k[2] for k in keys], seed)]
    run = ManyComparisonRun(test, f"stored {side} episodes, adaptive")
    run.available = len(keys)
    run.order_seed = seed
    used: set[tuple[str, ...]] = set()
    while test.decision == CONTINUE:
        chosen, _ = test.choose()
        fresh = [k for k in order if k not in used and all(p in by_key[k] for p in chosen)]
        if not fresh:
            break
        task = test.least_seen(chosen, [k[2] for k in fresh])
        key = next(k for k in fresh if k[2] == task)
        used.add(key)
        got = by_key[key]
        test.update({p: outcome(got[p], test.graded) for p in chosen}, key[2])
        run.reused += len(chosen)
        run.instances.append({
            "task": key[2],
            "seed": int(key[3]),
            "episodes": {p: got[p].episode_id for p in chosen},
        })  # fmt: skip
    return run
