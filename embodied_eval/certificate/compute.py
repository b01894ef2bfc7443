"""The certificate's numbers: the embodiment report, the AAI score and the level, from the
window's inputs, an evidence mapping and one RNG seed.

The scoring core and the embodiment report each decide part of the robotics level: the §7 gates
need P, W and the closures from the scoring core, and the level assignment needs E and the §7
gates from the embodiment report. `compute_results` therefore runs

1. the scoring core on the supplied evidence alone (no resampling) for P, W and the closures,
2. the embodiment report with those as gate evidence,
3. the scoring core again with E (raw Ê and the protocol's anchors) and the §7 gate results
   merged into the evidence, under the robotics weights, to get the index and the level.

Closures: when the protocol declares a maintenance or expansion audit, it is computed from the
store first and merged into the evidence (`certificate.closures`); otherwise only an external
closure that names its auditor is accepted from the evidence file.

Everything random comes from `numpy.random.default_rng(seed).spawn(4)` (embodiment, scoring,
closures; the fourth stream is the leaderboard's, `certificate.leaderboard`), so
`embodied-eval verify --db` recomputes the same numbers from the same store and seed.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.certificate.closures import (
    StoreClosures,
    closures_section,
    compute_store_closures,
    gate_closures,
    merge_closures,
    require_auditors,
)
from embodied_eval.certificate.inputs import WindowInputs, gather_inputs
from embodied_eval.embodiment import EmbodimentReport, compute_embodiment
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.scoring import ScoreReport, score_evidence
from embodied_eval.scoring.gate_checks import GateResult, Verdict
from embodied_eval.seeds import derive_seed
from embodied_eval.stats.ppi_floor import PPIFloor

PROFILE = "robotics"
#: The AAI level names used in the certificate.
LEVEL_LABEL = "AAI-{}"
#: Order in which closure audits are preferred when several were supplied.
_PREFERENCE = {
    Verdict.PASS: 0,
    Verdict.INCONCLUSIVE: 1,
    Verdict.EVIDENCE_MISSING: 2,
    Verdict.FAIL: 3,
}


def default_seed(base_seed: int, window_id: str) -> int:
    """The certificate's RNG seed when none is given: derived from the protocol's base seed."""
    return derive_seed(base_seed, f"certify:{window_id}")


def _refuse_supplied_embodiment(evidence: Mapping[str, Any]) -> None:
    """E and the robotics gates come from the store, never from the evidence file."""
    axes = evidence.get("axes")
    if isinstance(axes, Mapping) and "E" in axes:
        raise EvalError(
            "evidence axes.E: certify computes E from the store's episodes and incidents; remove "
            "axes.E from the evidence file",
            key="axes.E",
        )
    if "robotics" in evidence:
        raise EvalError(
            "evidence robotics: certify computes E and the §7 gates from the store; remove the "
            "robotics section from the evidence file",
            key="robotics",
        )


def _best(results: list[GateResult]) -> GateResult | None:
    """The most favourable of several audits of one closure (any passing audit suffices)."""
    return min(results, key=lambda r: _PREFERENCE[r.verdict]) if results else None


def gate_evidence(pre: ScoreReport, store: StoreClosures | None = None) -> dict[str, Any]:
    """What the §7 gates need from the scoring core: P, W (normalized, with intervals), the
    maintenance and expansion closures (computed from the store, else the best external audit
    of each) and the audited delivery attestation (AAI-4)."""
    out: dict[str, Any] = {}
    for axis in ("P", "W"):
        if axis in pre.axes:
            out[axis] = pre.axes[axis].value
    out.update(gate_closures(store or StoreClosures(None, None), pre.closures, _best))
    delivery = pre.attestations.get("delivery")
    if delivery is not None:
        out["delivery_attestation"] = {
            "verdict": delivery["verdict"],
            "detail": f"audited by {delivery['auditor']} on {delivery['date']}"
            + (f": {delivery['detail']}" if delivery["detail"] else ""),
        }
    return out


def embodiment_evidence(report: EmbodimentReport, protocol_anchors: tuple[float, float]) -> dict:
    """The evidence `robotics` section: raw Ê with the protocol's anchors, and the §7 gates."""
    section: dict[str, Any] = {"gates": [g.to_json() for g in report.gates.values()]}
    raw = report.embodiment.raw
    if raw.value is not None:
        section["E"] = {
            "raw": raw.to_json(),
            "L": protocol_anchors[0],
            "U": protocol_anchors[1],
            "details": {"source": "embodiment report (joint bootstrap)"},
        }
    return section


@dataclass(frozen=True)
class Results:
    """The computed part of a certificate.

    Attributes:
        seed: the RNG seed every bootstrap derives from.
        embodiment: `EmbodimentReport.to_json()`.
        score: `ScoreReport.to_json()` (robotics profile, E and §7 gates merged in).
        level: {"level", "assigned", "procedure_level", "procedure_name", "capped", "reason"}.
        report: the EmbodimentReport object (for the report's tables and plots).
        closures: how each closure was decided (`certificate.closures.closures_section`).
    """

    seed: int
    embodiment: dict[str, Any]
    score: dict[str, Any]
    level: dict[str, Any]
    report: EmbodimentReport
    closures: dict[str, Any]

    def numbers(self) -> dict[str, Any]:
        """What `verify --db` recomputes and compares."""
        return {
            "embodiment": self.embodiment,
            "score": self.score,
            "level": self.level,
            "closures": self.closures,
        }


def assign_certified_level(score: ScoreReport, report: EmbodimentReport) -> dict[str, Any]:
    """The certified level: the level-assignment procedure's, capped at AAI-0 on an invalid
    window (§7: a critical incident invalidates the window, so nothing is certified on it)."""
    procedure = score.level
    if report.valid:
        level = procedure
        reason = f"highest level whose gates all pass ({score.level_name})"
    else:
        level = 0
        reason = (
            f"{report.invalid_reason}; no level above AAI-0 is certified on an invalid window "
            f"(the gates alone gave {LEVEL_LABEL.format(procedure)})"
        )
    return {
        "level": level,
        "assigned": LEVEL_LABEL.format(level),
        "procedure_level": procedure,
        "procedure_name": score.level_name,
        "capped": level != procedure,
        "reason": reason,
    }


def compute_results(
    inputs: WindowInputs,
    evidence: Mapping[str, Any] | None,
    seed: int,
    *,
    policy: str | None = None,
    gate_overrides: Mapping[str, Any] | None = None,
    ppi_floor: PPIFloor | None = None,
    missing_outcomes: str | None = None,
) -> Results:
    """Compute the embodiment report, the AAI score and the certified level.

    Args:
        inputs: the window's data (see `gather_inputs`).
        evidence: the software-only evidence (axes other than E, κ, closures, CHC, ...), or None.
        seed: RNG seed; default_rng(seed).spawn(3) gives the embodiment, scoring and closure
            streams.
        policy: the evaluated policy (default: see `embodiment.selection.choose_policy`).
        gate_overrides: §7 gate evidence given directly (`embodied-eval metrics --evidence`:
            "maintenance_closure", "expansion_closure", "P", "W", "delivery_attestation");
            each item given replaces what the scoring core and the store say.
        ppi_floor: AR_ppi's validity floor (default: this version's).
        missing_outcomes: the AR gate's rule for unscored first attempts (default: the
            protocol's).

    Returns:
        Results.
    """
    protocol = inputs.protocol
    supplied = copy.deepcopy(dict(evidence or {}))
    _refuse_supplied_embodiment(supplied)
    require_auditors(supplied)
    g_embodiment, g_score, g_closures = np.random.default_rng(seed).spawn(3)
    level = protocol.confidence
    resamples = protocol.bootstrap_resamples

    store = compute_store_closures(inputs, g_closures)
    merge_closures(supplied, store)
    pre = score_evidence(supplied, PROFILE, None, level=level, n_resamples=resamples)
    report = compute_embodiment(
        list(inputs.episodes),
        list(inputs.faults),
        list(inputs.incidents),
        list(inputs.exposure),
        protocol,
        rng=g_embodiment,
        evidence={**gate_evidence(pre, store), **dict(gate_overrides or {})},
        policy=policy,
        notes=inputs.notes,
        ppi_floor=ppi_floor,
        missing_outcomes=missing_outcomes,
    )
    merged = dict(supplied)
    merged["robotics"] = embodiment_evidence(
        report, (protocol.e_anchor_low, protocol.e_anchor_high)
    )
    score = score_evidence(merged, PROFILE, g_score, level=level, n_resamples=resamples)
    return Results(
        seed=seed,
        embodiment=report.to_json(),
        score=score.to_json(),
        level=assign_certified_level(score, report),
        report=report,
        closures=closures_section(store, evidence, score.to_json()),
    )


def evaluate_window(
    protocol: Protocol,
    db: str | os.PathLike[str] | None,
    *,
    window: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    gate_overrides: Mapping[str, Any] | None = None,
    seed: int | None = None,
    policy: str | None = None,
    notes: Sequence[str] = (),
    calibration_files: Sequence[str | os.PathLike[str]] = (),
    signer_fingerprint: str | None = None,
    check_inputs: Callable[[WindowInputs], None] | None = None,
    ppi_floor: PPIFloor | None = None,
    missing_outcomes: str | None = None,
) -> tuple[WindowInputs, Results]:
    """The one evaluation of a window: `embodied-eval metrics`, `ee.metrics`, `certify` and
    `verify --db` all compute their numbers here, so they agree exactly. No other module
    assembles a window's inputs (`gather_inputs`) or computes its results (`compute_results`).

    Args:
        protocol: the window's protocol. db: the store (default: $EMBODIED_EVAL_DB).
        window: the window id (default: the protocol's).
        evidence: scoring-core evidence (as `certify --evidence`), or None.
        gate_overrides: §7 gate evidence given directly (as `metrics --evidence`), or None.
        seed: the RNG seed (default: `default_seed(base_seed, window id)`, the certificate's).
        policy: the evaluated policy. notes: notes from the caller, reported first.
        calibration_files: drift-day calibration files to show in the maintenance closure
            after the store's records (`embodied_eval.embodiment.calibration_days`; `metrics` only: a
            certificate shows what the store holds, so `verify --db` recomputes it).
        signer_fingerprint: the certificate signer's key (`certify`; see `gather_inputs`).
        check_inputs: called with the window's inputs before anything is computed (`verify
            --db` refuses a window whose episodes are not the certified ones); raises EvalError.
        ppi_floor: AR_ppi's validity floor (default: this version's; `verify --db` passes the
            floor the certificate states).
        missing_outcomes: the AR gate's rule for unscored first attempts (default: the
            protocol's; `verify --db` passes "judged" for a certificate issued before it).
    Returns:
        (the window's inputs, the results).
    """
    inputs = gather_inputs(protocol, db, window=window, signer_fingerprint=signer_fingerprint)
    if check_inputs is not None:
        check_inputs(inputs)
    if notes:
        inputs = dataclasses.replace(inputs, notes=(*notes, *inputs.notes))
    if calibration_files:
        from embodied_eval.embodiment.calibration_days import file_day_calibrations

        given = file_day_calibrations(calibration_files, protocol.robot_id)
        inputs = dataclasses.replace(inputs, calibrations=(*inputs.calibrations, *given))
    chosen = seed if seed is not None else default_seed(protocol.base_seed, inputs.window_id)
    results = compute_results(
        inputs,
        evidence,
        chosen,
        policy=policy,
        gate_overrides=gate_overrides,
        ppi_floor=ppi_floor,
        missing_outcomes=missing_outcomes,
    )
    return inputs, results
