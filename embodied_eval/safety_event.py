"""The safety event record: one safety measurement from a monitor (sim) or the robot's safety
system (real). Part of the data contract; `embodied_eval.records` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from embodied_eval.errors import EvalError
from embodied_eval.record_base import Record, _check_enum, _check_number

SAFETY_EVENT_KINDS = (
    "protective_stop",
    "emergency_stop",
    "separation",
    "tcp_speed",
    "contact",
    "joint_limit",
    "workspace",
    "damage",
    "injury",
    "safety_function_failure",
)
CONTACT_TYPES = ("transient", "quasi_static")


#: Largest value each measurement can physically take in a robot workcell; a larger one is a typo
#: or a unit slip (e.g. N entered as mN) and is refused rather than classified. Separation: 1 km;
#: speeds: 100 m/s (an order of magnitude above any industrial arm); force: 1 MN; pressure:
#: 10⁶ N/cm²; damage cost: 10¹² in the protocol's currency.
PHYSICAL_CEILINGS: dict[str, float] = {
    "separation_m": 1_000.0,
    "protective_separation_m": 1_000.0,
    "tcp_speed_mps": 100.0,
    "speed_limit_mps": 100.0,
    "contact_force_n": 1e6,
    "contact_pressure_ncm2": 1e6,
    "force_limit_n": 1e6,
    "damage_cost": 1e12,
}


@dataclass(frozen=True)
class SafetyEvent(Record):
    """A safety measurement from a monitor (sim) or the robot's safety system (real).

    The incident log's classifier turns these into incidents with a severity and the rules fired.
    Only the fields relevant to `kind` are set. Units: metres, m/s, newtons, N/cm², seconds.

    Attributes:
        kind: one of SAFETY_EVENT_KINDS.
        t_s: time since the episode started, s. step: control step index.
        stop_category: IEC 60204-1 stop category 0/1/2 for stops.
        separation_m / protective_separation_m: measured separation vs required S_p.
        tcp_speed_mps / speed_limit_mps / reduced_speed_required: speed vs limit.
        contact_force_n / contact_pressure_ncm2 / body_region / contact_type / contact_with /
            permitted: a contact (with a person: body_region names the ISO/TS 15066 region).
        force_limit_n: the contact-force limit the robot's (or monitor's) safety function applied,
            N — for a contact with the environment, the limit the classifier states beside the
            measured force (the threshold table's applies when it is stricter or this is unset).
        damage_cost / injury_level: property damage in currency units, injury level
            (`none`, `first_aid`, `medical_treatment`, `days_away`, `restricted_work`,
            `loss_of_consciousness`, `hospitalisation`, `amputation`, `loss_of_eye`, `death`).
        detail: free text; source_rule: the monitor's rule id.
    """

    kind: str
    t_s: float = 0.0
    step: int | None = None
    stop_category: int | None = None
    separation_m: float | None = None
    protective_separation_m: float | None = None
    tcp_speed_mps: float | None = None
    speed_limit_mps: float | None = None
    reduced_speed_required: bool = False
    contact_force_n: float | None = None
    contact_pressure_ncm2: float | None = None
    force_limit_n: float | None = None
    body_region: str | None = None
    contact_type: str | None = None
    contact_with: str | None = None
    permitted: bool = False
    damage_cost: float | None = None
    injury_level: str | None = None
    detail: str = ""
    source_rule: str = ""

    def __post_init__(self) -> None:
        self._plain()
        _check_enum("kind", self.kind, SAFETY_EVENT_KINDS)
        _check_number("t_s", self.t_s, low=0.0)
        if self.step is not None:
            _check_number("step", self.step, low=0, integer=True)
        if self.stop_category is not None and self.stop_category not in (0, 1, 2):
            raise EvalError("stop_category: expected 0, 1 or 2", key="stop_category")
        for name, ceiling in PHYSICAL_CEILINGS.items():
            value = getattr(self, name)
            if value is not None:
                _check_number(name, value, low=0.0, high=ceiling)
        if self.force_limit_n is not None and self.force_limit_n <= 0:
            raise EvalError("force_limit_n: a force limit must be > 0 N", key="force_limit_n")
        if self.contact_type is not None:
            _check_enum("contact_type", self.contact_type, CONTACT_TYPES)
