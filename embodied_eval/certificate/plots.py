"""The report's plots, drawn with matplotlib's Agg backend and returned as PNG bytes.

Each function takes plain JSON values (estimates as `{"value", "low", "high", ...}`) so the plots
can be redrawn from a certificate alone. No pyplot state is used: each plot builds its own
`Figure`, so plotting is safe in any thread and leaves no global state behind. PNG metadata is
fixed, so the same inputs give the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from embodied_eval.certificate.timeline_svg import SEVERITY_COLORS
from embodied_eval.records import SEVERITIES

#: Figure size in inches and resolution: small enough to embed, large enough to read.
FIGSIZE = (6.4, 3.6)
DPI = 100
SIDE_COLORS = {"sim": "#4C72B0", "real": "#DD8452"}


#: The loosest rate gate of the robotics gates (AAI-2: ≤ 1 minor per 100 h, seed §7), used when
#: a certificate does not carry the gate's own threshold.
DEFAULT_RATE_THRESHOLD_PER_100H = 1.0
RATE_GATE_ID = "aai2.minor_rate_max"


def zero_event_hours(threshold_per_100h: float, confidence: float) -> float:
    """Exposure hours at which zero events bound a rate at `threshold_per_100h` (one-sided
    exact Poisson bound χ²(c; 2)/(2H) = −ln(1 − c)/H per hour): H = −100·ln(1 − c)/threshold.
    At 95 % and 1 per 100 h this is 299.57 h (the statistics notes' 299.6 h)."""
    return -100.0 * math.log(1.0 - confidence) / threshold_per_100h


def rate_plot_floor(cert: Mapping[str, Any]) -> dict[str, Any]:
    """Below which exposure the report does not draw rates per 100 h, and why.

    The floor is the exposure at which zero events would demonstrate the loosest rate gate at
    the protocol's confidence (`zero_event_hours`): below it every severity's upper bound is
    above every rate threshold, so a bar chart only shows how thin the data are (bounds of
    10⁵ per 100 h on a 0.001 h window). The report then states the bounds as text.

    Returns:
        {"threshold": per 100 h, "confidence", "min_hours", "exposure_hours", "draw": bool,
        "more_hours": the planner's remaining hours for the gate (or min_hours − H)}.
    """
    confidence = float((cert.get("protocol") or {}).get("confidence") or 0.95)
    gate = ((cert.get("embodiment") or {}).get("gates") or {}).get("AAI-2") or {}
    check: Mapping[str, Any] = next(
        (c for c in gate.get("checks", []) if c.get("id") == RATE_GATE_ID), {}
    )
    threshold = float(check.get("threshold") or DEFAULT_RATE_THRESHOLD_PER_100H)
    exposure = float((cert.get("window") or {}).get("exposure_hours") or 0.0)
    min_hours = zero_event_hours(threshold, confidence)
    planned = (check.get("remaining") or {}).get("hours")
    return {
        "threshold": threshold,
        "confidence": confidence,
        "min_hours": min_hours,
        "exposure_hours": exposure,
        "draw": exposure >= min_hours,
        "more_hours": float(planned) if planned is not None else max(0.0, min_hours - exposure),
    }


def _new_figure() -> Figure:
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    # Fixed metadata (no software version, no timestamp) keeps the bytes reproducible.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _message_figure(title: str, message: str) -> bytes:
    fig = _new_figure()
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, transform=ax.transAxes)
    return _png(fig)


def _errors(estimates: Sequence[Mapping[str, Any] | None]) -> tuple[list[float], list[list[float]]]:
    """Bar heights and asymmetric error bars; a missing bound draws no bar on that side."""
    values: list[float] = []
    below: list[float] = []
    above: list[float] = []
    for est in estimates:
        value = None if est is None else est.get("value")
        if value is None:
            values.append(0.0)
            below.append(0.0)
            above.append(0.0)
            continue
        low = est.get("low") if est is not None else None
        high = est.get("high") if est is not None else None
        values.append(float(value))
        below.append(max(0.0, float(value) - float(low)) if low is not None else 0.0)
        above.append(max(0.0, float(high) - float(value)) if high is not None else 0.0)
    return values, [below, above]


def success_by_family_plot(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Sim vs real success rate per family, with confidence intervals.

    Args:
        rows: one per family: {"family": str, "sim": estimate | None, "real": estimate | None}.

    Returns:
        PNG bytes.
    """
    if not rows:
        return _message_figure("Success by family", "no scored episodes in the window")
    fig = _new_figure()
    ax = fig.add_subplot()
    width = 0.38
    positions = list(range(len(rows)))
    for offset, side in ((-width / 2, "sim"), (width / 2, "real")):
        values, err = _errors([row.get(side) for row in rows])
        ax.bar(
            [p + offset for p in positions],
            values,
            width,
            yerr=err,
            capsize=3,
            label=side,
            color=SIDE_COLORS[side],
        )
    ax.set_xticks(positions, [str(row["family"]) for row in rows], rotation=15)
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel("success rate (z = 1{q ≥ q*})")
    ax.set_title("Sim vs real success per family")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return _png(fig)


def incident_rates_plot(rates: Mapping[str, Mapping[str, Any] | None]) -> bytes:
    """Incident rates per 100 exposure hours by severity, with exact intervals.

    A severity with zero events is drawn at 0 with its upper bound and labelled "0 observed".

    Args:
        rates: severity → estimate (rate per 100 h).

    Returns:
        PNG bytes.
    """
    names = [s for s in SEVERITIES if s in rates]
    if not names or all((rates[s] or {}).get("value") is None for s in names):
        return _message_figure("Incident rates", "no exposure hours recorded")
    fig = _new_figure()
    ax = fig.add_subplot()
    values, err = _errors([rates[s] for s in names])
    positions = list(range(len(names)))
    ax.bar(
        positions,
        values,
        0.6,
        yerr=err,
        capsize=4,
        color=[SEVERITY_COLORS[s] for s in names],
    )
    for pos, name in zip(positions, names, strict=True):
        est = rates[name] or {}
        if est.get("n") == 0 and est.get("value") is not None:
            ax.annotate(
                "0 observed",
                (pos, 0.0),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=8,
            )
    ax.set_xticks(positions, [n.replace("_", "-") for n in names])
    ax.set_ylabel("incidents per 100 h")
    ax.set_title("Incident rates (exact Poisson intervals)")
    fig.tight_layout()
    return _png(fig)


def embodiment_parts_plot(parts: Mapping[str, Mapping[str, Any] | None]) -> bytes:
    """E and its parts (AR, SS, S2R, Ê, E) with intervals.

    Args:
        parts: label → estimate, in the order to draw.

    Returns:
        PNG bytes.
    """
    labels = list(parts)
    if not labels:
        return _message_figure("Embodiment", "no embodiment report")
    fig = _new_figure()
    ax = fig.add_subplot()
    values, err = _errors([parts[k] for k in labels])
    positions = list(range(len(labels)))
    colors = ["#55A868" if k in ("E", "Ê") else "#4C72B0" for k in labels]
    ax.bar(positions, values, 0.6, yerr=err, capsize=4, color=colors)
    for pos, label in zip(positions, labels, strict=True):
        if (parts[label] or {}).get("value") is None:
            ax.annotate(
                "n/a",
                (pos, 0.0),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=8,
            )
    ax.set_xticks(positions, labels)
    ax.set_ylim(0.0, 1.05)
    ax.set_title("Embodiment E = φ_E((AR·SS·S2R)^(1/3)) and its parts")
    fig.tight_layout()
    return _png(fig)


def frontier_plot(frontier: Mapping[str, Any] | None) -> bytes:
    """The delegability frontier q*(a) and/or the quality frontier F(τ), when evidence has them.

    Args:
        frontier: {"delegability": [{"a": float, "q": float}, ...] (optional),
            "quality": [{"tau": float, "F": float}, ...] (optional)} or None.

    Returns:
        PNG bytes; a "no frontier evidence" panel when there is nothing to draw.
    """
    delegability = list((frontier or {}).get("delegability") or [])
    quality = list((frontier or {}).get("quality") or [])
    if not delegability and not quality:
        return _message_figure("Delegability / quality frontier", "no frontier evidence")
    fig = _new_figure()
    panels = [p for p in (("delegability", delegability), ("quality", quality)) if p[1]]
    for i, (kind, points) in enumerate(panels, start=1):
        ax = fig.add_subplot(1, len(panels), i)
        if kind == "delegability":
            pts = sorted((float(p["a"]), float(p["q"])) for p in points)
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color="#4C72B0")
            ax.set_xlabel("autonomy a (uninterrupted actions)")
            ax.set_ylabel("quality q*(a)")
            ax.set_title("Delegability frontier")
        else:
            pts = sorted((float(p["tau"]), float(p["F"])) for p in points)
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color="#55A868")
            ax.set_xlabel("quality threshold τ")
            ax.set_ylabel("F(τ)")
            ax.set_title("Quality frontier")
        ax.set_ylim(0.0, 1.05)
    fig.tight_layout()
    return _png(fig)


def _cumulative(hours: Sequence[float], end_h: float) -> tuple[list[float], list[int]]:
    """Step coordinates of a cumulative count: 0 at 0 h, +1 at each event, flat to `end_h`."""
    xs = [0.0, *hours, end_h]
    ys = [0, *range(1, len(hours) + 1), len(hours)]
    return xs, ys


def reliability_plot(points: Sequence[Mapping[str, Any]], exposure_h: float) -> bytes:
    """Cumulative incidents against cumulative exposure hours, one step line per severity.

    Args:
        points: incidents in time order: {"exposure_h": hours of exposure when it occurred,
            "severity": str}.
        exposure_h: total exposure hours of the window (the x-axis extends to it).

    Returns:
        PNG bytes.
    """
    if exposure_h <= 0.0:
        return _message_figure("Reliability", "no exposure hours recorded")
    return _png(reliability_figure(points, exposure_h))


def reliability_figure(points: Sequence[Mapping[str, Any]], exposure_h: float) -> Figure:
    """The figure of `reliability_plot` (exposure_h > 0): counts start at 0, never below."""
    fig = _new_figure()
    ax = fig.add_subplot()
    ordered = sorted(points, key=lambda p: float(p["exposure_h"]))
    xs, ys = _cumulative([float(p["exposure_h"]) for p in ordered], exposure_h)
    ax.step(xs, ys, where="post", color="#333333", label="all incidents")
    for severity in SEVERITIES:
        chosen = [float(p["exposure_h"]) for p in ordered if p["severity"] == severity]
        if chosen:
            sx, sy = _cumulative(chosen, exposure_h)
            ax.step(
                sx,
                sy,
                where="post",
                color=SEVERITY_COLORS[severity],
                label=severity.replace("_", "-"),
            )
    ax.set_xlim(0.0, exposure_h)
    # Counts: never below zero, whole numbers, at least 0..1 so an empty window is not ±0.04.
    ax.set_ylim(0.0, max(1.0, len(ordered)) * 1.05)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("cumulative exposure (h)")
    ax.set_ylabel("cumulative incidents")
    ax.set_title("Reliability: incidents vs exposure")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def maintenance_plot(section: Mapping[str, Any]) -> bytes:
    """The maintenance audit: the index on each drift-calendar day with its two-sided interval
    and its one-sided gate bound, the α·C₀ line and Y.

    Args:
        section: the certificate's `closures.maintenance` (computed): "days" [{"day", "index",
            "bound", "patches"}], "threshold" α·C₀, "alpha", "Y_days", "index".

    Returns:
        PNG bytes.
    """
    days = [d for d in section.get("days", []) if (d.get("index") or {}).get("value") is not None]
    if not days:
        return _message_figure("Maintenance audit", "no drift-calendar day has episodes yet")
    fig = _new_figure()
    ax = fig.add_subplot()
    xs = [float(d["day"]) for d in days]
    values, err = _errors([d.get("index") for d in days])
    ax.errorbar(xs, values, yerr=err, fmt="o-", capsize=3, color="#4C72B0",
                label=f"{section.get('index')} per day (two-sided interval)")  # fmt: skip
    bounds = [(x, (d.get("bound") or {}).get("low")) for x, d in zip(xs, days, strict=True)]
    shown = [(x, b) for x, b in bounds if b is not None]
    if shown:
        ax.plot([x for x, _ in shown], [b for _, b in shown], "v", color="#4C72B0", alpha=0.6,
                label="one-sided bound (gate)")  # fmt: skip
    threshold = section.get("threshold")
    y_days = float(section.get("Y_days") or max(xs))
    if threshold is not None:
        ax.axhline(float(threshold), color="#C44E52", linestyle="--",
                   label=f"α·C₀ = {section.get('alpha')}·C₀ = {float(threshold):.3f}")  # fmt: skip
    ax.axvline(y_days, color="#8C8C8C", linestyle=":", label=f"Y = {y_days:g} days")
    patched = [(x, v) for x, v, d in zip(xs, values, days, strict=True) if d.get("patches")]
    if patched:
        ax.plot([x for x, _ in patched], [v for _, v in patched], "x", color="#C44E52",
                markersize=10, label="human patch")  # fmt: skip
    ax.set_xlim(-0.5, max(y_days, max(xs)) + 0.5)
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("drift-calendar day")
    ax.set_ylabel(str(section.get("index")))
    ax.set_title("Maintenance audit: index over the drift days")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def certificate_plots(cert: Mapping[str, Any]) -> dict[str, bytes]:
    """Every plot of the report, drawn from a certificate alone.

    Args:
        cert: the certificate (as written to certificate.json).

    Returns:
        plot name → PNG bytes: success_by_family, reliability, embodiment, frontier;
        incident_rates when the exposure reaches `rate_plot_floor` (below it the report gives
        the bounds as text); maintenance when the certificate has a computed maintenance audit.
    """
    emb = cert.get("embodiment", {})
    trials = cert.get("trials", {})
    incidents = cert.get("incidents", {})
    exposure_h = cert.get("window", {}).get("exposure_hours") or 0.0
    maintenance = (cert.get("closures") or {}).get("maintenance") or {}
    extra = {"maintenance": maintenance_plot(maintenance)} if "days" in maintenance else {}
    if rate_plot_floor(cert)["draw"]:
        extra["incident_rates"] = incident_rates_plot(emb.get("rates_per_100h", {}))
    return {
        **extra,
        "success_by_family": success_by_family_plot(trials.get("by_family", [])),
        "reliability": reliability_plot(incidents.get("reliability", []), float(exposure_h)),
        "embodiment": embodiment_parts_plot(
            {
                "AR": emb.get("AR"),
                "SS": emb.get("SS"),
                "S2R": emb.get("S2R"),
                "Ê": emb.get("E_raw"),
                "E": emb.get("E"),
            }
        ),
        "frontier": frontier_plot(cert.get("frontier")),
    }
