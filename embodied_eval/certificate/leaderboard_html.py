"""The leaderboard section of the HTML report: strengths with intervals, P(best), the comparison
graph (which pairs met how often, as a drawing and a table) and success per family.

Rendered from the leaderboard's JSON form (`embodied_eval.embodiment.policy_leaderboard.Leaderboard.to_json`), so
the page and `rank --json` show the same numbers. `leaderboard_page` wraps the section into a
self-contained page (`rank --html`); `leaderboard_html` is the section alone (`#leaderboard`),
for a report that already has its page.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from embodied_eval.certificate.html_parts import CSS, esc, fmt_estimate, fmt_number, table

SVG_SIZE = 360


def _graph_svg(policies: Sequence[str], graph: Sequence[Mapping[str, Any]]) -> str:
    """Policies on a circle; an edge per pair that met, its width growing with the count."""
    if not policies:
        return ""
    c = SVG_SIZE / 2.0
    r = c - 60.0
    pos = {
        p: (c + r * math.cos(2 * math.pi * i / len(policies) - math.pi / 2),
            c + r * math.sin(2 * math.pi * i / len(policies) - math.pi / 2))
        for i, p in enumerate(policies)
    }  # fmt: skip
    most = max((int(g["n"]) for g in graph), default=1) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_SIZE}" height="{SVG_SIZE}" '
        f'viewBox="0 0 {SVG_SIZE} {SVG_SIZE}" role="img" aria-label="comparison graph">'
    ]
    for g in graph:
        (x1, y1), (x2, y2) = pos[g["a"]], pos[g["b"]]
        width = 1.0 + 7.0 * int(g["n"]) / most
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#4c72b0" '
            f'stroke-opacity="0.6" stroke-width="{width:.1f}"><title>{esc(g["a"])} – '
            f"{esc(g['b'])}: {int(g['n'])} comparisons</title></line>"
        )
    for p, (x, y) in pos.items():
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="#222"/>'
            f'<text x="{x:.1f}" y="{y - 10:.1f}" font-size="11" text-anchor="middle">'
            f"{esc(p)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def leaderboard_html(board: Mapping[str, Any]) -> str:
    """The `#leaderboard` section for a leaderboard's JSON form."""
    pieces = board.get("pieces") or []
    parts = [
        '<section id="leaderboard"><h2>Leaderboard</h2>',
        f"<p>{esc(board.get('method'))}; centred log-strengths (mean 0 within a piece) with "
        f"{fmt_number(float(board.get('level', 0.95)) * 100, 1)} % {esc(board.get('interval'))}"
        f"; P(best) is the share of resamples in which the policy ranks first. Outcome: "
        f"{esc(board.get('outcome'))}; {fmt_number(board.get('episodes'))} episodes.</p>",
    ]
    if not board.get("connected", True):
        parts.append(
            '<p class="verdict-fail">The comparison graph is in '
            f"{len(pieces)} pieces that never met; each is ranked on its own scale.</p>"
        )
    notes = "".join(f"<li>{esc(n)}</li>" for n in board.get("notes") or [])
    if notes:
        parts.append(f"<ul>{notes}</ul>")
    for piece in pieces:
        rows = [
            [
                fmt_number(r.get("rank")),
                f"<code>{esc(r.get('policy'))}</code>",
                fmt_estimate(r.get("strength")),
                fmt_number(r.get("p_best")),
                fmt_number(r.get("comparisons")),
            ]
            for r in piece.get("leaderboard", [])
        ]
        nu = piece.get("tie_parameter")
        parts.append(
            f"<h3>{esc(piece.get('name'))}: {esc(', '.join(piece.get('policies', [])))}</h3>"
            + table(["rank", "policy", "log-strength", "P(best)", "comparisons"], rows)
            + (f"<p>Davidson's tie parameter ν = {fmt_estimate(nu)}.</p>" if nu else "")
            + (
                f'<p class="muted">{fmt_number(piece.get("resamples_regularized"))} of the '
                "resamples needed the prior (a policy never lost or never won in them).</p>"
                if piece.get("resamples_regularized")
                else ""
            )
        )
    graph = board.get("comparison_graph") or []
    policies = list(board.get("policies") or [])
    parts.append("<h3>Comparison graph</h3>" + _graph_svg(policies, graph))
    parts.append(
        table(
            ["policy a", "policy b", "compared", "a won", "b won", "ties"],
            [
                [
                    esc(g["a"]),
                    esc(g["b"]),
                    fmt_number(g["n"]),
                    fmt_number(g["a_wins"]),
                    fmt_number(g["b_wins"]),
                    fmt_number(g["ties"]),
                ]
                for g in graph
            ],
        )
    )
    success = board.get("success_by_family") or {}
    families = sorted({f for fams in success.values() for f in fams})
    parts.append(
        "<h3>Success per family</h3>"
        + table(
            ["policy", *families],
            [
                [f"<code>{esc(p)}</code>"] + [fmt_estimate(success[p].get(f)) for f in families]
                for p in policies
                if p in success
            ],
        )
    )
    parts.append("</section>")
    return "".join(parts)


def leaderboard_page(board: Mapping[str, Any], title: str = "Leaderboard") -> str:
    """A self-contained HTML page holding the leaderboard section."""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1>"
        + leaderboard_html(board)
        + "</body></html>\n"
    )
