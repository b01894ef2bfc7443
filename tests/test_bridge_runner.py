"""The runner's real side against the twin: a killed harness, a killed robot, resume. The twin runs
in real time here on purpose: deadlines, the deadman and a robot's return are about the wall clock.

- SIGKILL of the harness mid-episode: the twin holds within 200 ms (its deadman), the partial
  recording is readable, and the resumed run marks that attempt as unsupervised (partial kept and
  linked) and re-runs the row as a new attempt.
- SIGKILL of the twin mid-episode: the attempt is aborted as robot-lost, the runner waits, and
  when the twin comes back it re-runs the row without using a policy retry; if the twin never
  comes back the run halts with a non-zero exit and the reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.artifacts import artifact_file
from embodied_eval.store.core import Store
from real_bridge.bridge_config import load_bridge_config, profile_path
from real_bridge.discovery import configure_process, domain_id_for_test, ros_environment
from real_bridge.recording import read_partial
from real_bridge.twin.process import TwinProcess

pytestmark = [
    pytest.mark.ros,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

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
[battery.drawer_open]
instances = ["drawer_open/drawer_center"]
[sampling]
real_fraction = 1.0
[sim]
engines = ["mujoco"]
[real]
backend = "ros2"
robot_id = "twin-1"
"""


def profile(tmp_path: Path, robot_return_s: float) -> Path:
    """The twin profile with short deadlines (oracle judge: the runner tests are about the runner)."""
    text = profile_path("twin").read_text(encoding="utf-8")
    path = tmp_path / "twin-fast.toml"
    path.write_text(
        text + f"\n[deadlines]\nstate_stale_s = 1.0\ndiscovery_s = 10.0\nservice_s = 10.0\n"
        "judge_s = 10.0\nhoming_s = 20.0\n"
        f"robot_return_s = {robot_return_s}\n",
        encoding="utf-8",
    )
    load_bridge_config(path)  # valid
    return path


def wait_for_partial(out: Path, after_s: float, alive) -> None:
    """Return `after_s` seconds after the episode's recording appeared."""
    deadline = time.monotonic() + 60
    while not list(out.rglob("*.mcap.partial")) and alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(after_s)


def wait_for_loop(out: Path, after_s: float, alive) -> None:
    """Return `after_s` seconds after the episode's policy loop started: its "started" event is
    in the partial recording (flushed at least every 0.5 s), after homing and the setup."""
    deadline = time.monotonic() + 60
    while alive() and time.monotonic() < deadline:
        for partial in out.rglob("*.mcap.partial"):
            try:
                _, channels, messages = read_partial(partial)
            except (OSError, ValueError):
                continue
            if any(
                channels[m.channel_id].topic == "/embodied_eval/episode" and b"started" in m.data
                for m in messages
            ):
                time.sleep(after_s)
                return
        time.sleep(0.05)


HARNESS = """
import sys, tomllib
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.trials import RunOptions, run_trials
protocol = protocol_from_mapping(tomllib.loads(open(sys.argv[1]).read()))
options = RunOptions(sides=("real",), max_retries=1, robot_options={
    "domain_id": int(sys.argv[2]), "config_path": sys.argv[3], "max_steps": 1000})
run_trials(protocol, options, db_path=sys.argv[4], out_dir=sys.argv[5], show_progress=False)
"""


def test_killed_harness_leaves_a_held_robot_a_partial_recording_and_a_new_attempt(tmp_path):
    from real_bridge.bridge_link import Ros2Robot

    protocol_file = tmp_path / "p.toml"
    protocol_file.write_text(MINI_PROTOCOL, encoding="utf-8")
    protocol = protocol_from_mapping(tomllib.loads(MINI_PROTOCOL))
    domain = domain_id_for_test(600)
    config_path = profile(tmp_path, 10.0)
    db, out = tmp_path / "t.db", tmp_path / "run"
    with TwinProcess(domain):
        configure_process(domain, "loopback")
        watcher = Ros2Robot(
            load_bridge_config(config_path).replace(domain_id=domain, node_name="watcher"),
            heartbeat=False,
        )
        watcher.connect()
        try:
            harness = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    HARNESS,
                    str(protocol_file),
                    str(domain),
                    str(config_path),
                    str(db),
                    str(out),
                ],
                env=ros_environment(domain, "loopback"),
                start_new_session=True,
            )
            wait_for_partial(out, 2.5, lambda: harness.poll() is None)
            assert harness.poll() is None, "the harness ended before it could be killed"
            killed_ns = time.time_ns()
            os.killpg(harness.pid, signal.SIGKILL)
            harness.wait(10)

            def held() -> dict[str, str]:
                readings, _ = watcher.safety_readings(0)
                for r in reversed(readings):
                    values = dict(r.values)
                    if r.name == "robot/state" and values.get("mode") == "hold":
                        return values
                return {}

            assert watcher.session.wait_for(lambda: bool(held()), 5.0)
            # On the robot's own clock (its stamp clock, which a loaded machine holds up with the
            # simulated robot): its hold against the last heartbeat it received — not before the
            # profile's deadman (0.1 s), and within 200 ms.
            state = held()
            hold_after_ms = (int(state["held_at_ns"]) - int(state["last_heartbeat_ns"])) / 1e6
            assert 100.0 <= hold_after_ms < 200.0, hold_after_ms
            # The stamp clock runs at most one 2 ms tick ahead of the wall clock.
            assert int(state["last_heartbeat_ns"]) <= killed_ns + 2_000_000

            # ... and comes to rest there (in sim time; a loaded machine slows the twin down).
            def at_rest() -> bool:
                state = watcher.get_observation()
                return max(abs(v) for v in state.velocity[:7]) < 0.05

            assert watcher.session.wait_for(at_rest, 5.0)
        finally:
            watcher.disconnect()

        (partial,) = list(out.rglob("*.mcap.partial"))
        _, channels, messages = read_partial(partial)  # readable with the mcap library
        topics = {channels[m.channel_id].topic for m in messages}
        assert "/joint_trajectory_controller/joint_trajectory" in topics
        assert "/camera/image_raw/compressed" in topics

        options = RunOptions(
            sides=("real",),
            max_retries=1,
            robot_options={"domain_id": domain, "config_path": str(config_path), "max_steps": 40},
        )
        run_trials(protocol, options, db_path=db, out_dir=out, show_progress=False)
    with Store(db) as store:
        attempts = sorted(store.episodes(side="real"), key=lambda e: e.attempt)
    # The re-run is a new attempt that ran to a scored outcome (ok, or a safety stop the twin
    # raised: either is the policy's result, not the robot's loss).
    assert [(e.attempt, e.status == "aborted", e.scored) for e in attempts] == [
        (1, True, False),
        (2, False, True),
    ], [e.status_reason for e in attempts]
    first = attempts[0]
    assert first.control["abort_cause"] == "unsupervised" and "unsupervised" in first.status_reason
    # Kept and linked, relative to the store's folder.
    assert artifact_file(first.artifacts[0].path, db) == partial and partial.is_file()
    recovered = artifact_file(first.artifacts[1].path, db)
    assert recovered is not None
    from rosbags.highlevel import AnyReader

    with AnyReader([recovered]) as reader:  # the recovered copy opens in rosbags
        assert sum(1 for _ in reader.messages()) == len(messages)
    assert attempts[1].status != "ok" or attempts[1].judge["kind"] == "oracle"


def test_killed_twin_waits_and_resumes_without_using_a_retry(tmp_path):
    protocol = protocol_from_mapping(tomllib.loads(MINI_PROTOCOL))
    domain = domain_id_for_test(601)
    config_path = profile(tmp_path, 40.0)
    options = RunOptions(
        sides=("real",),
        max_retries=0,  # no policy retries at all: the robot-loss re-run must not need one
        robot_options={"domain_id": domain, "config_path": str(config_path), "max_steps": 300},
    )
    db, out = tmp_path / "t.db", tmp_path / "run"
    second: list[TwinProcess] = []
    first = TwinProcess(domain).start()
    try:

        def kill_then_restart() -> None:
            wait_for_loop(out, 1.0, first.alive)  # mid-episode: the loop runs for 6 s
            first.kill()
            time.sleep(1.5)
            second.append(TwinProcess(domain).start())

        helper = threading.Thread(target=kill_then_restart, daemon=True)
        helper.start()
        summary = run_trials(protocol, options, db_path=db, out_dir=out, show_progress=False)
        helper.join(30)
    finally:
        first.stop()
        for twin in second:
            twin.stop()
    assert not summary.real_halted, summary.real_stopped
    with Store(db) as store:
        attempts = sorted(store.episodes(side="real"), key=lambda e: e.attempt)
    assert [(e.attempt, e.status == "aborted", e.scored) for e in attempts] == [
        (1, True, False),
        (2, False, True),
    ], [e.status_reason for e in attempts]
    assert attempts[0].control["abort_cause"] == "robot_lost"
    assert "no joint state" in attempts[0].status_reason


def test_a_robot_that_never_returns_halts_the_run_with_a_nonzero_exit(tmp_path):
    protocol_file = tmp_path / "p.toml"
    protocol_file.write_text(MINI_PROTOCOL, encoding="utf-8")
    domain = domain_id_for_test(602)
    config_path = profile(tmp_path, 2.0)
    out = tmp_path / "run"
    with TwinProcess(domain) as twin:
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "embodied_eval",
                "run",
                str(protocol_file),
                "--side",
                "real",
                "--db",
                str(tmp_path / "t.db"),
                "--out",
                str(out),
                "--no-progress",
                "--robot-option",
                f"domain_id={domain}",
                "--robot-option",
                f"config_path={config_path}",
                "--robot-option",
                "max_steps=300",
            ],
            env=ros_environment(domain, "loopback"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_for_partial(out, 2.0, lambda: cli.poll() is None)
        twin.kill()
        output, _ = cli.communicate(timeout=120)
    assert cli.returncode == 3, output
    assert "did not come back" in output
