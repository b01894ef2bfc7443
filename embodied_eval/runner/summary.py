"""Where a run stands, read from the store: which manifest rows are settled, and the run summary.

The store is the only state a run keeps. A manifest row (a *slot*: pair, side, engine) is settled
when one of its attempts is scored, or its last attempt is unscored and no retries are left (or
its status is not one that is retried). Otherwise its next attempt is due. Resume needs nothing
else: re-running the same command runs exactly the slots that are not settled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_eval.canonical import atomic_write_text, canonical_json
from embodied_eval.manifest import Manifest, Slot, policy_attempts, settle, spec_slot
from embodied_eval.records import Episode
from embodied_eval.store.core import Store, apply_migrations, transaction

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

def progress_rows(
    manifest: Manifest,
    attempts: Mapping[Slot, Sequence[Episode]],
    max_retries: int,
    sides: Iterable[str],
    drift_days: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Per (side, engine, family): planned, done, scored, successes, unscored, attempts.

    `done` counts settled slots, `successes`/`scored` count settled scored episodes (z = 1 among
    those with z defined), `unscored` settled slots that ended error/aborted after their retries.
    With `drift_days` (drift name → its day on the drift calendar) the rows are per (side, engine,
    family, drift day) and also carry `drift_day`, `aborted` and `errors` (the unscored slots by
    how they ended) — the live console's table.
    """
    wanted = set(sides)
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for spec in manifest.specs:
        if spec.side not in wanted:
            continue
        key: tuple[Any, ...] = (spec.side, spec.engine, spec.family)
        extra: dict[str, Any] = {}
        if drift_days is not None:
            day = drift_days.get(spec.drift_name, 0)
            key += (day,)
            extra = {"drift_day": day, "aborted": 0, "errors": 0}
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
                **extra,
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
                if drift_days is not None:
                    row["errors" if final.status == "error" else "aborted"] += 1
    side_order = {"sim": 0, "real": 1}
    return [rows[k] for k in sorted(rows, key=lambda k: (side_order.get(k[0], 2), *k[1:]))]


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
        operator: the stops, pauses and resumes asked for from the run's console (each also a
            chained `operator` ledger record).
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
    operator: list[dict[str, Any]] = field(default_factory=list)

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
