"""The calibration's outputs: the calibration file's content and the HTML report with overlays.

The report shows, per validation episode, the measured joint positions against the replay before
(nominal simulator) and after calibration, and the object track when recorded; drawn as inline SVG
so the file stands alone.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from real_bridge.calibration.fit import FitResult
from real_bridge.calibration.intervals import ParameterEstimate
from real_bridge.calibration.params import PARAMETERS, bandwidth_hz
from real_bridge.calibration.recorded import RecordedEpisode
from real_bridge.calibration.residuals import EpisodeResidual

#: Joints drawn per episode (the shoulder, the elbow and the wrist carry most of the sag).
DRAWN_JOINTS = (1, 3, 5)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def estimate_entry(est: ParameterEstimate) -> dict[str, Any]:
    """One parameter in the calibration file (non-finite numbers left out). The actuator
    bandwidth is written in Hz (its fitted time constant beside it)."""
    info = PARAMETERS[est.name]
    value, low, high, unit = est.value, est.low, est.high, info.unit
    fitted = est.fitted
    entry: dict[str, Any] = {}
    if est.name == "actuator_bandwidth":
        entry["time_constant_s"] = _finite(value)
        value, low, high = bandwidth_hz(value), bandwidth_hz(high), bandwidth_hz(low)
        fitted = bandwidth_hz(fitted) if math.isfinite(fitted) else fitted
        unit = "Hz"
    entry.update(
        {
            "value": _finite(value),
            "low": _finite(low),
            "high": _finite(high),
            "unit": unit,
            "identified": bool(est.identified),
            "partner": est.partner,
            "correlation": round(float(est.correlation), 4),
            "reason": est.reason,
            # not identified: what the fit reached (the interval is around it); kept nominal
            "fitted_value": None if est.identified else _finite(fitted),
            # how the interval was made; its widening for residuals correlated in time
            "interval": est.method or None,
            "design_effect": round(float(est.design_effect), 3) if est.method else None,
        }
    )
    return {k: v for k, v in entry.items() if v is not None}


def calibration_content(
    result: FitResult, *, robot_id: str, protocol_hash: str, window: str, created_at: str
) -> dict[str, Any]:
    """The calibration file's content (see `embodied_eval.protocol.calibration_file`)."""
    from embodied_eval.protocol.calibration_file import FORMAT, NOT_MAPPED

    residuals = {
        f"{k}_{when}": round(v, 4)
        for when, part in (("before", result.before), ("after", result.after))
        for k, v in part.items()
        if math.isfinite(v)
    }
    return {
        "format": FORMAT,
        "robot_id": robot_id,
        "protocol_hash": protocol_hash,
        "window": window,
        "engine": "mujoco",
        "created_at": created_at,
        "fitted_on": list(result.fitting),
        "set_aside": list(result.set_aside),
        "set_aside_stretches": list(result.set_aside_stretches),
        "validated_on": list(result.validation),
        "parameters": {n: estimate_entry(e) for n, e in result.estimates.items()},
        "validation": residuals,
        "not_in_sim": {n: r for n, r in NOT_MAPPED.items() if n in result.estimates},
    }


def _polyline(
    t: np.ndarray,
    y: np.ndarray,
    box: tuple[float, float, float, float],
    span: tuple[float, float, float, float],
    colour: str,
    dash: str = "",
) -> str:
    x0, y0, w, h = box
    t0, t1, lo, hi = span
    xs = x0 + (t - t0) / max(t1 - t0, 1e-9) * w
    ys = y0 + h - (y - lo) / max(hi - lo, 1e-12) * h
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs, ys, strict=True))
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.2"{extra} points="{points}"/>'


def overlay_svg(
    title: str,
    t: np.ndarray,
    measured: np.ndarray,
    before: np.ndarray,
    after: np.ndarray,
    unit: str,
) -> str:
    """One panel: measured (black) vs replay before (red, dashed) and after (blue)."""
    w, h = 520.0, 150.0
    lo = float(min(measured.min(), before.min(), after.min()))
    hi = float(max(measured.max(), before.max(), after.max()))
    span = (float(t[0]), float(t[-1]), lo, hi)
    box = (45.0, 18.0, w - 55.0, h - 40.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}">',
        f'<text x="45" y="12" font-size="11">{html.escape(title)}</text>',
        f'<text x="2" y="24" font-size="9">{hi:.4g}</text>',
        f'<text x="2" y="{h - 22:.0f}" font-size="9">{lo:.4g} {html.escape(unit)}</text>',
        f'<text x="45" y="{h - 6:.0f}" font-size="9">{span[0]:.1f} s</text>',
        f'<text x="{w - 40:.0f}" y="{h - 6:.0f}" font-size="9">{span[1]:.1f} s</text>',
        _polyline(t, measured, box, span, "#000"),
        _polyline(t, before, box, span, "#c0392b", "4 3"),
        _polyline(t, after, box, span, "#2e6bd6"),
        "</svg>",
    ]
    return "".join(parts)


def _episode_panels(
    recorded: RecordedEpisode, before: EpisodeResidual, after: EpisodeResidual
) -> list[str]:
    start = recorded.commands[0].arrival_s
    keep = (before.trace.t >= start) & (before.trace.t < recorded.stopped_s)
    t = before.trace.t[keep]
    panels = []
    for j in DRAWN_JOINTS:
        measured = before.trace.q[keep, j] - before.joint[:, j]
        panels.append(
            overlay_svg(
                f"joint {j + 1}",
                t,
                measured,
                before.trace.q[keep, j],
                after.trace.q[keep, j],
                "rad",
            )
        )
    if before.object.size:
        inside = (
            (recorded.object_t >= start)
            & (recorded.object_t <= before.trace.t[-1])
            & (recorded.object_t < recorded.stopped_s)
        )
        seen_t = recorded.object_t[inside]
        seen = recorded.object_pos[inside]
        for axis, name in ((0, "x"), (2, "z")):
            panels.append(
                overlay_svg(
                    f"object {name}", seen_t, seen[:, axis],
                    seen[:, axis] + before.object[:, axis], seen[:, axis] + after.object[:, axis],
                    "m",
                )
            )  # fmt: skip
    return panels


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def write_report(
    directory: str | Path,
    content: Mapping[str, Any],
    result: FitResult,
    validation: Sequence[RecordedEpisode],
    sha256: str,
) -> Path:
    """Write `report.html` into `directory`; returns its path."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, entry in content["parameters"].items():
        verdict = (
            "identified"
            if entry["identified"]
            else (
                f"not identified: {entry['reason']}; the fit reached {_fmt(entry.get('fitted_value'))}"
                " (the interval is around it); kept nominal"
            )
        )
        partner = (
            f"{entry['partner']} (ρ = {entry['correlation']:+.2f})" if entry.get("partner") else "—"
        )
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{_fmt(entry.get('value'))}</td>"
            f"<td>[{_fmt(entry.get('low'))}, {_fmt(entry.get('high'))}]</td>"
            f"<td>{html.escape(entry['unit'])}</td><td>{html.escape(verdict)}</td>"
            f"<td>{html.escape(partner)}</td></tr>"
        )
    res = content["validation"]
    residual_rows = "".join(
        f"<tr><td>{label}</td><td>{_fmt(res.get(key + '_before'))}</td>"
        f"<td>{_fmt(res.get(key + '_after'))}</td></tr>"
        for key, label in (
            ("joint_rms_mrad", "joint tracking RMS, mrad"),
            ("object_rms_mm", "object track RMS, mm"),
        )
    )
    episodes = []
    for rec, before, after in zip(
        validation, result.before_residuals, result.after_residuals, strict=True
    ):
        panels = "".join(_episode_panels(rec, before, after))
        episodes.append(f"<h3>{html.escape(rec.episode_id)}</h3><div>{panels}</div>")
    not_in_sim = "".join(
        f"<li>{html.escape(n)}: {html.escape(r)}</li>" for n, r in content["not_in_sim"].items()
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>Calibration of {html.escape(content["robot_id"])}</title>
<style>body{{font-family:sans-serif;margin:1.5em}}td,th{{padding:2px 8px;text-align:left}}
table{{border-collapse:collapse}}tr:nth-child(even){{background:#f3f3f3}}</style></head><body>
<h1>Calibration of robot {html.escape(content["robot_id"])}</h1>
<p>Window {html.escape(content["window"])}, protocol {html.escape(content["protocol_hash"][:12])}…,
content SHA-256 <code>{sha256}</code>.</p>
<p>Fitted on {len(content["fitted_on"])} episode(s): {html.escape(", ".join(content["fitted_on"]))}.
Validated on {len(content["validated_on"])}: {html.escape(", ".join(content["validated_on"]))}.</p>
<h2>Parameters (95 % intervals)</h2>
<table><tr><th>parameter</th><th>estimate</th><th>95 % interval</th><th>unit</th>
<th>verdict</th><th>most correlated with</th></tr>{"".join(rows)}</table>
<p>A parameter the data do not pin down stays at its nominal value.</p>
<h2>Validation residuals</h2>
<table><tr><th></th><th>before (nominal)</th><th>after</th></tr>{residual_rows}</table>
<h2>Not applied in sim episodes</h2><ul>{not_in_sim or "<li>none</li>"}</ul>
<h2>Measured vs simulated (validation episodes)</h2>
<p>black: measured; red dashed: nominal simulator; blue: calibrated.</p>
{"".join(episodes)}
</body></html>
"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
