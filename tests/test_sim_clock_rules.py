"""Rules of the simulated-time link, without a robot: a resent scene-reset request is answered
without a second reset, and a stalled robot clock costs one grace, not one per sleep."""

from __future__ import annotations

import threading
import time

import pytest

from real_bridge.bridge_config import BridgeConfig
from real_bridge.robot_profile import LoopSettings
from real_bridge.twin.handoff import Handoff

pytestmark = pytest.mark.timeout(60)


def test_one_reset_per_manifest() -> None:
    handoff, lock, runs = Handoff(), threading.RLock(), []

    def reset() -> tuple[bool, str]:
        runs.append(handoff.manifests)
        return True, f"reset {len(runs)}"

    def ask() -> tuple[bool, str]:
        answer: list[tuple[bool, str]] = []
        asker = threading.Thread(target=lambda: answer.append(handoff.ask(lock, 5.0)))
        asker.start()
        while handoff.pending is None:
            time.sleep(0.001)
        with lock:
            handoff.serve(reset)
        asker.join()
        return answer[0]

    handoff.manifests = 1
    assert ask() == (True, "reset 1")
    # The harness resent its request (no answer within resend_s): the same answer, no reset.
    assert ask() == (True, "reset 1") and runs == [1] and handoff.repeated == 1
    handoff.manifests = 2  # a new manifest: a new reset
    assert ask() == (True, "reset 2") and runs == [1, 2]


def test_a_stalled_robot_clock_costs_one_grace_then_each_sleep_its_own_length() -> None:
    pytest.importorskip("rclpy", exc_type=ImportError)
    from real_bridge.bridge_clock import SIM_CLOCK_GRACE_S, LinkClock

    config = BridgeConfig(loop=LoopSettings(use_sim_time=True))
    clock = LinkClock(config, threading.Condition(), lambda: None, lambda: None, lambda: True)
    start = time.monotonic()
    clock.sleep(0.01)  # the robot's clock never moves: found stale after the grace
    first = time.monotonic() - start
    assert first >= SIM_CLOCK_GRACE_S
    assert clock.now_s() == pytest.approx(0.01)
    start = time.monotonic()
    for _ in range(20):
        clock.sleep(0.01)
    # 20 more sleeps of 0.01 s: 0.2 s of waiting, not 20 graces (40 s).
    assert time.monotonic() - start < SIM_CLOCK_GRACE_S
    assert clock.now_s() == pytest.approx(0.21)
