"""The harness's clock and deadman heartbeat on a ROS 2 link (`real_bridge.bridge_link.Ros2Robot`).

Real time: `now_s()` is the monotonic wall clock and `sleep(s)` sleeps; the heartbeat
(`std_msgs/Header`, stamped with the wall clock, `frame_id` the node's name) runs on its own
thread at `loop.heartbeat_hz` from `connect` to `disconnect`: when this process dies it stops and
the robot's deadman holds.

Simulated time (`loop.use_sim_time`, the twin's `--sim-time`; `real_bridge.twin.lockstep`):
`now_s()` is the robot's /clock (plus any time skipped while it did not answer), messages are
stamped on arrival and recorded with it, and `sleep(s)` asks the robot to advance to now + s —
a heartbeat stamped with that time whose `frame_id` announces how many trajectory messages were
sent ("name#N") — and waits until the clock and the joint states reach it. When the clock stops
moving for `SIM_CLOCK_GRACE_S` of wall time, the harness's clock skips to the target, so a robot
that died is found stale as on the wall clock; until the robot's clock moves again, each further
sleep waits its own length of wall time and skips (waiting for a lost robot's return takes as long
as on the wall clock, not a grace per sleep).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from real_bridge.bridge_config import BridgeConfig
from real_bridge.ros_node import ns_to_stamp, stamp_to_ns, stream_message_class

#: Simulated time: wall seconds without the robot's clock moving before `sleep` stops waiting
#: (as long as the twin's own grace for a silent harness, `TwinSettings.sim_grace_s`: a robot
#: starved of the CPU on a loaded machine is slow, not dead).
SIM_CLOCK_GRACE_S = 10.0


class LinkClock:
    """The link's clock and heartbeat (module docstring).

    Args:
        config: the robot profile (`loop.use_sim_time`, `loop.heartbeat_hz`, the node's name).
        arrived: the link's condition (its lock guards the link's state): notified when the
            robot's clock moves; waited on by `sleep`.
        state_stamp_ns: the latest joint state's stamp, ns (None before the first).
        publisher: the heartbeat publisher (None before the link is wired).
        connected: whether the link is still connected.
    """

    def __init__(
        self,
        config: BridgeConfig,
        arrived: threading.Condition,
        state_stamp_ns: Callable[[], int | None],
        publisher: Callable[[], Any],
        connected: Callable[[], bool],
    ) -> None:
        self.config = config
        self.sim_time = config.loop.use_sim_time
        self._arrived = arrived
        self._state_stamp_ns = state_stamp_ns
        self._publisher = publisher
        self._connected = connected
        self.clock_ns = 0  # the robot's /clock (simulated time)
        self.clock_heard = False
        self._skipped_s = 0.0  # simulated time skipped while the robot did not answer
        self._sleeping_to_ns: int | None = None  # the target of the sleep under way
        self._stalled = False  # the robot's clock stopped; skipping until it moves again
        self._allowed_ns = 0  # how far this harness allows the robot's clock
        self.trajectories_sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the clock

    def on_clock(self, msg: Any) -> None:
        """A /clock message (rosgraph_msgs/Clock) from the robot."""
        ns = stamp_to_ns(msg.clock)
        with self._arrived:
            self.clock_heard = True
            if ns > self.clock_ns:
                self.clock_ns = ns
                self._stalled = False
                self._arrived.notify_all()

    def now_s(self) -> float:
        if self.sim_time:
            return self.clock_ns / 1e9 + self._skipped_s
        return time.monotonic()

    def arrival_s(self) -> float:
        """When a message arriving now was received, s on `now_s`'s clock. Simulated time: what
        arrives during a sleep arrives at its end (the harness looks then), whatever the order
        in which the topics' messages and the clock were delivered."""
        to_ns = self._sleeping_to_ns
        if to_ns is None:
            return self.now_s()
        return to_ns / 1e9 + self._skipped_s

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if not self.sim_time:
            time.sleep(seconds)
            return
        target_s = self.now_s() + seconds
        with self._arrived:
            # At least one tick of the robot's (as on MuJoCo: a positive sleep steps once).
            target_ns = max(round((target_s - self._skipped_s) * 1e9), self.clock_ns + 1000)
            self._allowed_ns = max(self._allowed_ns, target_ns)
            self._sleeping_to_ns = target_ns
        try:
            self.beat()
            self._await_clock(target_ns, target_s)
        finally:
            self._sleeping_to_ns = None

    def _await_clock(self, target_ns: int, target_s: float) -> None:
        """Wait until the robot's clock and joint states reach `target_ns`; when the clock stops
        for SIM_CLOCK_GRACE_S (wall), skip ours to `target_s` (the robot is found stale)."""
        seen, since = -1, time.monotonic()
        with self._arrived:
            grace = SIM_CLOCK_GRACE_S if not self._stalled else max(target_s - self.now_s(), 0.0)
            while True:
                stamp = self._state_stamp_ns()
                if self.clock_ns >= target_ns and (stamp is None or stamp >= target_ns):
                    return
                if self.clock_ns != seen:
                    seen, since = self.clock_ns, time.monotonic()
                elif time.monotonic() - since > grace or not self._connected():
                    self._skipped_s += target_s - self.now_s()
                    self._stalled = True
                    return
                self._arrived.wait(0.05)

    def sent_trajectory(self) -> None:
        """Count one trajectory message sent (simulated time: the next heartbeat announces it)."""
        with self._arrived:
            self.trajectories_sent += 1

    # ------------------------------------------------------------------ the deadman heartbeat

    @property
    def heartbeat_alive(self) -> bool:
        """Whether this harness's deadman heartbeat is being published."""
        return self._thread is not None and self._thread.is_alive()

    def start_heartbeat(self) -> None:
        if self._thread is not None:
            return
        period = 1.0 / self.config.loop.heartbeat_hz

        def run() -> None:
            while not self._stop.wait(period):
                try:
                    self.beat()
                except Exception:  # the context is shutting down
                    return

        self._thread = threading.Thread(target=run, name="heartbeat", daemon=True)
        self._thread.start()

    def wait_heard(self, session: Any, timeout_s: float) -> None:
        """When the robot side listens to the heartbeat (the twin, the deadman relay), wait until
        it has had time to receive a few beats (up to `timeout_s` for it to appear)."""
        pub = self._publisher()
        if pub is None or self._thread is None:
            return
        if session.wait_for(lambda: pub.get_subscription_count() > 0, timeout_s, 0.01):
            time.sleep(3.0 / self.config.loop.heartbeat_hz)  # a few beats reach it

    def beat(self) -> None:
        """Publish one heartbeat: wall-clock stamped, or (simulated time) stamped with how far
        the robot's clock may go, announcing the trajectory messages sent so far."""
        msg = stream_message_class("heartbeat")()
        with self._arrived:
            if self.sim_time:
                # No allowance before the robot's clock is heard: it stands until then.
                self._allowed_ns = max(self._allowed_ns, self.clock_ns)
                if not self.clock_heard:
                    return
                ns_to_stamp(self._allowed_ns, msg.stamp)
                msg.frame_id = f"{self.config.node_name}#{self.trajectories_sent}"
            else:
                ns_to_stamp(time.time_ns(), msg.stamp)
                msg.frame_id = self.config.node_name
        pub = self._publisher()
        if pub is not None and self._thread is not None:
            pub.publish(msg)

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
            self._thread = None
        self._stop = threading.Event()
