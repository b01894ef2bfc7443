"""Fault injection from the suite's recoverable-fault taxonomy, and how recovery is judged.

Taxonomy (`FAULT_KINDS`), what each injection does, and its recovery condition:

- `grasp_slip`: while a part is carried (held ≥ 10 steps), the weld is released and the fingers spring open to
  the part's width + 2 cm for `duration_steps`, so the part drops. Cleared when the part is
  grasped again.
- `perception_dropout`: for `duration_steps` the object pose in the observation is frozen and
  `object_visible` reads 0. Cleared when perception is back.
- `planner_dead_end`: while a part is carried near its start, a 2 cm pillar (top 0.30 m) appears
  midway along the transport path; it is reported in the observation (`obstacle`). Cleared when
  the object is closer to its goal than the pillar is, with no robot contact with the pillar above
  the safety warning level.
- `actuator_stall`: joint `joint` stops following its set-point for `duration_steps` (its servo
  holds where it stalled). Cleared when the stall is over and the TCP is back within 1 cm of its
  set-point.

Recovered autonomously ⇔ the fault was cleared before the episode ended *and* the episode then
ended `ok` with q ≥ q* (the robot actually went back to doing its job). `repair_s` is the
simulated time from injection to clearing; for a fault that was never recovered it is the time
from injection to the end of the episode (when an operator would have to take over).

Faults are off unless requested. Each request fires at most once per episode: at its `step`
(or the first step after it where the fault can apply), or, with `probability`, at each eligible
step with that chance drawn from the episode's fault generator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import Fault

FAULT_KINDS = ("grasp_slip", "perception_dropout", "planner_dead_end", "actuator_stall")
#: Default injection steps and durations (control steps at the nominal rate).
_DEFAULT_STEP = {
    "grasp_slip": 0,
    "perception_dropout": 40,
    "planner_dead_end": 0,
    "actuator_stall": 30,
}
_DEFAULT_DURATION = {
    "grasp_slip": 8,
    "perception_dropout": 20,
    "planner_dead_end": 0,
    "actuator_stall": 25,
}
OBSTACLE_TOP_M = 0.30
#: A grasp slip fires only once the part has been held this many control steps.
SLIP_AFTER_GRASP_STEPS = 10
#: A stall is cleared once the TCP is this close to its set-point again (m).
STALL_CLEAR_M = 0.01


@dataclass(frozen=True)
class FaultRequest:
    """One fault to inject: kind, when (step or per-step probability), how long, which joint."""

    kind: str
    step: int | None = None
    probability: float | None = None
    duration_steps: int | None = None
    joint: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise EvalError(
                f"faults: {self.kind!r} is not in the fault taxonomy ({', '.join(FAULT_KINDS)})",
                key="faults",
            )
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise EvalError("faults: probability must be in [0, 1]", key="faults")
        if self.step is not None and self.step < 0:
            raise EvalError("faults: step must be ≥ 0", key="faults")
        if not 0 <= self.joint <= 6:
            raise EvalError("faults: joint must be an arm joint index 0..6", key="faults")

    @property
    def duration(self) -> int:
        return _DEFAULT_DURATION[self.kind] if self.duration_steps is None else self.duration_steps


def fault_requests(
    faults: Iterable[str | FaultRequest], applicable: tuple[str, ...], family: str
) -> tuple[FaultRequest, ...]:
    """Normalize a `faults=` argument (kind names or requests); reject ones the family lacks."""
    out: list[FaultRequest] = []
    for item in faults:
        req = item if isinstance(item, FaultRequest) else FaultRequest(kind=str(item))
        if req.kind not in applicable:
            raise EvalError(
                f"faults: {req.kind!r} does not apply to family {family!r} "
                f"(applicable: {', '.join(applicable)})",
                key="faults",
            )
        out.append(req)
    return tuple(out)


@dataclass
class ActiveFault:
    """Book-keeping of one injected fault."""

    request: FaultRequest
    step: int
    t_s: float
    ends_step: int
    cleared_t: float | None = None
    detail: str = ""
    data: dict[str, float] = field(default_factory=dict)


@dataclass
class FaultView:
    """What the environment exposes to the injector each step (read-only snapshot)."""

    step: int
    t_s: float
    attached: bool
    attached_steps: int
    object_pos: np.ndarray
    object_start: np.ndarray
    goal: np.ndarray
    tcp: np.ndarray
    tcp_target: np.ndarray
    obstacle_contact_n: float
    obstacle_contact_warn_n: float


class FaultInjector:
    """Decides when requested faults fire and tracks whether they were cleared."""

    def __init__(self, requests: tuple[FaultRequest, ...], rng: np.random.Generator) -> None:
        self.requests = requests
        self.rng = rng
        self.pending = list(requests)
        self.active: list[ActiveFault] = []

    def due(self, view: FaultView) -> list[FaultRequest]:
        """Requests that fire this step (removed from pending)."""
        fired: list[FaultRequest] = []
        for req in list(self.pending):
            if not self._eligible(req, view):
                continue
            if req.probability is not None:
                if self.rng.random() >= req.probability:
                    continue
            elif view.step < (_DEFAULT_STEP[req.kind] if req.step is None else req.step):
                continue
            self.pending.remove(req)
            fired.append(req)
        return fired

    @staticmethod
    def _eligible(req: FaultRequest, view: FaultView) -> bool:
        if req.kind == "grasp_slip":
            # Slip while carrying, not at the instant of grasping.
            return view.attached and view.attached_steps >= SLIP_AFTER_GRASP_STEPS
        if req.kind == "planner_dead_end":
            near_start = float(np.linalg.norm(view.object_pos[:2] - view.object_start[:2])) < 0.05
            lifted = float(view.object_pos[2]) > float(view.object_start[2]) + 0.01
            return view.attached and near_start and lifted
        return True

    def start(self, req: FaultRequest, view: FaultView, detail: str, **data: float) -> ActiveFault:
        fault = ActiveFault(
            request=req,
            step=view.step,
            t_s=view.t_s,
            ends_step=view.step + req.duration,
            detail=detail,
            data=dict(data),
        )
        self.active.append(fault)
        return fault

    def running(self, kind: str, step: int) -> ActiveFault | None:
        """The injected fault of `kind` whose effect is still on at `step`, if any."""
        for fault in self.active:
            if fault.request.kind == kind and fault.step <= step < fault.ends_step:
                return fault
        return None

    def update_clearing(self, view: FaultView) -> None:
        """Mark faults whose recovery condition holds now (see the module docstring)."""
        for fault in self.active:
            if fault.cleared_t is not None or view.step < fault.ends_step:
                continue
            kind = fault.request.kind
            if kind == "grasp_slip":
                cleared = view.attached
            elif kind == "perception_dropout":
                cleared = True
            elif kind == "planner_dead_end":
                pillar = np.array([fault.data["x"], fault.data["y"]])
                if view.obstacle_contact_n > view.obstacle_contact_warn_n:
                    fault.data["blocked"] = 1.0
                past = np.linalg.norm(view.object_pos[:2] - view.goal[:2]) < np.linalg.norm(
                    pillar - view.goal[:2]
                )
                cleared = bool(past and not fault.data.get("blocked"))
            else:
                cleared = float(np.linalg.norm(view.tcp_target - view.tcp)) < STALL_CLEAR_M
            if cleared:
                fault.cleared_t = view.t_s

    def records(self, end_t: float, task_done: bool) -> tuple[Fault, ...]:
        """One `Fault` record per injected fault (see the module docstring for the rule)."""
        out = []
        for fault in self.active:
            recovered = fault.cleared_t is not None and task_done
            repair = (fault.cleared_t if recovered else end_t) - fault.t_s  # type: ignore[operator]
            note = fault.detail
            if not recovered:
                note += (
                    "; cleared but the task was not completed"
                    if fault.cleared_t is not None
                    else "; not cleared before the episode ended"
                )
            out.append(
                Fault(
                    kind=fault.request.kind,
                    recovered_autonomously=bool(recovered),
                    repair_s=round(max(0.0, float(repair)), 6),
                    step=fault.step,
                    detail=note,
                )
            )
        return tuple(out)
