"""The `#episodes` section of the report: the episodes that need a look (failed real episodes and
every episode an incident names), each with its recording linked and a thumbnail strip of its
camera when the recording has one; then every pair (sim and real side by side) with outcome,
quality, judge and recording, folded, and capped at PAIRS_LIMIT rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_eval.certificate.episode_media import (
    RECORDING_KINDS,
    MediaPlaces,
    artifact_href,
    camera_strip,
)
from embodied_eval.certificate.html_parts import esc, table
from embodied_eval.records import SEVERITIES, Artifact, Episode

#: Pairs shown in the folded table (the store holds them all; `embodied-eval export` writes them).
PAIRS_LIMIT = 300
#: Thumbnail strips drawn at most (each decodes frames from a recording).
STRIPS_LIMIT = 12
#: Failed and incident episodes shown before the rest are folded.
ATTENTION_SHOWN = 10


def _outcome(e: Episode) -> str:
    if e.status == "ok":
        word, cls = ("success", "pass") if e.success else ("failure", "fail")
    else:
        word, cls = e.status.replace("_", " "), "fail" if e.scored else "inconclusive"
    return f'<span class="verdict-{cls}">{esc(word)}</span>'


def _links(e: Episode, places: MediaPlaces) -> str:
    return recording_links(e, lambda art: artifact_href(art, places))


def recording_links(e: Episode, href_of: Callable[[Artifact], str | None]) -> str:
    """An episode's recordings, each linked where `href_of` gives a URL (else named as not on
    disk); the report links files beside it, the live console links its own file URLs."""
    links = []
    for art in e.artifacts:
        href = href_of(art)
        name = Path(art.path).name
        kind = art.kind or "file"
        if href is None:
            links.append(f'{esc(kind)} <span class="muted">{esc(name)} (not on disk)</span>')
        else:
            links.append(f'<a href="{esc(href)}">{esc(kind)}: {esc(name)}</a>')
    return "<br>".join(links) if links else '<span class="muted">no recording</span>'


def judge_cell(e: Episode) -> str:
    """Who judged the episode (kind, name, version; "(signed)")."""
    text = " ".join(str(e.judge.get(k)) for k in ("kind", "name", "version") if e.judge.get(k))
    if e.judge.get("signature"):
        text += " (signed)"
    return esc(text or "—")


def episode_cell(e: Episode) -> str:
    """Outcome, q against q*, engine and attempt of one episode (HTML)."""
    retry = f", attempt {e.attempt}" if e.attempt > 1 else ""
    return (
        f"{_outcome(e)} q = {e.quality:.2f} / q* {e.target_quality:.2f} "
        f'<span class="muted">({esc(e.engine)}{esc(retry)})</span>'
    )


def camera_strip_html(artifacts: Sequence[Artifact], store_path: Path | None) -> str:
    """The thumbnail strip of an episode's recorded camera (`camera_strip`) and its note;
    `store_path`: the store the artifacts' paths are relative to."""
    strip, note = camera_strip(artifacts, store_path)
    images = "".join(
        f'<img src="{uri}" alt="camera at {t:.1f} s" title="{t:.1f} s">' for t, uri in strip
    )
    return f'<div class="thumbs">{images}</div><span class="muted">{esc(note)}</span>'


def _incidents_by_episode(
    incidents: Sequence[Mapping[str, Any]],
) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for i in incidents:
        if i.get("episode_id"):
            out[str(i["episode_id"])].append(i)
    return out


#: Incidents named per cell before the rest are counted.
INCIDENTS_NAMED = 3


def _incident_text(rows: Sequence[Mapping[str, Any]]) -> str:
    named = [
        f"{esc(i.get('incident_id'))} ({esc(str(i.get('severity', '')).replace('_', '-'))})"
        for i in rows[:INCIDENTS_NAMED]
    ]
    if len(rows) > INCIDENTS_NAMED:
        named.append(f"and {len(rows) - INCIDENTS_NAMED} more")
    return "<br>".join(named) or "—"


def _severity_rank(rows: Sequence[Mapping[str, Any]]) -> int:
    ranks = [SEVERITIES.index(r["severity"]) for r in rows if r.get("severity") in SEVERITIES]
    return max(ranks, default=-1)


def _attention(
    episodes: Sequence[Episode],
    by_episode: Mapping[str, Sequence[Mapping[str, Any]]],
    places: MediaPlaces,
) -> str:
    chosen = [
        e
        for e in episodes
        if e.episode_id in by_episode
        or (e.side == "real" and not e.success)
        or (
            e.side == "sim"
            and e.scored
            and not e.success
            and any(a.kind in RECORDING_KINDS for a in e.artifacts)
        )
    ]
    # Real episodes first (they have recordings), then by the worst incident.
    chosen.sort(
        key=lambda e: (
            e.side != "real",
            -_severity_rank(by_episode.get(e.episode_id, ())),
            e.episode_id,
        )
    )
    if not chosen:
        return (
            "<h3>Failed and incident episodes</h3>"
            '<p class="muted">No real episode failed and no incident names an episode.</p>'
        )
    rows = []
    strips = 0
    for e in chosen:
        media = _links(e, places)
        if any(a.kind in RECORDING_KINDS for a in e.artifacts):
            if strips < STRIPS_LIMIT:
                strips += 1
                media += camera_strip_html(e.artifacts, places.store_path)
            else:
                note = f"only the first {STRIPS_LIMIT} recordings get a strip"
                media += f'<div class="thumbs"></div><span class="muted">{esc(note)}</span>'
        rows.append(
            [
                f"<code>{esc(e.episode_id)}</code>",
                episode_cell(e) + (f"<br>{esc(e.status_reason)}" if e.status_reason else ""),
                judge_cell(e),
                _incident_text(by_episode.get(e.episode_id, ())),
                media,
            ]
        )
    headers = ["episode", "outcome", "judge", "incidents", "recording and camera frames"]
    shown, rest = rows[:ATTENTION_SHOWN], rows[ATTENTION_SHOWN:]
    return (
        f"<h3>Failed and incident episodes ({len(chosen)})</h3>"
        '<p class="muted">Real episodes first, then by their worst incident. Sim episodes '
        "carry a recording only when run with <code>--record</code>.</p>"
        + table(headers, shown)
        + (
            f"<details><summary>{len(rest)} more failed or incident episodes</summary>"
            f"{table(headers, rest)}</details>"
            if rest
            else ""
        )
    )


def _pairs(
    episodes: Sequence[Episode],
    by_episode: Mapping[str, Sequence[Mapping[str, Any]]],
    places: MediaPlaces,
) -> str:
    pairs: dict[str, list[Episode]] = defaultdict(list)
    for e in episodes:
        pairs[e.pair_id].append(e)
    order = sorted(pairs, key=lambda p: (not any(e.side == "real" for e in pairs[p]), p))
    rows = []
    for pair_id in order[:PAIRS_LIMIT]:
        eps = sorted(pairs[pair_id], key=lambda e: (e.side, e.engine, e.attempt))
        sim = [e for e in eps if e.side == "sim"]
        real = [e for e in eps if e.side == "real"]
        incidents = [i for e in eps for i in by_episode.get(e.episode_id, ())]
        rows.append(
            [
                f"<code>{esc(pair_id)}</code>",
                esc(eps[0].family),
                "<br>".join(episode_cell(e) for e in sim) or '<span class="muted">—</span>',
                "<br>".join(episode_cell(e) for e in real)
                or '<span class="muted">not paired</span>',
                "<br>".join(judge_cell(e) for e in real) or "—",
                _incident_text(incidents),
                "<br>".join(_links(e, places) for e in real if e.artifacts)
                or '<span class="muted">no recording</span>',
            ]
        )
    more = len(order) - PAIRS_LIMIT
    note = (
        f'<p class="muted">{more} more pair(s) are not shown; `embodied-eval export` writes every '
        "episode.</p>"
        if more > 0
        else ""
    )
    paired = sum(1 for p in order if any(e.side == "real" for e in pairs[p]))
    return (
        f'<details id="pairs"><summary><h3>All {len(order)} pairs ({paired} with a real '
        "episode, shown first)</h3></summary>"
        + table(
            ["pair", "family", "sim (per engine)", "real", "judge", "incidents", "recording"],
            rows,
        )
        + note
        + "</details>"
    )


def episodes_html(
    episodes: Sequence[Episode],
    incidents: Sequence[Mapping[str, Any]],
    report_dir: Path | None,
    store_path: Path | None = None,
) -> str:
    """The `#episodes` section.

    Args:
        episodes: the window's episodes (every attempt).
        incidents: the certificate's `incidents.list`.
        report_dir: the folder the report is written to (links are relative to it); None to
            name recordings without linking them.
        store_path: the store the episodes were read from (artifact paths are relative to its
            folder).
    """
    places = MediaPlaces(report_dir, store_path)
    if not episodes:
        return (
            '<section id="episodes"><h2>Episodes</h2>'
            '<p class="muted">No episode in this window.</p></section>'
        )
    by_episode = _incidents_by_episode(incidents)
    recorded = sum(1 for e in episodes if e.artifacts)
    return (
        '<section id="episodes"><h2>Episodes</h2>'
        f"<p>{len(episodes)} episode(s), {recorded} with a recording. Recording links are "
        "relative to this report's folder (they open where the report was written). Outcome: "
        "success when the episode ended ok with quality q ≥ q*.</p>"
        + _attention(episodes, by_episode, places)
        + _pairs(episodes, by_episode, places)
        + "</section>"
    )
