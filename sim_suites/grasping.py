"""Whether the hand holds the part: contact grasping, and the weld of the *assisted* mode.

Two grasp modes (`GRASP_MODES`):

- `contact` (the default): nothing attaches the part to the hand. The force-limited fingers
  squeeze it and friction on the finger pads carries it, so a slippery or heavy part slips out
  as it would from a real gripper. The part counts as grasped while both fingers press on it
  with at least GRASP_CONTACT_N each (contact forces from the engine).
- `assisted`: additionally, when the fingers have closed on the part and it is centred at the TCP
  (`sim_suites.controller.grasp_closes`), the part is welded to the hand, and released when the
  fingers are commanded open past it. Grasped then means welded. A weld holds any part, so this
  mode measures the policy without the grasp physics; every episode run with it records
  `control["grasp_mode"] = "assisted"` and `certify` refuses such episodes unless the protocol
  declares the mode (`[sim] grasp = "assisted"`).
"""

from __future__ import annotations

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import GRASP_MODES
from sim_suites.controller import grasp_closes, grasp_releases
from sim_suites.engines.base import PhysicsBackend
from sim_suites.tasks import Task

#: Normal force (N) each finger must exert on the part for it to count as grasped: well above
#: resting contact, well below the grip force (20 N per finger nominally).
GRASP_CONTACT_N = 2.0


def check_grasp_mode(mode: str) -> str:
    """`mode` if it is one of GRASP_MODES, else an EvalError naming them."""
    if mode not in GRASP_MODES:
        raise EvalError(
            f"grasp: {mode!r} is not a grasp mode ({', '.join(GRASP_MODES)})", key="grasp"
        )
    return mode


def both_fingers_press(left_n: float, right_n: float) -> bool:
    """The contact grasp rule: each finger presses on the part with ≥ GRASP_CONTACT_N."""
    return left_n >= GRASP_CONTACT_N and right_n >= GRASP_CONTACT_N


class GraspTracker:
    """Tracks the grasp of one episode's part and counts how long it has been held."""

    def __init__(self, task: Task, mode: str = "contact") -> None:
        self.task = task
        self.width = task.grasp_width()
        self.mode = check_grasp_mode(mode)
        self.held_steps = 0

    def reset(self, mode: str) -> None:
        self.mode = check_grasp_mode(mode)
        self.held_steps = 0

    def holding(self, backend: PhysicsBackend) -> bool:
        """Whether the part is held right now (see the module docstring)."""
        if not self.task.graspable:
            return False
        if self.mode == "assisted":
            return getattr(backend, "attached", None) is not None
        return both_fingers_press(*backend.finger_contact_forces(self.task.grasped_name))

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
            slip fault is running (no weld can close).
        """
        if self.mode == "assisted":
            welded = getattr(backend, "attached", None) is not None
            if welded:
                if grasp_releases(finger_cmd, self.width):
                    backend.detach()
            elif (
                self.task.graspable
                and not slipping
                and grasp_closes(finger_cmd, opening, self.width, part_in_tcp)
            ):
                backend.attach(self.task.grasped_name)
        held = self.holding(backend)
        self.held_steps = self.held_steps + 1 if held else 0
        return held
