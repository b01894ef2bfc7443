"""The verdict, "what remains" and the level explanation as printed by `metrics` and `certify`.

The decisions are in `embodied_eval.scoring.verdict`; this module only prints them (Rich: coloured on a
terminal, plain text when piped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from embodied_eval.cli.common import console as default_console
from embodied_eval.scoring.verdict import (
    AMBER,
    GREEN,
    MEASURED_HERE,
    NEEDED_FROM_ELSEWHERE,
    RED,
    ROBOTICS_ONLY_CEILING,
    WindowVerdict,
    level_rows,
    next_steps,
)

STYLES = {RED: "bold red", AMBER: "bold dark_orange", GREEN: "bold green"}


def print_verdict(
    verdict: WindowVerdict, *, remains: bool = True, out: Console | None = None
) -> None:
    """The coloured headline, then (unless `remains` is false) what remains."""
    console = out or default_console
    console.print(
        f"verdict: {verdict.colour.upper()} — {verdict.headline}",
        style=STYLES[verdict.colour],
        markup=False,
        highlight=False,
    )
    if remains:
        print_remains(verdict, out=console)


def print_remains(verdict: WindowVerdict, *, out: Console | None = None) -> None:
    """What remains: failing checks first (not fixable by more trials), then inconclusive ones
    with the trials or hours that would settle them."""
    console = out or default_console
    remains = verdict.remains()
    if remains:
        console.print("What remains:", markup=False, highlight=False)
        for line in remains:
            style = "red" if line.startswith("FAILING") else None
            console.print(f"  - {line}", style=style, markup=False, highlight=False)


def print_level_explanation(certificate: Mapping[str, Any], *, out: Console | None = None) -> None:
    """Why this level and not the next: one table of the checks of both, then what this harness
    measures and what it needs from elsewhere."""
    console = out or default_console
    level = certificate["level"]
    n = int(level["level"])
    score = certificate.get("score") or {}
    rows = level_rows(score.get("gates", []), n)
    nxt = f"AAI-{n + 1}" if n < 5 else None
    console.print(
        f"level {level['assigned']}: {level['reason']}"
        + (f"; what AAI-{n} rests on and what blocks {nxt}:" if nxt and n else "")
        + (f"; what blocks {nxt}:" if nxt and not n else ""),
        markup=False,
        highlight=False,
    )
    if rows:
        table = Table(show_lines=False)
        for col in ("level", "gate", "check", "verdict", "detail"):
            table.add_column(col, overflow="fold")
        for r in rows:
            style = {"pass": "green", "fail": "red", "inconclusive": "dark_orange"}.get(
                r["verdict"]
            )
            table.add_row(r["level"], r["gate"], r["check"], r["verdict"], r["detail"], style=style)
        console.print(table)
    for sentence in (MEASURED_HERE, NEEDED_FROM_ELSEWHERE, ROBOTICS_ONLY_CEILING):
        console.print(sentence, markup=False, highlight=False)


def print_next_steps(
    verdict: WindowVerdict, *, has_evidence: bool, out: Console | None = None
) -> None:
    """What to do next, most urgent first (see `verdict.next_steps`)."""
    console = out or default_console
    console.print("What to do next:", markup=False, highlight=False)
    for n, step in enumerate(next_steps(verdict, has_evidence=has_evidence), start=1):
        console.print(f"  {n}. {step}", markup=False, highlight=False)
