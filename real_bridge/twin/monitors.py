"""The twin's safety controller: contact force, TCP speed and the scheduled protective-stop drill,
checked every tick against its `Monitors` settings."""

from __future__ import annotations

import numpy as np

from embodied_eval.records import SafetyEvent
from real_bridge.twin.plant import Plant
from real_bridge.twin.settings import Monitors


def monitor_event(
    mon: Monitors, plant: Plant, started_sim_s: float | None, sim_s: float
) -> SafetyEvent | None:
    """The protective stop (category 2) the monitors raise now, or None.

    Args:
        mon: the monitor limits.
        plant: the twin's physics (wrench, TCP speed, physics step).
        started_sim_s: simulation time the current episode started, s (None: no episode).
        sim_s: the simulation time now, s.
    """
    t_s = sim_s - started_sim_s if started_sim_s is not None else 0.0
    step = round(t_s / plant.physics_dt_s)
    force = float(np.linalg.norm(plant.wrench()[:3]))
    detail, extra = "", {}
    if force > mon.force_limit_n:
        detail = f"contact force {force:.1f} N above the {mon.force_limit_n:.1f} N limit"
        extra = {
            "contact_force_n": force,
            "force_limit_n": mon.force_limit_n,
            "contact_with": "environment",
            "source_rule": "twin.force_limit",
        }
    elif mon.speed_limit_mps > 0 and plant.tcp_speed_mps() > mon.speed_limit_mps:
        speed = plant.tcp_speed_mps()
        detail = f"TCP speed {speed:.3f} m/s above {mon.speed_limit_mps:.3f} m/s"
        extra = {
            "tcp_speed_mps": speed,
            "speed_limit_mps": mon.speed_limit_mps,
            "source_rule": "twin.speed_limit",
        }
    elif mon.stop_at_s > 0 and started_sim_s is not None and t_s >= mon.stop_at_s:
        detail = f"protective stop drill at {mon.stop_at_s:.3f} s"
        extra = {"source_rule": "twin.stop_drill"}
    if not detail:
        return None
    return SafetyEvent(
        kind="protective_stop",
        t_s=t_s,
        step=step,
        stop_category=2,
        detail=detail,
        **extra,  # type: ignore[arg-type]
    )
