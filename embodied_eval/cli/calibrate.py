"""`embodied-eval calibrate`: fit the simulator's physical parameters to recorded real episodes.

    embodied-eval calibrate --db DB --protocol P [--window W] [--family F]
                            [--params payload,actuator_delay,...] --out calibration.toml
                            [--report DIR] [--by-drift] [--workers N] [--json]

Reads the window's real episodes that have an MCAP recording, replays their commands in the
MuJoCo model of each pair's scene and fits the named parameters (default: payload,
actuator_delay, actuator_gain, actuator_bandwidth, joint_damping, object_mass, friction). Prints
per parameter the estimate, its 95 % interval and whether the data identify it (with its most
correlated partner when not), the fitting/validation split and the validation residuals before
and after; writes the calibration file (`--out`) and, with `--report`, `report.html` with overlays
of measured vs simulated trajectories. `--by-drift` calibrates each drift setting's episodes
separately (one file per drift, `<out stem>-<drift>.toml`) and prints them by drift day. The work is done by the robot side's calibration
(`embodied_eval.plugins.CALIBRATE`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer

from embodied_eval.cli.common import (
    DbOption,
    JsonOption,
    console,
    open_store,
    print_json,
    window_id,
)
from embodied_eval.errors import EvalError
from embodied_eval.plugins import CALIBRATE, resolve
from embodied_eval.protocol.reader import load_protocol


def _fmt(value: Any) -> str:
    return "—" if value is None or (isinstance(value, float) and not math.isfinite(value)) else (
        f"{value:.4g}")  # fmt: skip


def _print_not_calibrated_from(out: dict[str, Any]) -> None:
    for row in out.get("not_calibrated_from", []):
        console.print(
            f"  not calibrated from {row['episode_id']}: {row['reason']}", markup=False
        )


def _print(out: dict[str, Any]) -> None:
    console.print(
        f"calibration of robot {out['robot_id']} — window {out['window']}; fitted on "
        f"{len(out['fitted_on'])} episode(s), validated on {len(out['validated_on'])} "
        f"(by episode: every third validates)",
        markup=False,
    )
    console.print(f"  fitting: {', '.join(out['fitted_on'])}", markup=False)
    console.print(f"  validation: {', '.join(out['validated_on'])}", markup=False)
    _print_not_calibrated_from(out)
    if out.get("set_aside"):
        console.print(
            f"  set aside (the replay could not follow them): {', '.join(out['set_aside'])}",
            markup=False,
        )
    if out.get("set_aside_stretches"):
        console.print(
            "  stretches set aside (the replay could not follow them): "
            f"{', '.join(out['set_aside_stretches'])}",
            markup=False,
        )
    for name, e in out["parameters"].items():
        line = (
            f"  {name:<19} {_fmt(e.get('value')):>9} {e['unit']:<3} 95 % "
            f"[{_fmt(e.get('low'))}, {_fmt(e.get('high'))}]"
        )
        if e.get("design_effect", 1.0) > 1.0:
            line += f" (widened ×√{_fmt(e['design_effect'])}: residuals correlated in time)"
        if not e["identified"]:
            if e.get("fitted_value") is not None:
                line += f" around the fit's {_fmt(e['fitted_value'])}"
            line += f"  NOT IDENTIFIED ({e['reason']}"
            line += f"; most correlated with {e['partner']}, ρ = {e['correlation']:+.2f})" if e.get(
                "partner") else ")"  # fmt: skip
            line += " — kept nominal"
        console.print(line, markup=False)
    methods = sorted({e["interval"] for e in out["parameters"].values() if e.get("interval")})
    if methods:
        console.print(f"intervals: {'; '.join(methods)}", markup=False)
    v = out["validation"]
    console.print(
        f"validation residual: joints {_fmt(v.get('joint_rms_mrad_before'))} → "
        f"{_fmt(v.get('joint_rms_mrad_after'))} mrad RMS; object "
        f"{_fmt(v.get('object_rms_mm_before'))} → {_fmt(v.get('object_rms_mm_after'))} mm RMS",
        markup=False,
    )
    for name, reason in out["not_in_sim"].items():
        console.print(f"not applied in sim episodes: {name} ({reason})", markup=False)
    console.print(f"wrote {out['out']} (content sha256 {out['content_sha256']})", markup=False)
    if out["report"]:
        console.print(f"report: {out['report']}", markup=False)


def _print_by_drift(out: dict[str, Any]) -> None:
    console.print(
        f"calibration of robot {out['robot_id']} per drift day — window {out['window']}",
        markup=False,
    )
    _print_not_calibrated_from(out)
    for row in out["by_drift"]:
        day = "?" if row["day"] is None else row["day"]
        console.print(
            f"day {day} ({row['drift']}, {row['episodes']} episodes) → {row['out']}", markup=False
        )
        for name, e in row["parameters"].items():
            verdict = "" if e["identified"] else "  not identified, kept nominal"
            console.print(
                f"  {name:<19} {_fmt(e.get('value')):>9} {e['unit']:<3} 95 % "
                f"[{_fmt(e.get('low'))}, {_fmt(e.get('high'))}]{verdict}",
                markup=False,
            )
    if out.get("recorded_in_store"):
        console.print(
            "each day recorded in the store's trial ledger: the maintenance closure's report "
            "shows them next to its index",
            markup=False,
        )


def calibrate(
    protocol: Path = typer.Option(..., "--protocol", help="The protocol file of the window."),
    out: Path = typer.Option(..., "--out", help="Calibration file to write (TOML)."),
    window: str | None = typer.Option(
        None, "--window", help="Window id (default: the protocol's)."
    ),
    family: str | None = typer.Option(None, "--family", help="Only this family's episodes."),
    params: str | None = typer.Option(
        None, "--params", help="Comma-separated parameters to fit (default: all but link_mass)."
    ),
    report: Path | None = typer.Option(None, "--report", help="Directory for report.html."),
    by_drift: bool = typer.Option(
        False, "--by-drift", help="Calibrate each drift setting (day) separately: one file each."
    ),
    workers: int = typer.Option(2, "--workers", min=1, max=64, help="Replay processes."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Fit the simulator's physical parameters to the window's recorded real episodes."""
    proto = load_protocol(protocol)
    wid = window_id(window) or proto.window_id
    if not out.name.endswith(".toml"):
        raise EvalError(f"--out: {out} should be a .toml file", key="out")
    with open_store(db, create=False) as store:
        result = resolve(CALIBRATE)(
            store, proto, window=wid, family=family, params=params, out=out, report=report,
            workers=workers, by_drift=by_drift,
        )  # fmt: skip
    if as_json:
        print_json(result)
    elif by_drift:
        _print_by_drift(result)
    else:
        _print(result)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
