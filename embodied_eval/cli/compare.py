"""`embodied-eval compare`: sequential A/B test of two policies, stopping as soon as it decides.

    embodied-eval compare PROTOCOL --policy-a X --policy-b Y [--engine E] [--delta D]
                          [--alpha A] [--power P] [--max-trials N] [--graded] [--db DB] [--json]
    embodied-eval compare --db DB --a X --b Y [--side sim|real] [--window W] [same test options]

The first form runs interleaved paired trials in sim (A and B on the same manifest row: task
instance, seed, drift) and records every episode in the store; the second replays stored episodes
and appends an `analysis` record (order seed, decision) to the store's trial ledger, so every
re-run on the same pairs is visible (a certificate of the window lists them).
Stored pairs are replayed in a random order stratified by family, fixed (with a recorded seed,
`--order-seed`) before any outcome is read. Decisions: "A better", "B better", "no difference"
(|Δ| < δ, only once the confidence sequence lies inside ±δ), "undecided" at the trial cap, or
"continue" when stored pairs ran out first. Guarantees (any number of looks): P(a winner is
declared between equal policies) ≤ α; P("no difference" | |Δ| ≥ δ) ≤ 1 − power.

JSON (`--json`): {"policy_a", "policy_b", "source", "decision", "trials", "max_trials", "delta",
"alpha", "power", "outcome" ("binary success" | "graded quality q"), "mean_a", "mean_b",
"effect" (estimate of Δ = mean(A − B) with its confidence sequence), "e_values" {"A", "B", "E+",
"E-"}, "fixed_n_trials" (pairs the fixed-n paired z-test design with the same α and power needs
at |Δ| = δ for any outcome law, σ²_D = 1 − δ²), "fixed_n_design", "method", "families"
[{"family", "pairs", "mean_a", "mean_b", "effect"}], "episodes" [{"a", "b"}], "first_in_pair",
"pair_order", "order_seed" (stored pairs; null in sim), "episodes_reused", "pairs_available"}.
"""

from __future__ import annotations

from pathlib import Path

import typer

from embodied_eval.cli.common import (
    DbOption,
    JsonOption,
    console,
    open_store,
    print_json,
    protocol_path,
    window_id,
)
from embodied_eval.cli.run import default_out_dir
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.runner.compare import ComparisonRun, compare_in_sim, compare_stored
from embodied_eval.stats.comparison import SequentialComparison
from embodied_eval.store.core import default_db_path


def _print(run: ComparisonRun) -> None:
    t = run.test
    out = run.to_json()
    eff = out["effect"]
    console.print(f"A = {run.policy_a}\nB = {run.policy_b}\nsource: {run.source}", markup=False)
    console.print(
        f"decision: [bold]{t.decision}[/bold] after {t.trials} paired trial(s) "
        f"(cap {t.max_trials}; δ = {t.delta:g}, α = {t.alpha:g}, power {t.power:g}, "
        f"{out['outcome']})"
    )
    if t.trials:
        console.print(
            f"mean A {out['mean_a']:.3f}, mean B {out['mean_b']:.3f}; Δ = A − B = "
            f"{eff['value']:+.3f}, {eff['level'] * 100:g} % confidence sequence "
            f"[{eff['low']:+.3f}, {eff['high']:+.3f}]",
            markup=False,
        )
        for fam in out["families"]:
            fe = fam["effect"]
            console.print(
                f"  {fam['family']}: {fam['pairs']} pair(s), mean A {fam['mean_a']:.3f}, mean B "
                f"{fam['mean_b']:.3f}; Δ {fe['value']:+.3f} [{fe['low']:+.3f}, {fe['high']:+.3f}]",
                markup=False,
            )
    if run.order_seed is not None:
        console.print(f"pair order: {run.pair_order} (seed {run.order_seed})", markup=False)
    console.print(
        f"a fixed-n paired design with the same α and power (any outcome law, |Δ| = δ) needs "
        f"{out['fixed_n_trials']} paired trials",
        markup=False,
    )
    if t.decision == "continue":
        console.print(f"not decided with the {run.available} stored pair(s)")


def compare(
    protocol_arg: Path | None = typer.Argument(
        None,
        metavar="[PROTOCOL]",
        help="Protocol TOML (or --protocol): run interleaved trials in sim (omit to use stored "
        "episodes).",
    ),
    protocol_opt: Path | None = typer.Option(
        None, "--protocol", help="Protocol TOML: run interleaved trials in sim."
    ),
    policy_a: str | None = typer.Option(None, "--policy-a", help="Policy A 'module:factory'."),
    policy_b: str | None = typer.Option(None, "--policy-b", help="Policy B 'module:factory'."),
    a: str | None = typer.Option(None, "--a", help="Stored policy name A (with --db)."),
    b: str | None = typer.Option(None, "--b", help="Stored policy name B (with --db)."),
    engine: str | None = typer.Option(None, "--engine", help="Sim engine (default: protocol's)."),
    side: str | None = typer.Option(None, "--side", help="Stored episodes: sim or real."),
    window: str | None = typer.Option(None, "--window", help="Stored episodes of this window."),
    delta: float = typer.Option(0.2, "--delta", help="Smallest difference that matters, δ."),
    alpha: float = typer.Option(0.05, "--alpha", help="P(declaring a winner | equal)."),
    power: float = typer.Option(0.8, "--power", help="1 − P('no difference' | |Δ| ≥ δ)."),
    max_trials: int = typer.Option(
        200,
        "--max-trials",
        help="Trial cap in paired trials (in sim: at most the manifest's rows).",
    ),
    graded: bool = typer.Option(False, "--graded", help="Compare graded quality q, not 0/1."),
    order_seed: int | None = typer.Option(
        None,
        "--order-seed",
        help="Stored episodes: seed of the family-stratified random pair order (default: from "
        "the policy names and pair keys; printed either way).",
    ),
    policies: str | None = typer.Option(
        None,
        "--policies",
        help="N policies, comma-separated (targets with a PROTOCOL, stored names with --db): "
        "the adaptive comparison; --max-trials then counts episodes.",
    ),
    decide: str = typer.Option("best", "--decide", help="With --policies: best or order."),
    db: Path | None = DbOption,
    out: Path | None = typer.Option(None, "--out", help="Folder for artifacts of errored runs."),
    as_json: bool = JsonOption,
) -> None:
    """Sequential comparison of two policies, or adaptive of N (anytime-valid; stops when it
    decides)."""
    protocol_file = protocol_path(protocol_arg, protocol_opt, required=False)
    window = window_id(window)
    if policies is not None:
        if policy_a or policy_b or a or b:
            raise EvalError("--policies names every policy; drop --policy-a/-b and --a/--b")
        from embodied_eval.cli.compare_many import compare_many

        compare_many(protocol_file, policies, decide, engine=engine, side=side, window=window,
                     delta=delta, alpha=alpha, power=power, max_trials=max_trials,
                     graded=graded, order_seed=order_seed, db=db, out=out,
                     as_json=as_json)  # fmt: skip
        return
    test = SequentialComparison(
        delta=delta, alpha=alpha, power=power, max_trials=max_trials, graded=graded
    )
    if protocol_file is not None:
        if a or b:
            raise EvalError("--a/--b name stored policies; with a protocol use --policy-a/-b")
        if order_seed is not None:
            raise EvalError(
                "--order-seed orders stored pairs; a protocol runs the manifest's order",
                key="order_seed",
            )
        if not policy_a or not policy_b:
            raise EvalError("compare PROTOCOL needs --policy-a and --policy-b", key="policy_a")
        protocol = load_protocol(protocol_file)
        shown = not as_json

        def on_trial(i: int, xa: float, xb: float, decision: str) -> None:
            if shown:
                console.print(f"trial {i}: A {xa:g}  B {xb:g}  → {decision}", markup=False)

        run = compare_in_sim(
            protocol,
            policy_a,
            policy_b,
            test,
            db_path=db if db is not None else default_db_path(),
            out_dir=out if out is not None else default_out_dir(protocol.window_id) / "compare",
            engine=engine,
            on_trial=on_trial,
        )
    else:
        if policy_a or policy_b:
            raise EvalError("--policy-a/-b run trials and need a PROTOCOL; stored: --a/--b")
        if not a or not b:
            raise EvalError("compare needs a PROTOCOL, or --db with --a and --b", key="a")
        with open_store(db, create=False) as store:
            episodes = store.episodes(window=window)
        run = compare_stored(episodes, a, b, test, side, order_seed)
        from embodied_eval.certificate.analyses import record_analysis, window_of

        # Every stored-data decision is a ledger record with its seed (re-runs stay visible).
        record_analysis(
            db if db is not None else default_db_path(),
            command="compare",
            window=window or window_of(episodes, (a, b)),
            policies=(a, b),
            side=run.side,
            seed=int(run.order_seed if run.order_seed is not None else 0),
            seed_given=order_seed is not None,
            outcome=run.test.decision,
            trials=run.test.trials,
            episode_ids=[x for pair in run.pairs for x in pair],
        )
    if as_json:
        print_json(run.to_json())
    else:
        _print(run)


def register(app: typer.Typer) -> None:
    """Add `compare` to the CLI."""
    app.command("compare")(compare)
