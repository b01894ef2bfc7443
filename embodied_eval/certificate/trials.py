"""The technicians' view of a window: trials run vs planned (from the escrowed manifests),
success per family and per sim engine, and what the planner says remains to run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from embodied_eval.certificate.compute import Results
from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.embodiment.selection import select_episodes
from embodied_eval.embodiment.window_rates import family_rows, planned_rows, success_by
from embodied_eval.records import Episode, first_attempts


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
    technician's view, `embodiment.window_rates`, which the console shows too); AR and S2R with
    their cluster-bootstrap intervals are in `embodiment`.
    """
    protocol = inputs.protocol
    level = protocol.confidence
    episodes = list(inputs.episodes)
    sets = select_episodes(episodes, protocol)
    planned = planned_rows(inputs.manifests, sets.policy)
    s2r_by_family = results.embodiment.get("S2R_by_family", {})
    by_family = [
        {**row, "s2r": s2r_by_family.get(row["family"])}
        for row in family_rows(episodes, inputs.manifests, protocol)
    ]
    scored_sim = (e for e in sets.sim_every_engine if e.scored)
    engines = success_by(first_attempts(scored_sim), lambda e: e.engine, level)
    return {
        "by_side": {side: _side_counts(episodes, planned, side) for side in ("sim", "real")},
        "by_family": by_family,
        "sim_by_engine": {engine: est.to_json() for engine, est in engines.items()},
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
