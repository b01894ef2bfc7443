"""Where a run stands, read from the store: which manifest rows are settled, and the run summary.

The store is the only state a run keeps. A manifest row (a *slot*: pair, side, engine) is settled
when one of its attempts is scored, or its last attempt is unscored and no retries are left (or
its status is not one that is retried). Otherwise its next attempt is due. Resume needs nothing
else: re-running the same command runs exactly the slots that are not settled.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_eval.canonical import atomic_write_text, canonical_json
from embodied_eval.records import Episode
from embodied_eval.manifest import Manifest, spec_slot
from embodied_eval.store.core import Store, apply_migrations, transaction

#: Statuses after which a manifest row is run again as a new attempt (while retries are left).
RETRY_ON = ("error", "aborted")
#: `control["abort_cause"]` values of robot-side aborts (see `robot_side_abort`).
ROBOT_SIDE_CAUSES = ("robot_lost", "unsupervised")

#: The runner's own table: one row per invocation, with its summary.
RUNNER_MIGRATIONS = (
    """
    CREATE TABLE runner_runs (
        run_id        TEXT PRIMARY KEY,
        manifest_hash TEXT NOT NULL,
        protocol_hash TEXT NOT NULL,
        window        TEXT NOT NULL,
        started_at    TEXT NOT NULL,
        finished_at   TEXT NOT NULL,
        summary_json  TEXT NOT NULL
    );
    CREATE INDEX runner_runs_by_manifest ON runner_runs(manifest_hash, started_at);
    """,
)

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
    """An attempt aborted by the robot side, not the policy: the robot was lost, or the episode
    ran unsupervised because the harness died. Such attempts do not use the policy's retries."""
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


def progress_rows(
    manifest: Manifest,
    attempts: Mapping[Slot, Sequence[Episode]],
    max_retries: int,
    sides: Iterable[str],
) -> list[dict[str, Any]]:
    """Per (side, engine, family): planned, done, scored, successes, unscored, attempts.

    `done` counts settled slots, `successes`/`scored` count settled scored episodes (z = 1 among
    those with z defined), `unscored` settled slots that ended error/aborted after their retries.
    """
    wanted = set(sides)
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for spec in manifest.specs:
        if spec.side not in wanted:
            continue
        key = (spec.side, spec.engine, spec.family)
        row = rows.setdefault(
            key,
            {
                "side": spec.side,
                "engine": spec.engine,
                "family": spec.family,
                "planned": 0,
                "done": 0,
                "scored": 0,
                "successes": 0,
                "unscored": 0,
                "attempts": 0,
            },
        )
        tried = attempts.get(spec_slot(spec), [])
        final, _ = settle(tried, max_retries)
        row["planned"] += 1
        row["attempts"] += len(tried)
        if final is not None:
            row["done"] += 1
            if final.scored:
                row["scored"] += 1
                row["successes"] += int(final.success)
            else:
                row["unscored"] += 1
    side_order = {"sim": 0, "real": 1}
    return [rows[k] for k in sorted(rows, key=lambda k: (side_order.get(k[0], 2), k[1], k[2]))]


@dataclass
class RunSummary:
    """What one invocation of the runner did, and where the whole manifest stands.

    Attributes:
        rows: `progress_rows` at the end of the invocation.
        stopping: the anytime-stopping decision (`StopDecision.to_json()`), None when disabled.
        real_stopped: why the real side stopped before its manifest ran out ("" if it did not).
        real_halted: the real side halted because something needs a person (the robot did not
            come back, or kept aborting) — the run exits non-zero; anytime stopping is not a halt.
        real_error: why the real side could not run ("" if it could).
        written: episodes written by this invocation (attempts, including errors).
        interrupted: Ctrl-C stopped the run; re-running the command continues it.
        settled: manifest rows this invocation settled (their last attempt ran in it).
        failed / first_error: rows this invocation settled as `error` (their retries spent), and
            the first one's reason; a run with any exits non-zero naming both.
        spent: rows of the selected sides that ended `error` and used their retries, so
            re-running does not run them again (`retries_spent`).
        actions_clipped: policy actions clipped to the action space in the stored episodes of
            the selected sides (only with `[sim] out_of_range_actions = "clip"`).
    """

    run_id: str
    protocol: str
    protocol_hash: str
    window: str
    manifest_hash: str
    manifest_path: str
    out_dir: str
    db_path: str
    sides: list[str]
    sim_engines: list[str]
    executor: str
    started_at: str
    finished_at: str = ""
    dry_run: bool = False
    interrupted: bool = False
    written: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    stopping: dict[str, Any] | None = None
    real_stopped: str = ""
    real_halted: bool = False
    real_error: str = ""
    incident_log: str = ""
    settled: int = 0
    failed: int = 0
    first_error: str = ""
    spent: dict[str, Any] | None = None
    actions_clipped: int = 0

    def failure(self) -> str:
        """Why this invocation counts as failed ("" when it does not): episodes that ended
        `error`, or nothing run because the errors of earlier runs used their retries."""
        if self.failed:
            return (
                f"{self.failed} of the {self.settled} episode(s) settled by this run ended "
                f"`error`; first error: {self.first_error}"
            )
        if self.spent and not self.written:
            return retries_spent_message(self.spent)
        return ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def complete(self) -> bool:
        """Every planned slot of the selected sides is settled, the real side counting as done
        once anytime stopping has decided."""
        decided = self.stopping is not None and self.stopping["decision"] != "continue"
        return all(
            row["done"] >= row["planned"] or (row["side"] == "real" and decided)
            for row in self.rows
        )


def retries_spent(
    manifest: Manifest,
    attempts: Mapping[Slot, Sequence[Episode]],
    max_retries: int,
    sides: Iterable[str],
) -> dict[str, Any] | None:
    """The rows of `sides` settled as `error` after using their retries (None when there are
    none): how many, the first one's reason, and the `--max-retries` that runs each once more."""
    wanted = set(sides)
    count, most, first = 0, 0, ""
    for spec in manifest.specs:
        if spec.side not in wanted:
            continue
        tried = attempts.get(spec_slot(spec), [])
        final, _ = settle(tried, max_retries)
        if final is None or final.status != "error" or final.scored:
            continue
        count += 1
        most = max(most, policy_attempts(tried))
        first = first or f"{final.episode_id}: {final.status_reason}"
    if not count:
        return None
    return {"episodes": count, "max_retries": max_retries, "retry_with": most, "first_error": first}


def retries_spent_message(spent: Mapping[str, Any]) -> str:
    """What to do when rows ended `error` and have no retries left."""
    return (
        f"{spent['episodes']} episode(s) ended `error` and used their retries (--max-retries "
        f"{spent['max_retries']}), so they are not run again; first error: "
        f"{spent['first_error']}. Fix the cause, then re-run with --max-retries "
        f"{spent['retry_with']} to run each once more"
    )


def persist_summary(store: Store, summary: RunSummary, out_dir: Path) -> Path:
    """Write the summary atomically as `<out>/summary-<manifest12>.json` and as a runner_runs row."""
    path = out_dir / f"summary-{summary.manifest_hash[:12]}.json"
    body = canonical_json(summary.to_json())
    atomic_write_text(path, body + "\n")
    apply_migrations(store.conn, "runner", RUNNER_MIGRATIONS)
    with transaction(store.conn):
        store.conn.execute(
            "INSERT OR REPLACE INTO runner_runs VALUES (?,?,?,?,?,?,?)",
            (
                summary.run_id,
                summary.manifest_hash,
                summary.protocol_hash,
                summary.window,
                summary.started_at,
                summary.finished_at,
                body,
            ),
        )
    return path


def run_history(store: Store, manifest_hash: str | None = None) -> list[dict[str, Any]]:
    """Summaries of earlier invocations (oldest first), optionally of one manifest."""
    import json

    apply_migrations(store.conn, "runner", RUNNER_MIGRATIONS)
    sql = "SELECT summary_json FROM runner_runs"
    params: list[str] = []
    if manifest_hash is not None:
        sql += " WHERE manifest_hash = ?"
        params.append(manifest_hash)
    return [json.loads(r[0]) for r in store.conn.execute(sql + " ORDER BY started_at", params)]
