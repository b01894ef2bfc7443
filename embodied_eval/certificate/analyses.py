"""Every analysis choice in the ledger: each stored-data `compare` and each `rank` is a chained
`analysis` record of the trial ledger, with its seed and outcome, and a certificate lists every
one run on its window before it was issued.

Re-running a sequential comparison on the same stored pairs with new order seeds until one
declares a winner voids its anytime-valid guarantee; a bootstrap seed can be shopped the same way.
Nothing here forbids re-running: it makes every run visible. A record holds:

    command         "compare" or "rank"
    policies        the policies compared (compare: [A, B]; rank: the ranked ones)
    side            "sim" or "real" (rank: null for both)
    seed            compare: the pair-order seed used (given or derived); rank: the bootstrap seed
    seed_given      whether the user chose the seed
    outcome         compare: the decision ("A better", "no difference", ...); rank: the policy
                    ranked first
    trials          compare: paired trials used; rank: episodes used
    episodes_sha256 SHA-256 of the sorted episode ids used: runs on the same stored data share it

The certificate's `analyses` entry: {"runs": [record fields + "record", "seq", "at"], in chain
order], "repeated": [{"command", "episodes_sha256", "runs", "seeds", "outcomes"}] for data
analysed more than once}.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_eval.records import Episode
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, transaction

#: Ledger record kind of an analysis run.
KIND = "analysis"


def episodes_digest(episode_ids: Iterable[str]) -> str:
    """SHA-256 of the sorted episode ids, one per line."""
    return hashlib.sha256("\n".join(sorted(set(episode_ids))).encode("utf-8")).hexdigest()


def window_of(episodes: Sequence[Episode], policies: Iterable[str]) -> str:
    """The one window the analysed policies' episodes belong to, or "" when several."""
    names = set(policies)
    windows = {e.window for e in episodes if e.policy in names}
    return windows.pop() if len(windows) == 1 else ""


def record_analysis(
    db: str | os.PathLike[str],
    *,
    command: str,
    window: str,
    policies: Sequence[str],
    side: str | None,
    seed: int,
    seed_given: bool,
    outcome: str | None,
    trials: int,
    episode_ids: Iterable[str],
) -> str:
    """Append an `analysis` record to the store's trial ledger; returns its record id."""
    record_id = ledger.new_record_id("ANA")
    data = {
        "command": command,
        "policies": list(policies),
        "side": side,
        "seed": int(seed),
        "seed_given": bool(seed_given),
        "outcome": outcome,
        "trials": int(trials),
        "episodes_sha256": episodes_digest(episode_ids),
    }
    with Store(Path(db), create=False) as store, transaction(store.conn):
        ledger.append(store.conn, KIND, record_id, data, window=window)
    return record_id


def window_analyses(db: str | os.PathLike[str], window: str, up_to_seq: int) -> dict[str, Any]:
    """The certificate's `analyses` entry: the window's analysis records up to ledger record
    `up_to_seq` (the certified head), and the data analysed more than once."""
    with Store(Path(db), create=False) as store:
        rows = ledger.rows(store.conn, "kind = ?", (KIND,))
    runs = [
        {"record": r.record_id, "seq": r.seq, "at": r.at, **dict(r.data)}
        for r in rows
        if r.window == window and r.seq <= up_to_seq
    ]
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for run in runs:
        groups.setdefault((str(run["command"]), str(run["episodes_sha256"])), []).append(run)
    repeated = [
        {
            "command": command,
            "episodes_sha256": digest,
            "runs": len(group),
            "seeds": [g["seed"] for g in group],
            "outcomes": [g["outcome"] for g in group],
        }
        for (command, digest), group in groups.items()
        if len(group) > 1
    ]
    return {"runs": runs, "repeated": repeated}
