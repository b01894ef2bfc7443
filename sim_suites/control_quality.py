"""Control-quality signals, the QC functional (seed §7 QC) and energy.

Per control step the recorder keeps: the TCP tracking error ‖x_cmd − x_tcp‖ (m) between the
commanded set-point and the measured TCP, the TCP position (for jerk), the peak contact force
that is not part of the task's intended grasp (robot against fixtures, table, obstacle or
person; the object against fixtures), the task's tracked point (for overshoot and settling) and
the mechanical power Σ|τ·q̇| (W).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_suites.engines.base import ROBOT, TABLE

#: Contact force regarded as ordinary manipulation (N); QC is penalized only above it.
CONTACT_OK_N = 20.0
#: Reference RMS jerk of the TCP (m/s³) for the smoothness term.
JERK_REF_MPS3 = 50.0
#: Weights of the QC terms (tracking, contact, smoothness); they sum to 1.
QC_WEIGHTS = (0.5, 0.3, 0.2)


def quality_of_control(
    rms_tracking_m: float,
    tracking_tolerance_m: float,
    peak_contact_n: float,
    rms_jerk_mps3: float,
) -> tuple[float, dict[str, float]]:
    """The published QC functional (seed §7 QC), a weighted geometric mean in [0, 1].

    QC = s_track^0.5 · s_contact^0.3 · s_smooth^0.2 with
      s_track   = exp(−RMS tracking error / tol)            (tol = the task's QC tolerance),
      s_contact = exp(−max(0, F_peak − F_ok) / F_ok)        (F_ok = CONTACT_OK_N = 20 N),
      s_smooth  = exp(−RMS jerk / J_ref)                    (J_ref = JERK_REF_MPS3 = 50 m/s³).

    Example: RMS error = tol, F_peak = 30 N, RMS jerk = 50 m/s³ gives
    QC = e^(−0.5·1 − 0.3·0.5 − 0.2·1) = e^(−0.85) ≈ 0.4274.

    Args:
        rms_tracking_m: RMS TCP tracking error, m. tracking_tolerance_m: tol > 0, m.
        peak_contact_n: peak unintended contact force, N. rms_jerk_mps3: RMS TCP jerk, m/s³.
    Returns:
        QC in [0, 1] and its terms {"s_track", "s_contact", "s_smooth"}.
    """
    s_track = math.exp(-max(0.0, rms_tracking_m) / tracking_tolerance_m)
    s_contact = math.exp(-max(0.0, peak_contact_n - CONTACT_OK_N) / CONTACT_OK_N)
    s_smooth = math.exp(-max(0.0, rms_jerk_mps3) / JERK_REF_MPS3)
    w_t, w_c, w_s = QC_WEIGHTS
    qc = s_track**w_t * s_contact**w_c * s_smooth**w_s
    return float(min(1.0, max(0.0, qc))), {
        "s_track": s_track,
        "s_contact": s_contact,
        "s_smooth": s_smooth,
    }


def energy_wh(power_w: np.ndarray, dt_s: float) -> float:
    """Mechanical energy E = Σ_t |τ_t·q̇_t|·dt in Wh.

    Args:
        power_w: (T,) per-step Σ_j |τ_j·q̇_j| in W. dt_s: control period, s.
    """
    return float(np.sum(np.abs(power_w)) * dt_s / 3600.0)


def rms_jerk(positions: np.ndarray, dt_s: float) -> float:
    """RMS of the third finite difference of positions divided by dt³ (m/s³).

    Args:
        positions: (T, 3) TCP positions, m. dt_s: sample period, s.
    Returns:
        0 when fewer than 4 samples.
    """
    if len(positions) < 4:
        return 0.0
    jerk = np.diff(positions, n=3, axis=0) / dt_s**3
    return float(np.sqrt(np.mean(np.sum(jerk * jerk, axis=1))))


def overshoot_and_settling(
    points: np.ndarray,
    errors: np.ndarray,
    start: np.ndarray,
    goal: np.ndarray,
    tolerance_m: float,
    dt_s: float,
) -> tuple[float, float | None]:
    """Overshoot past the goal and settling time of the task's tracked point.

    Overshoot = max(0, max_t (p_t − g)·u) with u the unit vector from the start to the goal.
    Settling time = the time after which the goal error stays within tolerance (None if the final
    error is outside it).

    Args:
        points: (T, 3) tracked point. errors: (T,) goal errors, m. start, goal: (3,) m.
    """
    if len(points) == 0:
        return 0.0, None
    direction = goal - start
    norm = float(np.linalg.norm(direction))
    overshoot = 0.0
    if norm > 1e-9:
        overshoot = max(0.0, float(np.max((points - goal) @ (direction / norm))))
    outside = np.nonzero(errors > tolerance_m)[0]
    if len(outside) and outside[-1] == len(errors) - 1:
        return overshoot, None
    settle = 0.0 if not len(outside) else float((outside[-1] + 1) * dt_s)
    return overshoot, settle


@dataclass
class ControlRecorder:
    """Collects per-step control signals for one episode (arrays grow by list append)."""

    dt_s: float

    def __post_init__(self) -> None:
        self.tracking: list[float] = []
        self.tcp: list[np.ndarray] = []
        self.contact: list[float] = []
        self.power: list[float] = []
        self.points: list[np.ndarray] = []
        self.errors: list[float] = []

    def add(
        self,
        tcp_target: np.ndarray,
        tcp: np.ndarray,
        contact_n: float,
        power_w: float,
        point: np.ndarray,
        error_m: float,
    ) -> None:
        lead = tcp_target - tcp
        # math.sqrt of the dot product is what np.linalg.norm computes for a vector, minus the
        # per-call overhead (this runs every control step).
        self.tracking.append(math.sqrt(float(lead.dot(lead))))
        self.tcp.append(tcp)
        self.contact.append(contact_n)
        self.power.append(power_w)
        self.points.append(point)
        self.errors.append(error_m)

    def summary(
        self, tolerance_m: float, task_tolerance_m: float, start: np.ndarray, goal: np.ndarray
    ) -> tuple[dict[str, Any], float, float]:
        """Control signals, QC and energy (Wh) of the episode."""
        track = np.asarray(self.tracking)
        rms_track = float(np.sqrt(np.mean(track**2))) if len(track) else 0.0
        peak = float(max(self.contact, default=0.0))
        jerk = rms_jerk(np.asarray(self.tcp).reshape(-1, 3), self.dt_s)
        qc, terms = quality_of_control(rms_track, tolerance_m, peak, jerk)
        overshoot, settle = overshoot_and_settling(
            np.asarray(self.points).reshape(-1, 3),
            np.asarray(self.errors),
            start,
            goal,
            task_tolerance_m,
            self.dt_s,
        )
        power = np.asarray(self.power)
        energy = energy_wh(power, self.dt_s)
        control: dict[str, Any] = {
            "rms_tracking_m": round(rms_track, 9),
            "max_tracking_m": round(float(track.max()) if len(track) else 0.0, 9),
            "tracking_tolerance_m": tolerance_m,
            "rms_jerk_mps3": round(jerk, 6),
            "peak_contact_n": round(peak, 6),
            "overshoot_m": round(overshoot, 9),
            "settling_s": None if settle is None else round(settle, 6),
            "mean_power_w": round(float(power.mean()) if len(power) else 0.0, 6),
            "qc_terms": {k: round(v, 9) for k, v in terms.items()},
        }
        return control, qc, energy


def unintended_contact(
    contacts: Mapping[tuple[str, str], float], object_name: str, tool_name: str = ""
) -> float:
    """Peak contact force (N) not part of the task's intended interaction (for QC).

    Without a tool, counted: the robot against anything but the task object, and the object
    against anything but the table (the object resting on the table and the hand holding it are
    intended). With a tool the hand holds the tool and the tool works the object: intended are
    the robot on the tool, the tool on the object and either on the table; the robot touching
    the object itself, or the tool or the object hitting anything else, counts.
    """
    worst = 0.0
    held = tool_name or object_name
    parts = {object_name, tool_name} - {""}
    for (a, b), force in contacts.items():
        if a == ROBOT and b == held:
            continue
        if TABLE in (a, b) and (a in parts or b in parts):
            continue
        if tool_name and {a, b} == parts:
            continue
        if a == ROBOT or a in parts or b in parts:
            worst = max(worst, force)
    return worst
