"""The `#safety` section of the HTML report: incidents with their margins and measurements, rates
per 100 h with exact intervals, window validity, amendments and the incident log's integrity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embodied_eval.certificate.html_parts import esc, figure, fmt_estimate, fmt_number, table
from embodied_eval.certificate.plots import rate_plot_floor
from embodied_eval.certificate.summary_html import certificate_verdict
from embodied_eval.records import SEVERITIES


def _measurements(measurements: Mapping[str, Any] | None) -> str:
    if not measurements:
        return '<span class="muted">—</span>'
    items = []
    for key in sorted(measurements):
        value = measurements[key]
        shown = esc(value) if isinstance(value, (dict, list)) else fmt_number(value)
        items.append(f"{esc(key)} = {shown}")
    return "<br>".join(items)


#: Gate checks (by the last part of their id) decided by the incident log.
SAFETY_CHECKS = ("incident_rules", "zero_major", "zero_critical", "minor_rate_max", "mtbsi_min")

# --------------------------------------------------------------------------- sections


def _margins(rules: Sequence[Mapping[str, Any]]) -> str:
    """The rules that fired with measured value, limit and margin (measured − limit)."""
    lines = []
    for r in rules:
        unit = f" {r.get('unit')}" if r.get("unit") else ""
        text = f"{esc(r.get('rule'))} → {esc(str(r.get('severity', '')).replace('_', '-'))}"
        if r.get("quantity"):
            text += (
                f": {esc(r.get('quantity'))} {fmt_number(r.get('measured'))}{esc(unit)} vs limit "
                f"{fmt_number(r.get('limit'))}{esc(unit)} (margin "
                f"{fmt_number(r.get('margin'))}{esc(unit)})"
            )
        lines.append(text)
    return "<br>".join(lines) if lines else '<span class="muted">—</span>'


def _rates_as_text(cert: Mapping[str, Any]) -> str:
    """In place of the rate plot on thin exposure: the upper bounds in words and the hours
    needed (see `plots.rate_plot_floor`)."""
    floor = rate_plot_floor(cert)
    rates = (cert.get("embodiment") or {}).get("rates_per_100h") or {}
    pct = f"{floor['confidence'] * 100:g} %"
    bounds = "; ".join(
        f"{sev.replace('_', '-')}: {fmt_number((rates.get(sev) or {}).get('n', 0))} observed, "
        f"rate ≤ {_big((rates.get(sev) or {}).get('high'))} per 100 h"
        for sev in SEVERITIES
        if isinstance(rates.get(sev), Mapping)
    )
    return (
        f'<p id="rates-not-plotted" class="muted">Rates are not plotted: exposure H = '
        f"{fmt_number(floor['exposure_hours'], 4)} h is below the "
        f"{fmt_number(floor['min_hours'], 1)} h at which zero incidents would show a rate ≤ "
        f"{fmt_number(floor['threshold'])} per 100 h ({esc(pct)} one-sided), so every bound is "
        f"above every rate gate. Upper bounds ({esc(pct)} two-sided exact): {esc(bounds) or '—'}."
        f" About {fmt_number(floor['more_hours'], 1)} more exposure hours are needed to "
        f"demonstrate ≤ {fmt_number(floor['threshold'])} minor per 100 h.</p>"
    )


def _big(value: Any) -> str:
    """A large bound with thousands separators; "—" when absent."""
    if not isinstance(value, (int, float)):
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def unsafe_successes_html(unsafe: Mapping[str, Any] | None) -> str:
    """The unsafe-success table: per family, successes with an incident above the warning level
    (SBU with its exact interval, worst severity); "" for a certificate issued without it."""
    if not isinstance(unsafe, Mapping):
        return ""
    strata = [*sorted(unsafe.get("by_family", {}).items()), ("all", unsafe.get("all"))]
    rows = [
        [
            esc(name),
            fmt_number(row.get("successes")),
            fmt_number(row.get("unsafe")),
            fmt_estimate(row.get("SBU")),
            esc(row.get("worst_severity") or "—"),
        ]
        for name, row in strata
        if isinstance(row, Mapping)
    ]
    rule = (
        "they count as failures for AR (protocol)"
        if unsafe.get("counted_as_failures")
        else "they count as successes in AR"
    )
    return (
        "<h3>Unsafe successes</h3>"
        f"<p>Successes with an incident above {esc(unsafe.get('above'))}: {rule}.</p>"
        + table(
            ["family", "successes", "unsafe", "SBU (exact)", "worst severity"],
            rows,
        )
    )


def safety_html(cert: Mapping[str, Any], plots: Mapping[str, bytes]) -> str:
    """The `#safety` section (id="safety") of the report."""
    window = cert.get("window", {})
    emb = cert.get("embodiment", {})
    inc = cert.get("incidents", {})
    counts = inc.get("counts", {})
    rates = emb.get("rates_per_100h", {}) or {}
    bounds = inc.get("zero_event_bounds", {}) or {}
    rate_rows = [
        [
            esc(sev.replace("_", "-")),
            fmt_number(counts.get(sev, 0)),
            fmt_estimate(rates.get(sev)),
            fmt_estimate(bounds.get(sev)) if sev in bounds else '<span class="muted">—</span>',
        ]
        for sev in SEVERITIES
    ]
    incident_rows = [
        [
            esc(i.get("incident_id")),
            esc(i.get("occurred_at")),
            esc(str(i.get("severity", "")).replace("_", "-")),
            esc(i.get("side")),
            esc(i.get("source")),
            fmt_number(i.get("reviewed")),
            fmt_number(i.get("counts_toward_window")),
            _margins(i.get("rules_fired") or []),
            _measurements(i.get("measurements")),
            esc(i.get("text")),
        ]
        for i in inc.get("list", [])
    ]
    amendment_rows = [
        [
            esc(a.get("incident_id")),
            esc(a.get("field")),
            esc(a.get("old")),
            esc(a.get("new")),
            esc(a.get("reason")),
            esc(a.get("author")),
            esc(a.get("role")),
            esc(a.get("at")),
        ]
        for a in inc.get("amendments", [])
    ]
    review_rows = [
        [
            esc(r.get("incident_id")),
            esc(r.get("decision")),
            esc(str(r.get("severity", "")).replace("_", "-")),
            esc(r.get("reviewer")),
            esc(r.get("role")),
            esc(r.get("rationale")),
            esc(r.get("at")),
        ]
        for r in inc.get("reviews", [])
    ]
    chain = inc.get("chain", {})
    close = window.get("close")
    valid = bool(window.get("valid"))
    failing_rules = [
        c.name
        for c in certificate_verdict(cert).failing
        if any(i.rsplit(".", 1)[-1] in SAFETY_CHECKS for i in c.ids)
    ]
    if not valid:
        validity = (
            f'<div class="banner invalid">Window invalid: {esc(window.get("invalid_reason"))}</div>'
        )
    elif failing_rules:
        validity = (
            '<div class="banner invalid">Window valid (no counted critical incident), but '
            f"the incident rules fail: {esc(failing_rules)}. More trials do not fix this.</div>"
        )
    else:
        validity = '<div class="banner valid">Window valid: no counted critical incident.</div>'

    how = ", ".join(str(h) for h in window.get("exposure_how_measured", [])) or esc(
        window.get("exposure_source")
    )
    pending = inc.get("unreviewed_serious") or []
    tables = ", ".join(
        f"{t.get('version')} ({str(t.get('hash'))[:12]}…)" for t in inc.get("threshold_tables", [])
    )
    closed = (
        f"closed and signed by the protocol owner ({esc(close.get('owner'))}, key "
        f"<code>{esc(close.get('signer'))}</code>, {fmt_number(close.get('exposure_h'), 2)} h)"
        if isinstance(close, Mapping)
        else "open (not yet signed by the protocol owner)"
    )
    return (
        '<section id="safety"><details><summary><h2>For safety officers</h2></summary>'
        + validity
        + (
            f'<div class="banner invalid">Unreviewed major/critical incidents: '
            f"{esc(', '.join(pending))}</div>"
            if pending
            else ""
        )
        + f"<p>Exposure H = {fmt_number(window.get('exposure_hours'), 2)} h from "
        f"{esc(how)} ({fmt_number(window.get('exposure_entries'))} ledger entries; blind "
        f"hours excluded: {fmt_number(window.get('blind_hours'), 2)}). Window {closed}.</p>"
        f"<p>SS = {fmt_estimate(emb.get('SS'))}.<br>MTBSI = {fmt_estimate(emb.get('MTBSI_h'))} h."
        f"<br>Counted incidents: {fmt_number(inc.get('counted'))} of "
        f"{fmt_number(inc.get('total'))} (excluded: {esc(inc.get('excluded'))}). Threshold "
        f"tables: {esc(tables) or '—'}.</p>"
        "<h3>Rates per 100 h</h3>"
        + table(
            [
                "severity",
                "count",
                "rate per 100 h (two-sided exact)",
                "zero-event upper bound (one-sided)",
            ],
            rate_rows,
        )
        + (
            figure("incident_rates", plots.get("incident_rates"))
            if "incident_rates" in plots
            else _rates_as_text(cert)
        )
        + figure("reliability", plots.get("reliability"))
        + unsafe_successes_html(emb.get("unsafe_successes"))
        + "<h3>Incidents</h3>"
        + table(
            [
                "id",
                "occurred (UTC)",
                "severity",
                "side",
                "source",
                "reviewed",
                "counts",
                "rules fired: measured vs limit",
                "measurements",
                "narrative",
            ],
            incident_rows,
        )
        + "<h3>Amendments and reclassifications</h3>"
        + table(
            ["incident", "field", "old", "new", "reason", "author", "role", "time"],
            amendment_rows,
        )
        + "<h3>Reviews (signed)</h3>"
        + table(
            ["incident", "decision", "severity", "reviewer", "role", "rationale", "time"],
            review_rows,
        )
        + "<h3>Incident log integrity</h3>"
        + table(
            ["head hash", "records", "verification", "registered keys"],
            [
                [
                    f"<code>{esc(chain.get('head_hash'))}</code>",
                    fmt_number(chain.get("record_count")),
                    esc(chain.get("verification")),
                    "<br>".join(
                        f"<code>{esc(fp)}</code>" for fp in chain.get("key_fingerprints", [])
                    )
                    or "—",
                ]
            ],
        )
        + "</details></section>"
    )
