"""The window as the console shows it, read from the store through a read-only connection.

`window_view` reads the manifests it shows — the attached run's, or, for a stored window, every
manifest escrowed for the window (the run and, say, an expansion audit's arms), each named — every
stored attempt of them, and returns the numbers and HTML sections of the page:

- what the certificate counts, per family (`embodiment.window_rates.family_rows`, over every
  manifest and every stored episode of the window: the certificate's trials section and
  `metrics --json` "trials" show the same rows);
- progress per manifest × side × engine × family × drift day (`runner.summary.progress_rows`;
  a stored window's manifest shows the sides it has stored attempts on): run/planned,
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
from dataclasses import dataclass
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
from embodied_eval.embodiment.window_rates import family_rows, window_manifests
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
    return manifest_of(data)


def manifest_of(body: dict[str, Any]) -> Manifest:
    """A stored manifest body (header and "episodes") as a `Manifest`."""
    header = {k: v for k, v in body.items() if k != "episodes"}
    return Manifest(
        header=header, specs=tuple(EpisodeSpec.from_dict(e) for e in body.get("episodes", []))
    )


@dataclass
class Shown:
    """One manifest the page shows: its name, the manifest, its stored attempts, its sides."""

    name: str
    manifest: Manifest
    attempts: dict[Any, list[Episode]]
    sides: tuple[str, ...]


def _shown(store: Store, protocol: Protocol, manifest_hash: str | None) -> list[Shown]:
    """The attached run's manifest (both sides), else every manifest of the window, each with
    the sides it has stored attempts on (all sides when none has any yet)."""
    if manifest_hash is not None:
        manifest = load_manifest(store, protocol, manifest_hash)
        named = [
            m for m in window_manifests(store, protocol) if m["manifest_hash"] == manifest_hash
        ]
        name = named[0]["name"] if named else "run"
        return [Shown(name, manifest, stored_attempts(store, manifest), ("sim", "real"))]
    found = window_manifests(store, protocol)
    if not found:  # the protocol's newest manifest (refused, naming it, when there is none)
        manifest = load_manifest(store, protocol, None)
        return [Shown("run", manifest, stored_attempts(store, manifest), ("sim", "real"))]
    out = []
    for m in found:
        manifest = manifest_of(m["manifest"])
        attempts = stored_attempts(store, manifest)
        sides = tuple(s for s in ("sim", "real") if any(slot[1] == s for slot in attempts))
        out.append(Shown(m["name"], manifest, attempts, sides))
    if not any(s.sides for s in out):
        out = [Shown(s.name, s.manifest, s.attempts, ("sim", "real")) for s in out]
    return out


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
    protocol: Protocol, shown: Sequence[Shown], max_retries: int, since: str
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    days = {d.name: d.day for d in protocol.drifts}
    rows = []
    for one in shown:
        for row in progress_rows(
            one.manifest, one.attempts, max_retries, one.sides, drift_days=days
        ):
            rows.append({"manifest": one.name, **row})
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
        stored = [
            e for one in shown for slot, eps in one.attempts.items() if slot[1] == side for e in eps
        ]
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


def _manifests_html(manifests: Sequence[dict[str, Any]]) -> str:
    rows = [
        [
            esc(m["name"]),
            f"<code>{esc(m['manifest_hash'][:12])}</code>",
            esc(m["sim_policy"] or "—"),
            esc(m["real_policy"] or "—"),
            esc(", ".join(m["sides"])),
        ]
        for m in manifests
    ]
    return table(["manifest", "hash", "sim policy", "real policy", "sides shown"], rows)


def _estimate_cell(est: dict[str, Any] | None) -> str:
    if est is None:
        return "—"
    n = int(est["n"])
    successes = round(float(est["value"]) * n)
    return f"{successes}/{n} [{est['low']:.4f}, {est['high']:.4f}]"


def _families_html(families: Sequence[dict[str, Any]], level: float) -> str:
    rows = [
        [
            f'<span data-family="{esc(f["family"])}">{esc(f["family"])}</span>',
            f"{f['real_run']}/{f['real_planned'] if f['real_planned'] is not None else '—'}",
            _estimate_cell(f["sim"]),
            _estimate_cell(f["real"]),
        ]
        for f in families
    ]
    headers = ["family", "real run / planned", "sim success", "real success"]
    return (
        f"<p class=muted>What the certificate counts: first scored attempts of the evaluated "
        f"policy over every manifest of the window ({level * 100:g} % Wilson).</p>"
        + table(headers, rows)
    )


def _progress_html(rows: Sequence[dict[str, Any]], level: float, named: bool = False) -> str:
    out = []
    for r in rows:
        key = f"{r['side']}/{r['engine']}/{r['family']}/d{r['drift_day']}"
        if named:
            key = f"{r['manifest']}/{key}"
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
        if named:
            cells.insert(0, ("manifest", esc(r["manifest"])))
        out.append([f'<span data-cell="{esc(key)}/{name}">{html}</span>' for name, html in cells])
    headers = ["manifest"] if named else []
    headers += ["side", "engine", "family", "drift day", "run / planned", "successes / scored"]
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
        shown = _shown(store, protocol, manifest_hash)
        operator = _operator_rows(store, protocol.window_id)
        every_manifest = window_manifests(store, protocol)
        window_episodes = [
            e
            for w in store.window_scope(protocol.window_id)
            for e in store.scored_episodes(window=w).episodes
        ]
    families = family_rows(window_episodes, every_manifest, protocol) if window_episodes else []
    rows, sides = _progress(protocol, shown, max_retries, since)
    with_real = [one for one in shown if "real" in one.sides] or shown
    stopping = _stopping(protocol, with_real[0].manifest, with_real[0].attempts, max_retries)
    incidents, note = _incidents(db_path, protocol.window_id)
    stored = [e for one in shown for eps in one.attempts.values() for e in eps]
    every = sorted(stored, key=lambda e: (e.started_at, e.episode_id), reverse=True)
    settled = [  # for the page's counts of settled real outcomes
        settle(eps, max_retries)[0] for one in shown for eps in one.attempts.values()
    ]
    real_scored = [e for e in settled if e is not None and e.side == "real" and e.scored]

    def href(e: Episode, art: Artifact) -> str | None:
        index = list(e.artifacts).index(art)
        found = artifact_file(art.path, db_path)
        return artifact_url(e.episode_id, index) if found is not None else None

    manifests = [
        {
            "name": one.name,
            "manifest_hash": one.manifest.manifest_hash,
            "sim_policy": one.manifest.header.get("sim_policy"),
            "real_policy": one.manifest.header.get("real_policy"),
            "sides": list(one.sides),
        }
        for one in shown
    ]
    return {
        "protocol": protocol.name,
        "window": protocol.window_id,
        "manifest_hash": shown[-1].manifest.manifest_hash,
        "manifests": manifests,
        "policies": {
            "sim": shown[-1].manifest.header.get("sim_policy"),
            "real": shown[-1].manifest.header.get("real_policy"),
        },
        "confidence": protocol.confidence,
        "families": families,
        "rows": rows,
        "sides": sides,
        "stopping": stopping,
        "real_scored": len(real_scored),
        "real_successes": sum(int(e.success) for e in real_scored),
        "incidents": incidents,
        "awaiting_review": sum(1 for i in incidents if not i["reviewed"]),
        "operator": operator,
        "html": {
            "manifests": _manifests_html(manifests),
            "families": _families_html(families, protocol.confidence),
            "progress": _progress_html(rows, protocol.confidence, len(shown) > 1),
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
