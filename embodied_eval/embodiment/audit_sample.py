"""The window's judge audit in the trial ledger: the drawn sample and the technicians' labels.

* `draw_window_audit` draws the audit sample of a window's judged real episodes
  (`embodiment.window_audit.draw_audit`, with a recorded seed) and chains an `audit_draw`
  record: the seed, the strata, the sample, and the detector that judged (name, version, code
  hash).
* `label_episode` chains an `audit_label` record: a technician's label of one sampled episode
  from its recording (`success`, `failure` or `cannot_tell`), who gave it, the judge's verdict
  and the detector's name, version and code hash; signed when a key is given. The scored view
  sets `audited_success` from it (`ledger.changes_of`), so the window's episodes carry their
  labels into the judge's accuracy (`embodiment.judge`).
* `measure_window_audit` chains a `judge_accuracy` record: Se and Sp per family with exact
  intervals from the window's latest labels, naming the detector (name, version, code hash) and
  the label records used.
* `audit_records` lists a window's draws and labels (the certificate names them).

An episode that is not one of the window's judged real episodes is refused.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.embodiment.window_audit import (
    LABELS,
    AuditDraw,
    detector_of_episode,
    draw_audit,
    recording_of,
    verdict_of,
    window_audit_accuracy,
)
from embodied_eval.errors import EvalError
from embodied_eval.plugins import DETECTOR_CODE_HASH, resolve
from embodied_eval.records import Episode
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, default_db_path, transaction


def detector_of(episodes: list[Episode]) -> dict[str, str]:
    """{kind, name, version, code_hash} of the judge of most of these episodes ({} if none)."""
    judges: Counter[tuple[str, str, str]] = Counter()
    for e in episodes:
        found = detector_of_episode(e)  # a cannot-judge episode names its detector in control
        if found is not None:
            judges["detector", *found] += 1
        elif e.judge:
            kind, name, version = (str(e.judge.get(k, "")) for k in ("kind", "name", "version"))
            judges[kind, name, version] += 1
    if not judges:
        return {}
    (kind, name, version), _ = judges.most_common(1)[0]
    code = ""
    if kind == "detector":
        try:
            code = str(resolve(DETECTOR_CODE_HASH)(name, version))
        except EvalError:
            code = ""
    return {"kind": kind, "name": name, "version": version, "code_hash": code}


def _judged(store: Store, window: str) -> list[Episode]:
    episodes = store.scored_episodes(window=window, side="real").episodes
    judged = [e for e in episodes if verdict_of(e) is not None]
    if not judged:
        raise EvalError(f"window {window!r}: no judged real episode to audit", key="window")
    return judged


def draw_window_audit(
    db: str | os.PathLike[str] | None, window: str, seed: int, per_stratum: int
) -> tuple[AuditDraw, dict[str, Any], list[Episode]]:
    """Draw and chain the audit sample of `window`; returns (draw, record, sampled episodes)."""
    path = Path(db) if db is not None else default_db_path()
    with Store(path, create=False) as store, transaction(store.conn):
        judged = _judged(store, window)
        draw = draw_audit(judged, seed, per_stratum)
        payload = {"window": window, **draw.to_json(), "detector": detector_of(judged)}
        row = ledger.append(
            store.conn, "audit_draw", ledger.new_record_id("ADR"), payload, window=window
        )
    by_id = {e.episode_id: e for e in judged}
    record = {**payload, "record_id": row.record_id, "seq": row.seq}
    return draw, record, [by_id[i] for i in draw.episode_ids]


def latest_draw_window(db: str | os.PathLike[str] | None) -> str:
    """The window of the most recent audit draw (EvalError when there is none)."""
    path = Path(db) if db is not None else default_db_path()
    with Store(path, create=False) as store:
        draws = ledger.rows(store.conn, "kind = 'audit_draw'")
    if not draws:
        raise EvalError("no audit drawn yet: run `trial audit --window W` first", key="window")
    return str(draws[-1].data["window"])


def label_episode(
    db: str | os.PathLike[str] | None,
    window: str,
    episode_id: str,
    label: str,
    by: str,
    key: Ed25519PrivateKey | None = None,
    note: str = "",
) -> dict[str, Any]:
    """Chain a technician's label of `episode_id` of `window` (module docstring)."""
    if label not in LABELS:
        raise EvalError(f"label {label!r}: expected one of {', '.join(LABELS)}", key="label")
    if not by.strip():
        raise EvalError("--by: name who labelled the recording", key="by")
    path = Path(db) if db is not None else default_db_path()
    with Store(path, create=False) as store, transaction(store.conn):
        judged = {e.episode_id: e for e in _judged(store, window)}
        episode = judged.get(episode_id)
        if episode is None:
            raise EvalError(
                f"episode {episode_id!r} is not a judged real episode of window {window!r}; "
                "label one the audit drew (`trial audit --window W` lists them)",
                key="episode_id",
            )
        chained = ledger.find(store.conn, "episode", episode_id)
        payload = {
            "window": window,
            "episode_id": episode_id,
            "episode_hash": None if chained is None else chained.hash,
            "family": episode.family,
            "label": label,
            "verdict": verdict_of(episode),
            "by": by.strip(),
            "detector": detector_of([episode]),
            "recording": recording_of(episode),
            "note": note.strip(),
        }
        row = ledger.append(
            store.conn,
            "audit_label",
            ledger.new_record_id("ALB"),
            payload,
            window=window,
            subject=episode_id,
            signing_key=key,
        )
    return {**payload, "record_id": row.record_id, "seq": row.seq, "signer": row.signer}


def audit_records(conn: Any, window: str) -> dict[str, Any]:
    """The window's audit draws and labels in chain order: {"draws": [...], "labels": [...]}
    (each {record_id, seq, ...payload}; a later label of an episode supersedes an earlier one)."""
    if not ledger.table_exists(conn):
        return {"draws": [], "labels": []}
    found = ledger.rows(conn, "kind IN ('audit_draw', 'audit_label') AND window = ?", (window,))
    draws: list[dict[str, Any]] = []
    labels: list[dict[str, Any]] = []
    for row in found:
        entry = {"record_id": row.record_id, "seq": row.seq, **row.data}
        (draws if row.kind == "audit_draw" else labels).append(entry)
    return {"draws": draws, "labels": labels}


def audit_note(records: dict[str, Any]) -> str:
    """One line naming a window's audit sample (draw record, seed, size) and its labels."""
    draws, labels = records["draws"], records["labels"]
    parts = [
        f"audit sample {d['record_id']} (seed {d['seed']}, {len(d['episode_ids'])} episode(s) "
        f"drawn, up to {d['per_stratum']} per family × verdict, every cannot-judge one)"
        for d in draws
    ]
    latest = {lab["episode_id"]: lab["label"] for lab in labels}
    tally = Counter(latest.values())
    parts.append(
        f"{len(latest)} episode(s) labelled from their recordings ("
        + ", ".join(f"{tally[k]} {k}" for k in LABELS)
        + ")"
    )
    return "judge audit: " + "; ".join(parts)


def measure_window_audit(
    db: str | os.PathLike[str] | None,
    window: str,
    level: float = 0.95,
    key: Ed25519PrivateKey | None = None,
) -> dict[str, Any]:
    """Chain the judge's accuracy on `window` from its latest labels; returns the payload
    ({window, detector, level, labels (record ids), accuracy {"all"/family: counts, Se, Sp}})."""
    path = Path(db) if db is not None else default_db_path()
    with Store(path, create=False) as store, transaction(store.conn):
        judged = _judged(store, window)
        labels = audit_records(store.conn, window)["labels"]
        if not labels:
            raise EvalError(
                f"window {window!r}: no label yet (`trial audit --label EPISODE_ID LABEL --by "
                "NAME`)",
                key="window",
            )
        latest = {lab["episode_id"]: lab for lab in labels}
        accuracy = window_audit_accuracy(judged, {k: v["label"] for k, v in latest.items()})
        payload = {
            "window": window,
            "detector": detector_of(judged),
            "level": level,
            "labels": [latest[k]["record_id"] for k in sorted(latest)],
            "accuracy": {k: v.to_json(level) for k, v in accuracy.items()},
        }
        row = ledger.append(
            store.conn,
            "judge_accuracy",
            ledger.new_record_id("JAC"),
            payload,
            window=window,
            signing_key=key,
        )
    return {**payload, "record_id": row.record_id, "seq": row.seq, "signer": row.signer}
