"""`embodied-eval plan rate|mtbsi|success|fixed`: how much more testing would settle a gate."""

from __future__ import annotations

from pathlib import Path

import typer

from embodied_eval.cli.common import DbOption, JsonOption, print_json, window_id
from embodied_eval.errors import EvalError
from embodied_eval.stats.planner import (
    HoursPlan,
    fixed_duration_plan,
    fixed_plan_risks,
    plan_mtbf_gate,
    plan_rate_gate,
    plan_success_gate,
)

plan_app = typer.Typer(
    help="Plan demonstration tests: remaining trials or hours to settle a gate.",
    no_args_is_help=True,
)

LevelOption = typer.Option(0.95, "--level", help="One-sided confidence level of the gate bound.")


def _print_hours(plan: HoursPlan, bound_name: str, unit: str) -> None:
    bound = plan.bound
    value = bound.high if bound_name == "upper" else bound.low
    shown = "—" if value is None else f"{value:.4g}{unit}"
    typer.echo(f"gate: {plan.gate} ({bound.level * 100:g} % one-sided)")
    typer.echo(
        f"so far: {plan.observed} event(s) in {plan.hours:g} h; {bound_name} bound {shown}"
        + (f" ({bound.note})" if bound.note else "")
    )
    if plan.demonstrated:
        typer.echo("demonstrated: yes (no more hours needed)")
        return
    typer.echo(
        f"hours needed in all: {plan.total_hours:.1f} h if no further event occurs; "
        f"remaining: {plan.remaining_hours:.1f} h"
    )


@plan_app.command("rate")
def plan_rate(
    max_per_100h: float = typer.Option(..., "--max-per-100h", help="Gate: events per 100 h."),
    observed: int = typer.Option(
        0, "--observed", min=0, max=10**12, help="Events observed so far."
    ),
    hours: float = typer.Option(0.0, "--hours", help="Exposure hours so far."),
    level: float = LevelOption,
    as_json: bool = JsonOption,
) -> None:
    """Remaining hours to show an incident rate <= the gate (one-sided Garwood bound)."""
    plan = plan_rate_gate(max_per_100h, observed, hours, level, per=100.0)
    if as_json:
        print_json(plan.to_json())
        return
    _print_hours(plan, "upper", "/100 h")


@plan_app.command("mtbsi")
def plan_mtbsi(
    min_hours: float = typer.Option(
        ..., "--min-hours", "--min-mtbsi", "--min-mtbsi-h", help="Gate: minimum MTBSI in hours."
    ),
    observed: int = typer.Option(
        0, "--observed", min=0, max=10**12, help="Safety incidents observed so far."
    ),
    hours: float = typer.Option(0.0, "--hours", help="Exposure hours so far."),
    level: float = LevelOption,
    as_json: bool = JsonOption,
) -> None:
    """Remaining hours to show MTBSI >= the gate (time-terminated chi-square lower bound)."""
    plan = plan_mtbf_gate(min_hours, observed, hours, level, name="MTBSI")
    if as_json:
        print_json(plan.to_json())
        return
    _print_hours(plan, "lower", " h")


def _plan_with_sim(
    threshold: float,
    level: float,
    db: Path | None,
    protocol: Path | None,
    window: str | None,
    policy: str | None,
    sim_episodes: int | None,
    as_json: bool,
) -> None:
    """`plan success --with-sim`: real trials with and without the sim, from the stored window."""
    from embodied_eval.embodiment.loading import load_window
    from embodied_eval.embodiment.selection import select_episodes
    from embodied_eval.protocol.reader import example_protocol_path, load_protocol
    from embodied_eval.stats.ppi import plan_success_with_sim

    proto = load_protocol(protocol if protocol is not None else example_protocol_path())
    sets = select_episodes(load_window(db, proto, window).episodes, proto, policy)
    paired = {r.pair_id for _, r in sets.pairs}
    if len(sets.pairs) < 2:
        raise EvalError(
            "--with-sim: the window needs at least 2 sim/real pairs to measure how well the sim "
            "predicts real",
            key="with_sim",
        )
    plan = plan_success_with_sim(
        threshold,
        [r.success for _, r in sets.pairs],
        [s.success for s, _ in sets.pairs],
        [e.success for e in sets.sim if e.pair_id not in paired],
        level,
        sim_episodes,
    )
    if as_json:
        print_json(plan.to_json())
        return

    def shown(n: int | None) -> str:
        return "not reachable at the current rate" if n is None else f"{n} real trial(s)"

    corr = "—" if plan.correlation is None else f"{plan.correlation:.2f}"
    typer.echo(f"gate: AR >= {threshold:g} ({level * 100:g} % one-sided, normal approximation)")
    typer.echo(
        f"so far: {plan.pairs} sim/real pairs, rate {plan.rate:.3f} (prediction-powered); sim and "
        f"real agree on {plan.agreement * 100:.0f} % of pairs (r = {corr}, λ = {plan.lam:.2f})"
    )
    typer.echo(f"without sim: {shown(plan.trials_without_sim)} in all")
    typer.echo(f"with sim ({plan.n_sim} sim episodes): {shown(plan.trials_with_sim)} in all")


@plan_app.command("success")
def plan_success(
    threshold: float = typer.Option(
        ..., "--threshold", "--min-rate", help="Gate: minimum success rate."
    ),
    successes: int = typer.Option(
        0, "--successes", min=0, max=10**12, help="Successful trials so far."
    ),
    trials: int = typer.Option(0, "--trials", min=0, max=10**12, help="Scored trials so far."),
    level: float = LevelOption,
    with_sim: bool = typer.Option(
        False, "--with-sim", help="Use the stored window's sim/real pairs (prediction-powered)."
    ),
    db: Path | None = DbOption,
    protocol: Path | None = typer.Option(None, "--protocol", help="Protocol (with --with-sim)."),
    window: str | None = typer.Option(None, "--window", help="Window id (with --with-sim)."),
    policy: str | None = typer.Option(None, "--policy", help="Evaluated policy (--with-sim)."),
    sim_episodes: int | None = typer.Option(
        None, "--sim-episodes", help="Sim episodes to plan with (default: the window's)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Remaining straight successes to show a success rate >= the gate (one-sided CP bound);
    with --with-sim, real trials needed with and without the sim's help."""
    if threshold == 1.0:
        raise EvalError(
            "--threshold 1: a success rate of 1 can never be demonstrated (a confidence bound "
            "from finitely many trials stays below 1); give a gate below 1, e.g. 0.99",
            key="threshold",
        )
    window = window_id(window)
    if with_sim:
        _plan_with_sim(threshold, level, db, protocol, window, policy, sim_episodes, as_json)
        return
    plan = plan_success_gate(threshold, successes, trials, level)
    if as_json:
        print_json(plan.to_json())
        return
    bound = plan.bound
    low = "—" if bound.low is None else f"{bound.low:.4f}"
    typer.echo(f"gate: {plan.gate} ({bound.level * 100:g} % one-sided Clopper-Pearson)")
    typer.echo(f"so far: {plan.successes}/{plan.trials}; lower bound {low}")
    if plan.demonstrated:
        typer.echo("demonstrated: yes (no more trials needed)")
    elif plan.remaining_trials is None:
        typer.echo("not reachable: no number of further successes clears the gate")
    else:
        typer.echo(
            f"remaining: at least {plan.remaining_trials} more trial(s), all successful "
            "(each failure adds more)"
        )


@plan_app.command("fixed")
def plan_fixed(
    alpha: float = typer.Option(..., "--alpha", help="Producer's risk (rejecting a good MTBF)."),
    beta: float = typer.Option(..., "--beta", help="Consumer's risk (passing a bad MTBF)."),
    ratio: float = typer.Option(..., "--ratio", help="Discrimination ratio d = θ0/θ1 > 1."),
    as_json: bool = JsonOption,
) -> None:
    """Fixed-duration MTBF demonstration plan (MIL-HDBK-781A style; not IEC 61124)."""
    plan = fixed_duration_plan(alpha, beta, ratio)
    producer, consumer = fixed_plan_risks(plan.max_failures, plan.duration, ratio)
    if as_json:
        print_json(
            {
                "alpha": alpha,
                "beta": beta,
                "discrimination_ratio": ratio,
                "max_failures": plan.max_failures,
                "duration_theta1": plan.duration,
                "actual_alpha": producer,
                "actual_beta": consumer,
            }
        )
        return
    typer.echo(
        f"run {plan.duration:.2f} × θ1 hours; pass if failures <= {plan.max_failures} "
        f"(actual risks: α = {producer:.3f}, β = {consumer:.3f})"
    )


def register(app: typer.Typer) -> None:
    """Add the `plan` command group to the CLI."""
    app.add_typer(plan_app, name="plan")
