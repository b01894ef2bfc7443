"""The embodiment report: every embodiment metric of a window, with intervals, and the §7 gates.

`compute_embodiment` is the one entry point; `EmbodimentReport.to_json()` is the object that
`embodied-eval metrics --json` prints and the certificate embeds (documented in
`embodied_eval.cli.metrics`).

Bounds: reported intervals are two-sided at the protocol's confidence; gates decide on one-sided
bounds at the same confidence, listed under `gate_bounds`: AR exact Clopper–Pearson, RA exact
Clopper–Pearson, S2R by TOST on Newcombe's paired interval, rates by Garwood, MTBSI by chi-square,
E by the joint bootstrap (exact draws per resample, so SS's and S2R's uncertainty enter it).
AR_ppi replaces AR in E and the AR gate only above the PPI validity floor (`prediction`).
No reported interval is a point on finite data, except E = SS = 0 under a critical incident.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embodied_eval.canonical import sha256_hex
from embodied_eval.embodiment.beyond import (
    BaselineCalibration,
    DetectorCorrection,
    PolicyAgreement,
    baseline_calibration,
    detector_correction,
    policy_agreement,
)
from embodied_eval.embodiment.composite import EmbodimentEstimates, embodiment_estimates
from embodied_eval.embodiment.cross_engine import EngineAgreement, cross_engine_agreement
from embodied_eval.embodiment.every_attempt import EveryAttempt, every_attempt
from embodied_eval.embodiment.gates import robotics_gates
from embodied_eval.embodiment.judge import JudgeSummary, judge_summary
from embodied_eval.embodiment.prediction import (
    PPI,
    PredictionPoweredAR,
    prediction_powered_ar,
    prediction_powered_ar_bound,
)
from embodied_eval.embodiment.reliability import (
    RecoveryResult,
    actuation_failures,
    actuation_reliability,
    actuation_reliability_bound,
    actuation_reliability_with_retries,
    mean_time_between_failures,
    mean_time_to_repair,
    paired_sim_success_rate,
    real_faults,
    recovery_autonomy,
)
from embodied_eval.embodiment.safety_report import DURATIONS, SafetySummary, summarize_safety
from embodied_eval.embodiment.scene_gap import SceneCheck
from embodied_eval.embodiment.selection import (
    EpisodeSets,
    episode_counts,
    family_rates,
    select_episodes,
    with_sim_engine,
)
from embodied_eval.embodiment.throughput import (
    ControlQuality,
    PhysicalThroughput,
    control_quality,
    physical_throughput,
)
from embodied_eval.embodiment.transfer import (
    PAIRED,
    TransferResult,
    transfer_by_family,
    transfer_overall,
)
from embodied_eval.embodiment.unsafe_successes import (
    UnsafeSuccesses,
    fail_unsafe,
    unsafe_successes,
)
from embodied_eval.protocol.reader import (
    Protocol,
    example_protocol_path,
    load_protocol,
    protocol_from_mapping,
)
from embodied_eval.protocol.sensitivity import saturation_warnings
from embodied_eval.records import (
    SEVERITIES,
    Episode,
    ExposureEntry,
    Fault,
    Incident,
)
from embodied_eval.scoring.gate_checks import GateResult
from embodied_eval.stats import Estimate
from embodied_eval.stats.ppi_floor import PPIFloor

if TYPE_CHECKING:
    import pandas as pd

#: Label mixed into the protocol's base seed when no generator is passed (reproducible).
RNG_LABEL = "embodiment-report"
#: Columns of `EmbodimentReport.to_frame()` after "metric".
_FRAME_FIELDS = ("value", "low", "high", "level", "method", "n", "note")


def default_rng(protocol: Protocol) -> np.random.Generator:
    """The report's generator when none is passed: seeded from (base_seed, RNG_LABEL)."""
    label = int(sha256_hex(RNG_LABEL.encode())[:16], 16)
    return np.random.default_rng([protocol.base_seed, label])


@dataclass(frozen=True)
class EmbodimentReport:
    """All embodiment metrics of one window for one evaluated policy (see module docstring)."""

    protocol_name: str
    protocol_hash: str
    window: str
    policy: str | None
    episodes: dict[str, int]
    ar: Estimate
    ar_bound: Estimate
    ar_sim: Estimate
    ar_with_retries: Estimate
    transfer: TransferResult
    transfer_by_family: dict[str, TransferResult]
    transfer_by_engine: dict[str, TransferResult]
    sim_engine: str | None
    safety: SafetySummary
    recovery: RecoveryResult
    qc: ControlQuality
    phys: PhysicalThroughput
    mtbf: Estimate
    mttr: Estimate
    embodiment: EmbodimentEstimates
    gates: dict[str, GateResult]
    detector: DetectorCorrection | None = None
    baselines: BaselineCalibration | None = None
    agreement: PolicyAgreement | None = None
    notes: list[str] = field(default_factory=list)
    cross_engine: dict[str, EngineAgreement] = field(default_factory=dict)
    ar_ppi: PredictionPoweredAR | None = None
    scene_check: SceneCheck | None = None
    judge: JudgeSummary | None = None
    ar_as_judged: Estimate | None = None
    unsafe: UnsafeSuccesses | None = None
    every: EveryAttempt | None = None

    @property
    def valid(self) -> bool:
        return self.safety.validity.valid

    @property
    def invalid_reason(self) -> str | None:
        return None if self.valid else self.safety.validity.reason

    @property
    def ss(self) -> Estimate:
        return self.safety.ss

    def estimates(self) -> dict[str, Estimate]:
        """The report's estimates by name (headline metrics, rates per 100 h, gate bounds)."""
        s = self.safety
        out: dict[str, Estimate] = {
            "AR": self.ar,
            "AR_sim": self.ar_sim,
            "AR_with_retries": self.ar_with_retries,
            "S2R": self.transfer.s2r,
            "SS": s.ss,
            "RA": self.recovery.overall,
            "QC": self.qc.overall,
            "PHYS": self.phys.value,
            "MTBF_h": self.mtbf,
            "MTTR_h": self.mttr,
            "MTBSI_h": s.mtbsi,
            "E_raw": self.embodiment.raw,
            "E": self.embodiment.score,
        }
        if self.ar_ppi is not None:
            out["AR_ppi"] = self.ar_ppi.estimate
        for family, t in self.transfer_by_family.items():
            out[f"S2R[{family}]"] = t.s2r
        for sev in SEVERITIES:
            out[f"{sev}_per_100h"] = s.rates[sev]
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per estimate: metric, value, low, high, level, method, n, note."""
        import pandas as pd

        rows = [
            {"metric": name, **{k: est.to_json().get(k) for k in _FRAME_FIELDS}}
            for name, est in self.estimates().items()
        ]
        return pd.DataFrame(rows, columns=["metric", *_FRAME_FIELDS])

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (the `metrics --json` object; see `embodied_eval.cli.metrics`)."""
        s = self.safety
        return {
            "protocol": {"name": self.protocol_name, "hash": self.protocol_hash},
            "window": self.window,
            "policy": self.policy,
            "valid": self.valid,
            "invalid_reason": self.invalid_reason,
            "exposure_hours": s.exposure_h,
            "exposure_source": s.exposure_source,
            "episodes": dict(self.episodes),
            "AR": self.ar.to_json(),
            "AR_ppi": self.ar_ppi.to_json() if self.ar_ppi is not None else None,
            "AR_sim": self.ar_sim.to_json(),
            "AR_with_retries": self.ar_with_retries.to_json(),
            "S2R": self.transfer.to_json(),
            "S2R_by_family": {f: t.to_json() for f, t in self.transfer_by_family.items()},
            "S2R_by_engine": {k: t.to_json() for k, t in self.transfer_by_engine.items()},
            "sim_engine": self.sim_engine,
            "scene_check": self.scene_check.to_json() if self.scene_check else None,
            "cross_engine": {k: v.to_json() for k, v in self.cross_engine.items()},
            "SS": s.ss.to_json(),
            "rates_per_100h": {sev: s.rates[sev].to_json() for sev in SEVERITIES},
            "incidents": s.to_json(),
            "RA": self.recovery.to_json(),
            "QC": self.qc.to_json(),
            "PHYS": self.phys.to_json(),
            "MTBF_h": self.mtbf.to_json(),
            "MTTR_h": self.mttr.to_json(),
            "MTBSI_h": s.mtbsi.to_json(),
            "E_raw": self.embodiment.raw.to_json(),
            "E": self.embodiment.score.to_json(),
            "gate_bounds": {
                "AR": self.ar_bound.to_json(),
                "E": self.embodiment.bound.to_json(),
                "RA": self.recovery.bound.to_json(),
                "S2R": self.transfer.bound.to_json(),
                "MTBSI_h": s.mtbsi_bound.to_json(),
                "rates_per_100h": {sev: s.upper[sev].to_json() for sev in SEVERITIES},
            },
            "gates": {k: g.to_json() for k, g in self.gates.items()},
            "beyond": {
                "detector_correction": self.detector.to_json() if self.detector else None,
                "baselines": self.baselines.to_json() if self.baselines else None,
                "policy_agreement": self.agreement.to_json() if self.agreement else None,
            },
            "judge": None
            if self.judge is None
            else {
                **self.judge.to_json(self.ar.level),
                "AR_as_judged": self.ar_as_judged.to_json() if self.ar_as_judged else None,
            },
            "notes": list(self.notes),
            "unsafe_successes": self.unsafe.to_json() if self.unsafe is not None else None,
            "AR_every_attempt": self.every.to_json() if self.every is not None else None,
        }


def _ar_sim(
    sets: EpisodeSets,
    transfer: TransferResult,
    rng: np.random.Generator,
    resamples: int,
    level: float,
) -> Estimate:
    """AR_sim: on the paired sim episodes (cluster bootstrap) or the reweighted sim rate."""
    if transfer.mode == PAIRED:
        return paired_sim_success_rate(sets, rng, resamples, level)
    return transfer.ar_sim


def _mtbf_hours(sets: EpisodeSets, safety: SafetySummary) -> tuple[float, str]:
    """H for MTBF: the window's H when only the evaluated policy ran on the real side, else the
    evaluated policy's own real episode hours (other policies' failures are not its failures)."""
    if len(sets.real_all) == len(sets.window_real):
        return safety.exposure_h, safety.exposure_source
    return sum(e.duration_h for e in sets.real_all), "the evaluated policy's episode durations"


def as_protocol(
    protocol: Protocol | Mapping[str, Any] | str | os.PathLike[str] | None,
) -> Protocol:
    """A `Protocol` from itself, a TOML file path, a parsed mapping, or None (the example)."""
    if isinstance(protocol, Protocol):
        return protocol
    if protocol is None:
        return load_protocol(example_protocol_path())
    if isinstance(protocol, Mapping):
        return protocol_from_mapping(protocol)
    return load_protocol(Path(protocol))


def compute_embodiment(
    episodes: Sequence[Episode],
    faults: Sequence[Fault],
    incidents: Sequence[Incident],
    exposure: Sequence[ExposureEntry] | float | None,
    protocol: Protocol | Mapping[str, Any] | str | os.PathLike[str] | None,
    *,
    rng: np.random.Generator | None = None,
    evidence: Mapping[str, Any] | None = None,
    policy: str | None = None,
    resamples: int | None = None,
    notes: Sequence[str] = (),
    window: str | None = None,
    ppi_floor: PPIFloor | None = None,
    missing_outcomes: str | None = None,
) -> EmbodimentReport:
    """Every embodiment metric of a window (seed §3.1 E, §7), with intervals and the §7 gates.

    Args:
        episodes: the window's episodes, both sides, every policy and attempt.
        faults: extra fault records naming their episode (faults stored in the episodes are
            used too; a fault present in both is counted once).
        incidents: the window's incidents (both sides; only counted ones enter SS).
        exposure: the window's exposure ledger, H in hours as a number, or None to use real
            episode durations.
        protocol: the frozen protocol (confidence, resamples, weights, anchors, price card,
            majors_allowed, baselines): a `Protocol`, a protocol file path, its parsed mapping,
            or None for the packaged example protocol.
        rng: generator for every bootstrap; default seeded from the protocol (`default_rng`).
        evidence: scoring-core evidence for the gates (see `embodiment.gates.EVIDENCE_KEYS`).
        policy: the evaluated policy (default: see `selection.choose_policy`).
        resamples: bootstrap resamples (default: the protocol's `bootstrap_resamples`).
        notes: notes from whoever loaded the data (e.g. "incident log not installed").
        window: the window id reported (default: the protocol's).
        ppi_floor: AR_ppi's validity floor (default: this version's; `verify --db` passes the
            one a certificate was issued under).
        missing_outcomes: the AR gate's rule for unscored first attempts (default: the
            protocol's `[real] missing_outcomes`; `verify --db` passes "judged" for a
            certificate issued before the rule existed).

    Returns:
        EmbodimentReport.
    """
    protocol = as_protocol(protocol)
    level = protocol.confidence
    r = int(resamples if resamples is not None else protocol.bootstrap_resamples)
    gen = rng if rng is not None else default_rng(protocol)
    # One child generator per metric: adding a metric does not change the others' draws.
    g_ar, g_sim, g_e, g_qc, g_phys, g_det, g_pol, g_judge = gen.spawn(8)
    notes = list(notes)

    sets = select_episodes(episodes, protocol, policy)
    unsafe = unsafe_successes(sets.real, incidents, level, protocol.unsafe_successes)
    sets = fail_unsafe(sets, unsafe)  # `[real] unsafe_successes = "fail"`: failures for AR
    if unsafe.rule == "fail" and unsafe.episode_ids:
        notes.append(f"{len(unsafe.episode_ids)} unsafe success(es) count as failures for AR")
    if sets.scene_check is not None and (scene_note := sets.scene_check.note()):
        notes.append(scene_note)
    if sets.policy is None:
        notes.append("no real episode of a non-baseline policy: AR, S2R and E are undefined")
    ar = actuation_reliability(sets, g_ar, r, level)
    ar_bound = actuation_reliability_bound(sets, level)
    use_ppi = protocol.ar_estimator == PPI
    ar_ppi = prediction_powered_ar(sets, level, use_ppi, classical=ar, floor=ppi_floor)
    ar_in_e, ppi_parts = ar, None
    if use_ppi:
        if ar_ppi.result is None:
            notes.append(
                "protocol ar_estimator = 'ppi' but AR_ppi is undefined (fewer than 2 pairs): "
                "E and the AR gate use the classical AR"
            )
        elif not ar_ppi.valid:
            notes.append(
                "protocol ar_estimator = 'ppi' but AR_ppi is below its validity floor ("
                + "; ".join(ar_ppi.below_floor)
                + "): E and the AR gate use the classical AR"
            )
        else:
            notes.append(
                "protocol ar_estimator = 'ppi': E and the AR gate bound use AR_ppi (prediction-"
                "powered, sim + paired real) instead of the classical AR"
            )
            ar_in_e = ar_ppi.estimate
            ar_bound = prediction_powered_ar_bound(sets, level, ppi_floor)
            ppi_parts = (ar_ppi.parts, ar_ppi.result.lam)
    ar_as_judged = ar
    judge = judge_summary(
        sets.real,
        protocol.judge_correction and not use_ppi,
        g_judge,
        r,
        level,
        sets.arrays,
        window_real=sets.real_all,
    )
    if protocol.judge_correction and use_ppi:
        notes.append("judge correction is not combined with ar_estimator = 'ppi': AR as judged")
    if judge.note:
        notes.append(f"judge: {judge.note}")
    if judge.corrected is not None and judge.corrected_bound is not None:
        ar = ar_in_e = judge.corrected
        ar_bound = dataclasses.replace(judge.corrected_bound, high=1.0)
    every = every_attempt(sets.real_all, level, missing_outcomes or protocol.missing_outcomes)
    if every.gate_uses_worst and judge.corrected is None and ppi_parts is None:
        ar_bound = every.worst_bound
        notes.append(
            f"AR gate: every pair's first attempt counts ({every.counts['policy_error']} policy "
            f"error(s) and {every.unknown} unknown outcome(s) as failures): worst-case bound"
        )
    ar_retries = actuation_reliability_with_retries(sets, level)
    transfer = transfer_overall(sets, level)
    by_family = transfer_by_family(sets, level)
    by_engine = {sets.sim_engine: transfer} if sets.sim_engine is not None else {}
    for other in sets.sim_engines:
        if other != sets.sim_engine:
            by_engine[other] = transfer_overall(with_sim_engine(sets, other, protocol), level)
    if len(sets.sim_engines) > 1:
        notes.append(
            f"S2R pairs the real side with sim engine {sets.sim_engine}; other engines in "
            "S2R_by_engine"
        )
    if transfer.note:
        notes.append(f"S2R: {transfer.note}")
    ar_sim = _ar_sim(sets, transfer, g_sim, r, level)

    safety = summarize_safety(sets, incidents, exposure, protocol)
    if safety.exposure_source == DURATIONS:
        notes.append("exposure H = summed real episode durations (no exposure ledger given)")
    if safety.blind_h > 0:
        notes.append(f"{safety.blind_h:g} blind ledger hour(s) excluded from H")
    if not safety.validity.valid:
        notes.append(safety.validity.reason)

    fault_list, ignored = real_faults(sets, faults)
    if ignored:
        notes.append(f"{ignored} fault record(s) name no episode of this window: not counted")
    recovery = recovery_autonomy(fault_list, level)
    mttr = mean_time_to_repair(fault_list, level)
    n_fail, causes = actuation_failures(sets.real_all)
    mtbf_h, mtbf_source = _mtbf_hours(sets, safety)
    mtbf = mean_time_between_failures(
        n_fail, mtbf_h, level, hours_source=mtbf_source, causes_recorded=causes
    )

    qc = control_quality(sets.real, protocol, g_qc, r, level)
    phys = physical_throughput(sets.real_all, protocol, g_phys, r, level)
    emb = embodiment_estimates(
        sets,
        ar_in_e,
        safety,
        transfer,
        weights=protocol.severity_weights,
        anchors=(protocol.e_anchor_low, protocol.e_anchor_high),
        rng=g_e,
        resamples=r,
        level=level,
        ar_ppi=ppi_parts,
        judge_accuracy=judge.resamples,
    )
    gates = robotics_gates(
        embodiment=emb,
        recovery=recovery,
        safety=safety,
        transfer=transfer,
        transfer_by_family=by_family,
        level=level,
        evidence=evidence,
    )
    baselines = baseline_calibration(sets.first_scored, protocol, sets.policy, level)
    if baselines is not None:
        notes.extend(f"baselines: {w}" for w in baselines.warnings)
    notes.extend(saturation_warnings(family_rates(sets), who="the evaluated policy"))
    return EmbodimentReport(
        protocol_name=protocol.name,
        protocol_hash=protocol.protocol_hash,
        window=window if window is not None else protocol.window_id,
        policy=sets.policy,
        episodes=episode_counts(sets),
        ar=ar,
        ar_bound=ar_bound,
        ar_sim=ar_sim,
        ar_with_retries=ar_retries,
        transfer=transfer,
        transfer_by_family=by_family,
        transfer_by_engine=by_engine,
        cross_engine=cross_engine_agreement(sets.sim_every_engine, level),
        sim_engine=sets.sim_engine,
        safety=safety,
        recovery=recovery,
        qc=qc,
        phys=phys,
        mtbf=mtbf,
        mttr=mttr,
        embodiment=emb,
        gates=gates,
        detector=detector_correction(sets.real, g_det, r, level),
        baselines=baselines,
        agreement=policy_agreement(sets.first_scored, g_pol, r, level),
        notes=notes,
        ar_ppi=ar_ppi,
        scene_check=sets.scene_check,
        judge=judge,
        ar_as_judged=ar_as_judged,
        unsafe=unsafe,
        every=every,
    )
