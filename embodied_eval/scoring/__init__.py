"""The shared AAI scoring core (seed §3.1–3.13, §4.5, §6, §7): pure functions on arrays.

Modules:
    calibration   φ_x (eq. 1), AxisScore
    axes          A (eq. 2), G (eq. 3), P (eq. 4), $ (eq. 11), E (embodiment report)
    memory        M (eqs. 5–6)
    tool_economy  T (eqs. 7–9)
    revision      R (eq. 10) and the difference-in-differences
    sociality     S (headroom-normalized lift, deadlock/chatter penalty)
    world_model   W (Brier against a reference predictor)
    composite     AAI-Index (eq. 12), weight profiles, intervals, U and AAI* (eq. 35)
    dynamics      κ = dC/dR (§3.3), window averages, time-based normalization
    curvature     eqs. 13–16 and 23
    links         links g, link steps (eqs. 17–18)
    continuous    Λ (eq. 31), escape-velocity bounds (§3.13)
    closures      maintenance and expansion closures (§3.4)
    chc           CHC-core gates (eq. 33), cognitive core (eq. 36)
    superintelligence  AAI-5 gates (eqs. 19–29)
    levels        AAI-1 … AAI-5 gates and level assignment (§3.5, Table 1, §7)
    frontier      delegability frontier (eqs. 38–41) and quality frontier (eq. 37)
    checks        strict ">", yes/no and "k of n" gate checks
    resampling    bootstrap indices (iid, moving block) and percentile intervals
    evidence      reading evidence sections (evidence_fields: numbers, quantities, lists)
    report        `score_evidence(evidence, profile, rng)` → `ScoreReport` (`.to_json()`)
"""

from embodied_eval.scoring.calibration import AXES, Anchors, AxisScore, calibrate
from embodied_eval.scoring.composite import (
    PROFILES,
    aai_index,
    jaggedness_adjusted_index,
    profile_weights,
    uniformity,
)
from embodied_eval.scoring.evidence import schema_path
from embodied_eval.scoring.evidence_fields import load_evidence
from embodied_eval.scoring.levels import LEVEL_NAMES, LevelPolicy, assign_level
from embodied_eval.scoring.report import ScoreReport, score_evidence

__all__ = [
    "AXES",
    "LEVEL_NAMES",
    "PROFILES",
    "Anchors",
    "AxisScore",
    "LevelPolicy",
    "ScoreReport",
    "aai_index",
    "assign_level",
    "calibrate",
    "jaggedness_adjusted_index",
    "load_evidence",
    "profile_weights",
    "schema_path",
    "score_evidence",
    "uniformity",
]
