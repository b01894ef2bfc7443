"""What the technician sees: progress bars per side and family while running, a table at the end.

Bars are drawn only on a terminal; piped output gets the summary table alone. Both sides may
advance the bars at once (the real side runs in its own thread); rich's Progress is thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from embodied_eval.records import Episode


class RunProgress:
    """Progress bars: one per (side, engine) with ETA, and one per family under it.

    Use as a context manager; `plan` the bars first, then `advance` with each finished slot.
    """

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            disable=not (enabled and console.is_terminal),
            transient=False,
        )
        self._tasks: dict[tuple[str, str, str], TaskID] = {}

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def plan(self, side: str, engine: str, family_totals: Mapping[str, tuple[int, int]]) -> None:
        """Add the bars of one side/engine: `family_totals[family] = (planned, already done)`."""
        planned = sum(p for p, _ in family_totals.values())
        done = sum(d for _, d in family_totals.values())
        self._tasks[(side, engine, "")] = self.progress.add_task(
            f"[bold]{side} · {engine}", total=planned, completed=done
        )
        for family in sorted(family_totals):
            p, d = family_totals[family]
            self._tasks[(side, engine, family)] = self.progress.add_task(
                f"   {family}", total=p, completed=d
            )

    def advance(self, episode: Episode) -> None:
        """One manifest row of `episode`'s side/engine/family is settled."""
        for family in ("", episode.family):
            task = self._tasks.get((episode.side, episode.engine, family))
            if task is not None:
                self.progress.advance(task)

    def stop_side(self, side: str, engine: str, note: str) -> None:
        """Mark a side as stopped early (its bar keeps the count reached)."""
        task = self._tasks.get((side, engine, ""))
        if task is not None:
            self.progress.update(task, description=f"[bold]{side} · {engine}[/] ({note})")

    def log(self, message: str) -> None:
        self.progress.console.print(message)


def summary_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """The end-of-run table: per side, engine and family, trials run vs planned and successes.

    "successes" is z = 1 among the settled scored episodes, "rate" their ratio (no interval: the
    metrics commands report AR with its confidence bounds); "err/abort" counts manifest rows that
    ended error/aborted after their retries; "attempts" counts every stored attempt.

    Args:
        rows: dicts with side, engine, family, planned, done, scored, successes, unscored,
            attempts (as in `RunSummary.rows`).
    """
    table = Table(title="paired trials", show_lines=False)
    for name, justify in (
        ("side", "left"),
        ("engine", "left"),
        ("family", "left"),
        ("run/planned", "right"),
        ("successes", "right"),
        ("rate", "right"),
        ("err/abort", "right"),
        ("attempts", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        rate = f"{row['successes'] / row['scored']:.3f}" if row["scored"] else "–"
        table.add_row(
            row["side"],
            row["engine"],
            row["family"],
            f"{row['done']} / {row['planned']}",
            f"{row['successes']} / {row['scored']}",
            rate,
            str(row["unscored"]),
            str(row["attempts"]),
        )
    return table
