"""`embodied-eval rank`: a leaderboard of the stored policies.

    embodied-eval rank --db DB [--window W] [--policies a,b,c] [--side sim|real] [--graded]
                       [--ties davidson|half] [--resamples 1000] [--seed 0] [--html FILE] [--json]

Bradley–Terry strengths with ties from pairwise outcomes on shared instances, percentile
bootstrap intervals over instances, P(best) and the comparison graph; a graph in several pieces
is named and each piece ranked on its own (see `embodied_eval.embodiment.policy_leaderboard`).

JSON (`--json`): {"model", "method", "interval", "level", "connected", "pieces" [{"name",
"policies", "leaderboard" [{"policy", "rank", "strength" (estimate), "p_best", "comparisons"}],
"tie_parameter" (Davidson's ν, estimate or null), "regularized", "resamples_regularized",
"instances"}], "comparison_graph" [{"a", "b", "a_wins", "b_wins", "ties", "n"}], "notes",
"policies", "outcome", "window", "side", "episodes", "success_by_family" {policy: {family:
estimate}}}.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from embodied_eval.cli.common import (
    DbOption,
    JsonOption,
    console,
    open_store,
    print_json,
    window_id,
)
from embodied_eval.embodiment.policy_leaderboard import Leaderboard, build_leaderboard
from embodied_eval.errors import EvalError
from embodied_eval.store.core import default_db_path


def _print(board: Leaderboard) -> None:
    r = board.ranking
    out = board.to_json()
    console.print(
        f"{out['method']}; {r.level * 100:g} % {out['interval']}; outcome: {board.outcome}",
        markup=False,
    )
    for note in r.notes:
        console.print(f"note: {note}", markup=False)
    for piece in r.pieces:
        console.print(f"\n{piece.name}: {', '.join(piece.policies)}", markup=False)
        t = Table(
            "rank",
            "policy",
            f"log-strength ({r.level * 100:g} % interval)",
            "P(best)",
            "comparisons",
        )
        for row in piece.rows:
            s = row.strength
            t.add_row(
                str(row.rank),
                escape(row.policy),
                escape(f"{s.value:+.3f} [{s.low:+.3f}, {s.high:+.3f}]"),
                f"{row.p_best:.3f}",
                str(row.comparisons),
            )
        console.print(t)
        if piece.tie_parameter is not None:
            nu = piece.tie_parameter
            console.print(
                f"Davidson's tie parameter ν = {nu.value:.3f} [{nu.low:.3f}, {nu.high:.3f}]",
                markup=False,
            )
    families = sorted({f for fams in board.success.values() for f in fams})
    t = Table("policy", *families, title=f"success per family ({r.level * 100:g} % Wilson)")
    for policy in board.policies:
        fams = board.success.get(policy, {})
        t.add_row(
            escape(policy),
            *(escape(fams[f].format()) if f in fams else "—" for f in families),
        )
    console.print(t)
    console.print("\ncomparison graph (pairs that met: a won / b won / ties):")
    for g in r.graph:
        console.print(f"  {g.a} – {g.b}: {g.n} ({g.a_wins} / {g.b_wins} / {g.ties})", markup=False)


def rank(
    db: Path | None = DbOption,
    window: str | None = typer.Option(None, "--window", help="Episodes of this window only."),
    policies: str | None = typer.Option(
        None, "--policies", help="Comma-separated policy names (default: every stored policy)."
    ),
    side: str | None = typer.Option(None, "--side", help="sim or real (default: both)."),
    graded: bool = typer.Option(
        False, "--graded", help="The higher quality q wins (default: success vs failure)."
    ),
    ties: str = typer.Option(
        "davidson", "--ties", help="Tie model: davidson (tie parameter ν) or half (half a win)."
    ),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples of instances."),
    level: float = typer.Option(0.95, "--level", help="Interval level."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap RNG seed."),
    html: Path | None = typer.Option(None, "--html", help="Also write the leaderboard as HTML."),
    as_json: bool = JsonOption,
) -> None:
    """Leaderboard of many policies: Bradley–Terry strengths with intervals and P(best)."""
    window = window_id(window)
    if seed < 0:
        raise EvalError(f"--seed: {seed} must be >= 0", key="seed")
    with open_store(db, create=False) as store:
        episodes = store.episodes(window=window)
    if not episodes:
        raise EvalError(
            f"no episodes stored{f' in window {window!r}' if window else ''}", key="window"
        )
    board = build_leaderboard(
        episodes,
        np.random.default_rng(seed),
        policies=policies.split(",") if policies else None,
        window=window,
        side=side,
        graded=graded,
        model=ties,
        resamples=resamples,
        level=level,
    )
    from embodied_eval.certificate.analyses import record_analysis, window_of

    shown = board.to_json()
    pieces = shown.get("pieces") or []
    first = pieces[0]["leaderboard"][0]["policy"] if pieces and pieces[0]["leaderboard"] else None
    # The bootstrap seed and the outcome are a ledger record: re-runs with new seeds stay visible.
    record_analysis(
        db if db is not None else default_db_path(),
        command="rank",
        window=window or window_of(episodes, board.policies),
        policies=board.policies,
        side=side,
        seed=seed,
        seed_given=True,
        outcome=first,
        trials=board.episodes,
        episode_ids=[
            e.episode_id
            for e in episodes
            if e.policy in board.policies and (side is None or e.side == side)
        ],
    )
    if html is not None:
        from embodied_eval.certificate.leaderboard_html import leaderboard_page

        title = f"Leaderboard — {window}" if window else "Leaderboard"
        try:
            html.write_text(leaderboard_page(board.to_json(), title), encoding="utf-8")
        except OSError as exc:
            raise EvalError(f"--html: cannot write {html}: {exc.strerror}", key="html") from None
    if as_json:
        print_json(board.to_json())
    else:
        _print(board)
        if html is not None:
            console.print(f"\nleaderboard written to {html}", markup=False)


def register(app: typer.Typer) -> None:
    """Add `rank` to the CLI."""
    app.command("rank")(rank)
