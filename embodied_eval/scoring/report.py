"""`score_evidence`: evidence → axes, AAI-Index with intervals, U and AAI*, κ, closures, level.

This is the Python API the certificate step calls; `embodied-eval score` is its CLI.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import AXES, AxisScore
from embodied_eval.scoring.chc import cognitive_core_score
from embodied_eval.scoring.closures import expansion_closure, maintenance_closure
from embodied_eval.scoring.composite import (
    DEFAULT_JAGGEDNESS_EXPONENT,
    aai_index,
    included_axes,
    index_delta_method,
    index_gradient,
    index_resampled,
    jaggedness_adjusted_index,
    profile_weights,
    uniformity,
)
from embodied_eval.scoring.curvature import acceleration_gate, link_curvature, meta_elasticity
from embodied_eval.scoring.dynamics import self_improvement_coefficient, window_averages
from embodied_eval.scoring.evidence import (
    SCHEMA_ID,
    TOP_KEYS,
    Checkpoints,
    KappaEvidence,
    read_aai5,
    read_attestations,
    read_axes,
    read_chc,
    read_closures,
    read_kappa,
    read_policy,
    read_robotics_gates,
    read_tools,
)
from embodied_eval.scoring.evidence_fields import boolean, mapping, number
from embodied_eval.scoring.gate_checks import GateResult
from embodied_eval.scoring.levels import (
    KappaFamily,
    LevelAssignment,
    LevelEvidence,
    LevelPolicy,
    assign_level,
)
from embodied_eval.scoring.resampling import DEFAULT_RESAMPLES
from embodied_eval.stats.estimate import Estimate

REPORT_SCHEMA = "embodied-eval/score/1"


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class ScoreReport:
    """Everything `score_evidence` computed, with `to_json()` for reports and certificates.

    Attributes:
        profile: weight profile name.
        weights: effective weights (E is 0 when optional and not supplied).
        axes: AxisScore per supplied axis.
        missing_axes: included axes without evidence (the index is then undefined).
        index_partial: eq. (12) over the supplied included axes only, when some are missing
            (a progress figure; gates never read it).
        attestations: audited attestations from the evidence ({kind: {verdict, auditor, date,
            detail}}), e.g. the §7 AAI-4 delivery attestation.
        index: AAI-Index (eq. (12)) with the resampling interval when an rng was given, else the
            delta-method interval; None when an axis is missing.
        index_delta, index_resampled: both intervals.
        uniformity, index_jagged: U and AAI* (eq. (35)).
        gradient: ∂C/∂x (None at a zero axis).
        assignment: the level and all gates.
        kappa_star, kappa: κ* and κ̂ per family.
        dynamics: κ̂ by three methods, window averages, link curvature of the overall series.
        closures: every audit's gate result.
        policy: the level policy used.
        notes: what the reader must know (dropped optional axes, fixed axes, ...).
        subject: the evidence's free `subject` metadata, echoed.
    """

    profile: str
    weights: dict[str, float]
    axes: dict[str, AxisScore]
    missing_axes: tuple[str, ...]
    index: Estimate | None
    index_delta: Estimate | None
    index_resampled: Estimate | None
    uniformity: float | None
    index_jagged: float | None
    jaggedness_exponent: float
    gradient: dict[str, float | None]
    assignment: LevelAssignment
    kappa_star: float | None
    kappa: dict[str, KappaFamily]
    dynamics: dict[str, Any] | None
    closures: dict[str, list[GateResult]]
    policy: LevelPolicy
    notes: tuple[str, ...] = field(default=())
    subject: dict[str, Any] = field(default_factory=dict)
    index_partial: float | None = None
    attestations: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def level(self) -> int:
        return self.assignment.level

    @property
    def level_name(self) -> str:
        return self.assignment.name

    def to_json(self) -> dict[str, Any]:
        """JSON form: axes (raw and value), profile, index, index_jagged, uniformity, level, gates…"""
        axes = {}
        for x in AXES:
            if x in self.axes:
                axes[x] = {**self.axes[x].to_json(), "weight": self.weights.get(x, 0.0)}
        lvl = self.assignment.to_json()
        return {
            "schema": REPORT_SCHEMA,
            "subject": self.subject,
            "profile": self.profile,
            "weights": self.weights,
            "included_axes": included_axes(self.weights),
            "axes": axes,
            "missing_axes": list(self.missing_axes),
            "index": None if self.index is None else _finite(self.index.value),
            "index_partial": self.index_partial,
            "attestations": {k: dict(v) for k, v in self.attestations.items()},
            "index_interval": {
                "resampling": None
                if self.index_resampled is None
                else self.index_resampled.to_json(),
                "delta_method": None if self.index_delta is None else self.index_delta.to_json(),
            },
            "uniformity": self.uniformity,
            "index_jagged": self.index_jagged,
            "jaggedness_exponent": self.jaggedness_exponent,
            "gradient": self.gradient,
            "level": lvl["level"],
            "level_name": lvl["level_name"],
            "gates": lvl["gates"],
            "blocking": lvl["blocking"],
            "kappa": {
                "kappa_star": self.kappa_star,
                "families": {f: k.to_json() for f, k in self.kappa.items()},
            },
            "dynamics": self.dynamics,
            "closures": {k: [g.to_json() for g in v] for k, v in self.closures.items()},
            "policy": self.policy.to_json(),
            "notes": list(self.notes),
        }


def _kappa_families(
    kev: KappaEvidence, rng: np.random.Generator | None, level: float, n_resamples: int
) -> dict[str, KappaFamily]:
    out = {}
    for name, fam in sorted(kev.families.items()):
        if isinstance(fam, Checkpoints):
            stream = None if rng is None else rng.spawn(1)[0]
            try:
                est = self_improvement_coefficient(
                    fam.resources,
                    fam.capability,
                    method=kev.method,
                    rng=stream,
                    level=level,
                    n_resamples=n_resamples,
                )
            except EvalError as exc:
                raise EvalError(
                    f"kappa.families.{name}: {exc}", key=f"kappa.families.{name}"
                ) from None
            out[name] = KappaFamily(est, fam.days)
        else:
            out[name] = KappaFamily(fam[0], fam[1])
    return out


def _dynamics(
    kev: KappaEvidence, rng: np.random.Generator | None, level: float, n_resamples: int
) -> tuple[dict[str, Any] | None, list[str]]:
    series = kev.overall
    if series is None:
        return None, []
    notes: list[str] = []
    out: dict[str, Any] = {"n_checkpoints": int(series.times.size), "days": series.days}
    kappas: dict[str, dict[str, Any] | None] = {}
    for method in ("theil-sen", "ols", "finite-differences"):
        stream = None if rng is None else rng.spawn(1)[0]
        try:
            kappas[method] = self_improvement_coefficient(
                series.resources,
                series.capability,
                method=method,
                rng=stream,
                level=level,
                n_resamples=n_resamples,
            ).to_json()
        except EvalError as exc:
            kappas[method] = None
            notes.append(f"kappa.checkpoints: {method} slope undefined ({exc})")
    out["kappa"] = kappas
    t, r, c = series.times, series.resources, series.capability
    if t[-1] > t[0]:
        out["window"] = window_averages(t[0], t[-1], c[0], c[-1], r[0], r[-1]).to_json()
    if np.unique(r).size >= 4:
        cap = c
        if kev.link != "identity" and (np.any(cap <= 0) or np.any(cap >= 1)):
            notes.append(
                f"kappa.checkpoints: C reaches 0 or 1; no curvature on the {kev.link} link"
            )
        else:
            stream = None if rng is None else rng.spawn(1)[0]
            fit = link_curvature(
                r, cap, link_name=kev.link, rng=stream, level=level, n_resamples=n_resamples
            )
            out["curvature"] = fit.to_json()
            out["acceleration_gate"] = acceleration_gate(fit).to_json()
            assert fit.slope.value is not None and fit.curvature.value is not None
            out["meta_elasticity"] = _finite(
                meta_elasticity(fit.center, fit.slope.value, fit.curvature.value)
            )
    else:
        notes.append("kappa.checkpoints: curvature needs at least four distinct R values")
    return out, notes


def score_evidence(
    evidence: Mapping[str, Any],
    profile: str | None = None,
    rng: np.random.Generator | None = None,
    *,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    jaggedness_exponent: float = DEFAULT_JAGGEDNESS_EXPONENT,
) -> ScoreReport:
    """Score an evidence mapping: axes, AAI-Index (eq. (12)) with intervals, U and AAI*
    (eq. (35)), κ per family, closures and the AAI level.

    Args:
        evidence: the evidence (see `embodied_eval/data/evidence.schema.json`).
        profile: "default", "software" or "robotics"; None takes evidence["profile"] or
            "default".
        rng: explicit generator for every bootstrap (index resampling, κ intervals, curvature).
            None: no resampling; the index interval is the delta method's and κ has no interval
            (so κ gates cannot pass).
        level: two-sided confidence level of the intervals computed here.
        n_resamples: B of every bootstrap.
        jaggedness_exponent: λ of AAI* (default 0.5).
    Returns:
        ScoreReport.
    """
    ev = mapping(evidence, "evidence", TOP_KEYS)
    if "schema" in ev and ev["schema"] != SCHEMA_ID:
        raise EvalError(f"schema: {ev['schema']!r} is not {SCHEMA_ID!r}", key="schema")
    name = profile if profile is not None else ev.get("profile", "default")
    if not isinstance(name, str):
        raise EvalError("profile: expected a profile name", key="profile")
    weights = profile_weights(name)
    notes: list[str] = []
    axes = read_axes(ev)
    if name == "default" and "E" not in axes:
        weights["E"] = 0.0
        notes.append("E not supplied: optional in Table 1, left out of the index and of U")
    inc = included_axes(weights)
    missing = tuple(x for x in inc if x not in axes)
    ignored = [x for x in axes if weights.get(x, 0.0) == 0.0]
    if ignored:
        notes.append(
            f"axes with weight 0 in the {name} profile (reported, not in the index): "
            f"{' '.join(ignored)}"
        )
    streams = rng.spawn(3) if rng is not None else [None, None, None]

    index = delta = resampled = None
    u = jagged = None
    gradient: dict[str, float | None] = {}
    partial: float | None = None
    if missing:
        notes.append(f"index undefined: no evidence for {' '.join(missing)}")
        supplied = {x: axes[x].x for x in inc if x in axes}
        if supplied:
            # eq. (12) over the supplied axes only (weights renormalized): a progress figure
            # for the reader, never used by a gate.
            partial = aai_index(supplied, {x: weights[x] for x in supplied})
            notes.append(
                f"index_partial = {partial:.4f}: eq. (12) over {' '.join(supplied)} only; "
                "not a certified index"
            )
    else:
        values = {x: axes[x].x for x in inc}
        c = aai_index(values, weights)
        if c == 0.0:
            zeros = [x for x in inc if values[x] == 0.0]
            notes.append(f"index is 0: axis {' '.join(zeros)} is 0 (no compensation, eq. 12)")
        delta = index_delta_method(axes, weights, level=level)
        if streams[0] is not None:
            resampled, _ = index_resampled(
                axes, weights, streams[0], level=level, n_resamples=n_resamples
            )
        index = resampled or delta
        u = uniformity(values, weights)
        jagged = jaggedness_adjusted_index(c, u, jaggedness_exponent)
        gradient = {x: _finite(g) for x, g in index_gradient(values, weights).items()}

    kev = read_kappa(ev.get("kappa", {}))
    kappa = _kappa_families(kev, streams[1], level, n_resamples)
    dynamics, dyn_notes = _dynamics(kev, streams[2], level, n_resamples)
    notes += dyn_notes

    maint, expan = read_closures(ev.get("closures", {}))
    policy = LevelPolicy.for_profile(name, **read_policy(ev.get("policy", {})))
    chc = read_chc(ev.get("chc", {}))
    policy = replace(policy, chc=chc.thresholds)
    if not policy.require_chc:
        notes.append("CHC-core gates waived by the evidence's declared policy")
    n_tools, tool_success = read_tools(ev.get("tools", {}))
    revision = mapping(ev.get("revision", {}), "revision", ("auditable_diffs",))
    auditable = revision.get("auditable_diffs")
    if auditable is not None:
        auditable = boolean(auditable, "revision.auditable_diffs")
    memory = mapping(ev.get("memory", {}), "memory", ("persistence_days",))
    persistence = memory.get("persistence_days")
    if persistence is not None:
        persistence = number(persistence, "memory.persistence_days", low=0.0)
    robotics_gates = read_robotics_gates(ev)
    if robotics_gates and not policy.robotics:
        notes.append(f"robotics gate results ignored in the {name} profile")
    core = None
    if chc.core is not None:
        core = Estimate(cognitive_core_score(chc.core), None, None, level, "eq. 36 (point)")
    if persistence is None and "M" in axes:
        persistence = axes["M"].breakdown.get("persistence_days")
    level_ev = LevelEvidence(
        axes=axes,
        index=index,
        kappa=kappa,
        kappa_star=kev.kappa_star,
        maintenance=maint,
        expansion=expan,
        vrp=chc.vrp,
        hallucination=chc.hallucination,
        wm_span=chc.wm_span,
        delayed_recall=chc.delayed_recall,
        core_score=core,
        n_tools=n_tools,
        tool_success_mild_shift=tool_success,
        revision_auditable=auditable,
        persistence_days=None if persistence is None else float(persistence),
        robotics_gates=robotics_gates,
        superintelligence=read_aai5(ev["aai5"]) if "aai5" in ev else None,
    )
    assignment = assign_level(level_ev, policy, embodied=weights.get("E", 0.0) > 0)
    closures = {
        "maintenance": [
            maintenance_closure(
                a,
                alpha=policy.maintenance_alpha,
                days=policy.maintenance_days,
                required_drifts=policy.required_drifts,
            )
            for a in maint
        ],
        "expansion": [expansion_closure(a, epsilon=policy.expansion_epsilon) for a in expan],
    }
    return ScoreReport(
        profile=name,
        weights=weights,
        axes=axes,
        missing_axes=missing,
        index=index,
        index_delta=delta,
        index_resampled=resampled,
        uniformity=u,
        index_jagged=jagged,
        jaggedness_exponent=jaggedness_exponent,
        gradient=gradient,
        assignment=assignment,
        kappa_star=kev.kappa_star,
        kappa=kappa,
        dynamics=dynamics,
        closures=closures,
        policy=policy,
        notes=tuple(notes),
        subject=dict(mapping(ev.get("subject", {}), "subject")),
        index_partial=partial,
        attestations=read_attestations(ev.get("attestations", {})),
    )
