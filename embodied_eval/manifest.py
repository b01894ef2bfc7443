"""The manifest (seed escrow): which (task t, seed s, drift δ) each episode runs, fixed ex ante.

The plan is a factorial draw from μ (seed §3 battery, item v): every task instance × every drift
used by `[sampling]` × `seeds_per_instance` seeds. Each such triple is a *pair*: one sim episode per
engine and, for a reproducibly chosen `real_fraction` of pairs in each family, one real episode.
All randomness is derived from the protocol's base seed with SHA-256, so the same protocol always
gives the same manifest, and a retry (a new attempt number) replays the same seed.

Seed rule: seed(t, k) = first 4 bytes (big-endian) of SHA-256("<base_seed>:<task_id>:s<k>"). The
seed does not depend on the drift, side, engine, policy or attempt: the sim and real episodes of a
pair share it, drifted and nominal runs of an instance use common random numbers, and two policies
evaluated under one protocol see the same draws.

The run order is a seeded permutation of the pairs. For the real side this matters: anytime
stopping looks at results in run order, and an order sorted by family would bias it.

Settling (resume): a manifest row (a *slot*: pair, side, engine) is settled when one of its
attempts is scored, or its last attempt is unscored and no retries are left (or its status is not
one that is retried); otherwise its next attempt is due. The runner, the technician's manual entry
and the window's readers all apply these rules from here.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.canonical import atomic_write_text, canonical_hash, canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import OPERATOR_STOP, ROBOT_LOST, UNSUPERVISED
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, EpisodeSpec
from embodied_eval.seeds import SEED_RULE, derive_seed
from embodied_eval.store.core import Store

MANIFEST_FORMAT = "embodied-eval/manifest-v1"

def run_key(protocol_hash: str, sim_policy: str, real_policy: str, sim_source: str = "") -> str:
    """Eight hex digits naming what is evaluated: the protocol, both policies and the sim source.

    Pair and episode ids start with it, so runs of two policies under one protocol can share a
    store without their ids colliding, while re-running the same command finds its own episodes.
    """
    return canonical_hash(
        {
            "protocol_hash": protocol_hash,
            "sim_policy": sim_policy,
            "real_policy": real_policy,
            "sim_source": sim_source,
        }
    )[:8]


def pair_id_for(key: str, task_id: str, drift_name: str, seed_index: int) -> str:
    """The pair id: "<run key>:<task id>:<drift>:s<k>"."""
    return f"{key}:{task_id}:{drift_name}:s{seed_index}"


def drift_name_of_pair(pair_id: str) -> str | None:
    """The drift setting's name inside a pair id made by `pair_id_for` (None if not one)."""
    parts = pair_id.rsplit(":", 2)
    if len(parts) != 3 or not parts[2].startswith("s") or not parts[2][1:].isdigit():
        return None
    return parts[1] or None


def manifest_row_key(pair_id: str) -> str:
    """The pair id without its run key, "<task id>:<drift>:s<k>": the same for every policy run
    under one protocol (how the conditions of an expansion audit are matched row by row)."""
    return pair_id.partition(":")[2]


def episode_id_for(pair_id: str, side: str, engine: str, attempt: int) -> str:
    """The episode id: "<pair id>-<side>-<engine>-a<attempt>" (a retry is a new attempt)."""
    return f"{pair_id}-{side}-{engine}-a{attempt}"


def spec_for_attempt(spec: EpisodeSpec, attempt: int) -> EpisodeSpec:
    """`spec` as attempt number `attempt`: same pair, side, engine and seed; its own episode id."""
    return spec.replace(
        attempt=attempt, episode_id=episode_id_for(spec.pair_id, spec.side, spec.engine, attempt)
    )


def next_attempt(spec: EpisodeSpec) -> EpisodeSpec:
    """The retry of `spec`: attempt + 1, a new episode id, the same seed."""
    return spec_for_attempt(spec, spec.attempt + 1)


def spec_slot(spec: EpisodeSpec) -> tuple[str, str, str]:
    """What a spec fills in the plan regardless of attempt: (pair id, side, engine)."""
    return (spec.pair_id, spec.side, spec.engine)


@dataclass(frozen=True)
class Manifest:
    """The planned episodes (attempt 1 of each) in run order, with a header saying how.

    Attributes:
        header: protocol name/hash, window, base seed, run key, policies, engines, the seed rule,
            drift weights and the real-side selection.
        specs: one `EpisodeSpec` per planned episode, in run order (pair by pair: sim engines,
            then real when the pair has a real episode).
    """

    header: Mapping[str, Any]
    specs: tuple[EpisodeSpec, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.header), "episodes": [s.to_dict() for s in self.specs]}

    @property
    def manifest_hash(self) -> str:
        """SHA-256 of the canonical JSON of `to_dict()` (what the manifest file carries)."""
        return canonical_hash(self.to_dict())

    def side(self, side: str, engines: Iterable[str] | None = None) -> list[EpisodeSpec]:
        """The specs of one side (optionally only some engines), in run order."""
        wanted = None if engines is None else set(engines)
        return [s for s in self.specs if s.side == side and (wanted is None or s.engine in wanted)]


def _calibration_header(protocol: Protocol) -> dict[str, str]:
    """The manifest's record of the sim side's calibration (verified now: an edited file or one
    fitted on another robot stops the run before anything is planned)."""
    if not protocol.sim_calibration:
        return {}
    from embodied_eval.protocol.calibration_file import read_calibration

    cal = read_calibration(protocol.sim_calibration, robot_id=protocol.robot_id)
    return {"sim_calibration_sha256": cal.sha256}


def plan_manifest(
    protocol: Protocol,
    *,
    engines: Sequence[str] | None = None,
    sim_policy: str | None = None,
    real_policy: str | None = None,
    real_engine: str | None = None,
    sim_source: str = "",
    sim_task: str = "",
) -> Manifest:
    """Draw the manifest from μ with the protocol's base seed (factorial over t × δ × s).

    Args:
        protocol: the validated protocol.
        engines: sim engines (default: the protocol's `[sim] engines`).
        sim_policy / real_policy: "module:factory" overrides of the protocol's policies.
        real_engine: the engine name written on real specs (default: the protocol's backend).
        sim_source: "" for the built-in engines; "gym:<id>|quality:<fn>" for an external
            Gymnasium environment (part of the run key, so its ids differ from built-in runs).
        sim_task: when set, sim specs are recorded under this family and task id (an external
            environment that is none of the protocol's tasks); pairs and seeds are unchanged.

    Returns:
        The `Manifest`: n_pairs = instances × drifts × seeds_per_instance pairs, each with one
        sim spec per engine; per (family, drift), round(real_fraction · n_pairs) pairs (half up)
        also get a real spec.
    """
    engine_list = list(engines) if engines else list(protocol.engines)
    if len(set(engine_list)) != len(engine_list):
        raise EvalError(f"engines: {engine_list} names an engine twice", key="engine")
    sim_pol = sim_policy or protocol.sim_policy
    real_pol = real_policy or protocol.real_policy
    real_eng = real_engine or protocol.real_backend
    key = run_key(protocol.protocol_hash, sim_pol, real_pol, sim_source)

    triples = [
        (inst, drift, k)
        for inst in protocol.instances
        for drift in protocol.drifts
        for k in range(protocol.seeds_per_instance)
    ]
    real_selected = _select_real_pairs(protocol, [(t[0].family, t[1].name) for t in triples])
    order = np.random.default_rng(derive_seed(protocol.base_seed, "run-order")).permutation(
        len(triples)
    )

    specs: list[EpisodeSpec] = []
    for index in order:
        inst, drift, k = triples[int(index)]
        pair = pair_id_for(key, inst.task_id, drift.name, k)
        common: dict[str, Any] = {
            "pair_id": pair,
            "family": inst.family,
            "task_id": inst.task_id,
            "seed": derive_seed(protocol.base_seed, f"{inst.task_id}:s{k}"),
            "drift_name": drift.name,
            "drift": dict(drift.params),
            "window": protocol.window_id,
            "protocol_hash": protocol.protocol_hash,
            "target_quality": inst.target_quality,
            "attempt": 1,
        }
        sim_common = {**common, "family": sim_task, "task_id": sim_task} if sim_task else common
        for engine in engine_list:
            specs.append(
                EpisodeSpec(
                    episode_id=episode_id_for(pair, "sim", engine, 1),
                    side="sim",
                    engine=engine,
                    policy=sim_pol,
                    **sim_common,
                )
            )
        if real_selected[int(index)]:
            specs.append(
                EpisodeSpec(
                    episode_id=episode_id_for(pair, "real", real_eng, 1),
                    side="real",
                    engine=real_eng,
                    policy=real_pol,
                    **common,
                )
            )

    header = {
        "format": MANIFEST_FORMAT,
        "protocol": protocol.name,
        "protocol_version": protocol.version,
        "protocol_hash": protocol.protocol_hash,
        "window": protocol.window_id,
        "window_start": protocol.window_start.isoformat(),
        "window_end": protocol.window_end.isoformat(),
        "base_seed": protocol.base_seed,
        "run_key": key,
        "sim_policy": sim_pol,
        "real_policy": real_pol,
        "sim_engines": engine_list,
        "real_engine": real_eng,
        "sim_source": sim_source,
        **({"sim_task": sim_task} if sim_task else {}),
        **_calibration_header(protocol),
        "seed_rule": SEED_RULE,
        "design": "factorial: instances x drifts x seeds_per_instance, seeded run order",
        "seeds_per_instance": protocol.seeds_per_instance,
        "drift_weights": {d.name: d.weight for d in protocol.drifts},
        "real_fraction": protocol.real_fraction,
        "pairs": len(triples),
        "real_pairs": int(sum(real_selected)),
    }
    return Manifest(header=header, specs=tuple(specs))


def _select_real_pairs(protocol: Protocol, strata: Sequence[tuple[str, str]]) -> list[bool]:
    """Mark round(real_fraction · n_s) pairs of each (family, drift) stratum for the real side,
    reproducibly.

    Stratified by family so that every family gets real pairs (S2R gates are per family), and
    by drift so that every day of a drift calendar does (a maintenance audit needs each day).
    With one drift the strata are the families.
    """
    rng = np.random.default_rng(derive_seed(protocol.base_seed, "real-selection"))
    chosen = [False] * len(strata)
    for stratum in sorted(set(strata)):
        members = [i for i, f in enumerate(strata) if f == stratum]
        count = math.floor(protocol.real_fraction * len(members) + 0.5)
        for pick in rng.choice(len(members), size=count, replace=False):
            chosen[members[int(pick)]] = True
    return chosen


def manifest_file_name(manifest: Manifest) -> str:
    return f"manifest-{manifest.manifest_hash[:12]}.json"


def write_manifest_file(manifest: Manifest, out_dir: str | Path) -> Path:
    """Write the manifest atomically as `<out_dir>/manifest-<hash12>.json`; returns the path.

    The file holds the manifest plus its `manifest_hash` (SHA-256 of the canonical JSON of
    everything else in the file); `verify_manifest_file` checks it.
    """
    path = Path(out_dir) / manifest_file_name(manifest)
    body = {**manifest.to_dict(), "manifest_hash": manifest.manifest_hash}
    atomic_write_text(path, canonical_json(body) + "\n")
    return path


def verify_manifest_file(path: str | Path) -> Manifest:
    """Read a manifest file and check its hash; raises EvalError when it does not match."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"manifest {str(path)!r} cannot be read: {exc}", key="manifest") from None
    claimed = data.pop("manifest_hash", None)
    episodes = data.pop("episodes", [])
    manifest = Manifest(header=data, specs=tuple(EpisodeSpec.from_dict(e) for e in episodes))
    if claimed != manifest.manifest_hash:
        raise EvalError(
            f"manifest {str(path)!r}: hash mismatch (file says {claimed}, contents hash to "
            f"{manifest.manifest_hash}); the escrowed manifest was altered",
            key="manifest",
        )
    return manifest


# --------------------------------------------------------------------------- settling

#: Statuses after which a manifest row is run again as a new attempt (while retries are left).
RETRY_ON = ("error", "aborted")
#: `control["abort_cause"]` values of aborts that are not the policy's (see `robot_side_abort`):
#: the robot was lost, the harness died mid-episode, or an operator stopped the run.
ROBOT_SIDE_CAUSES = (ROBOT_LOST, UNSUPERVISED, OPERATOR_STOP)

Slot = tuple[str, str, str]


def settle(attempts: Sequence[Episode], max_retries: int) -> tuple[Episode | None, int | None]:
    """The settled episode of one slot, or the attempt number to run next.

    Args:
        attempts: the stored attempts of one slot (any order).
        max_retries: retries allowed after attempt 1.

    Returns:
        (final, None) when settled: the first attempt that is scored (or has a status that is not
        retried), else the last attempt once its number exceeds max_retries. (None, n) when attempt
        n is due (n = 1 when nothing is stored).
    """
    if not attempts:
        return None, 1
    ordered = sorted(attempts, key=lambda e: e.attempt)
    for ep in ordered:
        if ep.scored or ep.status not in RETRY_ON:
            return ep, None
    last = ordered[-1]
    if policy_attempts(ordered) > max_retries:
        return last, None
    return None, last.attempt + 1


def robot_side_abort(ep: Episode) -> bool:
    """An attempt aborted by the robot side, not the policy: the robot was lost, the episode ran
    unsupervised because the harness died, or an operator stopped it from the run's console.
    Such attempts do not use the policy's retries."""
    return ep.status == "aborted" and ep.control.get("abort_cause") in ROBOT_SIDE_CAUSES


def policy_attempts(attempts: Sequence[Episode]) -> int:
    """Attempts that count against the retries: all but the robot-side aborts."""
    return sum(1 for ep in attempts if not robot_side_abort(ep))


def stored_attempts(store: Store, manifest: Manifest) -> dict[Slot, list[Episode]]:
    """Every stored attempt of every slot of `manifest`, by slot."""
    pairs = {s.pair_id for s in manifest.specs}
    out: dict[Slot, list[Episode]] = defaultdict(list)
    header = manifest.header
    for ep in store.episodes(
        protocol_hash=str(header["protocol_hash"]), window=str(header["window"])
    ):
        if ep.pair_id in pairs:
            out[(ep.pair_id, ep.side, ep.engine)].append(ep)
    return dict(out)
