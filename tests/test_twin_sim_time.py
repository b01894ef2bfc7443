"""The twin on its simulated clock (`real_bridge.twin.lockstep`, `loop.use_sim_time`): machine load
cannot move an outcome, and a dead harness still trips the deadman, in simulated time.

Asserted on what the robot's own clock recorded; never rerun.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import pytest

from real_bridge.twin.lockstep import Lockstep

pytestmark = [pytest.mark.timeout(600)]

_counter = itertools.count(140)
#: Episodes: 100 policy steps at 50 Hz = 2 s of simulated policy loop each.
STEPS = 100
EPISODES = (("pick_place/cube_center", 3), ("push/block_forward", 4))


# ---------------------------------------------------------------------- the lockstep (no ROS)


def test_the_lockstep_waits_for_the_allowance_and_the_announced_commands():
    lock = Lockstep(grace_s=0.05)
    assert lock.permission(0.0) == "idle"  # no harness yet: the clock stands
    # The harness allows 0.02 s and announces one trajectory message it sent.
    lock.heard(20_000_000, "embodied_eval_bridge#1", 0.0)
    assert lock.permission(0.0) == ""  # the command is not in yet
    lock.received = 1
    assert lock.permission(0.0) == "lockstep"
    assert lock.permission(0.018) == "lockstep"
    assert lock.permission(0.020) == ""  # the allowance is reached
    # Supervised up to the allowance plus the deadman (0.1 s): 0.02 + 0.1 = 0.12 s.
    assert lock.supervised(0.12, 0.1) and not lock.supervised(0.122, 0.1)
    time.sleep(0.06)  # no heartbeat for longer than the 0.05 s grace: the harness is gone
    assert lock.permission(0.020) == "free"


def test_a_lost_announced_command_is_given_up_after_the_grace():
    lock = Lockstep(grace_s=0.05)
    lock.heard(20_000_000, "bridge#2", 0.0)
    lock.received = 1
    assert lock.permission(0.0) == ""
    time.sleep(0.06)
    lock.heard(20_000_000, "bridge#2", 0.0)  # the harness is alive, the message is lost
    assert lock.permission(0.0) == "lockstep" and lock.grace_advances == 1


# ---------------------------------------------------------------------- over ROS 2

ros = pytest.mark.ros


def _burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _run(tmp_path, burners: int) -> tuple[list[tuple], list[list[tuple]]]:
    """Run EPISODES on a fresh sim-time twin with `burners` busy loops running; returns each
    episode's outcome and its recording's joint states (stamp ns, positions, velocities)."""
    from real_bridge.discovery import domain_id_for_test
    from real_bridge.twin.process import TwinProcess
    from tests.test_bridge_ros import backend, read_mcap, spec

    procs = _burners(burners)
    outcomes, states = [], []
    try:
        with TwinProcess(domain_id_for_test(next(_counter)), sim_time=True) as twin:  # noqa: SIM117
            with backend(twin.domain_id, max_steps=STEPS, use_sim_time=True) as robot:
                for i, (task, seed) in enumerate(EPISODES):
                    rec = tmp_path / f"rec-{burners}"
                    out = robot.run_episode(spec(f"st{i}", task=task, seed=seed), None, rec)
                    ep = out.episode
                    outcomes.append(
                        (ep.status, ep.status_reason, ep.success, ep.quality, ep.actions,
                         ep.duration_s)
                    )
                    mcap = next(a.path for a in ep.artifacts if a.kind == "mcap")
                    states.append(
                        [
                            (
                                d.header.stamp.sec * 10**9 + d.header.stamp.nanosec,
                                tuple(d.position),
                                tuple(d.velocity),
                            )
                            for _, d in read_mcap(mcap)["/joint_states"]
                        ]
                    )
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    return outcomes, states


@ros
def test_two_cpu_burners_change_no_outcome_and_no_recorded_joint_state(tmp_path):
    pytest.importorskip("rclpy", exc_type=ImportError)
    pytest.importorskip("sim_suites.env", exc_type=ImportError)
    idle_outcomes, idle_states = _run(tmp_path, 0)
    busy_outcomes, busy_states = _run(tmp_path, 2)
    assert idle_outcomes == busy_outcomes
    for idle, busy in zip(idle_states, busy_states, strict=True):
        # Every tick's state is recorded once (2 s of loop at 500 Hz is ≥ 1000 of them) and
        # the two runs recorded the same stamps and values, bit for bit.
        assert len(idle) >= 1000
        assert idle == busy


@ros
def test_a_dead_harness_trips_the_deadman_after_deadman_s_of_simulated_time():
    pytest.importorskip("rclpy", exc_type=ImportError)
    pytest.importorskip("sim_suites.env", exc_type=ImportError)
    from real_bridge.discovery import domain_id_for_test
    from real_bridge.safety_state import ROBOT_STATE_STATUS
    from real_bridge.twin.process import TwinProcess
    from tests.test_bridge_ros import backend

    with TwinProcess(domain_id_for_test(next(_counter)), sim_time=True) as twin:  # noqa: SIM117
        with backend(twin.domain_id, use_sim_time=True) as robot:
            link = robot.ros2_robot()
            for _ in range(10):
                link.sleep(0.02)  # the harness allows 10 control periods, one at a time
            allowed_ns = round(link.now_s() * 1e9)
            link.stop_heartbeat()  # the harness dies: no heartbeat, no allowance
            held: list[dict] = []

            def hold_reported() -> bool:
                readings, _ = link.safety_readings(0)
                held.extend(
                    dict(r.values)
                    for r in readings
                    if r.name == ROBOT_STATE_STATUS and dict(r.values).get("mode") == "hold"
                )
                return bool(held)

            # The twin waits sim_grace_s (10 s wall) for the harness, then runs on its own.
            assert link.session.wait_for(hold_reported, 40.0), "no deadman hold"
            time.sleep(0.5)  # wall time: a robot held without a harness does not run on
            clock_ns = round(link.now_s() * 1e9)
    state = held[0]
    assert int(state["supervised_until_ns"]) == allowed_ns
    # The profile's deadman is 100 ms of simulated time: still supervised at the allowance +
    # 100 ms, held at the first tick past it, 2 ms later (500 Hz) — 102 ms on the robot's clock.
    assert int(state["held_at_ns"]) - allowed_ns == 102_000_000
    # The hold's tick ends 2 ms later, and there the clock stands.
    assert clock_ns - allowed_ns == 104_000_000
