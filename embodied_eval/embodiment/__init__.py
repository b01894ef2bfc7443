"""Embodiment metrics of a window (seed §3.1 E, §7) and the robotics gates AAI-2 … AAI-4.

`compute_embodiment(episodes, faults, incidents, exposure, protocol)` returns an
`EmbodimentReport` with AR, AR_sim, S2R (overall and per family), incident rates, SS, RA, QC,
$_phys, MTBF, MTTR, MTBSI, Ê and E, each with its interval and method, and the §7 gates.

Modules: `selection` (which episodes count), `reliability` (AR, RA, MTBF, MTTR), `transfer`
(S2R), `safety` (exposure, incidents, SS, MTBSI, validity), `throughput` (QC, $_phys),
`composite` (Ê, E and the joint bootstrap), `gates` (§7), `beyond` (detector correction,
baseline calibration, policy-level agreement), `report` (the report and its JSON).
"""

from embodied_eval.embodiment.composite import embodiment_raw, embodiment_score
from embodied_eval.embodiment.gates import EVIDENCE_KEYS, robotics_gates
from embodied_eval.embodiment.report import EmbodimentReport, compute_embodiment

__all__ = [
    "EVIDENCE_KEYS",
    "EmbodimentReport",
    "compute_embodiment",
    "embodiment_raw",
    "embodiment_score",
    "robotics_gates",
]
