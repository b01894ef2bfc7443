"""Reading the sections of an evidence file (schema `embodied_eval/data/evidence.schema.json`)
into the typed inputs of the scoring core. Every problem raises `EvalError` naming the JSON key
path; field readers live in `evidence_fields`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import (
    AXES,
    IDENTITY,
    Anchors,
    AxisScore,
    axis_from_raw,
    axis_from_value,
)
from embodied_eval.scoring.chc import CORE_DOMAINS, ChcThresholds
from embodied_eval.scoring.evidence_fields import (
    boolean,
    estimate,
    mapping,
    number,
    number_list,
    string,
    string_list,
)
from embodied_eval.scoring.evidence_series import (
    MAX_CHECKPOINTS as MAX_CHECKPOINTS,
)
from embodied_eval.scoring.evidence_series import Checkpoints as Checkpoints
from embodied_eval.scoring.evidence_series import KappaEvidence as KappaEvidence
from embodied_eval.scoring.evidence_series import checkpoints as checkpoints
from embodied_eval.scoring.evidence_series import read_closures as read_closures
from embodied_eval.scoring.evidence_series import read_expansion as read_expansion
from embodied_eval.scoring.evidence_series import read_kappa as read_kappa
from embodied_eval.scoring.evidence_series import read_maintenance as read_maintenance
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict
from embodied_eval.scoring.superintelligence import SuperintelligenceEvidence, innovation_rate
from embodied_eval.stats.estimate import Estimate

SCHEMA_ID = "embodied-eval/evidence/1"

TOP_KEYS = (
    "schema", "subject", "profile", "anchors", "axes", "kappa", "closures", "chc", "tools",
    "revision", "memory", "robotics", "aai5", "policy", "attestations",
)  # fmt: skip
#: Audited attestations (§7 AAI-4: end-to-end delivery in novel workcells at expert-team cost).
ATTESTATION_KINDS = ("delivery",)
ATTESTATION_KEYS = ("verdict", "auditor", "date", "detail")


def _is_iso_date(text: str) -> bool:
    """An ISO 8601 date (2026-11-30) or date-time (2026-11-30T09:00:00Z)."""
    try:
        dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def read_attestations(raw: Any) -> dict[str, dict[str, str]]:
    """Validate the evidence's `attestations` section: {kind: {verdict, auditor, date, detail}}.

    `verdict` is a gate verdict (pass, fail, inconclusive, evidence_missing); `auditor` and
    `date` say who audited it and when (required: an unaudited claim is not an attestation).

    Raises:
        EvalError: naming the offending key.
    """
    if not isinstance(raw, Mapping):
        raise EvalError("attestations: expected an object", key="attestations")
    out: dict[str, dict[str, str]] = {}
    verdicts = ("pass", "fail", "inconclusive", "evidence_missing")
    for kind, item in raw.items():
        key = f"attestations.{kind}"
        if kind not in ATTESTATION_KINDS:
            raise EvalError(
                f"{key}: unknown attestation (known: {', '.join(ATTESTATION_KINDS)})", key=key
            )
        if not isinstance(item, Mapping):
            raise EvalError(f"{key}: expected an object with verdict, auditor, date", key=key)
        unknown = sorted(set(item) - set(ATTESTATION_KEYS))
        if unknown:
            raise EvalError(f"{key}.{unknown[0]}: unknown key", key=f"{key}.{unknown[0]}")
        for field_name in ("verdict", "auditor", "date"):
            value = item.get(field_name)
            if not isinstance(value, str) or not value.strip():
                raise EvalError(f"{key}.{field_name}: required text", key=f"{key}.{field_name}")
        if item["verdict"] not in verdicts:
            raise EvalError(
                f"{key}.verdict: {item['verdict']!r} is not one of {', '.join(verdicts)}",
                key=f"{key}.verdict",
            )
        if not _is_iso_date(item["date"]):
            raise EvalError(
                f"{key}.date: {item['date']!r:.40} is not a date; give it as 2026-11-30 (ISO 8601)",
                key=f"{key}.date",
            )
        out[str(kind)] = {k: str(item.get(k, "")) for k in ATTESTATION_KEYS}
    return out


#: Interval keys an axis entry may also give flat, beside its `value` or `raw` number, in the
#: `Estimate` JSON form: {"value": 0.8, "low": 0.7, "high": 0.9}.
AXIS_INTERVAL_KEYS = ("low", "high", "level", "method", "n", "sided", "note")
AXIS_KEYS = ("value", "raw", "L", "U", "replicates", "details", *AXIS_INTERVAL_KEYS)
#: Axes whose raw statistic is a fraction in [0, 1] by definition; without published anchors φ is
#: the identity clip for them. $ (tasks per currency unit) always needs anchors.
UNIT_INTERVAL_AXES = ("A", "G", "P", "M", "T", "R", "S", "E", "W")
POLICY_KEYS = (
    "maintenance_alpha", "maintenance_days", "required_drifts", "expansion_kinds",
    "expansion_epsilon", "kappa_days", "kappa_families_aai3", "persistence_days",
    "min_tools_aai1", "tool_success_aai1", "require_chc",
)  # fmt: skip


def schema_path() -> Path:
    """Path of the evidence JSON schema shipped with the package."""
    return Path(str(resources.files("embodied_eval") / "data" / "evidence.schema.json"))


# --- axes -------------------------------------------------------------------------------------


def _anchors(
    entry: Mapping[str, Any], published: Mapping[str, Any], axis: str, key: str
) -> Anchors:
    if "L" in entry or "U" in entry:
        if "L" not in entry or "U" not in entry:
            raise EvalError(
                f"{key}: give both anchors L and U", key=f"{key}.{'U' if 'L' in entry else 'L'}"
            )
        lo, hi = number(entry["L"], f"{key}.L"), number(entry["U"], f"{key}.U")
        if not lo < hi:
            raise EvalError(f"{key}: anchors need L < U, got L={lo}, U={hi}", key=f"{key}.L")
        return Anchors(lo, hi)
    if axis in published:
        pkey = f"anchors.{axis}"
        pa = mapping(published[axis], pkey, ("L", "U"))
        if "L" not in pa or "U" not in pa:
            raise EvalError(f"{pkey}: give both L and U", key=pkey)
        lo, hi = number(pa["L"], f"{pkey}.L"), number(pa["U"], f"{pkey}.U")
        if not lo < hi:
            raise EvalError(f"{pkey}: anchors need L < U, got L={lo}, U={hi}", key=f"{pkey}.L")
        return Anchors(lo, hi)
    if axis in UNIT_INTERVAL_AXES:
        return IDENTITY
    raise EvalError(
        f"{key}: a raw {axis} needs anchors L and U (its unit is not [0, 1])", key=f"{key}.L"
    )


def _flat_interval(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The `value`/`raw` quantity with interval keys given flat beside it (AXIS_INTERVAL_KEYS)
    merged into one quantity object; unchanged when there are none."""
    name = "raw" if "raw" in entry else "value"
    flat = {k: entry[k] for k in AXIS_INTERVAL_KEYS if k in entry}
    if not flat:
        return dict(entry)
    if isinstance(entry[name], Mapping):
        first = next(iter(flat))
        raise EvalError(
            f"{key}.{first}: the interval is given twice (flat and inside {key}.{name})",
            key=f"{key}.{first}",
        )
    out = {k: v for k, v in entry.items() if k not in flat}
    out[name] = {"value": entry[name], **flat}
    return out


def axis_entry(axis: str, obj: Any, key: str, published: Mapping[str, Any]) -> AxisScore:
    """One axis: {"value": x} (normalized) or {"raw": x̂, "L", "U"} (calibrated by eq. (1)); the
    number may carry its interval as an object ({"value": {"value", "low", "high"}}) or flat
    ({"value": x, "low": l, "high": h})."""
    entry = mapping(obj, key, AXIS_KEYS)
    has_raw, has_value = "raw" in entry, "value" in entry
    if has_raw == has_value:
        raise EvalError(f"{key}: give exactly one of raw (with anchors L, U) or value", key=key)
    entry = _flat_interval(entry, key)
    details = dict(mapping(entry.get("details", {}), f"{key}.details"))
    reps = None
    if "replicates" in entry:
        reps = np.array(number_list(entry["replicates"], f"{key}.replicates"))
    if has_value:
        if "L" in entry or "U" in entry:
            raise EvalError(
                f"{key}: anchors L, U apply to raw, not to an already normalized value",
                key=f"{key}.L",
            )
        val = estimate(entry["value"], f"{key}.value", low=0.0, high=1.0)
        if reps is not None and np.any((reps < 0) | (reps > 1)):
            raise EvalError(
                f"{key}.replicates: normalized replicates must lie in [0, 1]",
                key=f"{key}.replicates",
            )
        return axis_from_value(axis, val, breakdown=details, replicates=reps)
    anchors = _anchors(entry, published, axis, key)
    raw = estimate(entry["raw"], f"{key}.raw")
    return axis_from_raw(axis, raw, anchors, breakdown=details, raw_replicates=reps)


def read_axes(evidence: Mapping[str, Any]) -> dict[str, AxisScore]:
    """All axes of `evidence["axes"]` (and E from `robotics.E`)."""
    published = mapping(evidence.get("anchors", {}), "anchors", AXES)
    axes_obj = mapping(evidence.get("axes", {}), "axes", AXES)
    out = {x: axis_entry(x, axes_obj[x], f"axes.{x}", published) for x in AXES if x in axes_obj}
    robotics = mapping(evidence.get("robotics", {}), "robotics", ("E", "gates"))
    if "E" in robotics:
        if "E" in out:
            raise EvalError(
                "robotics.E: E is given twice (also in axes.E); give it once", key="robotics.E"
            )
        out["E"] = axis_entry("E", robotics["E"], "robotics.E", published)
    return out


# --- CHC, tools, robotics, AAI-5, policy ------------------------------------------------------


@dataclass(frozen=True)
class ChcEvidence:
    vrp: Estimate | None = None
    hallucination: Estimate | None = None
    wm_span: Estimate | None = None
    delayed_recall: Estimate | None = None
    core: dict[str, float] | None = None
    thresholds: ChcThresholds = field(default_factory=ChcThresholds)


def read_chc(obj: Any) -> ChcEvidence:
    keys = ("vrp_at_k", "hall_at_k", "k", "wm_span", "delayed_recall", "core", "thresholds")
    m = mapping(obj, "chc", keys)
    vrp = (
        None if "vrp_at_k" not in m else estimate(m["vrp_at_k"], "chc.vrp_at_k", low=0.0, high=1.0)
    )
    hall = (
        None
        if "hall_at_k" not in m
        else estimate(m["hall_at_k"], "chc.hall_at_k", low=0.0, high=1.0)
    )
    if hall is None and vrp is not None:
        # Hall@k = 1 − VRP@k (eq. (33)): the bounds swap
        assert vrp.value is not None
        hall = Estimate(
            1.0 - vrp.value,
            None if vrp.high is None else 1.0 - vrp.high,
            None if vrp.low is None else 1.0 - vrp.low,
            vrp.level,
            f"1 − VRP@k ({vrp.method})",
            vrp.n,
        )
    wm = None if "wm_span" not in m else estimate(m["wm_span"], "chc.wm_span", low=0.0)
    dr = (
        None
        if "delayed_recall" not in m
        else estimate(m["delayed_recall"], "chc.delayed_recall", low=0.0, high=1.0)
    )
    core = None
    if "core" in m:
        cm = mapping(m["core"], "chc.core")
        unknown = [k for k in cm if k not in CORE_DOMAINS]
        if unknown:
            raise EvalError(
                f"chc.core.{unknown[0]}: unknown CHC domain (known: {', '.join(CORE_DOMAINS)})",
                key=f"chc.core.{unknown[0]}",
            )
        core = {k: number(v, f"chc.core.{k}", low=0.0, high=1.0) for k, v in cm.items()}
    th = mapping(
        m.get("thresholds", {}),
        "chc.thresholds",
        ("tau_v", "tau_h", "tau_w", "tau_ms", "gamma_core"),
    )
    thresholds = ChcThresholds(
        vrp=number(th.get("tau_v", 0.85), "chc.thresholds.tau_v", low=0.0, high=1.0),
        hallucination=number(th.get("tau_h", 0.05), "chc.thresholds.tau_h", low=0.0, high=1.0),
        wm_span=None if "tau_w" not in th else number(th["tau_w"], "chc.thresholds.tau_w", low=0.0),
        delayed_recall=None
        if "tau_ms" not in th
        else number(th["tau_ms"], "chc.thresholds.tau_ms", low=0.0, high=1.0),
        core_min=None
        if "gamma_core" not in th
        else number(th["gamma_core"], "chc.thresholds.gamma_core", low=0.0),
    )
    return ChcEvidence(vrp, hall, wm, dr, core, thresholds)


def read_gate_result(obj: Any, key: str) -> GateResult:
    """A GateResult from its JSON form (`GateResult.to_json()`)."""
    m = mapping(obj, key)
    name = string(m.get("name"), f"{key}.name")
    raw_checks = m.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise EvalError(f"{key}.checks: expected a non-empty list of checks", key=f"{key}.checks")
    checks = []
    verdicts = {v.value: v for v in Verdict}
    for i, c in enumerate(raw_checks):
        ck = f"{key}.checks[{i}]"
        cm = mapping(c, ck)
        verdict = cm.get("verdict")
        if verdict not in verdicts:
            raise EvalError(
                f"{ck}.verdict: {verdict!r} is not one of {', '.join(verdicts)}",
                key=f"{ck}.verdict",
            )

        def opt(k: str, ck: str = ck, cm: Mapping[str, Any] = cm) -> float | None:
            return None if cm.get(k) is None else number(cm[k], f"{ck}.{k}")

        remaining = mapping(cm.get("remaining", {}) or {}, f"{ck}.remaining")
        checks.append(
            GateCheck(
                string(cm.get("name"), f"{ck}.name"),
                verdicts[verdict],
                opt("threshold"),
                str(cm.get("comparison", ">=")),
                opt("value"),
                opt("bound"),
                str(cm.get("detail", "")),
                {k: number(v, f"{ck}.remaining.{k}") for k, v in remaining.items()},
            )
        )
    result = GateResult(name, tuple(checks))
    stated = m.get("verdict")
    if stated is not None and stated != result.verdict.value:
        raise EvalError(
            f"{key}.verdict: {stated!r} disagrees with its checks ({result.verdict.value})",
            key=f"{key}.verdict",
        )
    return result


def read_robotics_gates(evidence: Mapping[str, Any]) -> list[GateResult]:
    robotics = mapping(evidence.get("robotics", {}), "robotics", ("E", "gates"))
    gates = robotics.get("gates", [])
    if not isinstance(gates, list):
        raise EvalError("robotics.gates: expected a list of gate results", key="robotics.gates")
    return [read_gate_result(g, f"robotics.gates[{i}]") for i, g in enumerate(gates)]


def read_tools(obj: Any) -> tuple[int | None, Estimate | None]:
    m = mapping(obj, "tools", ("n_tools", "success_under_mild_shift"))
    n = m.get("n_tools")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise EvalError("tools.n_tools: expected a non-negative integer", key="tools.n_tools")
    succ = m.get("success_under_mild_shift")
    return n, None if succ is None else estimate(
        succ, "tools.success_under_mild_shift", low=0.0, high=1.0
    )


def read_aai5(obj: Any) -> SuperintelligenceEvidence:
    keys = (
        "margins",
        "zeta",
        "curvature",
        "gamma",
        "innovation",
        "innovation_audited",
        "capability_aai4",
        "step",
    )
    m = mapping(obj, "aai5", keys)
    margins = {
        k: number(v, f"aai5.margins.{k}")
        for k, v in mapping(m.get("margins", {}), "aai5.margins").items()
    }
    curv = {
        k: estimate(v, f"aai5.curvature.{k}")
        for k, v in mapping(m.get("curvature", {}), "aai5.curvature").items()
    }
    inn = m.get("innovation")
    innovation = None
    if isinstance(inn, Mapping):
        im = mapping(
            inn, "aai5.innovation", ("lambda_tool", "lambda_rev", "alpha_tool", "alpha_rev")
        )
        for k in ("lambda_tool", "lambda_rev", "alpha_tool", "alpha_rev"):
            if k not in im:
                raise EvalError(f"aai5.innovation.{k}: missing", key=f"aai5.innovation.{k}")
        innovation = innovation_rate(
            *(
                number(im[k], f"aai5.innovation.{k}")
                for k in ("lambda_tool", "lambda_rev", "alpha_tool", "alpha_rev")
            )
        )
    elif inn is not None:
        innovation = number(inn, "aai5.innovation", low=0.0, high=1.0)
    step = mapping(m.get("step", {}), "aai5.step", ("delta", "link"))
    link = step.get("link", "surprisal")
    if link not in ("logit", "surprisal"):
        raise EvalError(f"aai5.step.link: {link!r} is not logit or surprisal", key="aai5.step.link")
    return SuperintelligenceEvidence(
        margins=margins,
        zeta=number(m.get("zeta", 2.0), "aai5.zeta", low=0.0),
        curvatures=curv,
        gamma=None if "gamma" not in m else number(m["gamma"], "aai5.gamma", low=0.0),
        innovation=innovation,
        innovation_audited=None
        if "innovation_audited" not in m
        else boolean(m["innovation_audited"], "aai5.innovation_audited"),
        capability_aai4=None
        if "capability_aai4" not in m
        else number(m["capability_aai4"], "aai5.capability_aai4", low=0.0, high=1.0),
        step_delta=None
        if "delta" not in step
        else number(step["delta"], "aai5.step.delta", low=0.0),
        step_link=link,
    )


def read_policy(obj: Any) -> dict[str, Any]:
    """Published overrides of the level policy (see `LevelPolicy`)."""
    m = mapping(obj, "policy", POLICY_KEYS)
    out: dict[str, Any] = {}
    for k, v in m.items():
        key = f"policy.{k}"
        if k in ("required_drifts", "expansion_kinds"):
            out[k] = string_list(v, key)
        elif k == "require_chc":
            out[k] = boolean(v, key)
        elif k in ("kappa_families_aai3", "min_tools_aai1"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise EvalError(f"{key}: expected a positive integer", key=key)
            out[k] = v
        else:
            out[k] = number(v, key, low=0.0)
    return out
