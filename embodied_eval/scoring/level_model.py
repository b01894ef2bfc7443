"""The level procedure's data: Table 1's thresholds, level names, the policy (which gates apply,
with what settings), the evidence a level is decided on and the assignment it returns (§3.5,
Table 1, §7). The gates themselves are in `embodied_eval.scoring.levels`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.scoring.calibration import AxisScore
from embodied_eval.scoring.chc import ChcThresholds
from embodied_eval.scoring.closures import ExpansionAudit, MaintenanceAudit
from embodied_eval.scoring.gate_checks import GateResult, Verdict
from embodied_eval.scoring.superintelligence import SuperintelligenceEvidence
from embodied_eval.stats.estimate import Estimate

#: Table 1 thresholds: level → axis → (comparison, threshold). E is optional at every level.
TABLE1: dict[int, dict[str, tuple[str, float]]] = {
    2: {"A": (">=", 0.6), "G": (">=", 0.3), "P": (">=", 0.5), "M": (">=", 0.5), "T": (">=", 0.5),
        "R": (">", 0.0), "S": (">=", 0.2), "W": (">=", 0.6), "$": (">=", 0.4)},
    3: {"A": (">=", 0.75), "G": (">=", 0.5), "P": (">=", 0.7), "M": (">=", 0.7), "T": (">=", 0.7),
        "R": (">=", 0.4), "S": (">=", 0.5), "W": (">=", 0.75), "$": (">=", 0.6)},
    4: {"A": (">=", 0.90), "G": (">=", 0.90), "P": (">=", 0.90), "M": (">=", 0.85),
        "T": (">=", 0.80), "R": (">=", 0.60), "S": (">=", 0.70), "W": (">=", 0.85),
        "$": (">=", 0.80)},
}  # fmt: skip

LEVEL_NAMES = {
    0: "AAI-0 Fixed Automation (RPA)",
    1: "AAI-1 Agentic LLM",
    2: "AAI-2 Self-Improving AI",
    3: "AAI-3 Baby AGI",
    4: "AAI-4 Full AGI",
    5: "AAI-5 Superintelligence",
}


@dataclass(frozen=True)
class KappaFamily:
    """κ̂ of one family (domain) on the default window, with its interval and the window length."""

    estimate: Estimate
    days: float | None

    def to_json(self) -> dict[str, Any]:
        return {"kappa": self.estimate.to_json(), "days": self.days}


@dataclass(frozen=True)
class LevelPolicy:
    """Thresholds of the level gates that a profile or window may publish ex ante.

    Attributes:
        robotics: apply the §7 robotics annex (robotics gates from the embodiment report).
        maintenance_alpha, maintenance_days: (α, Y) of the maintenance closure (0.8, 7; 14 for
            robotics).
        required_drifts: drift kinds the maintenance audit must cover.
        expansion_kinds: kinds of integrated capability that count for the expansion closure.
        expansion_epsilon: ε of the ablation check.
        kappa_days: minimum window (days) of a κ claim ("≥ 7 consecutive days").
        kappa_families_aai3: families with κ ≥ κ* for AAI-3 (multi-domain: 2).
        persistence_days: memory demonstrated over ≥ this many days for AAI-3 (30).
        min_tools_aai1, tool_success_aai1: AAI-1 "T ≥ 3 tools with ≥ 60 % success under mild
            shift".
        chc: thresholds of eq. (33) (and γ of eq. (36)).
        require_chc: apply the CHC-core gates to AAI-2 and above.
    """

    robotics: bool = False
    maintenance_alpha: float = 0.8
    maintenance_days: float = 7.0
    required_drifts: tuple[str, ...] = ()
    expansion_kinds: tuple[str, ...] = ("tool", "api")
    expansion_epsilon: float = 0.01
    kappa_days: float = 7.0
    kappa_families_aai3: int = 2
    persistence_days: float = 30.0
    min_tools_aai1: int = 3
    tool_success_aai1: float = 0.6
    chc: ChcThresholds = field(default_factory=ChcThresholds)
    require_chc: bool = True

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any) -> LevelPolicy:
        """The policy of a weight profile: robotics uses Y = 14 days under payload, friction,
        lighting and firmware drift, and counts new end-effectors, tools or perception pipelines
        as expansions (§7)."""
        base: dict[str, Any] = {}
        if profile == "robotics":
            base = {
                "robotics": True,
                "maintenance_days": 14.0,
                "required_drifts": ("payload", "friction", "lighting", "firmware"),
                "expansion_kinds": ("end_effector", "tool", "perception"),
            }
        base.update(overrides)
        return cls(**base)

    def to_json(self) -> dict[str, Any]:
        return {
            "robotics": self.robotics,
            "maintenance_alpha": self.maintenance_alpha,
            "maintenance_days": self.maintenance_days,
            "required_drifts": list(self.required_drifts),
            "expansion_kinds": list(self.expansion_kinds),
            "expansion_epsilon": self.expansion_epsilon,
            "kappa_days": self.kappa_days,
            "kappa_families_aai3": self.kappa_families_aai3,
            "persistence_days": self.persistence_days,
            "require_chc": self.require_chc,
            "chc": {
                "tau_v": self.chc.vrp, "tau_h": self.chc.hallucination,
                "tau_w": self.chc.wm_span, "tau_ms": self.chc.delayed_recall,
                "gamma_core": self.chc.core_min,
            },
        }  # fmt: skip


@dataclass(frozen=True)
class LevelEvidence:
    """Everything the level gates read. Absent items make their checks evidence_missing.

    Attributes:
        axes: AxisScore per symbol.
        index: AAI-Index with its interval.
        kappa: κ̂ per family.
        kappa_star: κ*, published ex ante.
        maintenance, expansion: closure audits.
        vrp, hallucination, wm_span, delayed_recall: CHC probes (eq. (33)).
        core_score: AAI_core of eq. (36).
        n_tools, tool_success_mild_shift: AAI-1 tool evidence.
        revision_auditable: R > 0 comes with auditable diffs (AAI-2).
        persistence_days: longest span over which memory was demonstrated (AAI-3 "M over ≥ 30
            days").
        robotics_gates: gate results of the embodiment report (names contain "AAI-n").
        superintelligence: AAI-5 evidence.
    """

    axes: Mapping[str, AxisScore] = field(default_factory=dict)
    index: Estimate | None = None
    kappa: Mapping[str, KappaFamily] = field(default_factory=dict)
    kappa_star: float | None = None
    maintenance: Sequence[MaintenanceAudit] = ()
    expansion: Sequence[ExpansionAudit] = ()
    vrp: Estimate | None = None
    hallucination: Estimate | None = None
    wm_span: Estimate | None = None
    delayed_recall: Estimate | None = None
    core_score: Estimate | None = None
    n_tools: int | None = None
    tool_success_mild_shift: Estimate | None = None
    revision_auditable: bool | None = None
    persistence_days: float | None = None
    robotics_gates: Sequence[GateResult] = ()
    superintelligence: SuperintelligenceEvidence | None = None


@dataclass(frozen=True)
class LevelGate:
    """One gate of a candidate level."""

    level: int
    gate: GateResult

    def to_json(self) -> dict[str, Any]:
        """The gate with its level; a check without its own id gets "aai<level>.<slug>"."""
        data = self.gate.to_json()
        for shown, check in zip(data["checks"], self.gate.checks, strict=True):
            shown["id"] = check.id or f"aai{self.level}.{shown['id']}"
        return {"level": self.level, **data}


@dataclass(frozen=True)
class LevelAssignment:
    """The assigned level and every gate checked on the way."""

    level: int
    gates: tuple[LevelGate, ...]

    @property
    def name(self) -> str:
        return LEVEL_NAMES[self.level]

    def blocking(self) -> list[LevelGate]:
        """Gates of the next level up that did not pass (what stands between this level and the
        next)."""
        return [
            g
            for g in self.gates
            if g.level == self.level + 1 and g.gate.verdict is not Verdict.PASS
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "level_name": self.name,
            "gates": [g.to_json() for g in self.gates],
            "blocking": [
                {"level": g.level, "name": g.gate.name, "verdict": g.gate.verdict.value}
                for g in self.blocking()
            ],
        }
