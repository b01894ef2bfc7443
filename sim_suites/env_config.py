"""The per-episode configuration of `PandaTaskEnv`, validated once when it is set."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from embodied_eval.errors import EvalError
from sim_suites.faults import FaultRequest, fault_requests
from sim_suites.grasping import check_grasp_mode
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.tasks import Task
from sim_suites.variations import (
    DEFAULT_RANDOMIZATION,
    RealityGap,
    check_drift,
    variations_from_ranges,
)


@dataclass(frozen=True)
class EnvConfig:
    """Per-episode configuration of the environment (see `PandaTaskEnv.configure`)."""

    randomization: Mapping[str, Sequence[float]]
    drift: Mapping[str, Any]
    reality_gap: RealityGap | None
    safety: SafetyLimits
    faults: tuple[FaultRequest, ...]
    max_steps: int
    target_quality: float
    qc_tolerance_m: float
    grasp: str = "contact"


def env_config(
    task: Task,
    *,
    randomization: Mapping[str, Sequence[float]] | None = None,
    drift: Mapping[str, Any] | None = None,
    reality_gap: RealityGap | None = None,
    safety: SafetyLimits | None = None,
    faults: Iterable[str | FaultRequest] = (),
    max_steps: int = 400,
    target_quality: float | None = None,
    qc_tolerance_m: float | None = None,
    grasp: str = "contact",
) -> EnvConfig:
    """Check every setting against `task` and return the configuration (EvalError if bad).

    None means the default: mild DR (`DEFAULT_RANDOMIZATION`), no drift, the task's own q* and
    QC tolerance, default safety limits. `grasp` is a mode of `sim_suites.grasping`.
    """
    ranges = DEFAULT_RANDOMIZATION if randomization is None else dict(randomization)
    variations_from_ranges(ranges)  # validates
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise EvalError(f"max_steps: expected a whole number ≥ 1, got {max_steps!r}")
    q_star = task.spec.target_quality if target_quality is None else target_quality
    if not 0.0 <= q_star <= 1.0:
        raise EvalError("target_quality: must be in [0, 1]", key="target_quality")
    tol = task.spec.qc_tolerance_m if qc_tolerance_m is None else qc_tolerance_m
    if tol <= 0:
        raise EvalError("qc_tolerance: must be > 0", key="qc_tolerance")
    return EnvConfig(
        randomization=ranges,
        drift=check_drift(drift or {}),
        reality_gap=reality_gap,
        safety=safety or SafetyLimits(),
        faults=fault_requests(faults, task.faults, task.family),
        max_steps=max_steps,
        target_quality=float(q_star),
        qc_tolerance_m=float(tol),
        grasp=check_grasp_mode(grasp),
    )


def with_reset_options(config: EnvConfig, task: Task, options: Mapping[str, Any]) -> EnvConfig:
    """The configuration with `reset(options=...)` applied (only "faults" is accepted)."""
    unknown = set(options) - {"faults"}
    if unknown:
        raise EvalError(f"reset options: unknown key(s) {', '.join(sorted(unknown))}")
    if "faults" not in options:
        return config
    return replace(config, faults=fault_requests(options["faults"], task.faults, task.family))
