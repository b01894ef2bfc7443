"""`embodied-eval compare --policies a,b,c`: the adaptive comparison of N policies.

    embodied-eval compare PROTOCOL --policies X,Y,Z [--decide best|order] [--engine E]
                          [--delta D] [--alpha A] [--power P] [--max-trials N] [--graded]
                          [--db DB] [--json]
    embodied-eval compare --db DB --policies x,y,z [--decide best|order] [--side sim|real]
                          [--window W] [--order-seed S] [same test options]

After every instance it runs the policies the decision still needs together on the next fresh
instance (`stats.allocation`), and stops at "best: X", "best within δ: X, Y", "order: X > Y ≈ Z",
"undecided" at the cap (`--max-trials` counts episodes here), or "continue" when the instances
ran out. P(any wrong "better") ≤ α however often it looks.

JSON (`--json`): {"policies", "decide", "decision", "trials", "instances", "max_trials",
"delta", "alpha", "power", "outcome", "threshold", "within_threshold", "means",
"trials_per_policy", "pairs" [{"a", "b", "trials", "e_value_a_better", "e_value_b_better",
"decided"}], "method", "source", "instances_used" [{"task", "seed", "episodes" {policy: id},
...}], "episodes_reused", "instances_available", "order_seed"}.
"""

from __future__ import annotations

from pathlib import Path

from embodied_eval.cli.common import console, open_store, print_json
from embodied_eval.errors import EvalError
from embodied_eval.runner.compare_many import (
    ManyComparisonRun,
    compare_many_in_sim,
    compare_many_stored,
)
from embodied_eval.stats.allocation import RankingAllocation
from embodied_eval.store.core import default_db_path


def _print(run: ManyComparisonRun) -> None:
    t = run.test
    out = run.to_json()
    console.print(f"policies: {', '.join(t.policies)}\nsource: {run.source}", markup=False)
    console.print(
        f"decision: {t.decision} after {t.trials} episode(s) on {t.rows} instance(s) (cap "
        f"{t.max_trials}; δ = {t.delta:g}, α = {t.alpha:g}, power {t.power:g}, {out['outcome']})",
        markup=False,
    )
    for p in t.policies:
        mean = out["means"][p]
        shown = "—" if mean is None else f"{mean:.3f}"
        console.print(
            f"  {p}: mean {shown} over {out['trials_per_policy'][p]} trial(s)", markup=False
        )
    for pair in out["pairs"]:
        if pair["trials"]:
            console.print(
                f"  {pair['a']} vs {pair['b']}: {pair['trials']} paired trial(s), "
                f"{pair['decided'] or 'open'}",
                markup=False,
            )
    if run.order_seed is not None:
        console.print(f"instance order seed {run.order_seed}", markup=False)
    if t.decision == "continue":
        console.print(f"not decided with the {run.available} instance(s) available")


def compare_many(
    protocol_file: Path | None,
    policies: str,
    decide: str,
    *,
    engine: str | None,
    side: str | None,
    window: str | None,
    delta: float,
    alpha: float,
    power: float,
    max_trials: int,
    graded: bool,
    order_seed: int | None,
    db: Path | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """The N-policy branch of `compare` (see the module docstring)."""
    names = [p.strip() for p in policies.split(",") if p.strip()]
    test = RankingAllocation(names, decide, delta, alpha, power, max_trials, graded)
    if protocol_file is not None:
        from embodied_eval.cli.run import default_out_dir
        from embodied_eval.protocol.reader import load_protocol

        if order_seed is not None:
            raise EvalError(
                "--order-seed orders stored instances; a protocol runs fresh manifest rows",
                key="order_seed",
            )
        protocol = load_protocol(protocol_file)
        shown = not as_json

        def on_instance(i: int, x: dict[str, float], decision: str) -> None:
            if shown:
                got = "  ".join(f"{p} {v:g}" for p, v in x.items())
                console.print(f"instance {i}: {got}  → {decision}", markup=False)

        run = compare_many_in_sim(
            protocol,
            names,
            test,
            db_path=db if db is not None else default_db_path(),
            out_dir=out if out is not None else default_out_dir(protocol.window_id) / "compare",
            engine=engine,
            on_instance=on_instance,
        )
    else:
        with open_store(db, create=False) as store:
            episodes = store.episodes(window=window)
        run = compare_many_stored(episodes, names, test, side, order_seed)
        from embodied_eval.certificate.analyses import record_analysis, window_of

        # Every stored-data decision is a ledger record with its seed (re-runs stay visible).
        record_analysis(
            db if db is not None else default_db_path(),
            command="compare",
            window=window or window_of(episodes, names),
            policies=names,
            side=side,
            seed=int(run.order_seed if run.order_seed is not None else 0),
            seed_given=order_seed is not None,
            outcome=str(run.test.decision),
            trials=run.test.trials,
            episode_ids=[e for row in run.instances for e in row["episodes"].values()],
        )
    if as_json:
        print_json(run.to_json())
    else:
        _print(run)
