"""What the technician sees: progress bars per side and family while running, a table at the end.

Bars are drawn only on a terminal. Written to a log file or a pipe (nohup, CI), the same
progress comes as plain lines instead, one per settled manifest row:
`progress sim · mujoco 12/40 · pick_place 3/10 · <episode id> ok q=0.930`. Both sides may advance
at once (the real side runs in its own thread); rich's Progress is thread-safe and plain lines
are written under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from rich import box
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
        #: Plain progress lines instead of bars (enabled, but not a terminal).
        self.plain = enabled and not console.is_terminal
        self._console = console
        self._counts: dict[tuple[str, str, str], list[int]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def plan(self, side: str, engine: str, family_totals: Mapping[str, tuple[int, int]]) -> None:
        """Add the bars of one side/engine: `family_totals[family] = (planned, already done)`."""
        planned = sum(p for p, _ in family_totals.values())
        done = sum(d for _, d in family_totals.values())
        self._counts[(side, engine, "")] = [done, planned]
        for family, (p, d) in family_totals.items():
            self._counts[(side, engine, family)] = [d, p]
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
        if self.plain:
            self._plain_line(episode)

    def _plain_line(self, episode: Episode) -> None:
        with self._lock:
            parts = []
            for family in ("", episode.family):
                count = self._counts.get((episode.side, episode.engine, family))
                if count is not None:
                    count[0] += 1
                    parts.append(f"{family + ' ' if family else ''}{count[0]}/{count[1]}")
            quality = "" if episode.status == "error" else f" q={episode.quality:.3f}"
            self._console.print(
                f"progress {episode.side} · {episode.engine} {' · '.join(parts)} · "
                f"{episode.episode_id} {episode.status}{quality}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )

    def stop_side(self, side: str, engine: str, note: str) -> None:
        """Mark a side as stopped early (its bar keeps the count reached)."""
        task = self._tasks.get((side, engine, ""))
        if task is not None:
            self.progress.update(task, description=f"[bold]{side} · {engine}[/] ({note})")

    def log(self, message: str) -> None:
        self.progress.console.print(message)


def summary_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """The end-of-run table: per side, engine and family, trials run vs planned and successes.

    "run/plan" is settled manifest rows of planned ones; "successes" is z = 1 among the settled
    scored episodes, "rate" their ratio (no interval: the metrics commands report AR with its
    confidence bounds); "err/abort" counts manifest rows that ended error/aborted after their
    retries; "tries" counts every stored attempt.

    Args:
        rows: dicts with side, engine, family, planned, done, scored, successes, unscored,
            attempts (as in `RunSummary.rows`).
    """
    rows = list(rows)
    cells = [
        (
            row["side"],
            row["engine"],
            row["family"],
            f"{row['done']}/{row['planned']}",
            f"{row['successes']}/{row['scored']}",
            f"{row['successes'] / row['scored']:.3f}" if row["scored"] else "–",
            str(row["unscored"]),
            str(row["attempts"]),
        )
        for row in rows
    ]
    # Light borders and cells that are never cut: 8 columns fit 80 characters with the longest
    # family and engine names (a narrower terminal folds the headers, never names or counts).
    table = Table(title="paired trials", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    headers = ("side", "engine", "family", "run/plan", "successes", "rate", "err/abort", "tries")
    for i, name in enumerate(headers):
        widest = max((len(c[i]) for c in cells), default=0)
        table.add_column(
            name,
            justify="left" if i < 3 else "right",
            no_wrap=True,
            min_width=widest,
            overflow="fold",
        )
    for c in cells:
        table.add_row(*c)
    return table
