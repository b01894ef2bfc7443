"""The technicians' view of a window: trials run vs planned (from the escrowed manifests),
success per family and per sim engine, and what the planner says remains to run."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from embodied_eval.certificate.compute import Results
from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.embodiment.selection import select_episodes
from embodied_eval.records import Episode, first_attempts
from embodied_eval.stats import wilson_interval


def _planned(manifests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The planned episode rows of every escrowed manifest, each planned slot once."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for m in manifests:
        body = m.get("manifest") or {}
        for spec in body.get("episodes", []):
            key = (str(spec["pair_id"]), str(spec["side"]), str(spec["engine"]))
            seen.setdefault(key, spec)
    return list(seen.values())


def _side_counts(
    episodes: Sequence[Episode], planned: Sequence[Mapping[str, Any]], side: str
) -> dict:
    mine = [e for e in episodes if e.side == side]
    slots = {(e.pair_id, e.engine) for e in mine}
    status = Counter(e.status for e in mine)
    return {
        "planned": sum(1 for s in planned if s["side"] == side) if planned else None,
        "run": len(slots),
        "episodes": len(mine),
        "scored": sum(1 for e in mine if e.scored),
        "aborted": status.get("aborted", 0),
        "error": status.get("error", 0),
        "retries": sum(1 for e in mine if e.attempt > 1),
    }


def _success(episodes: Iterable[Episode], level: float) -> dict[str, Any] | None:
    eps = list(episodes)
    if not eps:
        return None
    return wilson_interval(sum(e.success for e in eps), len(eps), level).to_json()


def _remaining(results: Results) -> list[dict[str, Any]]:
    """Gate checks the planner says more trials or hours would settle."""
    out = []
    gates = list(results.embodiment.get("gates", {}).values())
    gates += [g for g in results.score.get("gates", []) if "(Robotics)" not in g.get("name", "")]
    seen: set[tuple[str, str]] = set()
    for gate in gates:
        for check in gate.get("checks", []):
            remaining = check.get("remaining") or {}
            key = (gate.get("name", ""), check.get("name", ""))
            if not remaining or key in seen:
                continue
            seen.add(key)
            out.append(
                {
                    "gate": gate.get("name"),
                    "check": check.get("name"),
                    "verdict": check.get("verdict"),
                    "trials": remaining.get("trials"),
                    "hours": remaining.get("hours"),
                }
            )
    return out


def trials_section(inputs: WindowInputs, results: Results) -> dict[str, Any]:
    """Trials run vs planned (from the escrowed manifests), success per family and per engine,
    and what the planner says remains to run.

    Success per family and engine is the plain Wilson interval over first scored attempts (a
    technician's view); AR and S2R with their cluster-bootstrap intervals are in `embodiment`.
    """
    protocol = inputs.protocol
    level = protocol.confidence
    episodes = list(inputs.episodes)
    planned = _planned(inputs.manifests)
    sets = select_episodes(episodes, protocol)
    s2r_by_family = results.embodiment.get("S2R_by_family", {})
    families = sorted({e.family for e in episodes} | {str(s["family"]) for s in planned})
    by_family = []
    for family in families:
        real_run = {e.pair_id for e in episodes if e.side == "real" and e.family == family}
        by_family.append(
            {
                "family": family,
                "real_planned": (
                    sum(1 for s in planned if s["side"] == "real" and s["family"] == family)
                    if planned
                    else None
                ),
                "real_run": len(real_run),
                "sim": _success((e for e in sets.sim if e.family == family), level),
                "real": _success((e for e in sets.real if e.family == family), level),
                "s2r": s2r_by_family.get(family),
            }
        )
    engines: dict[str, list[Episode]] = defaultdict(list)
    for e in sets.sim_every_engine:
        if e.scored:
            engines[e.engine].append(e)
    return {
        "by_side": {side: _side_counts(episodes, planned, side) for side in ("sim", "real")},
        "by_family": by_family,
        "sim_by_engine": {
            eng: _success(first_attempts(eps), level) for eng, eps in sorted(engines.items())
        },
        "evaluated_policy": sets.policy,
        "success_method": f"Wilson {level * 100:g} % over first scored attempts",
        "remaining": _remaining(results),
        "real_episodes": _real_episodes(episodes),
    }


def _real_episodes(episodes: Iterable[Episode]) -> list[dict[str, Any]]:
    """Per real episode: its judge and its control loop's latency and deadline misses (as the
    harness recorded them in `control`)."""
    out = []
    for e in sorted((e for e in episodes if e.side == "real"), key=lambda e: e.episode_id):
        c = e.control
        out.append(
            {
                "episode_id": e.episode_id,
                "status": e.status,
                "judge": " ".join(
                    str(e.judge.get(k, "")) for k in ("kind", "name", "version") if e.judge.get(k)
                ),
                "signed": bool(e.judge.get("signature")),
                "loop_latency_p50_ms": c.get("loop_latency_p50_ms"),
                "loop_latency_p99_ms": c.get("loop_latency_p99_ms"),
                "loop_deadline_misses": c.get("loop_deadline_misses"),
            }
        )
    return out
