"""The window as the console shows it, read from the store through a read-only connection.

`window_view` reads the manifest (the run's, or the newest one escrowed for the protocol), every
stored attempt of it, and returns the numbers and HTML sections of the page:

- progress per side × engine × family × drift day (`runner.summary.progress_rows`): run/planned,
  successes of the scored episodes with a Wilson interval at the protocol's confidence
  (`stats.proportions.wilson_interval`), aborted and errored rows, and per side the ETA at the
  rate episodes were recorded recently;
- the anytime-stopping state (`runner.stopping`, replayed from the store in run order) and the
  gate it decides;
- the latest episodes with their recording links and camera strips (the report's pieces,
  `certificate.episodes_html`), linked to the console's own file URLs;
- the incident log's incidents of the window (severity, awaiting review) and the operator
  requests (stop, pause, resume) chained in the ledger.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from embodied_eval.certificate.episodes_html import (
    camera_strip_html,
    episode_cell,
    judge_cell,
    recording_links,
)
from embodied_eval.certificate.html_parts import esc, fmt_number, table, verdict_html
from embodied_eval.errors import EvalError
from embodied_eval.manifest import Manifest, settle, stored_attempts
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, Episode, EpisodeSpec, parse_utc
from embodied_eval.runner.summary import progress_rows
from embodied_eval.runner.trials import replay_stopping
from embodied_eval.stats.proportions import wilson_interval
from embodied_eval.store import ledger
from embodied_eval.store.artifacts import artifact_file
from embodied_eval.store.core import Store

#: Episodes listed under "recent episodes" (newest first).
RECENT_EPISODES = 8
#: Recent episodes the ETA's rate is measured over, per side.
ETA_EPISODES = 20
#: Without a running harness attached, a side counts as running when its last episode started
#: within this many seconds.
RUNNING_WITHIN_S = 600.0


def load_manifest(store: Store, protocol: Protocol, manifest_hash: str | None) -> Manifest:
    """The manifest `manifest_hash`, else the newest one escrowed for the protocol."""
    if manifest_hash is None:
        found = store.manifests(protocol_hash=protocol.protocol_hash)
        if not found:
            raise EvalError(
                f"the store holds no manifest of protocol {protocol.name!r} (hash "
                f"{protocol.protocol_hash[:12]}…): run it first (`embodied-eval run`)",
                key="protocol",
            )
        manifest_hash = found[-1]["manifest_hash"]
    data = store.manifest(manifest_hash)
    if data is None:
        raise EvalError(f"the store holds no manifest {manifest_hash!r}", key="manifest")
    episodes = data.pop("episodes", [])
    return Manifest(header=data, specs=tuple(EpisodeSpec.from_dict(e) for e in episodes))


def _eta_s(
    episodes: Sequence[Episode], remaining: int, now: dt.datetime, since: str
) -> float | None:
    """Seconds to finish `remaining` rows at the rate the last ETA_EPISODES episodes of a side
    started (from the run's start when one is attached); None when the side is not running."""
    if remaining <= 0:
        return 0.0
    times = sorted(parse_utc(e.started_at, key="started_at") for e in episodes)
    if since:
        start = parse_utc(since, key="since")
        times = [t for t in times if t >= start]
        if not times:
            return None
        span = (now - start).total_seconds()
        count = len(times)
    else:
        times = times[-ETA_EPISODES:]
        if len(times) < 2 or (now - times[-1]).total_seconds() > RUNNING_WITHIN_S:
            return None
        span = (now - times[0]).total_seconds()
        count = len(times) - 1
    if span <= 0 or count <= 0:
        return None
    return remaining * span / count


def _progress(
    protocol: Protocol, manifest: Manifest, attempts: Any, max_retries: int, since: str
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    days = {d.name: d.day for d in protocol.drifts}
    rows = progress_rows(manifest, attempts, max_retries, ("sim", "real"), drift_days=days)
    for row in rows:
        if row["scored"]:
            est = wilson_interval(row["successes"], row["scored"], level=protocol.confidence)
            row["interval"] = [est.low, est.high]
        else:
            row["interval"] = None
    now = dt.datetime.now(dt.UTC)
    sides: dict[str, dict[str, Any]] = {}
    for side in ("sim", "real"):
        mine = [r for r in rows if r["side"] == side]
        if not mine:
            continue
        planned = sum(r["planned"] for r in mine)
        done = sum(r["done"] for r in mine)
        stored = [e for slot, eps in attempts.items() if slot[1] == side for e in eps]
        sides[side] = {
            "planned": planned,
            "done": done,
            "eta_s": _eta_s(stored, planned - done, now, since),
        }
    return rows, sides


def _stopping(
    protocol: Protocol, manifest: Manifest, attempts: Any, max_retries: int
) -> dict[str, Any] | None:
    stopper, decision = replay_stopping(protocol, manifest, attempts, max_retries)
    if stopper is None:
        return None
    out = (decision or stopper.decision()).to_json()
    rule = protocol.stopping
    out["gate"] = f"AR ≥ {rule.ar_threshold:g} (real side, anytime-valid)"
    return out


def _incidents(db_path: Path, window: str) -> tuple[list[dict[str, Any]], str]:
    try:
        read = resolve(INCIDENT_LOG["window_incidents"])
        found = read(db_path, window)
    except EvalError as exc:
        return [], f"incident log: {exc}"
    rows = [
        {
            "incident_id": i.incident_id,
            "occurred_at": i.occurred_at,
            "severity": i.severity,
            "episode_id": i.episode_id or "",
            "reviewed": i.reviewed,
            "text": i.text,
        }
        for i in found
    ]
    return rows[::-1], ""


def _operator_rows(store: Store, window: str) -> list[dict[str, Any]]:
    if not ledger.table_exists(store.conn):
        return []
    rows = ledger.rows(store.conn, "kind != 'episode' AND kind = 'operator'")
    return [{**r.data, "record_id": r.record_id} for r in rows if r.window == window][::-1]


def artifact_url(episode_id: str, index: int) -> str:
    """The console's URL of an episode's artifact (served from the store's record only; the
    page adds its viewer's token when the link is followed)."""
    return f"/files/{quote(episode_id, safe='')}/{index}"


@functools.lru_cache(maxsize=256)
def _strip(episode_id: str, artifacts: tuple[Artifact, ...], store_path: Path) -> str:
    return camera_strip_html(artifacts, store_path)


def _recent_html(
    recent: Sequence[Episode],
    href: Callable[[Episode, Artifact], str | None],
    store_path: Path,
) -> str:
    rows = []
    for e in recent:
        media = recording_links(e, functools.partial(href, e))
        if e.artifacts:
            media += _strip(e.episode_id, tuple(e.artifacts), store_path)
        rows.append(
            [
                f'<code data-episode="{esc(e.episode_id)}">{esc(e.episode_id)}</code>',
                esc(e.side),
                episode_cell(e) + (f"<br>{esc(e.status_reason)}" if e.status_reason else ""),
                judge_cell(e),
                media,
            ]
        )
    return table(["episode", "side", "outcome", "judge", "recording and camera frames"], rows)


def _progress_html(rows: Sequence[dict[str, Any]], level: float) -> str:
    out = []
    for r in rows:
        key = f"{r['side']}/{r['engine']}/{r['family']}/d{r['drift_day']}"
        interval = "—"
        if r["interval"] is not None:
            low, high = r["interval"]
            interval = f"[{low:.4f}, {high:.4f}]"
        cells = [
            ("side", esc(r["side"])),
            ("engine", esc(r["engine"])),
            ("family", esc(r["family"])),
            ("day", fmt_number(r["drift_day"])),
            ("run", f"{r['done']}/{r['planned']}"),
            ("successes", f"{r['successes']}/{r['scored']}"),
            ("interval", interval),
            ("aborted", fmt_number(r["aborted"])),
            ("errors", fmt_number(r["errors"])),
        ]
        out.append([f'<span data-cell="{esc(key)}/{name}">{html}</span>' for name, html in cells])
    headers = ["side", "engine", "family", "drift day", "run / planned", "successes / scored"]
    headers += [f"{level * 100:g} % Wilson", "aborted", "errors"]
    return table(headers, out)


def _incidents_html(incidents: Sequence[dict[str, Any]], note: str) -> str:
    rows = [
        [
            f"<code>{esc(i['incident_id'])}</code>",
            esc(i["occurred_at"]),
            f'<span data-severity="{esc(i["severity"])}">{esc(i["severity"])}</span>',
            esc(i["episode_id"] or "—"),
            "reviewed" if i["reviewed"] else "<b>awaiting review</b>",
            esc(i["text"]),
        ]
        for i in incidents[:50]
    ]
    head = f'<p class="muted">{esc(note)}</p>' if note else ""
    return head + table(["incident", "occurred", "severity", "episode", "review", "what"], rows)


def _stopping_html(stopping: dict[str, Any] | None) -> str:
    if stopping is None:
        return (
            '<p class="muted">Anytime stopping is off (<code>[stopping] enabled = false</code>): '
            "the gates are decided by <code>embodied-eval metrics</code> at the end.</p>"
        )
    word = {"continue": "undecided"}.get(stopping["decision"], stopping["decision"])
    state = "inconclusive" if word == "undecided" else word
    return (
        f'<p><b>{esc(stopping["gate"])}</b>: <span data-stopping="{esc(word)}">'
        f"{verdict_html(state)}</span> — {esc(stopping['reason'])}</p>"
    )


def window_view(
    db_path: Path,
    protocol: Protocol,
    *,
    manifest_hash: str | None = None,
    max_retries: int = 1,
    since: str = "",
) -> dict[str, Any]:
    """The page's numbers and HTML sections for the window (see the module docstring).

    Args:
        db_path: the store (opened read-only).
        protocol: the window's protocol.
        manifest_hash: the run's manifest (default: the newest of the protocol).
        max_retries: the run's `--max-retries` (when a row counts as settled).
        since: the attached run's start (ISO UTC): the ETA's rate is this run's.
    """
    with Store(db_path, read_only=True) as store:
        manifest = load_manifest(store, protocol, manifest_hash)
        attempts = stored_attempts(store, manifest)
        operator = _operator_rows(store, protocol.window_id)
    rows, sides = _progress(protocol, manifest, attempts, max_retries, since)
    stopping = _stopping(protocol, manifest, attempts, max_retries)
    incidents, note = _incidents(db_path, protocol.window_id)
    every = sorted(
        (e for eps in attempts.values() for e in eps),
        key=lambda e: (e.started_at, e.episode_id),
        reverse=True,
    )
    settled = {
        slot: settle(eps, max_retries)[0] for slot, eps in attempts.items()
    }  # for the page's counts of settled real outcomes
    real_scored = [e for e in settled.values() if e is not None and e.side == "real" and e.scored]

    def href(e: Episode, art: Artifact) -> str | None:
        index = list(e.artifacts).index(art)
        found = artifact_file(art.path, db_path)
        return artifact_url(e.episode_id, index) if found is not None else None

    return {
        "protocol": protocol.name,
        "window": protocol.window_id,
        "manifest_hash": manifest.manifest_hash,
        "policies": {
            "sim": manifest.header.get("sim_policy"),
            "real": manifest.header.get("real_policy"),
        },
        "confidence": protocol.confidence,
        "rows": rows,
        "sides": sides,
        "stopping": stopping,
        "real_scored": len(real_scored),
        "real_successes": sum(int(e.success) for e in real_scored),
        "incidents": incidents,
        "awaiting_review": sum(1 for i in incidents if not i["reviewed"]),
        "operator": operator,
        "html": {
            "progress": _progress_html(rows, protocol.confidence),
            "stopping": _stopping_html(stopping),
            "episodes": _recent_html(every[:RECENT_EPISODES], href, db_path),
            "incidents": _incidents_html(incidents, note),
        },
    }


def episode_artifact(db_path: Path, episode_id: str, index: int) -> Path:
    """The file of an episode's `index`-th artifact, as the store records it (EvalError when the
    store does not list it or it is not on disk): the console serves nothing else."""
    with Store(db_path, read_only=True) as store:
        episode = store.get_episode(episode_id)
    if episode is None or not 0 <= index < len(episode.artifacts):
        raise EvalError(f"no artifact {index} of episode {episode_id!r} in the store", key="file")
    recorded = episode.artifacts[index].path
    path = artifact_file(recorded, db_path)
    if path is None:
        raise EvalError(f"{Path(recorded).name} is not on disk", key="file")
    return path
