"""The runner's real side through the ROS 2 backend and the twin robot, including resume."""

from __future__ import annotations

import threading
import time
import tomllib

import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.protocol import protocol_from_mapping
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store import Store
from real_bridge.discovery import domain_id_for_test
from real_bridge.twin.process import TwinProcess

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(240)]

#: One task instance, one real pair: the smallest protocol the runner accepts (m_min = 1).
MINI_PROTOCOL = """
[protocol]
name = "twin-mini"
version = "1"
base_seed = 7
m_min = 1
[window]
id = "w-twin"
start = 2026-11-01
end = 2026-11-30
[battery.pick_place]
instances = ["pick_place/cube_center"]
[sampling]
real_fraction = 1.0
[sim]
engines = ["mujoco"]
[real]
backend = "ros2"
robot_id = "twin-1"
"""


def test_runner_real_side_aborts_on_a_killed_robot_and_resumes(tmp_path):
    protocol = protocol_from_mapping(tomllib.loads(MINI_PROTOCOL))
    domain = domain_id_for_test(500)
    bridge_toml = tmp_path / "bridge.toml"
    bridge_toml.write_text(
        "[deadlines]\nstate_stale_s = 0.5\nsafe_stop_s = 0.5\ndiscovery_s = 4.0\n",
        encoding="utf-8",
    )
    options = RunOptions(
        sides=("real",),
        max_retries=3,
        robot_options={"domain_id": domain, "config_path": str(bridge_toml)},
    )
    db, out = tmp_path / "t.db", tmp_path / "run"

    with TwinProcess(domain) as twin:

        def kill_mid_episode() -> None:
            # The recording opens when the episode starts; kill the robot a second later.
            while not list(out.rglob("*.mcap.partial")) and twin.alive():
                time.sleep(0.02)
            time.sleep(1.0)
            twin.kill()

        killer = threading.Thread(target=kill_mid_episode, daemon=True)
        killer.start()
        first = run_trials(protocol, options, db_path=db, out_dir=out, show_progress=False)
        killer.join(10)
    assert "aborted 3 episodes in a row" in first.real_stopped
    with Store(db) as store:
        attempts = sorted(store.episodes(side="real"), key=lambda e: e.attempt)
    assert [(e.attempt, e.status) for e in attempts] == [(i, "aborted") for i in (1, 2, 3)]
    assert "no joint state on /joint_states" in attempts[0].status_reason
    assert "before the episode" in attempts[1].status_reason  # found dead, nothing sent
    assert all(e.artifacts and e.artifacts[0].kind == "mcap" for e in attempts)
    assert len({e.seed for e in attempts}) == 1  # a retry replays the same seed

    with TwinProcess(domain, time_scale=3.0):
        run_trials(protocol, options, db_path=db, out_dir=out, show_progress=False)
    with Store(db) as store:
        final = sorted(store.episodes(side="real"), key=lambda e: e.attempt)
    assert [(e.attempt, e.status) for e in final][:3] == [(i, "aborted") for i in (1, 2, 3)]
    last = final[-1]
    assert (last.attempt, last.status, last.engine) == (4, "ok", "ros2"), last.status_reason
    assert last.window == "w-twin" and last.protocol_hash == protocol.protocol_hash
