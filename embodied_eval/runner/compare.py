"""Sequential A/B comparison of two policies: interleaved paired trials in sim, or stored episodes.

`compare_in_sim` plans the protocol's manifest once per policy (the same rows in the same seeded
order: the seed rule does not depend on the policy), then runs row after row, A and B on the same
task instance, seed and drift, alternating which goes first, and feeds each pair to
`stats.comparison.SequentialComparison`; it stops at the first decision or at the trial cap.
Every episode is written to the store as it finishes (ids carry each policy's run key), so an
interrupted comparison resumes: rows already stored are read back, not run again.

`compare_stored` pairs stored episodes of two policies on (side, engine, task instance, seed,
drift) — first scored attempts — and replays the test in an order fixed before any outcome is
read: a random permutation of the pairs, stratified by family (`stratified_order`), from a seed
that is recorded (by default derived from the two policy names and the pair keys, so the same
store gives the same order). Reading pairs in id or start-time order would feed the test one
family after another: a policy that fails only one family can look equal to the other until
that family comes up, and the test may stop first.

Both report the effect per family beside the overall one (`ComparisonRun.family_effects`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.canonical import canonical_hash
from embodied_eval.embodiment.window_rates import instance_key
from embodied_eval.errors import EvalError
from embodied_eval.manifest import RETRY_ON, next_attempt, plan_manifest
from embodied_eval.plugins import SIM_ENGINES, resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, EpisodeSpec, first_attempts
from embodied_eval.runner.work import SimContext, run_sim_episode
from embodied_eval.stats.comparison import (
    CONTINUE,
    SequentialComparison,
    effect_confidence_sequence,
)
from embodied_eval.store.core import Store


@dataclass
class ComparisonRun:
    """The test and the episodes it used, in trial order."""

    policy_a: str
    policy_b: str
    test: SequentialComparison
    source: str
    pairs: list[tuple[str, str]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    reused: int = 0
    available: int = 0
    families: list[str] = field(default_factory=list)
    pair_order: str = "the manifest's run order"
    order_seed: int | None = None
    #: Stored episodes: the side compared ("sim" or "real"); None in sim.
    side: str | None = None

    def family_effects(self) -> list[dict[str, Any]]:
        """Per family of the pairs used: pairs, mean A, mean B and Δ = A − B with its
        confidence sequence (the test's construction and level, on that family's pairs)."""
        by_family: dict[str, list[tuple[float, float]]] = {}
        for family, pair in zip(self.families, self.test.history, strict=True):
            by_family.setdefault(family, []).append(pair)
        out = []
        for family in sorted(by_family):
            xs = by_family[family]
            d = np.array([a - b for a, b in xs])
            effect = effect_confidence_sequence(d, self.test.alpha, self.test.delta)
            out.append(
                {
                    "family": family,
                    "pairs": len(xs),
                    "mean_a": sum(a for a, _ in xs) / len(xs),
                    "mean_b": sum(b for _, b in xs) / len(xs),
                    "effect": effect.to_json(),
                }
            )
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy_a": self.policy_a,
            "policy_b": self.policy_b,
            "source": self.source,
        }
        out.update(self.test.to_json())
        out["families"] = self.family_effects()
        out["episodes"] = [{"a": a, "b": b} for a, b in self.pairs]
        out["first_in_pair"] = self.order
        out["pair_order"] = self.pair_order
        out["order_seed"] = self.order_seed
        out["episodes_reused"] = self.reused
        out["pairs_available"] = self.available
        return out


def outcome(ep: Episode, graded: bool) -> float:
    """What the test compares: quality q (graded) or success z."""
    return float(ep.quality) if graded else float(ep.success)


def _check_policy(target: str, name: str) -> None:
    try:
        resolve(target)
    except EvalError as exc:
        raise EvalError(f"{name}: {exc}", key=name) from None


def _run_one(
    store: Store, context: SimContext, spec: EpisodeSpec, max_retries: int
) -> tuple[Episode, bool]:
    """A stored scored attempt of this row, or run it (retrying errors); (episode, reused)."""
    stored: Episode | None = None
    for attempt in range(max_retries + 1):
        stored = store.get_episode(spec.episode_id)
        if stored is not None and stored.scored:
            return stored, True
        if stored is None:
            result = run_sim_episode(context, spec)
            store.write_episode(result.episode, [ev.to_dict() for ev in result.safety_events])
            stored = result.episode
            if stored.scored:
                return stored, False
        if stored.status not in RETRY_ON or attempt == max_retries:
            break
        spec = next_attempt(spec)
    status = stored.status if stored is not None else "missing"
    reason = (stored.status_reason if stored is not None else "") or "no reason"
    raise EvalError(
        f"episode {spec.episode_id} ended {status!r} ({reason}); the comparison needs scored "
        "episodes",
        key="episode",
    )


def compare_in_sim(
    protocol: Protocol,
    policy_a: str,
    policy_b: str,
    test: SequentialComparison,
    *,
    db_path: str | Path,
    out_dir: str | Path,
    engine: str | None = None,
    max_retries: int = 1,
    on_trial: Callable[[int, float, float, str], None] | None = None,
) -> ComparisonRun:
    """Run the interleaved A/B comparison in sim (see the module docstring).

    Args:
        protocol: the protocol whose manifest gives the rows.
        policy_a, policy_b: "module:factory[?key=value]" of the two policies (must differ).
        test: a fresh `SequentialComparison` (δ, α, power, cap, graded).
        db_path: the store. out_dir: artifacts of errored episodes.
        engine: sim engine (default: the protocol's first).
        max_retries: retries of an errored/aborted episode.
        on_trial: called after each pair with (trial, x_A, x_B, decision).

    Returns:
        ComparisonRun.
    """
    if policy_a == policy_b:
        raise EvalError("--policy-a and --policy-b name the same policy", key="policy_b")
    _check_policy(policy_a, "policy_a")
    _check_policy(policy_b, "policy_b")
    engine = engine or protocol.engines[0]
    if engine not in SIM_ENGINES:
        raise EvalError(
            f"--engine {engine!r} is not a registered sim engine (known: "
            f"{', '.join(sorted(SIM_ENGINES))})",
            key="engine",
        )
    manifests = [
        plan_manifest(protocol, engines=[engine], sim_policy=p, real_policy=p)
        for p in (policy_a, policy_b)
    ]
    rows_a, rows_b = (m.side("sim") for m in manifests)
    for sa, sb in zip(rows_a, rows_b, strict=True):
        if (sa.task_id, sa.seed, sa.drift_name) != (sb.task_id, sb.seed, sb.drift_name):
            raise EvalError("the two manifests do not list the same rows", key="manifest")
    if test.max_trials > len(rows_a):
        test.max_trials = len(rows_a)
    context = SimContext(
        protocol=protocol,
        engine_targets={engine: SIM_ENGINES[engine]},
        out_dir=str(Path(out_dir).resolve()),
        max_steps=protocol.max_steps,
    )
    run = ComparisonRun(policy_a, policy_b, test, f"sim ({engine}), interleaved")
    run.available = len(rows_a)
    with Store(db_path) as store:
        for m in manifests:
            store.write_manifest(
                m.manifest_hash, protocol.protocol_hash, protocol.window_id, m.to_dict()
            )
        for i, (sa, sb) in enumerate(zip(rows_a, rows_b, strict=True)):
            first = "A" if i % 2 == 0 else "B"
            order = [("A", sa), ("B", sb)] if first == "A" else [("B", sb), ("A", sa)]
            got: dict[str, Episode] = {}
            for label, spec in order:
                ep, reused = _run_one(store, context, spec, max_retries)
                got[label] = ep
                run.reused += reused
            xa, xb = outcome(got["A"], test.graded), outcome(got["B"], test.graded)
            decision = test.update(xa, xb)
            run.pairs.append((got["A"].episode_id, got["B"].episode_id))
            run.families.append(sa.family)
            run.order.append(first)
            if on_trial is not None:
                on_trial(test.trials, xa, xb, decision)
            if decision != CONTINUE:
                break
    return run


def default_order_seed(policy_a: str, policy_b: str, keys: Sequence[tuple[str, ...]]) -> int:
    """The order seed used when none is given: from the policy names and the pair keys only
    (never the outcomes), so the same store gives the same order."""
    digest = canonical_hash({"a": policy_a, "b": policy_b, "pairs": sorted(map(list, keys))})
    return int(digest[:8], 16)


def stratified_order(families: Sequence[str], seed: int) -> list[int]:
    """A random order of items that interleaves their families in proportion.

    Within each family the items are permuted at random; item i (0-based) of a family of n
    items gets the position (i + U)/n with U ~ Uniform(0, 1), and all items are sorted by
    position. Up to any position x in [0, 1] a family of n_f items has contributed ⌊n_f·x⌋ or
    ⌊n_f·x⌋ + 1 of them, so every family comes up in proportion and none waits for the others.

    Args:
        families: the family of each item, in a canonical (e.g. sorted-key) order.
        seed: the recorded seed of the random permutation.

    Returns:
        Indices into `families`, in the order to use.
    """
    rng = np.random.default_rng(seed)
    members: dict[str, list[int]] = {}
    for index, family in enumerate(families):
        members.setdefault(family, []).append(index)
    positions: list[tuple[float, int]] = []
    for family in sorted(members):
        items = members[family]
        n = len(items)
        shuffled = rng.permutation(n)
        jitter = rng.random(n)
        positions.extend(((i + jitter[i]) / n, items[j]) for i, j in enumerate(shuffled))
    return [index for _, index in sorted(positions)]


def compare_stored(
    episodes: Sequence[Episode],
    policy_a: str,
    policy_b: str,
    test: SequentialComparison,
    side: str | None = None,
    order_seed: int | None = None,
) -> ComparisonRun:
    """Replay the comparison on stored episodes (see the module docstring).

    Args:
        episodes: episodes of the store (any policies). policy_a, policy_b: the policy names.
        test: a fresh `SequentialComparison`.
        side: "sim" or "real" (default: real when both policies have real episodes, else sim).
        order_seed: seed of the family-stratified pair order (default: `default_order_seed`).

    Returns:
        ComparisonRun; its test's decision is "continue" when the stored pairs ran out first.
    """
    names = {e.policy for e in episodes}
    for label, p in (("--a", policy_a), ("--b", policy_b)):
        if p not in names:
            raise EvalError(
                f"{label}: no stored episodes of policy {p!r} (stored: "
                f"{', '.join(sorted(names)) or 'none'})",
                key=label.strip("-"),
            )
    scored = first_attempts([e for e in episodes if e.scored and e.policy in (policy_a, policy_b)])
    if side is None:
        real = {e.policy for e in scored if e.side == "real"}
        side = "real" if {policy_a, policy_b} <= real else "sim"
    if side not in ("sim", "real"):
        raise EvalError(f"--side: {side!r} must be sim or real", key="side")
    if order_seed is not None and not 0 <= order_seed < 2**63:
        raise EvalError("--order-seed: must be an integer in [0, 2**63)", key="order_seed")
    by_key: dict[str, dict[tuple[str, ...], Episode]] = {policy_a: {}, policy_b: {}}
    for e in sorted(scored, key=lambda e: (e.started_at, e.episode_id)):
        if e.side == side:
            by_key[e.policy].setdefault(instance_key(e), e)
    b_side = by_key[policy_b]
    keys = sorted(k for k in by_key[policy_a] if k in b_side)
    if not keys:
        raise EvalError(
            f"no {side} episodes of {policy_a!r} and {policy_b!r} share a task instance, seed "
            "and drift",
            key="b",
        )
    seed = default_order_seed(policy_a, policy_b, keys) if order_seed is None else order_seed
    matched = [(by_key[policy_a][k], b_side[k]) for k in keys]
    order = stratified_order([a.family for a, _ in matched], seed)
    run = ComparisonRun(policy_a, policy_b, test, f"stored {side} episodes")
    run.available = len(matched)
    run.pair_order = "random, stratified by family, fixed before any outcome was read"
    run.order_seed = seed
    run.side = side
    for index in order:
        a, b = matched[index]
        decision = test.update(outcome(a, test.graded), outcome(b, test.graded))
        run.pairs.append((a.episode_id, b.episode_id))
        run.families.append(a.family)
        run.reused += 2
        if decision != CONTINUE:
            break
    return run
