"""Whether the hand holds the part, and the weld grasp model.

The weld rule (see `sim_suites.controller.grasp_closes`): when the fingers have closed on the
part and it is centred at the TCP, the part is welded to the hand; commanding the fingers open
past the part releases it.
"""

from __future__ import annotations

import numpy as np

from sim_suites.controller import grasp_closes, grasp_releases
from sim_suites.engines.base import PhysicsBackend
from sim_suites.tasks import Task


class GraspTracker:
    """Tracks the grasp of one episode's part and counts how long it has been held."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.width = task.grasp_width()
        self.held_steps = 0

    def reset(self) -> None:
        self.held_steps = 0

    @staticmethod
    def holding(backend: PhysicsBackend) -> bool:
        """Whether the part is held right now."""
        return getattr(backend, "attached", None) is not None

    def update(
        self,
        backend: PhysicsBackend,
        finger_cmd: float,
        opening: float,
        part_in_tcp: np.ndarray,
        slipping: bool,
    ) -> bool:
        """Apply the grasp rule after a control step; returns whether the part is held.

        Args:
            backend: the physics. finger_cmd: per-finger set-point, m. opening: measured
            finger opening, m. part_in_tcp: (3,) part centre minus TCP, m. slipping: a grasp
            slip fault is running (no grasp can close).
        """
        if self.holding(backend):
            if grasp_releases(finger_cmd, self.width):
                backend.detach()
        elif (
            self.task.graspable
            and not slipping
            and grasp_closes(finger_cmd, opening, self.width, part_in_tcp)
        ):
            backend.attach(self.task.object_name)
        held = self.holding(backend)
        self.held_steps = self.held_steps + 1 if held else 0
        return held
