"""The twin's scheduled protective-stop drill, checked every tick.

The twin's contact-force and TCP-speed stops are the scene's own safety monitor
(`sim_suites.safety_monitors.SafetyMonitor`, the one a sim episode runs: the same contact pairs,
limits and per-physics-step peaks, stopping on the net external force a wrist force/torque sensor
reads), with the limits of the twin's `Monitors` (`real_bridge.twin.sim_plant.safety_limits`).
"""

from __future__ import annotations

from embodied_eval.records import SafetyEvent
from real_bridge.twin.plant import Plant
from real_bridge.twin.settings import Monitors


def monitor_event(
    mon: Monitors, plant: Plant, started_sim_s: float | None, sim_s: float
) -> SafetyEvent | None:
    """The drill's protective stop (category 2) now, or None.

    Args:
        mon: the monitor settings (`stop_at_s`: the drill's time into the episode, 0 = none).
        plant: the twin's physics (its physics step).
        started_sim_s: simulation time the current episode started, s (None: no episode).
        sim_s: the simulation time now, s.
    """
    if mon.stop_at_s <= 0 or started_sim_s is None:
        return None
    t_s = sim_s - started_sim_s
    if t_s < mon.stop_at_s:
        return None
    return SafetyEvent(
        kind="protective_stop",
        t_s=t_s,
        step=round(t_s / plant.physics_dt_s),
        stop_category=2,
        detail=f"protective stop drill at {mon.stop_at_s:.3f} s",
        source_rule="twin.stop_drill",
    )
