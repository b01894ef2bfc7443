"""Reading the time-series sections of an evidence file: κ checkpoint series and the
maintenance / expansion closure audits. Every problem raises `EvalError` naming the JSON key
path; sizes are bounded (`MAX_CHECKPOINTS`) because the κ estimators compare checkpoints pairwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.scoring.closures import ExpansionAudit, MaintenanceAudit
from embodied_eval.scoring.evidence_fields import (
    boolean,
    estimate,
    mapping,
    number,
    string,
    string_list,
)
from embodied_eval.scoring.links import LINKS
from embodied_eval.stats.estimate import Estimate

# --- κ ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoints:
    """A checkpoint series (t_j days, R_j cumulative resources, C_j capability)."""

    times: np.ndarray
    resources: np.ndarray
    capability: np.ndarray

    @property
    def days(self) -> float:
        return float(self.times.max() - self.times.min())


#: Most checkpoints of one series: κ estimators compare checkpoints pairwise.
MAX_CHECKPOINTS = 1000


def checkpoints(obj: Any, key: str) -> Checkpoints:
    if not isinstance(obj, list) or len(obj) < 2:
        raise EvalError(f"{key}: expected a list of at least two checkpoints", key=key)
    if len(obj) > MAX_CHECKPOINTS:
        raise EvalError(
            f"{key}: {len(obj)} checkpoints; at most {MAX_CHECKPOINTS} (thin the series)", key=key
        )
    rows = [mapping(c, f"{key}[{i}]", ("t", "R", "C")) for i, c in enumerate(obj)]
    for i, r in enumerate(rows):
        for k in ("t", "R", "C"):
            if k not in r:
                raise EvalError(f"{key}[{i}].{k}: missing", key=f"{key}[{i}].{k}")
    t = np.array([number(r["t"], f"{key}[{i}].t") for i, r in enumerate(rows)])
    big_r = np.array([number(r["R"], f"{key}[{i}].R", low=0.0) for i, r in enumerate(rows)])
    c = np.array([number(r["C"], f"{key}[{i}].C", low=0.0, high=1.0) for i, r in enumerate(rows)])
    order = np.argsort(t, kind="stable")
    t, big_r, c = t[order], big_r[order], c[order]
    if np.any(np.diff(big_r) < 0):
        raise EvalError(
            f"{key}: cumulative resources R must not decrease over time", key=f"{key}.R"
        )
    return Checkpoints(t, big_r, c)


@dataclass(frozen=True)
class KappaEvidence:
    """κ section: κ*, estimator, per-family series or pre-computed κ̂, an overall series."""

    kappa_star: float | None = None
    method: str = "theil-sen"
    link: str = "logit"
    families: dict[str, Checkpoints | tuple[Estimate, float | None]] = field(default_factory=dict)
    overall: Checkpoints | None = None


def read_kappa(obj: Any) -> KappaEvidence:
    m = mapping(obj, "kappa", ("kappa_star", "method", "link", "families", "checkpoints"))
    star = None if "kappa_star" not in m else number(m["kappa_star"], "kappa.kappa_star", low=0.0)
    if star is not None and star <= 0:
        raise EvalError("kappa.kappa_star: κ* must be positive", key="kappa.kappa_star")
    method = m.get("method", "theil-sen")
    if method not in ("theil-sen", "ols", "finite-differences"):
        raise EvalError(
            f"kappa.method: {method!r} is not theil-sen, ols or finite-differences",
            key="kappa.method",
        )
    link = m.get("link", "logit")
    if link not in LINKS:
        raise EvalError(f"kappa.link: {link!r} is not one of {', '.join(LINKS)}", key="kappa.link")
    fams: dict[str, Checkpoints | tuple[Estimate, float | None]] = {}
    for name, f in mapping(m.get("families", {}), "kappa.families").items():
        key = f"kappa.families.{name}"
        fm = mapping(f, key, ("checkpoints", "kappa", "days"))
        if ("checkpoints" in fm) == ("kappa" in fm):
            raise EvalError(f"{key}: give checkpoints or a pre-computed kappa (with days)", key=key)
        if "checkpoints" in fm:
            fams[name] = checkpoints(fm["checkpoints"], f"{key}.checkpoints")
        else:
            days = None if "days" not in fm else number(fm["days"], f"{key}.days", low=0.0)
            fams[name] = (estimate(fm["kappa"], f"{key}.kappa"), days)
    overall = None if "checkpoints" not in m else checkpoints(m["checkpoints"], "kappa.checkpoints")
    return KappaEvidence(star, method, link, fams, overall)


# --- closures ---------------------------------------------------------------------------------


def _auditor(m: Mapping[str, Any], key: str) -> str:
    """The audit's `auditor` (and `date`) as one line, "" when not named."""
    if "auditor" not in m:
        return ""
    who = string(m["auditor"], f"{key}.auditor")
    if not who.strip():
        raise EvalError(f"{key}.auditor: must not be empty", key=f"{key}.auditor")
    when = string(m["date"], f"{key}.date") if "date" in m else ""
    return f"{who.strip()} on {when}" if when else who.strip()


def read_maintenance(obj: Any, key: str) -> MaintenanceAudit:
    m = mapping(
        obj,
        key,
        ("baseline", "checkpoints", "human_patches", "drifts", "planned_span", "auditor", "date"),
    )
    if "baseline" not in m or "checkpoints" not in m:
        raise EvalError(f"{key}: needs baseline and checkpoints", key=key)
    cps = m["checkpoints"]
    if not isinstance(cps, list) or not cps or len(cps) > MAX_CHECKPOINTS:
        raise EvalError(
            f"{key}.checkpoints: expected a non-empty list of at most {MAX_CHECKPOINTS}",
            key=f"{key}.checkpoints",
        )
    days, indices = [], []
    for i, c in enumerate(cps):
        ck = f"{key}.checkpoints[{i}]"
        cm = mapping(c, ck, ("day", "index"))
        if "day" not in cm or "index" not in cm:
            raise EvalError(f"{ck}: needs day and index", key=ck)
        days.append(number(cm["day"], f"{ck}.day", low=0.0))
        indices.append(estimate(cm["index"], f"{ck}.index", low=0.0, high=1.0))
    patches = None
    if "human_patches" in m:
        p = m["human_patches"]
        if isinstance(p, bool) or not isinstance(p, int) or p < 0:
            raise EvalError(
                f"{key}.human_patches: expected a non-negative integer", key=f"{key}.human_patches"
            )
        patches = p
    drifts = string_list(m.get("drifts", []), f"{key}.drifts")
    planned = m.get("planned_span")
    return MaintenanceAudit(
        estimate(m["baseline"], f"{key}.baseline", low=0.0, high=1.0),
        days,
        indices,
        patches,
        drifts,
        None if planned is None else number(planned, f"{key}.planned_span", low=0.0),
        _auditor(m, key),
    )


def read_expansion(obj: Any, key: str) -> ExpansionAudit:
    parts = ("pre", "post", "ablated", "control_pre", "control_post")
    extra = ("ablated_difference", "ablated_gain")
    m = mapping(obj, key, ("name", "kind", *parts, "matched", "gain", *extra, "auditor", "date"))
    for p in ("name", *parts):
        if p not in m:
            raise EvalError(f"{key}.{p}: missing", key=f"{key}.{p}")
    vals = {p: estimate(m[p], f"{key}.{p}", low=0.0, high=1.0) for p in parts}
    matched = None if "matched" not in m else boolean(m["matched"], f"{key}.matched")
    gain = None if "gain" not in m else estimate(m["gain"], f"{key}.gain")
    paired = {k: estimate(m[k], f"{key}.{k}") for k in extra if k in m}
    return ExpansionAudit(
        string(m["name"], f"{key}.name"),
        vals["pre"],
        vals["post"],
        vals["ablated"],
        vals["control_pre"],
        vals["control_post"],
        matched,
        string(m.get("kind", "tool"), f"{key}.kind"),
        gain,
        paired.get("ablated_difference"),
        paired.get("ablated_gain"),
        _auditor(m, key),
    )


def _audit_list(m: Mapping[str, Any], name: str) -> list[Any]:
    items = m.get(name, [])
    if not isinstance(items, list):
        raise EvalError(f"closures.{name}: expected a list of audits", key=f"closures.{name}")
    return items


def read_closures(obj: Any) -> tuple[list[MaintenanceAudit], list[ExpansionAudit]]:
    """Maintenance and expansion audits of `closures`."""
    m = mapping(obj, "closures", ("maintenance", "expansion"))
    maint = [
        read_maintenance(a, f"closures.maintenance[{i}]")
        for i, a in enumerate(_audit_list(m, "maintenance"))
    ]
    expan = [
        read_expansion(a, f"closures.expansion[{i}]")
        for i, a in enumerate(_audit_list(m, "expansion"))
    ]
    return maint, expan
