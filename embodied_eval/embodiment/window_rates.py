"""The window's success rates by group, computed once, and what makes two episodes one instance.

The certificate's trials section, the console's stored-window view, `metrics --json` ("trials"),
the policy leaderboard (`rank`), the baselines check (`beyond`) and the stored-data `compare`
all count success here:

- `success_by`: success per group (a family, a (family, side) cell, a policy's family, a sim
  engine) as a Wilson interval at the protocol's confidence over the episodes handed in — first
  scored attempts, as every caller selects them (`embodiment.selection`);
- `window_manifests`: every manifest escrowed for the window, each named (`manifest_name`: the
  run, or an expansion audit's arm);
- `planned_rows`: the planned slots of every manifest escrowed for the window, each slot once;
- `family_rows`: per family, real trials planned and run and the sim and real success — the
  rows the certificate's trials section and the console both show;
- `instance_key`: side, sim engine, task, seed and drift — the instance two policies' episodes
  are matched on (`rank`'s pairwise outcomes, `compare`'s stored pairs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from embodied_eval.canonical import canonical_json
from embodied_eval.embodiment.selection import select_episodes
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.proportions import wilson_interval
from embodied_eval.store.core import Store

K = TypeVar("K", bound=Hashable)


def instance_key(ep: Episode) -> tuple[str, ...]:
    """What makes two episodes the same instance: side, sim engine, task, seed and drift."""
    return (ep.side, ep.engine if ep.side == "sim" else "", ep.task_id, str(ep.seed),
            canonical_json(dict(ep.drift)))  # fmt: skip


def success_by(
    episodes: Iterable[Episode], group: Callable[[Episode], K], level: float
) -> dict[K, Estimate]:
    """Success per group: Wilson interval at `level` over the episodes of each group.

    Args:
        episodes: the episodes to count (the caller selects them: first scored attempts).
        group: the group of an episode, e.g. `lambda e: e.family`.
        level: two-sided confidence level.

    Returns:
        group -> Estimate (value = successes / n, n = episodes of the group), groups sorted.
    """
    cells: dict[K, list[bool]] = defaultdict(list)
    for e in episodes:
        cells[group(e)].append(bool(e.success))
    return {g: wilson_interval(sum(z), len(z), level) for g, z in sorted(cells.items())}


def manifest_name(header: Mapping[str, Any], protocol: Protocol) -> str:
    """What a manifest of the window was planned for, in the technicians' words: "run" (the
    protocol's policies), "expansion audit: <condition> arm (<side>)" (a condition of the
    protocol's `[expansion]` audit run under its own policy), else "run of <sim policy>"."""
    sim_policy = str(header.get("sim_policy", ""))
    plan = protocol.expansion
    if plan is not None and sim_policy != protocol.sim_policy:
        for condition in ("pre", "post", "ablated"):
            if plan.policy(condition) == sim_policy:
                return f"expansion audit: {condition} arm ({plan.side})"
    if sim_policy == protocol.sim_policy:
        return "run"
    return f"run of {sim_policy}"


def window_manifests(
    store: Store, protocol: Protocol, window: str | None = None
) -> list[dict[str, Any]]:
    """Every manifest escrowed for the protocol's window, oldest first: {"manifest_hash",
    "created_at", "name" (`manifest_name`), "manifest" (its body: header and "episodes")}."""
    window_id = window if window is not None else protocol.window_id
    out = []
    for row in store.manifests(protocol_hash=protocol.protocol_hash):
        if row["window"] != window_id:
            continue
        body = store.manifest(row["manifest_hash"]) or {}
        out.append(
            {
                "manifest_hash": row["manifest_hash"],
                "created_at": row["created_at"],
                "name": manifest_name(body, protocol),
                "manifest": body,
            }
        )
    return out


def planned_rows(
    manifests: Sequence[Mapping[str, Any]], real_policy: str | None = None
) -> list[dict[str, Any]]:
    """The planned episode rows of every escrowed manifest ({"manifest": body} as the store and
    `certificate.inputs` hold them), each planned (pair, side, engine) slot once.

    Args:
        manifests: the window's manifests.
        real_policy: the evaluated policy: real rows planned for another policy are left out
            (an expansion audit's arm plans real rows it never runs); None keeps every row.
    """
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for m in manifests:
        body = m.get("manifest") or {}
        for spec in body.get("episodes", []):
            if real_policy is not None and spec["side"] == "real" and spec["policy"] != real_policy:
                continue
            key = (str(spec["pair_id"]), str(spec["side"]), str(spec["engine"]))
            seen.setdefault(key, spec)
    return list(seen.values())


def family_rows(
    episodes: Sequence[Episode],
    manifests: Sequence[Mapping[str, Any]],
    protocol: Protocol,
) -> list[dict[str, Any]]:
    """Per family of the window: the evaluated policy's real trials planned (over every escrowed
    manifest; None without one) and run (real pairs with a stored attempt), and success on each
    side over its first scored attempts (`select_episodes`), Wilson at the protocol's confidence.

    Args:
        episodes: every stored episode of the window (both sides, every policy and attempt).
        manifests: every manifest escrowed for the window.
        protocol: the window's protocol.

    Returns:
        [{"family", "real_planned", "real_run", "sim", "real"}], families sorted; "sim" and
        "real" are estimates as JSON (None when the family has no such episode).
    """
    level = protocol.confidence
    sets = select_episodes(episodes, protocol)
    planned = planned_rows(manifests, sets.policy)
    sim = success_by(sets.sim, lambda e: e.family, level)
    real = success_by(sets.real, lambda e: e.family, level)
    families = sorted({e.family for e in episodes} | {str(s["family"]) for s in planned})
    rows = []
    for family in families:
        real_run = {e.pair_id for e in sets.real_all if e.family == family}
        rows.append(
            {
                "family": family,
                "real_planned": (
                    sum(1 for s in planned if s["side"] == "real" and s["family"] == family)
                    if planned
                    else None
                ),
                "real_run": len(real_run),
                "sim": sim[family].to_json() if family in sim else None,
                "real": real[family].to_json() if family in real else None,
            }
        )
    return rows
