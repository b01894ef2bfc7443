"""Scripted reference policies: one waypoint state machine per family, with recovery.

They read only the observation (so they work unchanged against the twin robot) and command TCP
velocities with a proportional law toward the current waypoint. Recovery behaviours:

- grasp slip: the `grasped` flag drops while carrying → go back and re-grasp.
- perception dropout: `object_visible` = 0 → hold still until the object is seen again.
- planner dead end: an `obstacle` is reported on the path → re-plan the transfer over it.
- actuator stall: the TCP falls behind its set-point by more than STALL_LAG_M → stop commanding
  motion (wait) and retry once it has caught up.

`plan_depth` counts the plan segments executed (re-plans add segments).
"""

from __future__ import annotations

import numpy as np

from sim_suites.controller import V_MAX_MPS
from sim_suites.policies.mobile_script import MobilePickPlaceScript
from sim_suites.policies.script_base import (
    CLOSED,
    GAIN,
    OPEN,
    PEG_FILTER,
    RETREAT_Z,
    STALL_LAG_M,
    STALL_WAIT_STEPS,
    Obs,
    ScriptedPolicy,
    toward,
)
from sim_suites.policies.tool_script import ToolScript
from sim_suites.tasks.families import HOLE_DEPTH, PEG_HALF

__all__ = [
    "CLOSED",
    "GAIN",
    "OPEN",
    "RETREAT_Z",
    "STALL_LAG_M",
    "STALL_WAIT_STEPS",
    "Obs",
    "ScriptedPolicy",
    "toward",
]


class PickAndPlaceScript(ScriptedPolicy):
    """Pick the object, carry it (over an obstacle if one is reported), place it, retreat.

    Subclasses change the grasp height and the placing motion (peg insertion).
    """

    CARRY_Z = 0.15
    HOVER = 0.10
    GRASP_DZ = 0.0
    CLOSE_TIMEOUT = 30

    def carry_z(self, obs: Obs) -> float:
        obstacle = obs["obstacle"]
        if obstacle[3] > 0.5:
            return max(self.CARRY_Z, float(obstacle[2]) + 0.12)
        return self.CARRY_Z

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, obj, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        grasped = obs["grasped"][0] > 0.5
        grasp_point = obj + np.array([0.0, 0.0, self.GRASP_DZ])
        carrying = self.phase in ("lift", "transfer", "place")
        if carrying and not grasped:
            self.goto("approach")  # slipped: re-grasp
        if self.phase == "start":
            self.goto("approach")
        if self.phase == "approach":
            return self.approach_phase(obs, grasp_point, self.HOVER, 0.01)
        if self.phase == "descend":
            if self.near(tcp, grasp_point, 0.006):
                self.goto("close")
            xy_ok = self.near(tcp[:2], grasp_point[:2], 0.02)
            return toward(
                tcp, grasp_point if xy_ok else grasp_point + np.array([0.0, 0.0, self.HOVER]), 0.6
            )
        if self.phase == "close":
            return self.close_phase(obs, grasp_point, "lift", self.CLOSE_TIMEOUT)
        z_carry = self.carry_z(obs)
        if self.phase == "lift":
            up = np.array([tcp[0], tcp[1], z_carry])
            if tcp[2] > z_carry - 0.01:
                self.goto("transfer")
            return toward(tcp, up)
        if self.phase == "transfer":
            if tcp[2] < z_carry - 0.03:
                self.memory.pop("placed", None)
                self.goto("lift")  # an obstacle appeared: re-plan over it
                return toward(tcp, np.array([tcp[0], tcp[1], z_carry]))
            offset = tcp - obj  # where the object hangs relative to the TCP
            above = np.array([goal[0] + offset[0], goal[1] + offset[1], z_carry])
            if self.near(tcp[:2], above[:2], 0.004):
                self.goto("place")
            return toward(tcp, above)
        if self.phase == "place":
            return self.place(obs)
        if self.phase == "release":
            return self.release_phase(obs)
        if self.phase == "retreat":
            return self.retreat_phase(obs)
        return np.zeros(3)

    def place(self, obs: Obs) -> np.ndarray:
        tcp, obj, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        offset = tcp - obj
        target = goal + offset + np.array([0.0, 0.0, 0.004])
        if self.near(tcp, target, 0.005):
            self.goto("release")
        return toward(tcp, target, 0.5)


class PegInsertScript(PickAndPlaceScript):
    """Pick the peg near its top, align it over the hole, insert slowly, release."""

    GRASP_DZ = 0.02
    ALIGN_TOL = 0.0005
    JAM_LAG_M = 0.008
    JAM_STEPS = 15

    def place(self, obs: Obs) -> np.ndarray:
        tcp, hole = obs["tcp_pos"], obs["goal_pos"]
        # Low-pass the peg's measured position: the tight hole needs sub-millimetre alignment,
        # finer than the sensor noise of a single reading.
        for key, value in (("peg_f", obs["object_pos"]), ("tcp_f", tcp)):
            old = self.memory.get(key)
            self.memory[key] = value if old is None else old + PEG_FILTER * (value - old)
        peg = self.memory["peg_f"]
        offset = self.memory["tcp_f"] - peg
        lateral = hole[:2] - peg[:2]
        entry_z = HOLE_DEPTH + PEG_HALF[2] + 0.008  # peg bottom 8 mm above the hole
        stage = self.memory.get("stage", np.array([0.0]))[0]
        if stage == 0.0:  # align above the hole, then dwell until the alignment is steady
            target = np.array([hole[0] + offset[0], hole[1] + offset[1], entry_z + offset[2]])
            aligned = float(np.linalg.norm(lateral)) < self.ALIGN_TOL
            steady = self.near(tcp, target, 0.003) and (aligned or self.phase_steps > 60)
            dwell = self.memory.get("dwell", np.array([0.0]))[0] + 1 if steady else 0.0
            self.memory["dwell"] = np.array([dwell])
            if dwell >= 5:
                self.memory["stage"] = np.array([1.0])
                self.memory["dwell"] = np.array([0.0])
                self.plan_depth += 1
            return toward(tcp, target, 0.4)
        # Insert: keep servoing the lateral error, go down slowly.
        target = np.array([hole[0] + offset[0], hole[1] + offset[1], hole[2] + offset[2] + 0.002])
        lag = float(np.linalg.norm(obs["tcp_target"] - tcp))
        best = float(self.memory.get("best_z", np.array([np.inf]))[0])
        if peg[2] < best - 0.0005:
            self.memory["best_z"] = np.array([peg[2]])
            self.memory["stuck"] = np.array([0.0])
        else:
            self.memory["stuck"] = self.memory.get("stuck", np.array([0.0])) + 1.0
        stuck = float(self.memory["stuck"][0]) > self.JAM_STEPS
        if lag > self.JAM_LAG_M and stuck and peg[2] > hole[2] + 0.008:
            # Jammed on the rim (pushing without going down): back off, re-align.
            self.memory["stage"] = np.array([0.0])
            self.memory.pop("best_z", None)
            self.memory.pop("stuck", None)
            self.phase_steps = 0
            self.plan_depth += 1
            return toward(tcp, tcp + np.array([0.0, 0.0, 0.02]))
        if peg[2] < hole[2] + 0.004:
            self.memory.pop("stage", None)
            self.goto("release")
        return toward(tcp, target, 0.15)

    def waiting(self, obs: Obs) -> bool:
        # During insertion a lagging TCP means a jam, which `place` handles by backing off.
        inserting = self.phase == "place" and self.memory.get("stage", [0.0])[0] == 1.0
        return super().waiting(obs) and not inserting


class DrawerScript(ScriptedPolicy):
    """Grasp the handle from above, pull it along the drawer's axis to the goal, release."""

    HOVER = 0.08

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, handle, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        grasped = obs["grasped"][0] > 0.5
        if self.phase == "pull" and not grasped:
            self.goto("approach")  # slipped off the handle: grasp it again
        if self.phase == "start":
            self.goto("approach")
        if self.phase == "approach":
            return self.approach_phase(obs, handle, self.HOVER, 0.008)
        if self.phase == "descend":
            if self.near(tcp, handle, 0.005):
                self.goto("close")
            return toward(tcp, handle, 0.5)
        if self.phase == "close":
            return self.close_phase(obs, handle, "pull", 30)
        if self.phase == "pull":
            offset = tcp - handle
            target = goal + offset - np.array([0.006, 0.0, 0.0])
            if handle[0] <= goal[0] + 0.001:
                self.goto("release")
            return toward(tcp, target, 0.5)
        if self.phase == "release":
            return self.release_phase(obs)
        if self.phase == "retreat":
            return self.retreat_phase(obs)
        return np.zeros(3)


class PushScript(ScriptedPolicy):
    """Push the block toward the goal with the closed fingers, re-positioning when off-line."""

    PUSH_Z = 0.03
    HOVER_Z = 0.10
    CONTACT = 0.034  # block half-width + finger half-thickness (m)
    LINE_TOL = 0.012

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.gripper = CLOSED

    def plan(self, obs: Obs) -> np.ndarray:
        tcp, block, goal = obs["tcp_pos"], obs["object_pos"], obs["goal_pos"]
        to_goal = goal[:2] - block[:2]
        dist = float(np.linalg.norm(to_goal))
        self.gripper = CLOSED
        if self.phase == "start":
            self.goto("reposition")
        if self.phase == "done" or (dist < 0.008 and self.phase == "push"):
            self.goto("done")
            return toward(tcp, np.array([tcp[0], tcp[1], self.HOVER_Z]))
        u = to_goal / max(dist, 1e-9)
        behind = block[:2] - u * (self.CONTACT + 0.02)
        if self.phase == "reposition":
            hover = np.array([behind[0], behind[1], self.HOVER_Z])
            if tcp[2] < self.HOVER_Z - 0.02 and not self.near(tcp[:2], behind, 0.01):
                return toward(tcp, np.array([tcp[0], tcp[1], self.HOVER_Z]))
            if self.near(tcp[:2], behind, 0.006):
                self.goto("lower")
            return toward(tcp, hover)
        if self.phase == "lower":
            low = np.array([behind[0], behind[1], self.PUSH_Z])
            if self.near(tcp, low, 0.006):
                self.goto("push")
            return toward(tcp, low, 0.6)
        # Push: stay on the line through the block toward the goal, advance along it.
        rel = tcp[:2] - block[:2]
        along = float(rel @ u)
        across = float(rel @ np.array([-u[1], u[0]]))
        if abs(across) > self.LINE_TOL or along > -self.CONTACT + 0.01:
            self.goto("reposition")
            return toward(tcp, np.array([tcp[0], tcp[1], self.HOVER_Z]))
        speed = min(0.35, max(0.08, 2.0 * dist / V_MAX_MPS))
        contact = block[:2] - u * (self.CONTACT - 0.006)
        target = np.array([contact[0], contact[1], self.PUSH_Z])
        v = toward(tcp, target, 1.0)
        v[:2] += u * speed
        return v


SCRIPTS: dict[str, type[ScriptedPolicy]] = {
    "pick_place": PickAndPlaceScript,
    "peg_insert": PegInsertScript,
    "drawer_open": DrawerScript,
    "push": PushScript,
    "tool_use": ToolScript,
    "mobile_pick_place": MobilePickPlaceScript,
}
