"""The incident timeline in calendar time: an inline SVG with dates on the axis, one lane per
severity, filled markers for incidents that count toward the window and hollow ones for those
that do not (sim side, excluded). Incidents closer than a marker's width share one marker with
their count. With no incident the axis is still drawn, spanning the window, with a note.

The SVG scales with the page (viewBox, width 100 %), so it reads at any width.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Mapping, Sequence
from typing import Any

from embodied_eval.records import SEVERITIES

SEVERITY_COLORS = {
    "near_miss": "#8C8C8C",
    "minor": "#CCB974",
    "major": "#DD8452",
    "critical": "#C44E52",
}
WIDTH = 1000
LEFT, RIGHT = 120, 20
#: Room between the lane labels and the first possible marker, SVG units.
PAD = 16
LANE_H = 34
TOP = 16
#: Markers closer than this (SVG units) on one lane merge into one marker with a count.
MERGE_UNITS = 14.0
#: Tick spacings tried, in days, smallest first; the first giving at most MAX_TICKS ticks is used.
TICK_DAYS = (1, 2, 7, 14, 30, 61, 91, 182, 365)
MAX_TICKS = 8


def _parse(text: Any) -> dt.datetime | None:
    """A UTC datetime from an ISO date or date-time text; None when unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC)


def _span(start: Any, end: Any, times: Sequence[dt.datetime]) -> tuple[dt.datetime, dt.datetime]:
    """The axis span: the window (its end date included whole) widened to every incident."""
    lo = _parse(start)
    hi = _parse(end)
    if hi is not None and isinstance(end, str) and len(end) == 10:
        hi += dt.timedelta(days=1)  # a bare end date means the end of that day
    candidates_lo = [t for t in (lo, *times) if t is not None]
    candidates_hi = [t for t in (hi, *times) if t is not None]
    if not candidates_lo:
        now = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return now, now + dt.timedelta(days=1)
    first, last = min(candidates_lo), max(candidates_hi)
    if last - first < dt.timedelta(days=1):
        last = first + dt.timedelta(days=1)
    return first, last


def _ticks(first: dt.datetime, last: dt.datetime) -> list[dt.datetime]:
    """Midnight ticks, every k days for the smallest k giving at most MAX_TICKS ticks."""
    day0 = dt.datetime(first.year, first.month, first.day, tzinfo=dt.UTC)
    if day0 < first:
        day0 += dt.timedelta(days=1)
    days = max(1, (last - day0).days + 1)
    step = next((k for k in TICK_DAYS if days / k <= MAX_TICKS), TICK_DAYS[-1])
    out = []
    t = day0
    while t <= last:
        out.append(t)
        t += dt.timedelta(days=step)
    return out


def incident_timeline_svg(incidents: Sequence[Mapping[str, Any]], start: Any, end: Any) -> str:
    """The timeline as SVG markup (escaped).

    Args:
        incidents: the certificate's `incidents.list` rows ("incident_id", "occurred_at",
            "severity", "side", "counts_toward_window").
        start, end: the window's first and last date (ISO).

    Returns:
        An `<svg>` element.
    """
    dated = [(i, _parse(i.get("occurred_at"))) for i in incidents]
    times = [t for _, t in dated if t is not None]
    first, last = _span(start, end, times)
    total_s = (last - first).total_seconds()
    plot_w = WIDTH - LEFT - RIGHT - 2 * PAD
    height = TOP + LANE_H * len(SEVERITIES) + 44

    def x_of(t: dt.datetime) -> float:
        return LEFT + PAD + plot_w * (t - first).total_seconds() / total_s

    parts = [
        f'<svg id="incident-timeline" role="img" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="18">',
        "<title>Incidents over the window, by severity (calendar time, UTC)</title>",
    ]
    axis_y = TOP + LANE_H * len(SEVERITIES)
    for lane, severity in enumerate(reversed(SEVERITIES)):
        y = TOP + LANE_H * lane + LANE_H / 2
        parts.append(
            f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">'
            f"{html.escape(severity.replace('_', '-'))}</text>"
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#eee"/>'
        )
    parts.append(
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis_y}" y2="{axis_y}" stroke="#444"/>'
    )
    for tick in _ticks(first, last):
        x = x_of(tick)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axis_y}" y2="{axis_y + 5}" stroke="#444"/>'
            f'<text x="{x:.1f}" y="{axis_y + 20}" text-anchor="middle">'
            f"{tick.strftime('%Y-%m-%d')}</text>"
        )
    parts.append(
        f'<text x="{LEFT}" y="{axis_y + 38}" fill="#555">date (UTC); filled: counts toward the '
        "window; hollow: does not count (sim side or excluded)</text>"
    )
    if not times:
        parts.append(
            f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + LANE_H * 2:.1f}" text-anchor="middle" '
            'fill="#555">no incidents recorded in this window</text>'
        )
    for lane, severity in enumerate(reversed(SEVERITIES)):
        y = TOP + LANE_H * lane + LANE_H / 2
        for counted in (False, True):
            chosen = sorted(
                (
                    (t, i)
                    for i, t in dated
                    if t is not None
                    and i.get("severity") == severity
                    and bool(i.get("counts_toward_window")) == counted
                ),
                key=lambda pair: pair[0],
            )
            groups: list[list[tuple[dt.datetime, Mapping[str, Any]]]] = []
            for t, i in chosen:
                if groups and x_of(t) - x_of(groups[-1][0][0]) < MERGE_UNITS:
                    groups[-1].append((t, i))
                else:
                    groups.append([(t, i)])
            color = SEVERITY_COLORS.get(severity, "#333")
            for group in groups:
                x = sum(x_of(t) for t, _ in group) / len(group)
                fill = color if counted else "#fff"
                names = ", ".join(str(i.get("incident_id")) for _, i in group[:5])
                more = f" and {len(group) - 5} more" if len(group) > 5 else ""
                when = group[0][0].strftime("%Y-%m-%d %H:%M")
                label = (
                    f"{len(group)} {severity.replace('_', '-')} incident(s) from {when} UTC"
                    f" ({'counted' if counted else 'not counted'}): {names}{more}"
                )
                parts.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="{fill}" stroke="{color}" '
                    f'stroke-width="2.5"><title>{html.escape(label)}</title></circle>'
                )
                if len(group) > 1:
                    parts.append(
                        f'<text x="{x + 10:.1f}" y="{y - 6:.1f}" font-size="14">'
                        f"×{len(group)}</text>"
                    )
    parts.append("</svg>")
    return "".join(parts)
