"""The base of the scripted reference policies: waypoint following, waiting and shared phases.

`ScriptedPolicy` keeps the phase bookkeeping, holds still while perception is out or the arm
lags its set-point (a stall), packs actions, and provides the phases the grasping scripts share
(approach, close, release, retreat). Each family's script is in its module of
`sim_suites.families`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sim_suites.controller import V_MAX_MPS

#: Proportional gain of waypoint following (1/s).
GAIN = 6.0
#: The TCP lagging its set-point by more than this (m) means the arm is stalled.
STALL_LAG_M = 0.035
#: Longest wait for a lagging arm to catch up before retrying anyway (control steps).
STALL_WAIT_STEPS = 40
#: Height the grasping scripts retreat to after releasing (m).
RETREAT_Z = 0.25
OPEN, CLOSED = 1.0, -1.0

Obs = Mapping[str, np.ndarray]


def toward(tcp: np.ndarray, target: np.ndarray, speed: float = 1.0) -> np.ndarray:
    """Normalized velocity action (3,) moving the TCP toward `target`, at most `speed`·V_MAX."""
    v = GAIN * (target - tcp) / V_MAX_MPS
    norm = float(np.linalg.norm(v))
    if norm > speed:
        v *= speed / norm
    return v


class ScriptedPolicy:
    """Base class: phase bookkeeping, waiting on dropouts and stalls, action packing."""

    name = "sim_suites.policies:scripted"

    def __init__(self) -> None:
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.phase = "start"
        self.phase_steps = 0
        self.plan_depth = 1
        self.gripper = OPEN
        self.lag_wait = 0
        self.memory: dict[str, np.ndarray] = {}

    def goto(self, phase: str) -> None:
        if phase != self.phase:
            if phase == "approach":
                self.memory.clear()  # a new grasp: forget estimates tied to the old one
            self.phase = phase
            self.phase_steps = 0
            self.plan_depth += 1

    def act(self, obs: Obs) -> np.ndarray:
        self.phase_steps += 1
        if self.waiting(obs):
            # Wait and retry: hold position, keep the gripper as it is.
            return self.pack(np.zeros(3))
        return self.pack(self.plan(obs))

    def waiting(self, obs: Obs) -> bool:
        """Perception is out, or the arm lags its set-point (stalled): hold still.

        A lag that outlasts STALL_WAIT_STEPS is not a stall that waiting will cure (e.g. a sagging
        arm under an unmodelled load): the policy then carries on.
        """
        if obs["object_visible"][0] < 0.5:
            return True
        lag = float(np.linalg.norm(obs["tcp_target"] - obs["tcp_pos"]))
        if lag <= STALL_LAG_M:
            self.lag_wait = 0
            return False
        self.lag_wait += 1
        return self.lag_wait <= STALL_WAIT_STEPS

    def plan(self, obs: Obs) -> np.ndarray:
        raise NotImplementedError

    def pack(self, velocity: np.ndarray) -> np.ndarray:
        return np.concatenate([np.clip(velocity, -1.0, 1.0), [self.gripper]]).astype(np.float32)

    @staticmethod
    def near(tcp: np.ndarray, target: np.ndarray, tol: float) -> bool:
        return float(np.linalg.norm(target - tcp)) < tol

    # Phases shared by the grasping scripts (approach -> descend -> close -> ... -> release ->
    # retreat); each returns the TCP velocity (3,) and moves to the next phase when done.

    def approach_phase(
        self, obs: Obs, point: np.ndarray, hover: float, xy_tol: float
    ) -> np.ndarray:
        """Open the gripper and go `hover` m above `point`; descend once open and within `xy_tol`."""
        tcp = obs["tcp_pos"]
        self.gripper = OPEN
        above = point + np.array([0.0, 0.0, hover])
        if obs["gripper_width"][0] > 0.07 and self.near(tcp[:2], above[:2], xy_tol):
            self.goto("descend")
        return toward(tcp, above)

    def close_phase(self, obs: Obs, point: np.ndarray, then: str, timeout: int) -> np.ndarray:
        """Close on `point`; go to phase `then` once grasped, or approach again after `timeout`."""
        self.gripper = CLOSED
        if obs["grasped"][0] > 0.5:
            self.goto(then)
        elif self.phase_steps > timeout:
            self.goto("approach")
        return toward(obs["tcp_pos"], point, 0.3)

    def release_phase(self, obs: Obs) -> np.ndarray:
        """Open the gripper in place; retreat once it is open (or after 20 steps)."""
        self.gripper = OPEN
        if obs["gripper_width"][0] > 0.06 or self.phase_steps > 20:
            self.goto("retreat")
        return np.zeros(3)

    @staticmethod
    def retreat_phase(obs: Obs) -> np.ndarray:
        """Rise straight up to RETREAT_Z."""
        tcp = obs["tcp_pos"]
        return toward(tcp, np.array([tcp[0], tcp[1], RETREAT_Z]))
