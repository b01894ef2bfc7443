"""The closures a certificate decides AAI-2 and AAI-3 (Robotics) on: computed from the store
when the protocol declares the audit, else an external audited closure from the evidence file.

Rules (one path into the gates):

* A protocol `[maintenance]` (`[expansion]`) table makes certify compute that closure from the
  window's episodes and human patches (`embodiment.maintenance`, `embodiment.expansion`); the
  computed closure is the one the §7 gates and the level procedure use. An evidence-file audit
  of the same closure is then listed as not used.
* Without the table, an evidence-file audit (`closures.maintenance[]`, `closures.expansion[]`)
  is accepted only when it names its `auditor`; it is marked external in the certificate.
* The protocol's α, Y and ε are the published values: they become the scoring core's
  `policy.maintenance_alpha`, `maintenance_days` and `expansion_epsilon` (an evidence file that
  sets them differently is refused).

`closures_section` is the certificate's `closures` object: for each closure its source
("computed" or "external"), the verdict, and the evidence behind it (days, per-day index with
its interval and bound, α·C₀, patches, and each drift day's measured calibration — payload,
friction, delay with intervals, `embodied_eval.embodiment.calibration_days`; the DiD and ablation
intervals).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.embodiment.calibration_days import calibration_by_day
from embodied_eval.embodiment.expansion import ExpansionResult, expansion_audit
from embodied_eval.embodiment.maintenance import MaintenanceResult, maintenance_audit
from embodied_eval.errors import EvalError
from embodied_eval.scoring.closures import ExpansionAudit, MaintenanceAudit
from embodied_eval.scoring.gate_checks import GateResult
from embodied_eval.stats import Estimate

KINDS = ("maintenance", "expansion")


@dataclass(frozen=True)
class StoreClosures:
    """The closures computed from the store (None where the protocol declares no audit)."""

    maintenance: MaintenanceResult | None
    expansion: ExpansionResult | None
    calibrations: tuple[dict[str, Any], ...] = ()

    def result(self, kind: str) -> MaintenanceResult | ExpansionResult | None:
        return self.maintenance if kind == "maintenance" else self.expansion


def compute_store_closures(inputs: WindowInputs, rng: np.random.Generator) -> StoreClosures:
    """The protocol's declared closure audits from the window's episodes, incidents, patches."""
    episodes = list(inputs.episodes)
    return StoreClosures(
        maintenance=maintenance_audit(
            episodes, list(inputs.incidents), list(inputs.patches), inputs.protocol, rng=rng
        ),
        expansion=expansion_audit(episodes, inputs.protocol),
        calibrations=tuple(inputs.calibrations),
    )


def _est(e: Estimate) -> dict[str, Any]:
    out = e.to_json()
    return {k: v for k, v in out.items() if v is not None}


def maintenance_evidence(audit: MaintenanceAudit) -> dict[str, Any]:
    """A maintenance audit in the evidence file's form (`closures.maintenance[]`)."""
    out: dict[str, Any] = {
        "baseline": _est(audit.baseline),
        "checkpoints": [
            {"day": d, "index": _est(i)} for d, i in zip(audit.days, audit.indices, strict=True)
        ],
        "drifts": list(audit.drifts),
    }
    if audit.human_patches is not None:
        out["human_patches"] = audit.human_patches
    if audit.planned_span is not None:
        out["planned_span"] = audit.planned_span
    return out


def expansion_evidence(audit: ExpansionAudit) -> dict[str, Any]:
    """An expansion audit in the evidence file's form (`closures.expansion[]`)."""
    out: dict[str, Any] = {"name": audit.name, "kind": audit.kind}
    for key in ("pre", "post", "ablated", "control_pre", "control_post"):
        out[key] = _est(getattr(audit, key))
    if audit.matched is not None:
        out["matched"] = audit.matched
    for key in ("gain", "ablated_difference", "ablated_gain"):
        value = getattr(audit, key)
        if value is not None:
            out[key] = _est(value)
    return out


def _external(evidence: Mapping[str, Any], kind: str) -> list[Any]:
    closures = evidence.get("closures")
    if not isinstance(closures, Mapping):
        return []
    items = closures.get(kind, [])
    return list(items) if isinstance(items, list) else []


def require_auditors(evidence: Mapping[str, Any]) -> None:
    """Refuse an evidence-file closure that does not name its auditor."""
    for kind in KINDS:
        for i, item in enumerate(_external(evidence, kind)):
            who = item.get("auditor") if isinstance(item, Mapping) else None
            if not isinstance(who, str) or not who.strip():
                key = f"closures.{kind}[{i}].auditor"
                raise EvalError(
                    f"evidence {key}: certify accepts a closure from the evidence file only when "
                    "it names its auditor (or declare the audit in the protocol and let the "
                    "harness compute it from its episodes)",
                    key=key,
                )


def _set_policy(evidence: dict[str, Any], key: str, value: float) -> None:
    policy = evidence.setdefault("policy", {})
    if not isinstance(policy, dict):
        return  # the scoring core reports the bad type
    if key in policy and policy[key] != value:
        raise EvalError(
            f"evidence policy.{key}: {policy[key]!r} disagrees with the protocol's published "
            f"value {value!r}; remove it from the evidence file",
            key=f"policy.{key}",
        )
    policy[key] = value


def merge_closures(evidence: dict[str, Any], store: StoreClosures) -> None:
    """Put the computed audits into the evidence the scoring core reads (in place).

    A computed audit replaces evidence-file audits of the same closure; the protocol's α, Y and
    ε become the core's policy. An audit that allows human patches is not passed on (the core
    then finds no audit: it can never give the closure).
    """
    protocol_plans = (store.maintenance, store.expansion)
    if all(p is None for p in protocol_plans):
        return
    closures = evidence.get("closures")
    closures = dict(closures) if isinstance(closures, Mapping) else {}
    m = store.maintenance
    if m is not None:
        usable = m.audit is not None and not m.plan.patches_allowed
        closures["maintenance"] = [maintenance_evidence(m.audit)] if usable else []  # type: ignore[arg-type]
        _set_policy(evidence, "maintenance_alpha", m.plan.alpha)
        _set_policy(evidence, "maintenance_days", float(m.plan.days))
    x = store.expansion
    if x is not None:
        closures["expansion"] = [] if x.audit is None else [expansion_evidence(x.audit)]
        _set_policy(evidence, "expansion_epsilon", x.plan.epsilon)
    evidence["closures"] = closures


def gate_closures(
    store: StoreClosures, pre_closures: Mapping[str, list[GateResult]], best: Any
) -> dict[str, GateResult]:
    """The closure results the §7 gates read, named with where they come from.

    Args:
        store: the computed closures. pre_closures: the scoring core's decisions of the
            evidence's audits (external ones when nothing was computed). best: picks the most
            favourable of several results.
    """
    out: dict[str, GateResult] = {}
    for kind in KINDS:
        computed = store.result(kind)
        if computed is not None:
            g = computed.closure
            out[f"{kind}_closure"] = GateResult(f"{g.name}, computed from the store", g.checks)
            continue
        chosen = best(list(pre_closures.get(kind, [])))
        if chosen is not None:
            out[f"{kind}_closure"] = GateResult(f"{chosen.name}, external", chosen.checks)
    return out


def closures_section(
    store: StoreClosures, evidence: Mapping[str, Any] | None, score: Mapping[str, Any]
) -> dict[str, Any]:
    """The certificate's `closures`: how each closure was decided and on what evidence."""
    out: dict[str, Any] = {}
    decided = score.get("closures", {}) if isinstance(score, Mapping) else {}
    for kind in KINDS:
        external = _external(evidence or {}, kind)
        computed = store.result(kind)
        if computed is not None:
            entry = {**computed.to_json(), "source": "computed"}
            entry["verdict"] = computed.closure.verdict.value
            if isinstance(computed, MaintenanceResult):
                calendar = [(c.drift, c.day) for c in computed.plan.calendar]
                entry["calibration_by_day"] = calibration_by_day(calendar, store.calibrations)
            if external:
                entry["external_not_used"] = [
                    {"auditor": e.get("auditor"), "date": e.get("date")}
                    for e in external
                    if isinstance(e, Mapping)
                ]
            out[kind] = entry
        elif external:
            results = list(decided.get(kind, []))
            out[kind] = {
                "source": "external",
                "audits": [
                    {
                        "auditor": e.get("auditor"),
                        "date": e.get("date"),
                        "audit": dict(e),
                        "closure": results[i] if i < len(results) else None,
                    }
                    for i, e in enumerate(external)
                    if isinstance(e, Mapping)
                ],
            }
        else:
            out[kind] = {"source": None, "verdict": "evidence_missing"}
    return out
