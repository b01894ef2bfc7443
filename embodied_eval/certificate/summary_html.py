"""The report's first screen (`#summary`): the window verdict, the certified level and why not
higher, the headline numbers with their intervals, what remains and what to do next; then the
table of the checks of the certified and the next level.

The decisions come from `embodied_eval.scoring.verdict` (the same verdict, "what remains" and level rows
that `certify`, `metrics` and the demo print); this module only lays them out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from embodied_eval.certificate.html_parts import (
    esc,
    fmt_number,
    judge_line,
    table,
    verdict_html,
)
from embodied_eval.scoring.verdict import (
    MEASURED_HERE,
    NEEDED_FROM_ELSEWHERE,
    ROBOTICS_ONLY_CEILING,
    WindowVerdict,
    level_rows,
    next_steps,
    window_verdict,
)

#: Check names given per outcome in the "why not higher" sentence (the table lists them all).
NAMES_SHOWN = 4

#: The headline numbers (seed §3.1 and §7: E's parts and the auxiliary gates), in order.
HEADLINE = (
    ("AR", "actuation reliability"),
    ("SS", "safety score"),
    ("S2R", "sim-to-real agreement"),
    ("RA", "recovery autonomy"),
    ("QC", "control quality"),
)


def _code(text: str) -> str:
    """Escaped text with `command` spans set as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))


def certificate_verdict(cert: Mapping[str, Any]) -> WindowVerdict:
    """The window verdict of a certificate, decided exactly as `certify` decides it."""
    window = cert.get("window", {})
    return window_verdict(
        (cert.get("embodiment") or {}).get("gates") or {},
        valid=bool(window.get("valid")),
        invalid_reason=window.get("invalid_reason"),
    )


def _interval(est: Mapping[str, Any] | None) -> str:
    """`[low, high]` (or a one-sided bound) of an estimate, escaped; "" without one."""
    if not isinstance(est, Mapping) or est.get("value") is None:
        return ""
    low, high = est.get("low"), est.get("high")
    if low is None and high is None:
        return ""
    lo = "—" if low is None else f"{float(low):.3f}"
    hi = "—" if high is None else f"{float(high):.3f}"
    return esc(f"[{lo}, {hi}]")


def _short(est: Mapping[str, Any] | None) -> str:
    """`0.812 [0.700, 0.900]` (value and interval only; escaped); "—" without a value."""
    if not isinstance(est, Mapping) or est.get("value") is None:
        return "—"
    return f"{float(est['value']):.3f} {_interval(est)}".strip()


def _headline_card(name: str, words: str, est: Mapping[str, Any] | None) -> str:
    if not isinstance(est, Mapping) or est.get("value") is None:
        why = (est or {}).get("note") if isinstance(est, Mapping) else None
        if isinstance(est, Mapping) and est.get("faults") == 0:
            why = "no fault occurred or was injected"
        return (
            f'<div id="headline-{esc(name)}">{esc(name)} <small>{esc(words)}</small>'
            f"<b>—</b><small>no evidence{': ' + esc(why) if why else ''}</small></div>"
        )
    level = est.get("level")
    pct = f"{float(level) * 100:g} % " if isinstance(level, (int, float)) else ""
    return (
        f'<div id="headline-{esc(name)}">{esc(name)} <small>{esc(words)}</small>'
        f"<b>{float(est['value']):.3f}</b><small>{pct}{_interval(est)} · n = "
        f"{fmt_number(est.get('n', 0))}</small></div>"
    )


def _by_family(emb: Mapping[str, Any]) -> str:
    """The per-family S2R values and one-sided bounds the S2R gates decide on, beside the
    overall S2R (an overall 1.000 can stand next to a family at 0.500 that fails its gate)."""
    families = emb.get("S2R_by_family") or {}
    parts = []
    for family in sorted(families):
        t = families[family] or {}
        if t.get("value") is None:
            continue
        bound = (t.get("lower_bound") or {}).get("low")
        shown = "—" if bound is None else f"{float(bound):.3f}"
        parts.append(f"{esc(family)} {float(t['value']):.3f} (bound {shown})")
    if not parts:
        return ""
    return (
        '<p id="headline-S2R-families">S2R by family, as the S2R gates use it: '
        f"{'; '.join(parts)}.</p>"
    )


def _headline(cert: Mapping[str, Any]) -> str:
    emb = cert.get("embodiment") or {}
    cards = "".join(_headline_card(n, w, emb.get(n)) for n, w in HEADLINE)
    cards_after = _by_family(emb)
    phys = emb.get("PHYS") or {}
    throughput = (
        f"{float(phys['value']):.3g} {esc(phys.get('unit', ''))} {_interval(phys)} "
        f"({float(phys.get('tasks_per_hour') or 0.0):.3g} successful tasks per hour)"
        if phys.get("value") is not None
        else f"— ({esc(phys.get('note') or 'not computed')})"
    )
    window = cert.get("window", {})
    return (
        f'<div class="headline">{cards}</div>{cards_after}'
        f'<p>E = {_short(emb.get("E"))} <span class="muted">(embodiment, '
        f"(AR·SS·S2R)^(1/3) normalized)</span>; throughput $_phys = {throughput}; exposure "
        f"H = {fmt_number(window.get('exposure_hours'), 4)} h "
        f"({esc(str(window.get('exposure_source') or '').replace('_', ' '))}).</p>"
        + (f'<p id="judge">{judged}</p>' if (judged := judge_line(emb.get("judge"))) else "")
    )


def _why_not_higher(cert: Mapping[str, Any]) -> str:
    """One paragraph: the certified level, what blocks the next one, and the harness's scope."""
    level = cert.get("level") or {}
    n = int(level.get("level", 0))
    rows = level_rows((cert.get("score") or {}).get("gates", []), n)
    if level.get("capped"):
        said = f"— {esc(level.get('reason'))}."
    else:
        name = str(level.get("procedure_name") or "")
        said = f"({esc(name.removeprefix(str(level.get('assigned'))).strip())}): the highest "
        said += "level whose gates all pass."
    parts = [f"Certified level: <strong>{esc(level.get('assigned'))}</strong> {said}"]
    if n >= 5:
        parts.append("AAI-5 is the highest level.")
    else:
        nxt = [r for r in rows if r["level"] == f"AAI-{n + 1}"]
        blocked = []
        for verdict, words in (
            ("fail", "fail"),
            ("inconclusive", "are inconclusive"),
            ("evidence_missing", "lack evidence"),
        ):
            names = sorted({str(r["check"]) for r in nxt if r["verdict"] == verdict})
            if names:
                shown = "; ".join(names[:NAMES_SHOWN])
                if len(names) > NAMES_SHOWN:
                    shown += f"; and {len(names) - NAMES_SHOWN} more in the table below"
                blocked.append(f"{len(names)} check(s) {words} ({shown})")
        parts.append(
            f"Why not AAI-{n + 1}: "
            + (", ".join(esc(b) for b in blocked) if blocked else "its checks are not all met")
            + "."
        )
    if not cert.get("evidence"):
        parts.append(esc(ROBOTICS_ONLY_CEILING))
    return f'<p id="level">{" ".join(parts)}</p>'


def _remains(verdict: WindowVerdict) -> str:
    lines = verdict.remains()
    if not lines:
        return "<p>What remains: nothing fails and nothing is inconclusive.</p>"
    items = "".join(
        f'<li class="{"fail" if line.startswith("FAILING") else "inconclusive"}">{esc(line)}</li>'
        for line in lines
    )
    counts = (
        f"{len(verdict.failing)} failing (not fixable by more trials), "
        f"{len(verdict.inconclusive)} inconclusive"
    )
    missing = (
        f"; {len(verdict.missing)} more lack evidence from outside this harness"
        if verdict.missing
        else ""
    )
    return f'<h3 id="remains">What remains: {esc(counts)}{esc(missing)}</h3><ul>{items}</ul>'


def _level_table(cert: Mapping[str, Any]) -> str:
    level = cert.get("level") or {}
    n = int(level.get("level", 0))
    rows = level_rows((cert.get("score") or {}).get("gates", []), n)
    shown = [
        [
            esc(r["level"]),
            esc(r["gate"]),
            esc(r["check"]),
            verdict_html(r["verdict"]),
            esc(r["detail"]),
        ]
        for r in rows
    ]
    which = f"AAI-{n} and AAI-{n + 1}" if 1 <= n < 5 else f"AAI-{max(n, 1)}"
    return (
        f'<details open id="level-checks"><summary><h3>The checks of {esc(which)}</h3>'
        "</summary>"
        + table(["level", "gate", "check", "verdict", "detail"], shown)
        + f'<p class="muted">{esc(MEASURED_HERE)} {esc(NEEDED_FROM_ELSEWHERE)}</p></details>'
    )


def summary_html(cert: Mapping[str, Any]) -> str:
    """The `#summary` section: the first screen of the report."""
    protocol = cert.get("protocol", {})
    window = protocol.get("window", {})
    verdict = certificate_verdict(cert)
    steps = "".join(
        f"<li>{_code(s)}</li>"
        for s in next_steps(verdict, has_evidence=bool(cert.get("evidence")))
    )
    word = verdict.colour.upper()
    return (
        '<section id="summary">'
        f"<h1>AAI certificate — {esc(protocol.get('name'))} v{esc(protocol.get('version'))}</h1>"
        f'<p class="muted">robot {esc(protocol.get("robot_id"))}; window {esc(window.get("id"))} '
        f"({esc(window.get('start'))} to {esc(window.get('end'))}); issued "
        f"{esc(cert.get('issued_at'))}; embodied-eval "
        f"{esc(cert.get('software', {}).get('version'))}</p>"
        f'<div id="verdict" class="verdict-banner verdict-{esc(verdict.colour)}" '
        f'data-verdict="{esc(verdict.colour)}">{esc(word)} — {esc(verdict.headline)}</div>'
        + _why_not_higher(cert)
        + f'<div id="next"><strong>What to do next:</strong><ol>{steps}</ol></div>'
        + _headline(cert)
        + _remains(verdict)
        + _level_table(cert)
        + "</section>"
    )
