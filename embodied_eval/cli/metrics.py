"""`embodied-eval metrics`: the embodiment metrics of a window and the §7 robotics gates.

    embodied-eval metrics [--db DB] [--protocol P] [--window W] [--policy NAME]
                          [--evidence FILE] [--seed N] [--json]

Episodes and faults come from the store; incidents and the exposure ledger from the incident log
(if installed). Without `--protocol` the packaged example protocol is used; the window defaults
to the protocol's, and episodes run under another protocol are refused.

JSON output (`--json`, `EmbodimentReport.to_json()` plus "verdict" and
"amendments_used"). Every *estimate* below is
`{"value", "low", "high", "level", "method", "n"}` plus `"sided"` for one-sided bounds and
`"note"` when there is something to say (e.g. "0 observed"); unbounded values (an MTBF with no
failures) are `null` with a note. Intervals are two-sided at the protocol's confidence.

    protocol            {"name", "hash"}
    window              window id
    policy              the evaluated policy (null when none ran on the real side)
    valid               false when a counted critical incident invalidates the window
    invalid_reason      why (null when valid)
    exposure_hours      H, real exposure hours
    exposure_source     "exposure_ledger" (non-blind ledger hours) or "episode_durations"
    episodes            counts: real_counted, real_all, real_unscored, real_retries,
                        sim_counted, pairs, real_unpaired, window_real, window_sim
    AR                  estimate: first scored real attempts, cluster bootstrap over task instances
                        with exact binomial draws per resample, never narrower than
                        Clopper-Pearson (never a point on finite data)
    AR_ppi              estimate: prediction-powered AR (every sim episode of the paired engine +
                        the pairs' real − λ·sim residuals; PPI++ λ; cluster jackknife over task
                        instances) + "effective_n" (real trials the classical estimate would need
                        for the same variance), "lambda", "pairs" (labelled pairs used),
                        "sim_unpaired", "clusters", "valid", "below_floor" (the validity floors
                        not met: then the estimate is the classical AR, said in "method" and
                        "note"), "floor" {pairs, task_instances, events_from_edge, variance},
                        "in_use" (true when the protocol's [embodiment] ar_estimator = "ppi" and
                        the fit is valid: it is then in E and the AR gate bound); null never
                        (value null with a note below 2 pairs)
    AR_sim              estimate: paired sim episodes (or sim reweighted to the real contexts)
    AR_with_retries     estimate: pairs succeeding at any scored attempt (Wilson); never in E
    S2R                 estimate + "mode" ("paired" | "reweighted" | "none"), "gap" (estimate of
                        AR_sim − AR_real), "lower_bound" (one-sided estimate), "table" {a,b,c,d}
    S2R_by_family       {family: same shape as S2R}
    S2R_by_engine       {sim engine: same shape as S2R}; S2R pairs the real side with
                        `sim_engine`, the protocol's first sim engine that ran
    sim_engine          the sim engine paired with the real side
    cross_engine        {"mujoco~pybullet": {"n", "table" {a,b,c,d}, "agreement" (Wilson),
                        "gap" (Newcombe paired)}}: sim engines against each other on the same
                        manifest rows; separate from S2R (engines are tuned each on its own)
    SS                  estimate (SS at the per-severity Garwood bounds)
    rates_per_100h      {near_miss, minor, major, critical: estimate (Garwood exact)}
    incidents           {"counts", "upper_bounds_per_100h", "sim": {"hours", "counts",
                        "rates_per_100h"}, "blind_hours", "excluded", "incident_ids",
                        "major_fail", "validity_reason"}
    RA                  estimate (Clopper-Pearson) + "recovered", "faults",
                        "by_kind": {kind: {"recovered", "faults", "rate": estimate}}
    QC                  estimate (mean qc) + "by_task": {task: {n, mean, median, p10, p90, min,
                        max, qc_tolerance}}, "episodes_without_qc"
    PHYS                estimate ($_phys, tasks per currency unit) + "unit", "tasks_per_hour",
                        "cost_per_hour", "cost_items_per_hour" {energy, wear, consumables,
                        operator}, "cost_share", "currency", "successes", "episodes", "hours"
    MTBF_h, MTTR_h, MTBSI_h   estimates in hours
    E_raw, E            estimates: Ê = (AR·SS·S2R)^(1/3) and E = φ_E(Ê) (joint bootstrap over
                        task instances with exact draws per resample: Clopper-Pearson beta for
                        AR and the discordant pairs, Garwood gamma for each severity's rate)
    gate_bounds         the one-sided bounds gates use: {"AR", "E", "RA", "S2R", "MTBSI_h",
                        "rates_per_100h": {severity: estimate}}
    gates               {"AAI-2", "AAI-3", "AAI-4": {"name", "verdict", "checks": [{"id" (stable,
                        e.g. "aai2.e_min"; see `embodied_eval.embodiment.gates`), "name",
                        "verdict", "threshold", "comparison", "value", "bound", "detail",
                        "remaining": {"trials" | "hours": number}}]}}; verdicts are "pass",
                        "inconclusive", "fail" or "evidence_missing"
    beyond              {"detector_correction", "baselines", "policy_agreement"} (null when the
                        data does not allow them)
    judge               who judged the counted real episodes: {"judges": [{"kind", "name",
                        "version", "episodes"}], "accuracy" (a single detector's measured counts
                        with "sensitivity"/"specificity" Wilson estimates, "measured_on",
                        "episodes"; null when not measured), "correction" (the protocol's
                        [real] judge_correction), "AR_corrected" (Rogan–Gladen estimate, also
                        the reported AR when applied), "AR_as_judged", "note",
                        "AR_corrected_bound" (when applied: the gate's one-sided bound with its
                        "corner": judged rate, Se and Sp bounds at tail α/3)}
    unsafe_successes    {"above" (the warning level, "near_miss"), "counted_as_failures" ([real]
                        unsafe_successes = "fail"), "by_family": {family: row}, "all": row}; a
                        row: {"successes", "unsafe", "SBU" (exact estimate), "worst_severity",
                        "episodes"}
    AR_every_attempt    every real pair's first attempt counts: {"pairs", "first_attempts"
                        {"scored", "policy_error", "cannot_judge", "aborted"}, "successes",
                        "worst_case", "best_case" (exact estimates: unknowns fail / succeed;
                        policy errors fail in both), "worst_case_bound", "rule" ([real]
                        missing_outcomes), "gate_uses_worst_case"}
    notes               list of sentences (exposure source, reweighting, warnings)
    verdict             {"colour" ("red" | "amber" | "green"), "headline", "failing",
                        "inconclusive", "evidence_missing": [{"ids", "name", "verdict",
                        "gates", "remaining", "detail"}]} (`embodied_eval.scoring.verdict`; CLI only)
    calibration_by_day  the maintenance closure's drift days with their measured calibration
                        (`calibrate --by-drift`, recorded in the store; `--calibration FILE`
                        adds files): [{"day", "drift", "source" ("store" | "file"),
                        "content_sha256", "parameters": {"payload" | "friction" |
                        "actuator_delay": {"value", "low", "high", "unit", "identified"}}}];
                        null without a [maintenance] audit
    trials              the certificate's trials section (`certificate.trials`): "by_side",
                        "by_family" [{"family", "real_planned" (over every manifest of the
                        window), "real_run", "sim", "real" (Wilson estimates over first scored
                        attempts, `embodiment.window_rates`), "s2r"}], "sim_by_engine",
                        "evaluated_policy", "success_method", "remaining", "real_episodes" — the
                        per-family counts the console shows for a stored window
    amendments_used     the trial ledger's audits and corrections applied to the episodes:
                        [{"kind", "record_id", "seq", "episode_id", "changes", "by", "role",
                        "signer", "at"}]

`--evidence FILE` is a JSON object with any of "maintenance_closure", "expansion_closure",
"delivery_attestation" (a verdict string or true/false) and "P", "W" (a number or an estimate
object); absent items are evidence_missing, except the closures a protocol declares
(`[maintenance]`, `[expansion]`): those are computed from the store as `certify` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from embodied_eval.certificate.compute import evaluate_window
from embodied_eval.certificate.trials import trials_section
from embodied_eval.cli.common import DbOption, JsonOption, console, print_json, window_id
from embodied_eval.cli.summaries import print_remains, print_verdict
from embodied_eval.embodiment.report import EmbodimentReport
from embodied_eval.errors import EvalError
from embodied_eval.input_files import read_user_json
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import SEVERITIES
from embodied_eval.scoring.verdict import WindowVerdict, window_verdict
from embodied_eval.stats import Estimate


def _read_evidence(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    data = read_user_json(path, "--evidence")
    if not isinstance(data, dict):
        raise EvalError("--evidence: expected a JSON object", key="evidence")
    return data


def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x == float("inf"):
        return "∞"
    return f"{x:.{digits}f}"


def _row(table: Table, name: str, est: Estimate, digits: int = 3, extra: str = "") -> None:
    if est.value is not None and est.n == 0 and "0 observed" in est.note:
        value = f"0 observed (≤ {_num(est.high, digits)})"
    else:
        value = _num(est.value, digits)
    interval = f"[{_num(est.low, digits)}, {_num(est.high, digits)}]"
    method = est.method + (f" — {est.note}" if est.note else "") + extra
    table.add_row(name, value, interval, method, str(est.n))


def report_verdict(report: EmbodimentReport) -> WindowVerdict:
    """The window verdict of a metrics report (`embodied_eval.scoring.verdict`)."""
    return window_verdict(
        {k: g.to_json() for k, g in report.gates.items()},
        valid=report.valid,
        invalid_reason=report.invalid_reason,
    )


def render(report: EmbodimentReport) -> None:
    """Print the report as rich tables."""
    s = report.safety
    head = (
        f"window {report.window} · policy {report.policy or '—'} · protocol "
        f"{report.protocol_name} ({report.protocol_hash[:12]}…)"
    )
    console.print(head, markup=False)
    verdict = report_verdict(report)
    print_verdict(verdict, remains=False)
    if report.valid:  # plain: a valid window may still fail its gates (the verdict says so)
        console.print("window valid (no counted critical incident)", markup=False)
    console.print(
        f"exposure H = {s.exposure_h:.2f} h ({s.exposure_source}); "
        f"{report.episodes['real_counted']} real episodes counted, "
        f"{report.episodes['pairs']} pairs",
        markup=False,
    )
    level = f"{report.ar.level * 100:g} %"
    t = Table(title=f"Embodiment metrics ({level} intervals)")
    for col in ("metric", "value", "interval", "method", "n"):
        t.add_column(col, overflow="fold")
    _row(t, "AR", report.ar)
    if report.ar_ppi is not None:
        r = report.ar_ppi.result
        eff = (
            ""
            if r is None
            else f" ({r.n_pairs} pairs, n_eff ≈ {r.effective_n:.0f} real trials, λ = {r.lam:.2f})"
        )
        _row(t, "AR_ppi", report.ar_ppi.estimate, 3, eff)
    _row(t, "AR_sim", report.ar_sim)
    _row(t, "AR with retries", report.ar_with_retries)
    if report.every is not None and report.every.pairs > report.every.counts["scored"]:
        every = report.every
        unscored = f" ({every.counts['policy_error']} policy error(s), {every.unknown} unknown)"
        _row(t, "AR every attempt, worst", every.worst, 3, unscored)
        _row(t, "AR every attempt, best", every.best)
    _row(t, f"S2R ({report.transfer.mode})", report.transfer.s2r)
    for fam, tr in report.transfer_by_family.items():
        _row(t, f"  S2R {fam}", tr.s2r)
    for engines, agree in report.cross_engine.items():
        # Sim engines against each other: not S2R (see embodied_eval.embodiment.cross_engine).
        _row(t, f"sim agreement {engines}", agree.agreement)
    _row(t, "SS", s.ss)
    for sev in SEVERITIES:
        _row(t, f"  {sev} / 100 h", s.rates[sev], 3, f" (N = {s.counts[sev]})")
    _row(t, "RA", report.recovery.overall)
    for kind, v in report.recovery.by_kind.items():
        _row(t, f"  RA {kind}", v["rate"], 3, f" ({v['recovered']}/{v['faults']})")
    _row(t, "QC", report.qc.overall)
    _row(t, f"$_phys (tasks/{report.phys.currency})", report.phys.value, 4)
    _row(t, "MTBF (h)", report.mtbf, 1)
    _row(t, "MTTR (h)", report.mttr, 3)
    _row(t, "MTBSI (h)", s.mtbsi, 1)
    if report.unsafe is not None:
        for name, row in report.unsafe.rows.items():
            worst = f" (worst {row.worst_severity})" if row.worst_severity else ""
            _row(
                t, f"unsafe successes {name}", row.sbu, 3, f" ({row.unsafe}/{row.successes}){worst}"
            )
    _row(t, "Ê = (AR·SS·S2R)^(1/3)", report.embodiment.raw)
    _row(t, "E = φ_E(Ê)", report.embodiment.score)
    console.print(t)
    if report.phys.cost_per_hour is not None:
        items = ", ".join(f"{k} {v:.2f}" for k, v in report.phys.items_per_hour.items())
        console.print(
            f"$_phys: {_num(report.phys.tasks_per_hour, 2)} tasks/h ÷ "
            f"{_num(report.phys.cost_per_hour, 2)} {report.phys.currency}/h ({items})",
            markup=False,
        )
    g = Table(title="Robotics gates (§7), decided on one-sided bounds")
    for col in ("gate", "check", "verdict", "value", "bound", "threshold", "remaining", "detail"):
        g.add_column(col, overflow="fold")
    for key, gate in report.gates.items():
        g.add_row(key, "", f"[bold]{gate.verdict.value}[/bold]", "", "", "", "", gate.name)
        for c in gate.checks:
            remaining = ", ".join(f"{v:g} {k}" for k, v in c.remaining.items())
            g.add_row(
                "",
                c.name,
                c.verdict.value,
                _num(c.value),
                _num(c.bound),
                _num(c.threshold),
                remaining,
                c.detail,
            )
    console.print(g)
    print_remains(verdict)
    for note in report.notes:
        console.print(f"note: {note}", markup=False)


def metrics(
    db: Path | None = DbOption,
    protocol: Path | None = typer.Option(
        None, "--protocol", help="Protocol TOML (default: the packaged example protocol)."
    ),
    window: str | None = typer.Option(None, "--window", help="Window id (default: protocol's)."),
    policy: str | None = typer.Option(
        None, "--policy", help="Evaluated policy (default: the protocol's real policy)."
    ),
    evidence: Path | None = typer.Option(
        None, "--evidence", help="JSON with closures, P, W and the delivery attestation."
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        min=0,
        help="Bootstrap seed (default: derived from the protocol's base seed).",
    ),
    calibration: list[Path] = typer.Option(
        [],
        "--calibration",
        help="A drift day's calibration file (from `calibrate --by-drift`) to show in the "
        "maintenance closure after the store's; repeatable.",
    ),
    as_json: bool = JsonOption,
) -> None:
    """Embodiment metrics (AR, S2R, SS, RA, QC, $_phys, MTBF/MTTR/MTBSI, E) and the robotics
    gates AAI-2..4 for one window."""
    window = window_id(window)
    notes: list[str] = []
    if protocol is None:
        protocol = example_protocol_path()
        notes.append("no --protocol given: using the packaged example protocol")
    proto = load_protocol(protocol)
    # The one window evaluation `certify`, `verify --db` and `ee.metrics` use (same seed rule).
    inputs, results = evaluate_window(
        proto,
        db,
        window=window,
        gate_overrides=_read_evidence(evidence),
        seed=seed,
        policy=policy,
        notes=notes,
        calibration_files=calibration,
    )
    report = results.report
    amendments_used = (inputs.ledger or {}).get("amendments_used", [])
    if as_json:
        print_json(
            {
                **report.to_json(),
                "verdict": report_verdict(report).to_json(),
                "amendments_used": amendments_used,
                "trials": trials_section(inputs, results),
                "calibration_by_day": (results.closures.get("maintenance") or {}).get(
                    "calibration_by_day"
                ),
            }
        )
    else:
        render(report)


def register(app: typer.Typer) -> None:
    """Add `metrics` to the CLI."""
    app.command("metrics")(metrics)
