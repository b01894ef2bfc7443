"""The twin's simulated-time mode: a clock no machine load can move (`TwinSettings.sim_time`).

The twin's clock starts at 0; every tick is stamped with it and published on `topics.clock`
(rosgraph_msgs/Clock) after the tick's states, and every time the twin records (heartbeats,
holds, command arrivals, diagnostics) is on it. Until a harness's first heartbeat the clock
stands at 0 (the twin republishes its state and clock there, so a harness finds it): whenever
the harness starts, every run begins at the same simulated instant. Then it runs in lockstep: a
heartbeat's stamp is how far the harness allows the clock to go and its `frame_id` ("name#N") how
many trajectory messages the harness had sent by then; the twin runs its next tick only while its
clock is short of that allowance and once those N messages are in (so a command lands in the same
tick whatever the load; topics are not ordered with each other), and otherwise waits. The harness
supervises the simulated time it allowed: the deadman holds `deadlines.deadman_s` of simulated
time past it. With no heartbeat for `sim_grace_s` on the wall clock the harness is gone and the
twin free-runs (paced on the wall clock by `time_scale`), so a dead harness still trips the
deadman, in simulated time. A message
announced but not in after `sim_grace_s` (lost) is given up on.
"""

from __future__ import annotations

import time

from real_bridge.twin.settings import SAME_INSTANT_S

#: While the clock stands (no harness yet, or gone and the robot holding): how often the standing
#: state and clock are sent again, s (wall).
IDLE_PERIOD_S = 0.02
#: Behind schedule by more than this, pacing gives up catching up, s (wall).
MAX_LAG_S = 0.25


class WallPacer:
    """Ticks paced on the wall clock: tick k is due at start + slip + k·period; a tick more than
    MAX_LAG_S late stops the catching up (the slip grows by the lag; stamps stay continuous).

    Args:
        period_wall_s: wall seconds per tick.
    """

    def __init__(self, period_wall_s: float) -> None:
        self.period_wall_s = period_wall_s
        self.start = time.monotonic()
        self.ticks = 0
        self.slip = 0.0
        self.late_ticks = 0
        self.max_lag_us = 0

    def restart(self) -> None:
        """Start afresh: the next tick is due now."""
        self.start, self.ticks, self.slip = time.monotonic(), 0, 0.0

    def wait(self) -> None:
        """Wait for the next tick's slot."""
        due = self.start + self.slip + self.ticks * self.period_wall_s
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        elif now - due > MAX_LAG_S:
            self.slip += now - due
            self.late_ticks += 1
        self.max_lag_us = max(self.max_lag_us, int((time.monotonic() - due) * 1e6))
        self.ticks += 1

    def elapsed_s(self) -> float:
        """Wall seconds since the start, less the slip (the ticks' schedule's time now)."""
        return time.monotonic() - self.start - self.slip


class Lockstep:
    """What the harness allowed and what came in (the twin node's lock guards it).

    Args:
        grace_s: wall seconds without a heartbeat (or an announced message) before the twin
            runs on without the harness.
    """

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        #: How far the harness allows the clock, s (None: no harness has supervised yet).
        self.allowed_until_s: float | None = None
        #: Wall time (monotonic) of the last heartbeat.
        self.heard_at: float | None = None
        self.announced = 0
        self.received = 0
        self.grace_advances = 0
        self._waiting_since: float | None = None
        self._free: WallPacer | None = None

    def heard(self, allowed_ns: int, frame_id: str, sim_s: float) -> None:
        """A heartbeat: the clock may go to `allowed_ns` once the announced messages are in."""
        self.heard_at = time.monotonic()
        self.allowed_until_s = max(self.allowed_until_s or 0.0, allowed_ns / 1e9, sim_s)
        _, _, count = frame_id.rpartition("#")
        if count.isdigit():
            self.announced = max(self.announced, int(count))

    def supervised(self, sim_s: float, deadman_s: float) -> bool:
        """Whether the harness supervises simulated time `sim_s` (what it allowed, plus the
        deadman's `deadman_s`)."""
        allowed = self.allowed_until_s
        return allowed is not None and sim_s <= allowed + deadman_s + SAME_INSTANT_S

    def permission(self, sim_s: float) -> str:
        """May the tick starting at `sim_s` run? "idle" (no harness yet: not before one comes),
        "free" (the harness is gone: pace it), "lockstep" (the harness allowed it: run at once)
        or "" (wait)."""
        if self.allowed_until_s is None or self.heard_at is None:
            return "idle"
        wall = time.monotonic()
        if wall - self.heard_at > self.grace_s:
            return "free"  # the harness is gone: time runs on and the deadman trips in it
        if sim_s + SAME_INSTANT_S >= self.allowed_until_s:
            self._waiting_since = None
            return ""
        if self.received >= self.announced:
            self._waiting_since = None
            return "lockstep"
        if self._waiting_since is None:
            self._waiting_since = wall
        if wall - self._waiting_since > self.grace_s:
            self.received = self.announced  # an announced message never came: go on
            self.grace_advances += 1
            return "lockstep"
        return ""

    def pace(self, permission: str, period_wall_s: float) -> None:
        """Before a tick: a free-running one waits for its wall-clock slot; a lockstep one
        does not (and the next free-running stretch starts afresh)."""
        if permission != "free":
            self._free = None
            return
        if self._free is None:
            self._free = WallPacer(period_wall_s)
        self._free.wait()
