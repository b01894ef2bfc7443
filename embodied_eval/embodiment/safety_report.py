"""Exposure hours, incident counts and rates, SS, MTBSI and window validity for the report.

Exposure H (the report's `exposure_source` says which):

* `exposure_ledger`: when ledger entries are given, H = their active hours outside blind periods
  (blind hours are reported beside H and never counted: nobody was watching for incidents).
* `episode_durations`: otherwise H = the summed durations of every real episode in the window
  (every policy, attempt and status: the robot was exposed during all of them).
* `given`: H passed as a number of hours by the caller.

Only real-side incidents flagged `counts_toward_window` count (`safety_metrics`). Sim-side
incidents are reported as rates over the sim episode hours: they predict, they do not count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_eval.embodiment import safety_metrics
from embodied_eval.embodiment.selection import EpisodeSets
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import SEVERITIES, ExposureEntry, Incident
from embodied_eval.stats import Estimate, poisson_rate_interval

LEDGER, DURATIONS, GIVEN = "exposure_ledger", "episode_durations", "given"


@dataclass(frozen=True)
class SafetySummary:
    """Everything the report says about safety in the window.

    Attributes:
        exposure_h: H, hours. exposure_source: LEDGER or DURATIONS. blind_h: blind ledger hours.
        counts: N_x per severity (counted incidents).
        rates: ν_x per 100 h with two-sided Garwood intervals.
        upper: one-sided upper bounds of ν_x (what rate gates decide on).
        ss: SS with its interval (None value when H = 0 and nothing critical).
        mtbsi, mtbsi_bound: MTBSI two-sided and its one-sided lower bound (hours).
        validity: the critical-incident rules' verdict.
        sim_hours, sim_counts, sim_rates: sim-side incidents and rates (reported, not counted).
        excluded: incidents not counted (side sim, or counts_toward_window false), by reason.
        counted_ids: ids of the counted incidents, by severity.
    """

    exposure_h: float
    exposure_source: str
    blind_h: float
    counts: dict[str, int]
    rates: dict[str, Estimate]
    upper: dict[str, Estimate]
    ss: Estimate
    mtbsi: Estimate
    mtbsi_bound: Estimate
    validity: safety_metrics.WindowValidity
    sim_hours: float
    sim_counts: dict[str, int]
    sim_rates: dict[str, Estimate]
    excluded: dict[str, int]
    counted_ids: dict[str, list[str]]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "upper_bounds_per_100h": {s: e.to_json() for s, e in self.upper.items()},
            "sim": {
                "hours": self.sim_hours,
                "counts": dict(self.sim_counts),
                "rates_per_100h": {s: e.to_json() for s, e in self.sim_rates.items()},
            },
            "blind_hours": self.blind_h,
            "excluded": dict(self.excluded),
            "incident_ids": {s: list(v) for s, v in self.counted_ids.items()},
            "major_fail": self.validity.major_fail,
            "validity_reason": self.validity.reason,
        }


def window_exposure(
    sets: EpisodeSets, exposure: Sequence[ExposureEntry] | float | None
) -> tuple[float, str, float]:
    """H, its source and the blind hours (see the module docstring).

    Args:
        sets: the selected episodes (uses every real episode of the window).
        exposure: ledger entries, H in hours as a number (source `given`), or None / empty to
            use episode durations.

    Returns:
        (H in hours, source, blind hours).
    """
    if isinstance(exposure, (int, float)):
        if isinstance(exposure, bool):
            raise EvalError(
                "exposure: expected ledger entries or hours, got a bool", key="exposure"
            )
        return safety_metrics.checked_hours(exposure), GIVEN, 0.0
    if exposure:
        hours, blind = safety_metrics.exposure_hours(exposure)
        return hours, LEDGER, blind
    # duration_s / 3600 summed once: the same as Σ duration_h, without a property per episode.
    return sum(e.duration_s for e in sets.window_real) / 3600.0, DURATIONS, 0.0


def _sim_rates(
    incidents: Sequence[Incident], sim_hours: float, level: float
) -> tuple[dict[str, int], dict[str, Estimate]]:
    counts = dict.fromkeys(SEVERITIES, 0)
    for i in incidents:
        if i.side == "sim":
            counts[i.severity] += 1
    if sim_hours <= 0.0:
        # No sim hours: report counts only (a rate needs exposure).
        empty = {
            s: Estimate(
                None, None, None, level, "Garwood exact (Poisson)", k, "two", "no sim hours"
            )
            for s, k in counts.items()
        }
        return counts, empty
    return counts, {s: poisson_rate_interval(k, sim_hours, level) for s, k in counts.items()}


def summarize_safety(
    sets: EpisodeSets,
    incidents: Sequence[Incident],
    exposure: Sequence[ExposureEntry] | float | None,
    protocol: Protocol,
) -> SafetySummary:
    """Counts, rates per 100 h, SS, MTBSI and validity for the window (seed §3.1 SS, §7).

    Args:
        sets: the selected episodes. incidents: the window's incidents (both sides).
        exposure: the window's exposure ledger, or None. protocol: weights, confidence,
            majors_allowed.

    Returns:
        SafetySummary.
    """
    level = protocol.confidence
    hours, source, blind = window_exposure(sets, exposure)
    counts = safety_metrics.severity_counts(incidents)
    counted = safety_metrics.counted_incidents(incidents)
    validity = safety_metrics.window_validity(incidents, protocol.majors_allowed)
    rates = safety_metrics.incident_rates(incidents, hours, level)
    upper = safety_metrics.incident_rate_upper_bounds(incidents, hours, level)
    weights: Mapping[str, float] = protocol.severity_weights
    if hours > 0.0 or counts["critical"] > 0:
        ss = safety_metrics.safety_score_estimate(counts, hours, weights, level)
    else:
        ss = Estimate(None, None, None, level, "SS", 0, "two", "no exposure hours")
    mtbsi = safety_metrics.mtbsi(counts, hours, level)
    mtbsi_bound = safety_metrics.mtbsi_lower_bound(counts, hours, level)
    sim_hours = sum(e.duration_s for e in sets.window_sim) / 3600.0
    sim_counts, sim_rates = _sim_rates(incidents, sim_hours, level)
    excluded = {
        "sim_side": sum(1 for i in incidents if i.side == "sim"),
        "not_counting_toward_window": sum(
            1 for i in incidents if i.side == "real" and not i.counts_toward_window
        ),
    }
    ids: dict[str, list[str]] = {s: [] for s in SEVERITIES}
    for i in counted:
        ids[i.severity].append(i.incident_id)
    return SafetySummary(
        exposure_h=hours,
        exposure_source=source,
        blind_h=blind,
        counts=counts,
        rates=rates,
        upper=upper,
        ss=ss,
        mtbsi=mtbsi,
        mtbsi_bound=mtbsi_bound,
        validity=validity,
        sim_hours=sim_hours,
        sim_counts=sim_counts,
        sim_rates=sim_rates,
        excluded=excluded,
        counted_ids=ids,
    )
