"""The twin robot's clock: its simulated time, the stamp clock its messages carry, and how its
control loop's ticks are paced.

Real-time mode (a robot on the wall clock, what a real robot is): states are stamped with the
simulation clock anchored to wall time when the control loop starts: tick k is stamped
start + (k + 1) / rate, and tick k runs at its wall-clock slot start + k / rate / time_scale.
Ticks are never skipped, so a gap in the stamps the harness receives is a lost message; a loop
held up by more than MAX_LAG_S stops catching up (the stamps stay continuous, the slip is
counted as a late tick). The deadman runs on the simulated time too: a load that holds the
control loop up holds the simulated robot with it. A command is applied at the simulated time
corresponding to its wall-clock arrival (`arrival_s`), so commands that arrive while the loop
catches up keep their spacing. The robot's logs (heartbeat and command arrivals, diagnostics'
stamps) are on the wall clock, except the deadman's heartbeat and hold times, which are on the
stamp clock.

Simulated-time mode (`TwinSettings.sim_time`, `real_bridge.twin.lockstep`): the stamp clock starts
at 0 and every log is on it; a tick runs only when the harness allowed it (`next_tick`), and a
command arriving is applied at the simulated time it arrived at — the clock stands while the
harness decides.
"""

from __future__ import annotations

import threading
import time

from real_bridge.twin.lockstep import MAX_LAG_S, Lockstep
from real_bridge.twin.settings import TwinSettings

#: Seconds between periodic diagnostics (robot/state and latched safety statuses), on the
#: wall clock in real-time mode and on the simulated clock in simulated-time mode.
DIAGNOSTICS_PERIOD_S = 0.5
#: Simulated time, while the clock stands: how often its state and clock are sent again, s.
IDLE_PERIOD_S = 0.02
#: Simulated time: how long the control loop waits for the harness before asking again, s.
WAIT_PERIOD_S = 0.05


class TwinClock:
    """The twin's clock (see the module docstring).

    Args:
        settings: the twin's settings (rate, time scale, simulated time, its grace, deadman).
        lock: the node's lock; the condition a waiting control loop sleeps on (a heartbeat or a
            command wakes it) is built on it.
        stats: the node's counters; late ticks, the worst tick lag, simulated-time waits and
            grace advances are counted into it.
    """

    def __init__(
        self, settings: TwinSettings, lock: threading.RLock, stats: dict[str, int]
    ) -> None:
        self.sim_time = settings.sim_time
        self.period_sim_s = 1.0 / settings.state_rate_hz
        self.period_wall_s = self.period_sim_s / settings.time_scale
        self.period_ns = round(self.period_sim_s * 1e9)
        self.time_scale = settings.time_scale
        self.deadman_s = settings.bridge.deadlines.deadman_s
        self.lockstep = Lockstep(settings.sim_grace_s)
        self.wake = threading.Condition(lock)
        self.stats = stats
        self._permission = ""
        self.start()

    def start(self) -> None:
        """Anchor the clock as the control loop starts: stamps from 0 in simulated time, else
        from the wall clock now."""
        self.epoch_ns = 0 if self.sim_time else time.time_ns()
        self._epoch = time.monotonic()
        self._slip = 0.0
        self._next_diagnostics = 0.0 if self.sim_time else self._epoch

    # ------------------------------------------------------------------ reading it

    def stamp_ns(self, sim_s: float) -> int:
        """The robot's stamp clock at simulated time `sim_s` (what its joint states carry)."""
        return self.epoch_ns + round(sim_s * 1e9)

    def tick_stamp_ns(self, k: int) -> int:
        """The stamp of tick k's states: the end of the k-th period."""
        return self.epoch_ns + (k + 1) * self.period_ns

    def log_ns(self, sim_s: float) -> int:
        """Now on the robot's log clock, ns: its stamp clock in simulated time, else wall."""
        return self.stamp_ns(sim_s) if self.sim_time else time.time_ns()

    def arrival_s(self, sim_s: float) -> float:
        """The simulated time a message arriving now arrived at (`sim_s`: the simulated time
        the control loop reached). Real time: the simulated time corresponding to now on the
        wall clock (≥ `sim_s`, which lags when the loop was held up). Simulated time: `sim_s`,
        the clock stands while the harness decides."""
        if self.sim_time:
            return sim_s
        wall = (time.monotonic() - self._epoch - self._slip) * self.time_scale
        return max(sim_s, wall)

    def diagnostics_due(self, sim_s: float) -> bool:
        """Whether the periodic diagnostics are due (then they are counted as sent)."""
        now = sim_s if self.sim_time else time.monotonic()
        if now < self._next_diagnostics:
            return False
        self._next_diagnostics += DIAGNOSTICS_PERIOD_S
        return True

    # ------------------------------------------------------------------ the harness

    def heard(self, allowed_ns: int, frame_id: str, sim_s: float) -> None:
        """A heartbeat (the node's lock held): in simulated time, what it allows."""
        if self.sim_time:
            self.lockstep.heard(allowed_ns, frame_id, sim_s)
            self.wake.notify_all()

    def command_in(self) -> None:
        """A trajectory message came in (the node's lock held): the lockstep waits for them."""
        self.lockstep.received += 1
        self.wake.notify_all()

    def supervised(self, sim_s: float, last_heartbeat_s: float | None) -> bool:
        """Whether a harness supervises simulated time `sim_s`: real time, a heartbeat came
        within `deadlines.deadman_s` of the robot's time; simulated time, `sim_s` is within
        what the harness allowed plus `deadlines.deadman_s`."""
        if self.sim_time:
            return self.lockstep.supervised(sim_s, self.deadman_s)
        return last_heartbeat_s is not None and sim_s - last_heartbeat_s <= self.deadman_s

    # ------------------------------------------------------------------ pacing

    def next_tick(self, sim_s: float, held: bool) -> str:
        """What the control loop does next (the node's lock held): "tick" (run the next tick,
        after `pace`), or in simulated time "stand" (the clock stands: no harness yet, or the
        harness is gone and the robot holds) or "wait" (for the harness's allowance or the
        commands it announced). `held`: the robot holds or is stopped."""
        if not self.sim_time:
            return "tick"
        permission = self.lockstep.permission(sim_s)
        self.stats["sim_grace_advances"] = self.lockstep.grace_advances
        if permission == "free" and held:
            permission = "idle"  # the harness is gone and the robot holds: its clock stands
        self._permission = permission
        if permission == "idle":
            return "stand"
        if not permission:
            self.stats["sim_waits"] += 1
            return "wait"
        return "tick"

    def pause(self, step: str) -> None:
        """After "stand" or "wait" (the node's lock held): sleep until woken or a little."""
        self.wake.wait(IDLE_PERIOD_S if step == "stand" else WAIT_PERIOD_S)

    def pace(self, k: int) -> None:
        """Before tick k (lock not held): real time, wait for its wall-clock slot; simulated
        time, run a lockstep tick at once and a harness-less one at its wall-clock pace."""
        if self.sim_time:
            self.lockstep.pace(self._permission, self.period_wall_s)
            return
        due = self._epoch + self._slip + k * self.period_wall_s
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        elif now - due > MAX_LAG_S:
            self._slip += now - due  # stop trying to catch up; stamps stay continuous
            self.stats["late_ticks"] += 1
        lag_us = int((time.monotonic() - due) * 1e6)
        self.stats["max_tick_lag_us"] = max(self.stats["max_tick_lag_us"], lag_us)
