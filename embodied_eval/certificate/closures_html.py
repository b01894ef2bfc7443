"""The report's closures section: how the maintenance and expansion closures were decided.

Reads the certificate's `closures` object (see `certificate.closures`): a computed maintenance
audit shows its drift-calendar days with the index, interval and bound per day next to the
payload, friction and delay measured on that day (`embodied_eval.embodiment.calibration_days`), α·C₀, the
human patches and the plot; a computed expansion audit shows the conditions' success rates and the DiD
and ablation intervals; an external closure shows who audited it and is marked external.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embodied_eval.certificate.html_parts import (
    esc,
    figure,
    fmt_estimate,
    fmt_number,
    table,
    verdict_html,
)


def _checks(closure: Mapping[str, Any] | None) -> str:
    if not closure:
        return ""
    rows = []
    for c in closure.get("checks", []):
        remaining = c.get("remaining") or {}
        rem = ", ".join(f"{fmt_number(v, 1)} more {esc(k)}" for k, v in remaining.items())
        rows.append(
            [
                esc(c.get("name")),
                fmt_number(c.get("value")),
                fmt_number(c.get("bound")),
                verdict_html(c.get("verdict")),
                esc(c.get("detail", "")) + (f" — {rem}" if rem else ""),
            ]
        )
    return table(["check", "value", "bound", "verdict", "detail"], rows)


#: The measured drift parameters shown per day: (name, column heading, factor to the unit shown).
MEASURED = (("payload", "payload (kg)", 1.0), ("friction", "friction ×", 1.0),
            ("actuator_delay", "delay (ms)", 1000.0))  # fmt: skip


def measured_cell(entry: Mapping[str, Any] | None, factor: float) -> str:
    """One measured parameter: "value [low, high]" in the column's unit; "not identified" marks
    a value the calibration kept nominal; "—" when the day's calibration has none."""
    if not entry or entry.get("value") is None:
        return "—"

    def num(key: str) -> str:
        v = entry.get(key)
        return "?" if v is None else fmt_number(float(v) * factor)

    text = f"{num('value')} [{num('low')}, {num('high')}]"
    return esc(text if entry.get("identified", True) else text + " not identified")


def _maintenance(m: Mapping[str, Any], plots: Mapping[str, bytes]) -> str:
    if m.get("source") == "external":
        return _external("Maintenance closure", m)
    if m.get("source") != "computed":
        return "<h4>Maintenance closure: no audit (declare [maintenance] in the protocol)</h4>"
    measured = {c.get("day"): c for c in m.get("calibration_by_day") or []}
    rows = [
        [
            esc(d.get("day")),
            esc(d.get("drift")),
            esc(", ".join(d.get("kinds", [])) or "none (baseline)"),
            fmt_estimate(d.get("index")),
            fmt_number((d.get("bound") or {}).get("low")),
            esc(d.get("episodes")),
            esc(d.get("patches")),
            *(
                measured_cell(
                    ((measured.get(d.get("day")) or {}).get("parameters") or {}).get(n), f
                )
                for n, _, f in MEASURED
            ),
        ]
        for d in m.get("days", [])
    ]
    sources = sorted({str(c.get("source")) for c in measured.values()})
    measured_note = (
        "<p>Payload, friction and delay per day: measured by calibrating that day's real "
        f"episodes (<code>calibrate --by-drift</code>; from {esc(' and '.join(sources))}), 95 % "
        "intervals.</p>"
        if measured
        else "<p>No drift day was calibrated (<code>calibrate --by-drift</code> records each "
        "day's payload, friction and delay).</p>"
    )
    patches = [
        [esc(p.get("recorded_at")), esc(p.get("kind")), esc(p.get("technician")),
         esc(p.get("episode_id") or p.get("drift")), esc(p.get("text"))]
        for p in m.get("human_patches", [])
    ]  # fmt: skip
    notes = "".join(f"<li>{esc(n)}</li>" for n in m.get("notes", []))
    return (
        f"<h4>Maintenance closure (computed from the store): {verdict_html(m.get('verdict'))}</h4>"
        f"<p>Index {esc(m.get('index'))} of policy <code>{esc(m.get('policy'))}</code>; "
        f"baseline C₀ (day 0) = {fmt_estimate(m.get('baseline'))}; α = {fmt_number(m.get('alpha'))}"
        f", α·C₀ = {fmt_number(m.get('threshold'))}; Y = {esc(m.get('Y_days'))} days; the "
        f"calendar ends at day {esc(m.get('planned_span_days'))}.</p>"
        + table(
            [
                "day",
                "drift",
                "drift kinds",
                "index (interval)",
                "one-sided bound",
                "n",
                "patches",
                *(h for _, h, _ in MEASURED),
            ],
            rows,
        )
        + measured_note
        + figure("maintenance", plots.get("maintenance"))
        + "<p>Human patches recorded in the window:</p>"
        + table(["when", "kind", "technician", "episode / drift", "what"], patches)
        + _checks(m.get("closure"))
        + (f"<ul>{notes}</ul>" if notes else "")
    )


def _expansion(x: Mapping[str, Any]) -> str:
    if x.get("source") == "external":
        return _external("Expansion closure", x)
    if x.get("source") != "computed":
        return "<h4>Expansion closure: no audit (declare [expansion] in the protocol)</h4>"
    plan = x.get("plan", {})
    rates = x.get("rates", {})
    rate_rows = [
        [esc(name), fmt_estimate(rates.get(name))]
        for name in ("pre", "post", "ablated", "control_pre", "control_post")
        if name in rates
    ]
    diff_rows = [
        ["gain ΔC_DiD (one-sided bound)", fmt_estimate(x.get("gain_did"))],
        ["C(S_abl) − C(S_pre)", fmt_estimate(x.get("ablated_minus_pre"))],
        ["ΔC_DiD(S_abl)", fmt_estimate(x.get("ablated_did"))],
    ]
    notes = "".join(f"<li>{esc(n)}</li>" for n in x.get("notes", []))
    return (
        f"<h4>Expansion closure (computed from the store): {verdict_html(x.get('verdict'))}</h4>"
        f"<p>{esc(plan.get('name'))} ({esc(plan.get('kind'))}) on "
        f"{esc(', '.join(plan.get('families', [])))}, control "
        f"{esc(', '.join(plan.get('control_families', [])) or 'none')}; pre "
        f"<code>{esc(plan.get('pre'))}</code>, post <code>{esc(plan.get('post'))}</code>, "
        f"ablated <code>{esc(plan.get('ablated'))}</code>; ε = {fmt_number(plan.get('epsilon'))}"
        f"; {esc(plan.get('side'))} side; matched rows: "
        f"{esc(x.get('rows', {}).get('treated_rows'))} treated, "
        f"{esc(x.get('rows', {}).get('control_rows'))} control.</p>"
        + table(["condition", "success rate"], rate_rows)
        + table(["difference", "estimate"], diff_rows)
        + _checks(x.get("closure"))
        + (f"<ul>{notes}</ul>" if notes else "")
    )


def _external(title: str, entry: Mapping[str, Any]) -> str:
    parts = [f"<h4>{esc(title)}: external (from the evidence file)</h4>"]
    for audit in entry.get("audits", []):
        closure = audit.get("closure") or {}
        parts.append(
            f"<p>Audited by <strong>{esc(audit.get('auditor'))}</strong>"
            f"{' on ' + esc(audit.get('date')) if audit.get('date') else ''}: "
            f"{verdict_html(closure.get('verdict'))}</p>"
        )
        parts.append(_checks(closure))
    return "".join(parts)


def closures_html(cert: Mapping[str, Any], plots: Mapping[str, bytes]) -> str:
    """The "Closures" part of the certification section."""
    closures = cert.get("closures") or {}
    return (
        "<h3>Closures (§3.4; AAI-2 and AAI-3 Robotics)</h3>"
        + _maintenance(closures.get("maintenance") or {}, plots)
        + _expansion(closures.get("expansion") or {})
    )
