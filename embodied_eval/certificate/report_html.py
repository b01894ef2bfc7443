"""The HTML report: one self-contained file rendered from a certificate, its plots and the
window's episodes.

The report opens from disk with no network: the CSS is inline and every plot and thumbnail is
embedded as a base64 `data:` URI (the plots are also written beside it). It reads top-down:

- `#summary` (the first screen): the window verdict (red / amber / green, as `certify` decides
  it), the certified level and why not higher, the headline numbers AR, SS, S2R, RA, QC with
  intervals (and E, throughput, exposure), what remains (failing first) and what to do next,
  then the table of the checks of the certified and the next level;
- `#timeline`: incidents in calendar time; `#episodes`: failed and incident episodes with their
  recordings and camera thumbnails, and every pair (folded);
- folded details per reader: `#technicians` (trials run vs planned, per-family success, what
  remains to run), `#safety` (incidents with margins, rates per 100 h with exact intervals, window
  validity, amendments, integrity of the incident log), `#certification` (axis table, index,
  gates, level) and `#integrity` (hashes, seeds, signer);
- `#leaderboard`: with two or more policies in the window, their ranking (strengths with
  intervals, P(best), the comparison graph; `certificate/leaderboard_html.py`).

Every piece of text goes through `html.escape` after `plain_text`, so no Python repr reaches the
page. A small inline script marks `<body data-images-loaded="N">` once all N images have decoded
with a non-zero natural width, so a headless browser can confirm the report renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_eval.certificate.closures_html import closures_html
from embodied_eval.certificate.episodes_html import episodes_html
from embodied_eval.certificate.html_parts import (
    CSS,
    IMAGES_LOADED_SCRIPT,
    esc,
    figure,
    fmt_estimate,
    fmt_number,
    judge_line,
    table,
    verdict_html,
)
from embodied_eval.certificate.leaderboard_html import leaderboard_html
from embodied_eval.certificate.safety_html import safety_html
from embodied_eval.certificate.summary_html import summary_html
from embodied_eval.certificate.timeline_svg import incident_timeline_svg
from embodied_eval.records import Episode


def _gate_rows(gate: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for check in gate.get("checks", []):
        remaining = check.get("remaining") or {}
        rem = ", ".join(f"{fmt_number(v, 1)} more {esc(k)}" for k, v in remaining.items())
        rows.append(
            [
                esc(check.get("name")),
                f"{esc(check.get('comparison', ''))} {fmt_number(check.get('threshold'))}",
                fmt_number(check.get("value")),
                fmt_number(check.get("bound")),
                verdict_html(check.get("verdict")),
                esc(check.get("detail", "")) + (f" — {rem}" if rem else ""),
            ]
        )
    return rows


def _technicians(cert: Mapping[str, Any], plots: Mapping[str, bytes]) -> str:
    trials = cert.get("trials", {})
    rows = []
    for side in ("sim", "real"):
        t = trials.get("by_side", {}).get(side, {})
        rows.append(
            [
                esc(side),
                fmt_number(t.get("planned")),
                fmt_number(t.get("run")),
                fmt_number(t.get("scored")),
                fmt_number(t.get("aborted")),
                fmt_number(t.get("error")),
                fmt_number(t.get("retries")),
            ]
        )
    fam_rows = []
    for fam in trials.get("by_family", []):
        fam_rows.append(
            [
                esc(fam.get("family")),
                f"{fmt_number(fam.get('real_run'))} / {fmt_number(fam.get('real_planned'))}",
                fmt_estimate(fam.get("sim")),
                fmt_estimate(fam.get("real")),
                fmt_estimate(fam.get("s2r")),
            ]
        )
    engine_rows = [
        [esc(engine), fmt_estimate(est)]
        for engine, est in (trials.get("sim_by_engine") or {}).items()
    ]
    loop_rows = [
        [
            f"<code>{esc(r.get('episode_id'))}</code>",
            esc(r.get("status")),
            esc(r.get("judge") or "—") + (" (signed)" if r.get("signed") else ""),
            fmt_number(r.get("loop_latency_p50_ms")),
            fmt_number(r.get("loop_latency_p99_ms")),
            fmt_number(r.get("loop_deadline_misses"), 0),
        ]
        for r in trials.get("real_episodes", [])
    ]
    remaining = trials.get("remaining", [])
    rem_rows = [
        [
            esc(r.get("gate")),
            esc(r.get("check")),
            verdict_html(r.get("verdict")),
            fmt_number(r.get("trials"), 0),
            fmt_number(r.get("hours"), 1),
        ]
        for r in remaining
    ]
    manifest_note = (
        "Planned counts come from the escrowed manifest(s) "
        + ", ".join(
            f"<code>{esc(m.get('manifest_hash'))}</code>" for m in cert.get("manifests", [])
        )
        if cert.get("manifests")
        else "No manifest is escrowed for this window: planned counts are unknown."
    )
    return (
        '<section id="technicians"><details><summary><h2>For technicians</h2></summary>'
        f"<p>Evaluated policy: <code>{esc(trials.get('evaluated_policy'))}</code>. Success "
        f"intervals: {esc(trials.get('success_method'))}.</p>"
        f"<h3>Trials run vs planned</h3><p>{manifest_note}.</p>"
        + table(["side", "planned", "run", "scored", "aborted", "error", "retries"], rows)
        + "<h3>Success per family</h3>"
        + table(["family", "real run / planned", "sim success", "real success", "S2R"], fam_rows)
        + figure("success_by_family", plots.get("success_by_family"))
        + "<h3>Sim success per engine</h3>"
        + table(["engine", "success"], engine_rows)
        + "<h3>Real episodes: judge and control loop</h3>"
        + (f"<p>{judged}</p>" if (judged := judge_line(_judge_of(cert))) else "")
        + (
            table(
                ["episode", "status", "judge", "loop p50 (ms)", "loop p99 (ms)", "deadline misses"],
                loop_rows,
            )
            if loop_rows
            else '<p class="muted">No real episodes.</p>'
        )
        + "<h3>What remains to run</h3>"
        + (
            table(["gate", "check", "verdict", "more trials", "more hours"], rem_rows)
            if rem_rows
            else '<p class="muted">No gate check is waiting on more trials or hours.</p>'
        )
        + "</details></section>"
    )


def _judge_of(cert: Mapping[str, Any]) -> Any:
    return (cert.get("embodiment") or {}).get("judge")


def _with_interval(value: Any, interval: Mapping[str, Any] | None) -> str:
    """An axis number with its interval (`interval` as the scoring core writes it)."""
    if value is None:
        return "—"
    if interval is None:
        return f"{fmt_number(value)} (point value, no interval)"
    return fmt_estimate({"value": value, **interval})


def _validity_html(validity: Any) -> str:
    """Until when the certificate holds and what voids it ("" for one issued without them)."""
    if not isinstance(validity, dict):
        return ""
    items = "".join(f"<li>{esc(v)}</li>" for v in validity.get("void_if", []))
    return (
        f"<p>Valid until <strong>{esc(validity.get('expires'))}</strong> for robot "
        f"<code>{esc(validity.get('robot_id'))}</code>; void from the first of:</p><ul>{items}</ul>"
    )


def _analyses_html(analyses: Any) -> str:
    """Every compare and rank run on the window before issue, with seed and outcome."""
    if not isinstance(analyses, dict) or not analyses.get("runs"):
        return ""
    rows = [
        [
            esc(r.get("command")),
            esc(", ".join(r.get("policies") or [])),
            esc(r.get("seed")) + ("" if r.get("seed_given") else " (derived)"),
            esc(r.get("outcome")),
            f"<code>{esc(str(r.get('episodes_sha256'))[:12])}</code>",
            esc(r.get("at")),
        ]
        for r in analyses["runs"]
    ]
    repeated = "".join(
        f"<li>{esc(g['command'])} ran {g['runs']} times on the same data "
        f"(seeds {esc(', '.join(map(str, g['seeds'])))}; outcomes "
        f"{esc(', '.join(map(str, g['outcomes'])))})</li>"
        for g in analyses.get("repeated", [])
    )
    return (
        "<h3>Analyses run on this window</h3>"
        + table(["command", "policies", "seed", "outcome", "data", "at"], rows)
        + (f"<ul>{repeated}</ul>" if repeated else "")
    )


def _level_gates_html(gates: Sequence[Mapping[str, Any]]) -> str:
    parts = ["<h3>Level gates (level-assignment procedure, §3.5 and §7)</h3>"]
    if not gates:
        parts.append('<p class="muted">no gates evaluated</p>')
    for gate in gates:
        parts.append(
            f"<h4>AAI-{esc(gate.get('level'))} — {esc(gate.get('name'))}: "
            f"{verdict_html(gate.get('verdict'))}</h4>"
        )
        parts.append(
            table(["check", "threshold", "value", "bound", "verdict", "detail"], _gate_rows(gate))
        )
    return "".join(parts)


def _certification(cert: Mapping[str, Any], plots: Mapping[str, bytes]) -> str:
    score = cert.get("score", {})
    level = cert.get("level", {})
    axis_rows = []
    for name, axis in (score.get("axes") or {}).items():
        if not isinstance(axis, Mapping):
            continue
        axis_rows.append(
            [
                esc(f"{name} ({axis.get('name', '')})"),
                _with_interval(axis.get("raw"), axis.get("raw_interval")),
                _with_interval(axis.get("value"), axis.get("interval")),
                fmt_number(axis.get("weight")),
            ]
        )
    for name in score.get("missing_axes", []):
        axis_rows.append([esc(name), "—", '<span class="muted">no evidence</span>', "—"])
    interval = (score.get("index_interval") or {}).get("resampling") or (
        score.get("index_interval") or {}
    ).get("delta_method")
    index_text = (
        _with_interval(score.get("index"), interval)
        if score.get("index") is not None
        else "undefined (an axis has no evidence)"
    )
    card = cert.get("resource_card", {})
    prior_rows = [[esc(p)] for p in card.get("declared_priors", [])]
    training = card.get("training", {})
    training_rows = [[esc(k), fmt_number(v)] for k, v in sorted(training.items())]
    notes = "".join(f"<li>{esc(n)}</li>" for n in score.get("notes", []))
    return (
        '<section id="certification"><details><summary><h2>For certification</h2></summary>'
        f"<p>Level certified: <strong>{esc(level.get('assigned'))}</strong> — "
        f"{esc(level.get('reason'))}.</p>"
        + _validity_html(cert.get("validity"))
        + _analyses_html(cert.get("analyses"))
        + f"<p>AAI-Index ({esc(score.get('profile'))} weights, eq. 12) = {index_text}; "
        f"uniformity U = {fmt_number(score.get('uniformity'))}; AAI* = AAI·U^"
        f"{fmt_number(score.get('jaggedness_exponent'), 2)} = "
        f"{fmt_number(score.get('index_jagged'))}.</p>"
        + (f"<ul>{notes}</ul>" if notes else "")
        + "<h3>Axes (raw x̂ before normalized φ(x̂))</h3>"
        + table(["axis", "raw x̂", "normalized φ(x̂)", "weight"], axis_rows)
        + figure("embodiment", plots.get("embodiment"))
        + closures_html(cert, plots)
        + _level_gates_html(score.get("gates") or [])
        + figure("frontier", plots.get("frontier"))
        + "<h3>Priors and experience (resource card)</h3>"
        + f'<p class="muted">source: {esc(card.get("source"))}</p>'
        + table(["declared prior"], prior_rows)
        + table(["experience", "amount"], training_rows)
        + "</details></section>"
    )


def _integrity(cert: Mapping[str, Any]) -> str:
    protocol = cert.get("protocol", {})
    signer = cert.get("signer", {})
    registered = signer.get("registered_in_incident_log")
    chain = cert.get("incidents", {}).get("chain", {})
    artifacts = cert.get("artifacts", {})
    ledger = cert.get("ledger") or {}
    seal = ledger.get("seal")
    rows = [
        ["protocol hash", f"<code>{esc(protocol.get('hash'))}</code>"],
        [
            "manifest hash(es)",
            "<br>".join(
                f"<code>{esc(m.get('manifest_hash'))}</code>" for m in cert.get("manifests", [])
            )
            or "—",
        ],
        ["incident-chain head", f"<code>{esc(chain.get('head_hash'))}</code>"],
        [
            "trial-ledger head",
            f"<code>{esc(ledger.get('head_hash'))}</code> "
            f"({fmt_number(ledger.get('record_count', 0))} records)",
        ],
        [
            "window seal",
            (
                f"record {esc(seal.get('seq'))}: episode head "
                f"<code>{esc((seal.get('episode_head') or {}).get('head_hash'))}</code>, incident "
                f"head <code>{esc((seal.get('incident_head') or {}).get('head_hash'))}</code>, "
                f"signed by {esc(seal.get('owner'))}"
                if isinstance(seal, Mapping)
                else "not sealed"
            ),
        ],
        [
            "checkpoints",
            "<br>".join(
                f"{esc(c.get('checkpoint_id'))} ({esc(c.get('at'))}): trial ledger "
                f"{esc((c.get('trial_ledger') or {}).get('seq'))}, incident log "
                f"{esc((c.get('incident_log') or {}).get('seq'))}; countersigned by "
                + (
                    ", ".join(esc(w.get("holder")) for w in c.get("countersigned_by", []))
                    or "nobody"
                )
                for c in ledger.get("checkpoints", [])
            )
            or "none",
        ],
        [
            "audits and corrections applied",
            ", ".join(
                f"{esc(u.get('record_id'))} ({esc(u.get('episode_id'))})"
                for u in ledger.get("amendments_used", [])
            )
            or "none",
        ],
        ["episodes digest", f"<code>{esc(cert.get('episodes', {}).get('digest'))}</code>"],
        [
            "artifact checksums",
            f"{fmt_number(artifacts.get('count', 0))} file(s); digest "
            f"<code>{esc(artifacts.get('digest'))}</code>",
        ],
        ["evidence file", f"<code>{esc((cert.get('evidence') or {}).get('sha256'))}</code>"],
        ["bootstrap RNG seed", esc(cert.get("rng", {}).get("seed"))],
        ["signer key fingerprint", f"<code>{esc(signer.get('key_fingerprint'))}</code>"],
        [
            "signer in the incident log",
            (
                f"{esc(registered.get('holder'))} ({esc(registered.get('role'))})"
                if isinstance(registered, Mapping)
                else "not registered"
            ),
        ],
    ]
    return (
        '<section id="integrity"><details><summary><h2>Integrity</h2></summary>'
        + table(["item", "value"], rows)
        + "<p>Check this bundle with <code>embodied-eval verify &lt;folder&gt;</code>.</p>"
        "</details></section>"
    )


NAV = (
    '<nav><a href="#summary">Summary</a><a href="#timeline">Incident timeline</a>'
    '<a href="#episodes">Episodes</a><a href="#technicians">Technicians</a>'
    '<a href="#safety">Safety officers</a><a href="#certification">Certification</a>'
    '<a href="#integrity">Integrity</a><a href="#leaderboard">Leaderboard</a></nav>'
)


def _timeline(cert: Mapping[str, Any]) -> str:
    window = (cert.get("protocol") or {}).get("window") or {}
    incidents = (cert.get("incidents") or {}).get("list") or []
    return (
        '<section id="timeline"><h2>Incidents over the window</h2>'
        + incident_timeline_svg(incidents, window.get("start"), window.get("end"))
        + "</section>"
    )


def _leaderboard(cert: Mapping[str, Any]) -> str:
    board = cert.get("leaderboard")
    if isinstance(board, Mapping) and "pieces" in board:
        return leaderboard_html(board)
    why = (
        board.get("not_ranked")
        if isinstance(board, Mapping)
        else "one policy in this window: nothing to rank"
    )
    return (
        f'<section id="leaderboard"><h2>Leaderboard</h2><p class="muted">{esc(why)}</p></section>'
    )


def render_report(
    cert: Mapping[str, Any],
    plots: Mapping[str, bytes],
    *,
    episodes: Sequence[Episode] = (),
    report_dir: Path | None = None,
    store_path: Path | None = None,
) -> str:
    """Render the self-contained HTML report: the summary first (verdict, level and why not
    higher, headline numbers, what remains, what to do next), the incident timeline, the
    episodes, then each reader's details folded.

    Args:
        cert: the certificate (as written to certificate.json).
        plots: plot name (see PLOT_CAPTIONS) → PNG bytes.
        episodes: the window's episodes (the episode table; empty: the section says so).
        report_dir: the folder the report is written to (recording links are relative to it).
        store_path: the store the episodes were read from (artifact paths are relative to it).

    Returns:
        The HTML document as text.
    """
    protocol = cert.get("protocol", {})
    title = (
        f"AAI certificate — {protocol.get('name', '')} {protocol.get('window', {}).get('id', '')}"
    )
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style></head><body>"
        + summary_html(cert)
        + NAV
        + _timeline(cert)
        + episodes_html(
            episodes, (cert.get("incidents") or {}).get("list") or [], report_dir, store_path
        )
        + _technicians(cert, plots)
        + safety_html(cert, plots)
        + _certification(cert, plots)
        + _integrity(cert)
        + _leaderboard(cert)
        + f"<script>{IMAGES_LOADED_SCRIPT}</script></body></html>\n"
    )
