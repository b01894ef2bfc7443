"""The robot's clock as `real_bridge.bridge_link.Ros2Robot` reads it, and the deadman heartbeat
with which the harness supervises the robot.

Real time (a real robot; the twin without `--sim-time`): `now_s()` is this process's monotonic
clock, `sleep(s)` sleeps, and the heartbeat (`std_msgs/Header`, stamped with the wall clock, its
frame_id the harness's node name) runs on its own thread at `loop.heartbeat_hz` from `connect` to
`disconnect`: when this process dies, it stops, and the robot holds.

Simulated time (`loop.use_sim_time`, the twin's `--sim-time`; `real_bridge.twin.lockstep`):
`now_s()` is the robot's /clock (plus any time skipped while it did not answer), messages are
stamped on arrival and recorded with it — what arrives during a sleep arrives at its end, whatever
the order in which the topics' messages and the clock were delivered — and `sleep(s)` asks the
robot to advance to now + s — a heartbeat stamped with that time whose frame_id announces how many
trajectory messages were sent ("name#N") — and waits until the clock and the joint states reach
it. The heartbeat thread keeps announcing what was allowed so far (the robot's sign that the
harness lives). When the clock stops moving for SIM_CLOCK_GRACE_S of wall time, the harness's
clock skips to the target, so a robot that died is found stale as on the wall clock. The robot
publishes a tick's messages before that tick's clock, and this process's executor handles each
ready stream in the order its subscription was made (the clock's last), so the messages of the
ticks a sleep waited for are in when it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from real_bridge.bridge_config import BridgeConfig
from real_bridge.ros_node import ns_to_stamp, stamp_to_ns, stream_message_class

#: Simulated time: wall seconds without the robot's clock moving before `sleep` stops waiting.
SIM_CLOCK_GRACE_S = 2.0


class LinkClock:
    """The robot's clock and the deadman heartbeat of one `Ros2Robot` (see the module docstring).

    Args:
        config: the robot profile (`loop.use_sim_time`, `loop.heartbeat_hz`, the node's name).
        arrived: the link's condition (on its lock), notified when a joint state or the clock
            comes in; everything here is guarded by its lock.
        latest_stamp_ns: the stamp of the latest joint state received (None before the first).
        connected: whether the link's session is open.
    """

    def __init__(
        self,
        config: BridgeConfig,
        arrived: threading.Condition,
        latest_stamp_ns: Callable[[], int | None],
        connected: Callable[[], bool],
    ) -> None:
        self.config = config
        self.sim_time = config.loop.use_sim_time
        self._arrived = arrived
        self._latest_stamp_ns = latest_stamp_ns
        self._connected = connected
        #: The heartbeat's publisher (set when the link wires its streams).
        self.publisher: Any = None
        self._clock_ns = 0  # the robot's /clock (simulated time)
        self.clock_heard = False
        self._skipped_s = 0.0  # simulated time skipped while the robot did not answer
        self._sleeping_to_ns: int | None = None  # the target of the sleep under way
        self._allowed_ns = 0  # how far this harness allows the robot's clock
        self._trajectories_sent = 0
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the clock

    def on_clock(self, msg: Any) -> None:
        """The /clock subscription's callback (simulated time)."""
        ns = stamp_to_ns(msg.clock)
        with self._arrived:
            self.clock_heard = True
            if ns > self._clock_ns:
                self._clock_ns = ns
                self._arrived.notify_all()

    def now_s(self) -> float:
        if self.sim_time:
            return self._clock_ns / 1e9 + self._skipped_s
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
            target_ns = max(round((target_s - self._skipped_s) * 1e9), self._clock_ns + 1000)
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
            while True:
                stamp_ns = self._latest_stamp_ns()
                if self._clock_ns >= target_ns and (stamp_ns is None or stamp_ns >= target_ns):
                    return
                if self._clock_ns != seen:
                    seen, since = self._clock_ns, time.monotonic()
                elif time.monotonic() - since > SIM_CLOCK_GRACE_S or not self._connected():
                    self._skipped_s += target_s - self.now_s()
                    return
                self._arrived.wait(0.05)

    def trajectory_sent(self) -> None:
        """Count a trajectory message published (simulated time: heartbeats announce them)."""
        with self._arrived:
            self._trajectories_sent += 1

    # ------------------------------------------------------------------ the deadman heartbeat

    @property
    def heartbeat_alive(self) -> bool:
        """Whether this harness's deadman heartbeat is being published."""
        return self._heartbeat_thread is not None and self._heartbeat_thread.is_alive()

    @property
    def heartbeat_started(self) -> bool:
        return self._heartbeat_thread is not None

    def start_heartbeat(self) -> None:
        if self._heartbeat_thread is not None:
            return
        period = 1.0 / self.config.loop.heartbeat_hz

        def beat() -> None:
            while not self._heartbeat_stop.wait(period):
                try:
                    self.beat()
                except Exception:  # the context is shutting down
                    return

        self._heartbeat_thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
        self._heartbeat_thread.start()

    def beat(self) -> None:
        """Publish one heartbeat: wall-clock stamped, or (simulated time) stamped with how far
        the robot's clock may go, announcing the trajectory messages sent so far."""
        msg = stream_message_class("heartbeat")()
        with self._arrived:
            if self.sim_time:
                # No allowance before the robot's clock is heard: it stands until then.
                self._allowed_ns = max(self._allowed_ns, self._clock_ns)
                if not self.clock_heard:
                    return
                ns_to_stamp(self._allowed_ns, msg.stamp)
                msg.frame_id = f"{self.config.node_name}#{self._trajectories_sent}"
            else:
                ns_to_stamp(time.time_ns(), msg.stamp)
                msg.frame_id = self.config.node_name
        if self.publisher is not None and self._heartbeat_thread is not None:
            self.publisher.publish(msg)

    def stop_heartbeat(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(1.0)
            self._heartbeat_thread = None
        self._heartbeat_stop = threading.Event()
