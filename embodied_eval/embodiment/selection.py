"""Which episodes each embodiment metric counts: the evaluated policy, first attempts, pairs.

Rules (the report states them):

* The **evaluated policy** is the one named `--policy`, else the protocol's real policy, else the
  only non-baseline policy that ran on the real side. Baseline policies (`[baselines]` in the
  protocol) never enter AR, S2R or E; they are reported by the baseline calibration.
* **AR** counts real episodes of the evaluated policy that are *scored* (not aborted, not errored),
  first scored attempt per pair only (`records.first_attempts` after filtering `scored`). A retry
  after a scored failure therefore cannot lift AR; retries are reported as `AR_with_retries`.
* A **pair** is the first scored real attempt and the first scored sim attempt with the same
  `pair_id`. Sim and real episodes of a pair must be on the same task instance and seed.
* The **sim engine** paired with the real side is one engine: the protocol's first `sim.engines`
  entry that has sim episodes (else the engine with the most). A pair run on MuJoCo *and*
  PyBullet has two sim episodes; mixing them would make AR_sim depend on which one came first.
  Other engines' S2R is reported separately (`S2R_by_engine`).
* **Clusters** for the bootstrap are task instances (`task_id`): seeds and drifts of one instance
  share the instance's difficulty, so they are resampled together.
* **Strata** for reweighting sim to the real context distribution are (task instance, drift).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from embodied_eval.canonical import canonical_json
from embodied_eval.embodiment.scene_gap import SceneCheck, check_scenes
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, first_attempts

#: What the cluster bootstrap resamples (said in every bootstrap method name).
CLUSTER_UNIT = "task instance"


def context_stratum(episode: Episode) -> str:
    """The reweighting stratum of an episode: its task instance and its drift setting."""
    return f"{episode.task_id}|{canonical_json(dict(episode.drift))}"


@dataclass(frozen=True)
class OutcomeArrays:
    """Outcomes of the counted real episodes and of the pairs as arrays (z evaluated once).

    Attributes:
        tasks: sorted task ids of the counted real episodes (the bootstrap clusters), [C].
        families: sorted families of the counted real episodes, [F].
        real_task, real_family: index into `tasks` / `families` per counted real episode, [n].
        real_z: z per counted real episode (bool), [n].
        pair_task, pair_family: the same per pair (of its real episode), [m].
        pair_sim_z, pair_real_z: z of the pair's sim and real episode (bool), [m].
    """

    tasks: tuple[str, ...]
    families: tuple[str, ...]
    real_task: NDArray[np.int64]
    real_family: NDArray[np.int64]
    real_z: NDArray[np.bool_]
    pair_task: NDArray[np.int64]
    pair_family: NDArray[np.int64]
    pair_sim_z: NDArray[np.bool_]
    pair_real_z: NDArray[np.bool_]

    def per_task(self, index: NDArray[np.int64], values: NDArray | None = None) -> NDArray:
        """Sum `values` (or count) per task instance: float array [C]."""
        out: NDArray = np.bincount(index, weights=values, minlength=len(self.tasks))
        return out.astype(float)


def outcome_arrays(
    real: Sequence[Episode], pairs: Sequence[tuple[Episode, Episode]]
) -> OutcomeArrays:
    """Build `OutcomeArrays` from the counted real episodes and the pairs (pairs ⊆ real)."""
    tasks = tuple(sorted({e.task_id for e in real}))
    families = tuple(sorted({e.family for e in real}))
    t_index = {t: i for i, t in enumerate(tasks)}
    f_index = {f: i for i, f in enumerate(families)}

    def ints(values: list[int]) -> NDArray[np.int64]:
        return np.asarray(values, dtype=np.int64)

    return OutcomeArrays(
        tasks=tasks,
        families=families,
        real_task=ints([t_index[e.task_id] for e in real]),
        real_family=ints([f_index[e.family] for e in real]),
        real_z=np.asarray([e.success for e in real], dtype=bool),
        pair_task=ints([t_index[r.task_id] for _, r in pairs]),
        pair_family=ints([f_index[r.family] for _, r in pairs]),
        pair_sim_z=np.asarray([s.success for s, _ in pairs], dtype=bool),
        pair_real_z=np.asarray([r.success for _, r in pairs], dtype=bool),
    )


@dataclass(frozen=True)
class EpisodeSets:
    """The episode subsets the metrics are computed on.

    Attributes:
        policy: the evaluated policy (None when no real episode of a non-baseline policy exists).
        real: first scored real attempts of the evaluated policy (the AR sample).
        real_all: every real episode of the evaluated policy (any attempt, any status).
        sim: first scored sim attempts of the evaluated policy (paired or not).
        sim_all: every sim episode of the evaluated policy.
        pairs: (sim, real) episodes matched on pair_id, both first scored attempts.
        window_real: every real episode in the input, every policy (exposure hours).
        window_sim: every sim episode in the input, every policy.
        unscored_real: real episodes of the evaluated policy that were aborted or errored.
        retries_real: real episodes of the evaluated policy that are not the counted attempt.
        first_scored: every policy's first scored attempts (both sides), by policy name.
        arrays: outcomes of `real` and `pairs` as arrays.
        sim_engine: the sim engine paired with the real side (None without sim episodes).
        sim_engines: every engine the evaluated policy's sim episodes ran on.
        sim_every_engine: every sim episode of the evaluated policy, on any engine.
        scene_check: every matched pair's start-scene gap; pairs beyond the protocol's
            tolerance are flagged there and are not in `pairs`.
    """

    policy: str | None
    real: list[Episode]
    real_all: list[Episode]
    sim: list[Episode]
    sim_all: list[Episode]
    pairs: list[tuple[Episode, Episode]]
    window_real: list[Episode]
    window_sim: list[Episode]
    unscored_real: int
    retries_real: int
    first_scored: dict[str, list[Episode]]
    arrays: OutcomeArrays
    sim_engine: str | None = None
    sim_engines: tuple[str, ...] = ()
    sim_every_engine: tuple[Episode, ...] = ()
    scene_check: SceneCheck | None = None

    @property
    def unpaired_real(self) -> int:
        return len(self.real) - len(self.pairs) - len(self.scene_flagged)

    @property
    def scene_flagged(self) -> frozenset[str]:
        """Pair ids whose halves started from different scenes (out of S2R and PPI)."""
        return frozenset(self.scene_check.flagged) if self.scene_check is not None else frozenset()

    @property
    def transfer_real(self) -> list[Episode]:
        """The real episodes S2R compares: `real` without the scene-flagged pairs."""
        flagged = self.scene_flagged
        return [e for e in self.real if e.pair_id not in flagged] if flagged else self.real

    @property
    def transfer_sim(self) -> list[Episode]:
        """The sim episodes S2R compares: `sim` without the scene-flagged pairs."""
        flagged = self.scene_flagged
        return [e for e in self.sim if e.pair_id not in flagged] if flagged else self.sim


def baseline_policies(protocol: Protocol) -> set[str]:
    """Policy names the protocol declares as baselines (null, expert, ...)."""
    return set(protocol.baselines.values())


def choose_policy(
    episodes: Sequence[Episode], protocol: Protocol, policy: str | None = None
) -> str | None:
    """The evaluated policy (see the module docstring).

    Args:
        episodes: all episodes of the window.
        protocol: the window's protocol (its real policy and baselines).
        policy: an explicit choice, or None.

    Returns:
        The policy name, or None when no non-baseline policy ran on the real side.

    Raises:
        EvalError: the explicit policy has no real episodes, or several candidates exist.
    """
    real_policies = sorted({e.policy for e in episodes if e.side == "real"})
    if policy is not None:
        if policy not in real_policies:
            raise EvalError(
                f"policy: {policy!r} has no real episodes here (real policies: "
                f"{', '.join(real_policies) or 'none'})",
                key="policy",
            )
        return policy
    baselines = baseline_policies(protocol)
    candidates = [p for p in real_policies if p not in baselines]
    if protocol.real_policy in candidates:
        return protocol.real_policy
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        return None
    raise EvalError(
        f"policy: several policies ran on the real side ({', '.join(candidates)}) and none is "
        "the protocol's real policy; choose one with --policy",
        key="policy",
    )


def _sim_policy_names(protocol: Protocol, policy: str | None) -> set[str]:
    names = {policy} if policy is not None else set()
    # The protocol may name the same policy differently on each side.
    if policy == protocol.real_policy:
        names.add(protocol.sim_policy)
    return names


def first_scored_by_policy(
    by_policy: Mapping[str, Sequence[Episode]],
) -> dict[str, list[Episode]]:
    """Each policy's first scored attempts (per pair and side).

    Args:
        by_policy: policy name → its episodes (both sides, any attempt and status).

    Returns:
        policy name → first scored attempts.
    """
    return {
        name: first_attempts([e for e in group if e.scored]) for name, group in by_policy.items()
    }


def group_by_policy(episodes: Sequence[Episode]) -> dict[str, list[Episode]]:
    """Episodes grouped by policy name."""
    out: dict[str, list[Episode]] = defaultdict(list)
    for e in episodes:
        out[e.policy].append(e)
    return dict(out)


def choose_sim_engine(
    sim_episodes: Sequence[Episode], protocol: Protocol, engine: str | None = None
) -> str | None:
    """The sim engine paired with the real side (see the module docstring).

    Raises:
        EvalError: an explicit engine has no sim episodes.
    """
    counts: dict[str, int] = defaultdict(int)
    for e in sim_episodes:
        counts[e.engine] += 1
    if engine is not None:
        if engine not in counts:
            raise EvalError(
                f"sim_engine: no sim episodes ran on {engine!r} (engines: "
                f"{', '.join(sorted(counts)) or 'none'})",
                key="sim_engine",
            )
        return engine
    for name in protocol.engines:
        if name in counts:
            return name
    return max(sorted(counts), key=lambda n: counts[n]) if counts else None


def select_episodes(
    episodes: Sequence[Episode],
    protocol: Protocol,
    policy: str | None = None,
    sim_engine: str | None = None,
) -> EpisodeSets:
    """Split the window's episodes into the sets every metric uses.

    Args:
        episodes: every episode of the window (both sides, every policy, every attempt).
        protocol: the window's protocol.
        policy: the evaluated policy, or None to choose it (see `choose_policy`).
        sim_engine: the sim engine to pair with the real side, or None to choose it.

    Returns:
        EpisodeSets.

    Raises:
        EvalError: a pair's sim and real episodes are on different task instances or seeds.
    """
    chosen = choose_policy(episodes, protocol, policy)
    sim_names = _sim_policy_names(protocol, chosen)
    # One pass: sides, and every policy's episodes.
    window_real: list[Episode] = []
    window_sim: list[Episode] = []
    by_policy: dict[str, list[Episode]] = defaultdict(list)
    add_real, add_sim = window_real.append, window_sim.append
    for e in episodes:
        (add_real if e.side == "real" else add_sim)(e)
        by_policy[e.policy].append(e)
    first_scored = first_scored_by_policy(by_policy)
    mine = by_policy.get(chosen, []) if chosen is not None else []
    real_all = [e for e in mine if e.side == "real"]
    mine_sim = [e for e in mine if e.side == "sim"]
    real = [e for e in first_scored.get(chosen, []) if e.side == "real"] if chosen else []
    # Sim episodes under another policy name belong to the evaluated policy when the protocol
    # names them its sim policy, or through a real episode's pair id.
    others = [g for name, g in by_policy.items() if name != chosen]
    sim_other: list[Episode] = []
    if others:
        real_pairs = {e.pair_id for e in real_all}
        sim_other = [
            e
            for g in others
            for e in g
            if e.side == "sim" and (e.policy in sim_names or e.pair_id in real_pairs)
        ]
    sim_every_engine = mine_sim + sim_other
    engine = choose_sim_engine(sim_every_engine, protocol, sim_engine)
    sim_all, sim, pairs, check = _engine_side(sim_every_engine, real, engine, protocol)
    scored_real = sum(e.scored for e in real_all)
    unscored = len(real_all) - scored_real
    return EpisodeSets(
        policy=chosen,
        real=real,
        real_all=real_all,
        sim=sim,
        sim_all=sim_all,
        pairs=pairs,
        window_real=window_real,
        window_sim=window_sim,
        unscored_real=unscored,
        retries_real=scored_real - len(real),
        first_scored=first_scored,
        arrays=outcome_arrays(real, pairs),
        sim_engine=engine,
        sim_engines=tuple(sorted({e.engine for e in sim_every_engine})),
        sim_every_engine=tuple(sim_every_engine),
        scene_check=check,
    )


def _engine_side(
    sim_every_engine: Sequence[Episode],
    real: Sequence[Episode],
    engine: str | None,
    protocol: Protocol,
) -> tuple[list[Episode], list[Episode], list[tuple[Episode, Episode]], SceneCheck]:
    """The sim side on one engine: (every episode, first scored attempts, pairs with `real`,
    the pairs' start-scene check). Pairs that started from different scenes are left out.

    Raises:
        EvalError: a pair's sim and real episodes are on different task instances or seeds.
    """
    sim_all = [e for e in sim_every_engine if e.engine == engine]
    sim = first_attempts([e for e in sim_all if e.scored])
    sim_by_pair: Mapping[str, Episode] = {e.pair_id: e for e in sim}
    pairs: list[tuple[Episode, Episode]] = []
    for r in real:
        s = sim_by_pair.get(r.pair_id)
        if s is None:
            continue
        if s.task_id != r.task_id or s.seed != r.seed:
            raise EvalError(
                f"pair_id {r.pair_id!r}: sim episode {s.episode_id!r} is on "
                f"({s.task_id}, seed {s.seed}) but real episode {r.episode_id!r} on "
                f"({r.task_id}, seed {r.seed}); a pair must share task instance and seed",
                key="pair_id",
            )
        pairs.append((s, r))
    check = check_scenes(pairs, protocol.scene_tolerance_m, protocol.scene_tolerance_rad)
    flagged = set(check.flagged)
    return sim_all, sim, [p for p in pairs if p[1].pair_id not in flagged], check


def with_sim_engine(sets: EpisodeSets, engine: str, protocol: Protocol) -> EpisodeSets:
    """The same selection with the real side paired against another sim engine.

    Only the sim side is recomputed; the policy choice, real episodes and first attempts of
    every policy are reused.
    """
    sim_all, sim, pairs, check = _engine_side(sets.sim_every_engine, sets.real, engine, protocol)
    return dataclasses.replace(
        sets,
        sim=sim,
        sim_all=sim_all,
        pairs=pairs,
        arrays=outcome_arrays(sets.real, pairs),
        sim_engine=engine,
        scene_check=check,
    )


def family_rates(sets: EpisodeSets) -> dict[tuple[str, str], tuple[int, int]]:
    """(side, family) -> (successes, first scored attempts) of the evaluated policy; the sim
    side is named by its engine ("sim mujoco")."""
    sim = first_attempts([e for e in sets.sim_every_engine if e.scored])
    rates: dict[tuple[str, str], tuple[int, int]] = {}
    sides = [("real", sets.real)]
    sides += [(f"sim {eng}", [x for x in sim if x.engine == eng]) for eng in sets.sim_engines]
    for side, episodes in sides:
        for ep in episodes:
            wins, n = rates.get((side, ep.family), (0, 0))
            rates[(side, ep.family)] = (wins + int(ep.success), n + 1)
    return rates


def episode_counts(sets: EpisodeSets) -> dict[str, int]:
    """The report's episode counts of a selection."""
    return {
        "real_counted": len(sets.real),
        "real_all": len(sets.real_all),
        "real_unscored": sets.unscored_real,
        "real_retries": sets.retries_real,
        "sim_counted": len(sets.sim),
        "pairs": len(sets.pairs),
        "real_unpaired": sets.unpaired_real,
        "window_real": len(sets.window_real),
        "window_sim": len(sets.window_sim),
    }
