"""What an injected fault does to the running episode: the physics and perception side.

`FaultInjector` (sim_suites.faults) decides when a fault fires and when it is cleared; this module
carries the effects out on the backend and on what the policy perceives: a grasp slip releases the
part, a perception dropout freezes the object pose, a planner dead end moves the pillar onto the
transport path, an actuator stall holds one joint's set-point.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sim_suites.engines.base import ROBOT, PhysicsBackend
from sim_suites.faults import OBSTACLE_TOP_M, FaultInjector, FaultRequest, FaultView
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.tasks import Task


class FaultEffects:
    """The effects of the faults of one episode (see the module docstring).

    Attributes:
        injector: when faults fire and clear.
        frozen: the (point, quat) perception is stuck at during a dropout, else None.
        obstacle: (4,) [x, y, top_z, active] of the pillar as the observation reports it.
    """

    def __init__(self, injector: FaultInjector) -> None:
        self.injector = injector
        self.frozen: tuple[np.ndarray, np.ndarray] | None = None
        self.obstacle = np.zeros(4)

    @property
    def idle(self) -> bool:
        """Nothing requested is pending or running: no fault can fire or clear this step."""
        return not (self.injector.pending or self.injector.active)

    def step(
        self,
        backend: PhysicsBackend,
        task: Task,
        view: FaultView,
        q: np.ndarray,
        quat: np.ndarray,
    ) -> list[str]:
        """Fire due faults, freeze perception during a dropout, mark cleared faults.

        Args:
            backend: the physics of the episode. task: its task. view: the state faults see.
            q: (9,) joint positions. quat: (4,) current object orientation.
        Returns:
            the kinds injected this step.
        """
        injector = self.injector
        injected = [self._inject(backend, task, req, view, q) for req in injector.due(view)]
        dropout = injector.running("perception_dropout", view.step)
        if dropout is None:
            self.frozen = None
        elif self.frozen is None:
            self.frozen = (view.object_pos.copy(), quat.copy())
        injector.update_clearing(view)
        return injected

    def _inject(
        self,
        backend: PhysicsBackend,
        task: Task,
        req: FaultRequest,
        view: FaultView,
        q: np.ndarray,
    ) -> str:
        kind = req.kind
        injector = self.injector
        if kind == "grasp_slip":
            backend.detach()
            injector.start(req, view, "grasp released; part dropped")
        elif kind == "perception_dropout":
            injector.start(req, view, f"object pose frozen for {req.duration} steps")
        elif kind == "planner_dead_end":
            xy = task.dead_end_xy(view.object_start, view.goal)
            half = OBSTACLE_TOP_M / 2
            backend.move_body("obstacle", np.array([xy[0], xy[1], half]))
            self.obstacle = np.array([xy[0], xy[1], OBSTACLE_TOP_M, 1.0])
            injector.start(
                req, view, "pillar blocks the transport path", x=float(xy[0]), y=float(xy[1])
            )
        else:
            joint = req.joint
            injector.start(
                req,
                view,
                f"joint {joint + 1} stalled for {req.duration} steps",
                hold=float(q[joint]),
            )
        return kind


def obstacle_contact_n(contacts: Mapping[tuple[str, str], float]) -> float:
    """Contact force (N) between the robot and the pillar this step."""
    return contacts.get((ROBOT, "obstacle"), 0.0)


def obstacle_warn_n(safety: SafetyLimits) -> float:
    """Robot–pillar force (N) above which a dead end counts as not cleanly recovered."""
    return safety.contact_warn_fraction * safety.fixture_contact_limit_n
