"""`embodied-eval score EVIDENCE.json [--profile default|software|robotics] [--json]`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import numpy as np
import typer
from rich.table import Table

from embodied_eval.cli.common import JsonOption, console, print_json
from embodied_eval.scoring.calibration import AXES, AXIS_NAMES
from embodied_eval.scoring.evidence_fields import load_evidence
from embodied_eval.scoring.gate_checks import Verdict
from embodied_eval.scoring.report import ScoreReport, score_evidence


class Profile(str, Enum):
    default = "default"
    software = "software"
    robotics = "robotics"


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _print_report(report: ScoreReport) -> None:
    table = Table(title=f"AAI axes ({report.profile} profile)")
    for col in ("axis", "raw x̂", "anchors (L, U)", "x = φ(x̂)", "interval", "weight"):
        table.add_column(col)
    for x in AXES:
        if x not in report.axes:
            if report.weights.get(x, 0.0) > 0:
                table.add_row(
                    f"{x} {AXIS_NAMES[x]}", "missing", "", "", "", f"{report.weights[x]:g}"
                )
            continue
        s = report.axes[x]
        anchors = "" if s.anchors is None else f"({s.anchors.low:g}, {s.anchors.high:g})"
        iv = (
            ""
            if s.value.low is None or s.value.high is None
            else f"[{s.value.low:.3f}, {s.value.high:.3f}]"
        )
        table.add_row(
            f"{x} {AXIS_NAMES[x]}",
            _fmt(None if s.raw is None else s.raw.value),
            anchors,
            _fmt(s.x),
            iv,
            f"{report.weights.get(x, 0.0):g}",
        )
    console.print(table)
    if report.index is None:
        console.print("AAI-Index: undefined (missing axes: " + " ".join(report.missing_axes) + ")")
    else:
        console.print(f"AAI-Index  {report.index.format()}")
        console.print(
            f"uniformity U = {_fmt(report.uniformity)}   AAI* = AAI·U^{report.jaggedness_exponent:g}"
            f" = {_fmt(report.index_jagged)}"
        )
    console.print(f"[bold]level: {report.level_name}[/]")
    for g in report.assignment.blocking():
        console.print(f"  blocks AAI-{g.level}: {g.gate.name} — {g.gate.verdict.value}")
        for c in g.gate.checks:
            if c.verdict is not Verdict.PASS:
                extra = f" ({c.detail})" if c.detail else ""
                console.print(f"    {c.verdict.value}: {c.name}{extra}")
    for note in report.notes:
        console.print(f"note: {note}")


def score(
    evidence: Path = typer.Argument(..., help="Evidence JSON file (see the evidence schema)."),
    profile: Profile | None = typer.Option(
        None, "--profile", help="Weight profile (default: the evidence's, else default)."
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the bootstrap generator."),
    resamples: int = typer.Option(
        2000, "--resamples", min=100, max=1_000_000, help="Bootstrap resamples."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Score an evidence file: axes, AAI-Index with intervals, U, AAI*, κ, closures and level."""
    data = load_evidence(evidence)
    rng = np.random.default_rng(seed)
    report = score_evidence(
        data, None if profile is None else profile.value, rng, n_resamples=resamples
    )
    if as_json:
        out = report.to_json()
        out["seed"] = seed
        out["evidence"] = str(evidence)
        print_json(out)
        return
    _print_report(report)


def register(app: typer.Typer) -> None:
    app.command("score")(score)
