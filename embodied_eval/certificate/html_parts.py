"""HTML building blocks of the report: escaping, number and estimate formatting, tables,
inline figures, the stylesheet and the images-loaded marker script.

Every piece of text that reaches the page goes through `esc` (html.escape); the helpers return
HTML that is safe to concatenate.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Plot file stem → caption, in the order they appear in the report.
PLOT_CAPTIONS = {
    "success_by_family": "Sim vs real success per family (95 % intervals).",
    "incident_rates": "Incident rates per 100 h with exact Poisson intervals.",
    "reliability": "Cumulative incidents against cumulative exposure hours.",
    "embodiment": "E and its parts with intervals.",
    "frontier": "Delegability / quality frontier.",
    "maintenance": "Maintenance audit: the index per drift-calendar day with its interval and "
    "one-sided bound, against α·C₀.",
}

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;line-height:1.4;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;
margin-top:2em}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.banner{padding:.7em 1em;border-radius:4px;margin:1em 0;font-weight:600}
.valid{background:#e7f5ea;border:1px solid #55a868}.invalid{background:#fbe9ea;
border:1px solid #c44e52}
.verdict-pass{color:#2e7d32;font-weight:600}.verdict-fail{color:#c62828;font-weight:600}
.verdict-inconclusive{color:#b26a00;font-weight:600}.verdict-evidence_missing{color:#666;
font-weight:600}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.9em;color:#555}code{font-size:.88em;overflow-wrap:anywhere}
nav a{margin-right:1em}.muted{color:#666}
.scroll{overflow-x:auto;max-width:100%}
.verdict-banner{padding:.8em 1em;border-radius:4px;margin:.8em 0;font-weight:600;
font-size:1.05em}
.verdict-red{background:#c62828;color:#fff}.verdict-amber{background:#f0a30a;color:#1a1a1a}
.verdict-green{background:#2e7d32;color:#fff}
.headline{display:flex;flex-wrap:wrap;gap:.5em;margin:.6em 0}
.headline div{border:1px solid #ccc;border-radius:4px;padding:.4em .7em;min-width:9.5em;
flex:1 1 9.5em}
.headline b{display:block;font-size:1.35em}.headline small{color:#555;display:block}
li.fail{color:#c62828}li.inconclusive{color:#8a5200}
details{margin:.6em 0}details>summary{cursor:pointer}
details>summary h2,details>summary h3{display:inline}
.thumbs img{height:90px;margin:0 2px 2px 0;border:1px solid #ddd}
"""

IMAGES_LOADED_SCRIPT = """
(function(){
  function check(){
    var imgs=document.images, ok=0;
    for(var i=0;i<imgs.length;i++){
      if(imgs[i].complete && imgs[i].naturalWidth>0){ok++;}
    }
    if(ok===imgs.length){document.body.setAttribute('data-images-loaded', String(ok));}
    else{setTimeout(check, 20);}
  }
  if(document.readyState==='complete'){check();}
  else{window.addEventListener('load', check);}
})();
"""


def plain_text(value: Any) -> str:
    """A value as a reader would write it, never as a Python repr: None → "—", booleans →
    yes/no, mappings → "key: value; …", lists → "a, b", numbers as themselves."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return str(value)
    if isinstance(value, Mapping):
        if not value:
            return "none"
        return "; ".join(f"{k}: {plain_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return ", ".join(plain_text(v) for v in items) if items else "none"
    return str(value)


def esc(value: Any) -> str:
    """Text for HTML: `plain_text` of the value (so no Python repr reaches the page), through
    `html.escape`."""
    return html.escape(plain_text(value), quote=True)


def fmt_number(value: Any, digits: int = 3) -> str:
    """A number for a table cell (escaped); None → "—", inf → "∞", bools as yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return esc(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        if math.isnan(value):
            return "—"
        if value.is_integer() and abs(value) < 1e15:
            return esc(f"{int(value)}")
        return esc(f"{value:.{digits}f}")
    return esc(value)


def fmt_estimate(est: Mapping[str, Any] | None, digits: int = 3) -> str:
    """`0.750 [0.628, 0.842] (95 % Wilson, n=60)` for an estimate's JSON form (escaped)."""
    if not isinstance(est, Mapping):
        return "—"
    value = est.get("value")
    low, high = est.get("low"), est.get("high")
    sided = est.get("sided", "two")
    if value is None:
        text = "—"
    else:
        text = f"{float(value):.{digits}f}"
    lo = "—" if low is None else f"{float(low):.{digits}f}"
    hi = (
        "∞"
        if high is None and sided == "lower"
        else ("—" if high is None else f"{float(high):.{digits}f}")
    )
    if sided == "upper":
        bounds = f"≤ {hi}"
    elif sided == "lower":
        bounds = f"≥ {lo}"
    else:
        bounds = f"[{lo}, {hi}]"
    level = est.get("level")
    pct = f"{float(level) * 100:g} % " if isinstance(level, (int, float)) else ""
    method = est.get("method", "")
    detail = f"{pct}{method}, n={est.get('n', 0)}"
    note = est.get("note")
    out = f"{text} {bounds} ({detail})"
    if note:
        out += f" — {note}"
    return esc(out)


def verdict_html(verdict: Any) -> str:
    """A verdict word with its colour class."""
    word = str(verdict or "evidence_missing")
    return f'<span class="verdict-{esc(word)}">{esc(word.replace("_", " "))}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, raw: bool = True) -> str:
    """An HTML table. Cells are already-escaped HTML when `raw`, else escaped here."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(f"<td>{c if raw else esc(c)}</td>" for c in row)
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>')
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def figure(name: str, png: bytes | None) -> str:
    """An <img> with the PNG inlined as a data URI, and its caption."""
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    caption = PLOT_CAPTIONS.get(name, name)
    return (
        f'<figure id="plot-{esc(name)}"><img alt="{esc(caption)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{esc(caption)} '
        f"(also <code>plots/{esc(name)}.png</code>)</figcaption></figure>"
    )


def judge_line(judge: Mapping[str, Any] | None) -> str:
    """One escaped sentence naming who judged the real episodes, the detector's measured accuracy
    (Se, Sp with intervals and n) and whether AR was corrected for it; "" without real episodes."""
    if not isinstance(judge, Mapping) or not judge.get("judges"):
        return ""
    # Judges first; episodes that ended before any judge was asked (a protective stop) last.
    judges = sorted(judge["judges"], key=lambda j: j.get("kind") == "none")
    who = "; ".join(
        (
            "no judge: ended before judging"
            if j.get("kind") == "none"
            else f"{j.get('kind')} {j.get('name') or ''} {j.get('version') or ''}".strip()
        )
        + f" ({fmt_number(j.get('episodes'), 0)} episodes)"
        for j in judges
    )
    text = f"Real outcomes judged by {esc(who)}."
    acc = judge.get("accuracy")
    if isinstance(acc, Mapping):
        audited = acc.get("audited_episodes") or []
        text += (
            f" Accuracy on this window's audit ({len(audited)} labelled episodes: "
            f"{esc(', '.join(audited))}): sensitivity {fmt_estimate(acc.get('sensitivity'))}, "
            f"specificity {fmt_estimate(acc.get('specificity'))}."
        )
    elif judge.get("judges") and any(j.get("kind") == "detector" for j in judge["judges"]):
        text += " No audit of the detector on this window: its accuracy here is unmeasured."
    bench = judge.get("benchmark")
    if isinstance(bench, Mapping):
        text += (
            f" {esc(str(bench.get('label') or ''))} ({esc(bench.get('measured_on') or '')}, "
            f"sha256 {esc(str(bench.get('sha256') or '')[:16])}…): sensitivity "
            f"{fmt_estimate(bench.get('sensitivity'))}, specificity "
            f"{fmt_estimate(bench.get('specificity'))}; not used for the correction."
        )
    if judge.get("correction"):
        corrected = judge.get("AR_corrected")
        text += (
            f" AR corrected for the judge (Rogan–Gladen): {fmt_estimate(corrected)}."
            if isinstance(corrected, Mapping) and corrected.get("value") is not None
            else f" AR not corrected: {esc(judge.get('note') or '')}."
        )
    return text
