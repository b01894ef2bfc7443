"""The twin honours a drift's command latency, measured on the robot's own clock: each applied
command's echo says how long the command waited between its arrival and taking effect (the
twin's simulated clock), read from the episode's recording."""

from __future__ import annotations

import itertools
import json
import statistics

import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from real_bridge.discovery import domain_id_for_test
from real_bridge.twin.process import TwinProcess
from tests.test_bridge_ros import backend, read_mcap, spec

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]

_counter = itertools.count(70)
ARM_TOPIC = "/joint_trajectory_controller/joint_trajectory"
ECHO_TOPIC = "/joint_trajectory_controller/applied"


def command_to_effect_s(path) -> list[float]:
    """Per command of the policy loop (sent after the "started" event; homing's commands went
    out before the scene reset): how long it waited on the robot's clock between arriving and
    taking effect, from the twin's applied-command echo (matched by command id)."""
    rec = read_mcap(path)
    started = min(
        m.log_time
        for m, d in rec["/embodied_eval/episode"]
        if json.loads(d.data).get("phase") == "started"
    )
    sent = {d.header.frame_id for m, d in rec[ARM_TOPIC] if m.log_time >= started}
    return [
        d.points[0].time_from_start.sec + d.points[0].time_from_start.nanosec * 1e-9
        for _, d in rec[ECHO_TOPIC]
        if d.header.frame_id in sent
    ]


@pytest.fixture(scope="module")
def twin():
    # On its simulated clock: which echoes reach the recording cannot depend on machine load.
    with TwinProcess(domain_id_for_test(next(_counter)), sim_time=True) as process:
        yield process


def test_command_latency_follows_the_drifts_latency_steps(twin, tmp_path):
    delays = {}
    with backend(twin.domain_id, judge="oracle", use_sim_time=True) as robot:
        for name, drift in (("nominal", {}), ("slow", {"latency_steps": 4})):
            ep = robot.run_episode(
                spec(f"lat-{name}", seed=5, drift=drift), None, tmp_path / name
            ).episode
            assert ep.status == "ok", ep.status_reason
            delays[name] = command_to_effect_s(ep.artifacts[0].path)
    assert len(delays["nominal"]) >= 50 and len(delays["slow"]) >= 50
    nominal, slow = statistics.median(delays["nominal"]), statistics.median(delays["slow"])
    # The gap's 20 ms actuator delay alone (applied at the next 2 ms physics step), then
    # 4 more control periods of 20 ms: +80 ms.
    assert nominal == pytest.approx(0.020, abs=0.0025)
    assert slow == pytest.approx(0.100, abs=0.0025)
    assert max(delays["slow"]) - min(delays["slow"]) <= 0.0025
