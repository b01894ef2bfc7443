"""Turning the robot's diagnostics into safety events and a safety state (no ROS imports).

A robot reports safety through `diagnostic_msgs/DiagnosticArray` (see `real_bridge.interface`):
`safety/<kind>` statuses at WARN/ERROR are events, OK clears them, and a robot may republish a
latched status many times. `SafetyTracker` keeps exactly one `SafetyEvent` per event: per
`event_id` when the robot sends one, else per rising edge of the status. It also tracks which
statuses are active (for `safety_state()`) and the robot's `robot/state` status (`enabled`).
"""

from __future__ import annotations

from dataclasses import dataclass

from embodied_eval.records import SafetyEvent
from real_bridge.interface import LEVEL_ERROR, LEVEL_WARN, STOP_KINDS, read_safety_status

#: Name of the status a robot uses for its mode (KeyValues `enabled`, `episode_id`, `phase`).
ROBOT_STATE_STATUS = "robot/state"


@dataclass(frozen=True)
class DiagnosticReading:
    """One DiagnosticStatus as received: arrival time (monotonic s) and its fields."""

    received_s: float
    name: str
    level: int
    message: str
    values: tuple[tuple[str, str], ...]


class SafetyTracker:
    """Accumulates the safety events of one episode from diagnostic readings.

    Args:
        episode_id: the running episode; readings naming another episode are not its events.
        started_s: monotonic time the episode started (events without `t_s` are timed from it).
    """

    def __init__(self, episode_id: str = "", started_s: float = 0.0) -> None:
        self.episode_id = episode_id
        self.started_s = started_s
        self.events: list[SafetyEvent] = []
        self.active: dict[str, str] = {}
        self.enabled: bool | None = None
        self.stop_received_s: float | None = None
        self.stop_event: SafetyEvent | None = None
        self._seen_ids: set[str] = set()

    def feed(self, reading: DiagnosticReading) -> SafetyEvent | None:
        """Process one reading; returns the new SafetyEvent it produced, if any."""
        if reading.name == ROBOT_STATE_STATUS:
            values = dict(reading.values)
            if "enabled" in values:
                self.enabled = values["enabled"].lower() in ("true", "1")
            return None
        parsed = read_safety_status(
            reading.name,
            reading.level,
            reading.message,
            reading.values,
            t_s=reading.received_s - self.started_s,
        )
        if parsed is None:
            return None
        if parsed.event is None:  # OK / STALE: the status cleared
            self.active.pop(reading.name, None)
            return None
        if parsed.level not in (LEVEL_WARN, LEVEL_ERROR):
            return None
        previous = self.active.get(reading.name)
        self.active[reading.name] = parsed.event_id
        if parsed.event_id:
            if parsed.event_id in self._seen_ids:
                return None
            self._seen_ids.add(parsed.event_id)
        elif previous is not None:  # still latched, republished without an id
            return None
        if self.episode_id and parsed.episode_id and parsed.episode_id != self.episode_id:
            return None
        self.events.append(parsed.event)
        if parsed.kind in STOP_KINDS and self.stop_received_s is None:
            self.stop_received_s = reading.received_s
            self.stop_event = parsed.event
        return parsed.event

    @property
    def protective_stop(self) -> bool:
        return "safety/protective_stop" in self.active

    @property
    def emergency_stop(self) -> bool:
        return "safety/emergency_stop" in self.active
