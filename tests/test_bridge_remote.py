"""The real side with a remote policy: `--policy ws://…` against the twin robot process.

The harness runs its own control loop on the real side; with a policy URL every step's action
comes from an `embodied-eval policy serve` process over the openpi websocket protocol.

- The same paired protocol run (sim and real sides) with the served scripted policy and with the
  in-process one. The sim episodes are identical. The twin runs on its simulated clock (the
  `twin_sim` profile): it advances only as far as the harness allows, so however long the served
  policy takes, the real episodes are identical too — status, quality, the judge's success, the
  number of loop steps and policy calls — and, on a remote run's own observations, every action
  it received equals what the in-process policy computes from the same observation (a policy that
  asks both and returns the served action).
- The server dies mid-episode, or stops answering: the episode is `aborted` saying why, and the
  robot got the safe-stop hold after the last command and comes to rest.
- A served chunk policy in joint space: chunks are checked and executed whole, one inference per
  chunk, each timed on the episode (`control.policy_latency_ms`).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", exc_type=ImportError)
pytest.importorskip("sim_suites.env", exc_type=ImportError)

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from embodied_eval.interchange.lerobot import export_lerobot
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import EpisodeSpec
from embodied_eval.remote.client import RemotePolicy
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store
from real_bridge.bridge_config import Deadlines, LoopSettings, load_bridge_config, profile_path
from real_bridge.discovery import domain_id_for_test, ros_environment
from real_bridge.robot import wait_until
from real_bridge.ros2_backend import Ros2Backend
from real_bridge.twin.process import TwinProcess
from tests.remote_support import start_server, stop_server

pytestmark = [
    pytest.mark.ros,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[1]
ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
EPISODE_TOPIC = "/embodied_eval/episode"
COMMAND_TOPIC = "/joint_trajectory_controller/joint_trajectory"
TASK = "pick_place/cube_center"
STEPS = 40
#: The paired run's real episode: the approach of the pick (1.2 s at 50 Hz). Whether the twin
#: finishes a whole pick and place depends on how late the loop's observations are on a loaded
#: machine, which is not what these tests are about.
RUN_STEPS = 60

PROTOCOL = f"""
[protocol]
name = "twin-remote"
version = "1"
base_seed = 11
m_min = 1
[window]
id = "w-remote"
start = 2026-11-01
end = 2026-11-30
[battery.pick_place]
instances = ["{TASK}"]
[sampling]
real_fraction = 1.0
[sim]
engines = ["mujoco"]
[real]
backend = "ros2"
robot_id = "twin-1"
"""


@pytest.fixture(scope="module")
def twin():
    with TwinProcess(domain_id_for_test(640), sim_time=True) as process:
        yield process


@pytest.fixture(scope="module")
def scripted_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    proc, port = start_server("sim_suites.policies:scripted", log)
    yield f"ws://127.0.0.1:{port}"
    stop_server(proc)


def profile(tmp_path: Path) -> Path:
    text = profile_path("twin_sim").read_text(encoding="utf-8")
    path = tmp_path / "twin-remote.toml"
    # Under the profile's own [deadlines] (its service deadline stays).
    path.write_text(
        text.replace(
            "[deadlines]\n",
            "[deadlines]\nstate_stale_s = 1.0\ndiscovery_s = 20.0\njudge_s = 10.0\n"
            "homing_s = 20.0\n",
        ),
        encoding="utf-8",
    )
    return path


#: What the tee policy saw: (served action chunk, in-process action) per inference.
TEE: list[tuple[np.ndarray, np.ndarray]] = []


class Tee:
    """Asks the served policy and an in-process one the same observation; returns the served
    action and keeps both (the remote path must not change a single action)."""

    def __init__(self, task_id: str, url: str) -> None:
        from sim_suites.policies import load_policy

        self.name = "tests.test_bridge_remote:tee"
        self.remote = RemotePolicy(url, task_id)
        self.local = load_policy("sim_suites.policies:scripted", task_id)

    def reset(self, seed=None):
        self.remote.reset(seed)
        self.local.reset(seed)

    def act(self, obs):
        served = self.remote.act_chunk(obs)
        TEE.append((served, np.asarray(self.local.act(obs), dtype=np.float32)))
        return served


def tee(task_id=None, url="", **_):
    return Tee(task_id, url)


def _episodes(db: Path, side: str = "real"):
    with Store(db) as store:
        return sorted(
            store.episodes(side=side),
            key=lambda e: (e.task_id, e.seed, str(sorted(e.drift.items()))),
        )


def test_a_paired_run_over_the_websocket_matches_the_in_process_run(twin, scripted_url, tmp_path):
    protocol_file = tmp_path / "p.toml"
    protocol_file.write_text(PROTOCOL, encoding="utf-8")
    config = profile(tmp_path)
    robot = {"domain_id": twin.domain_id, "config_path": str(config), "max_steps": RUN_STEPS}
    protocol = protocol_from_mapping(tomllib.loads(PROTOCOL))
    # The in-process baseline, one side after the other (a sim episode computing in this
    # process would compete with the real side's control loop for the interpreter).
    for side in ("sim", "real"):
        run_trials(
            protocol,
            RunOptions(sides=(side,), executor="sequential", robot_options=robot, max_retries=0),
            db_path=tmp_path / "local.db",
            out_dir=tmp_path / "local",
            show_progress=False,
        )
    # The command a user types, in its own process: a paired run (sim and real sides, the sim
    # episodes in a worker process), every action of both sides from the served policy.
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "embodied_eval",
            "run",
            str(protocol_file),
            "--executor",
            "local",
            "--workers",
            "1",
            "--policy",
            scripted_url,
            "--db",
            str(tmp_path / "remote.db"),
            "--out",
            str(tmp_path / "remote"),
            "--no-progress",
            "--max-retries",
            "0",
            *(x for k, v in robot.items() for x in ("--robot-option", f"{k}={v}")),
        ],
        env=ros_environment(twin.domain_id, "loopback"),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    local, remote = _episodes(tmp_path / "local.db"), _episodes(tmp_path / "remote.db")
    # The same rows (pair ids differ: they name the run, whose policy differs).
    key = [(e.task_id, e.seed, str(sorted(e.drift.items())), e.attempt) for e in local]
    assert (
        key == [(e.task_id, e.seed, str(sorted(e.drift.items())), e.attempt) for e in remote]
        and key
    )
    for a, b in zip(local, remote, strict=True):
        assert b.policy == scripted_url and a.policy == "sim_suites.policies:scripted"
        assert (a.task_id, a.seed) == (b.task_id, b.seed)
        assert a.status == b.status == "ok", (a.status_reason, b.status_reason)
        assert a.judge["kind"] == b.judge["kind"] == "oracle"
        assert (a.success, a.quality) == (b.success, b.quality)
        assert a.control["loop_steps"] == b.control["loop_steps"] == RUN_STEPS
        assert a.control["loop_policy_calls"] == b.control["loop_policy_calls"] == RUN_STEPS
        assert "policy_latency_ms" not in a.control
        latency = b.control["policy_latency_ms"]
        # One inference per step (the scripted policy answers chunks of one), each timed.
        assert latency["inferences"] == RUN_STEPS
        assert 0.0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
        assert latency["server_infer_p50_ms"] <= latency["p50_ms"]
    # The sim side of the same pairs: deterministic, so the very same episodes.
    local, remote = (
        _episodes(tmp_path / "local.db", "sim"),
        _episodes(tmp_path / "remote.db", "sim"),
    )
    assert len(local) == len(remote) == 1
    for a, b in zip(local, remote, strict=True):
        same = ("task_id", "seed", "quality", "status", "actions", "qc", "energy_wh", "duration_s")
        assert {k: getattr(a, k) for k in same} == {k: getattr(b, k) for k in same}
        assert b.control["policy_latency_ms"]["inferences"] == b.actions
        assert dict(a.control) == {k: v for k, v in b.control.items() if k != "policy_latency_ms"}


def backend(domain: int, steps: int = STEPS) -> Ros2Backend:
    config = load_bridge_config(profile_path("twin_sim")).replace(
        domain_id=domain,
        deadlines=Deadlines(discovery_s=20.0, service_s=5.0, state_stale_s=1.0, judge_s=5.0),
        loop=LoopSettings(judge="oracle", max_steps=steps, use_sim_time=True),
    )
    return Ros2Backend(None, config=config)


def spec(name: str, policy: str, seed: int = 3) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"{name}-real-ros2-a1",
        pair_id=name,
        side="real",
        family=TASK.split("/")[0],
        task_id=TASK,
        seed=seed,
        drift_name="nominal",
        engine="ros2",
        attempt=1,
        target_quality=0.8,
        policy=policy,
    )


def commands(path: str) -> list:
    """The arm commands sent from the episode's "started" event on (homing's come before it)."""
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        decoded = [(ch.topic, m.log_time, d) for _, ch, m, d in reader.iter_decoded_messages()]
    started = min(
        t for topic, t, d in decoded if topic == EPISODE_TOPIC and b'"started"' in d.data.encode()
    )
    return [d for topic, t, d in decoded if topic == COMMAND_TOPIC and t >= started]


def _tfs(trajectory) -> float:
    t = trajectory.points[-1].time_from_start
    return t.sec + t.nanosec * 1e-9


def test_every_served_action_equals_the_in_process_action_on_the_same_observation(
    twin, scripted_url, tmp_path
):
    TEE.clear()
    with backend(twin.domain_id) as robot:
        ep = robot.run_episode(
            spec("tee", f"tests.test_bridge_remote:tee?url={scripted_url}"), None, tmp_path
        ).episode
    assert ep.status == "ok", ep.status_reason
    assert len(TEE) == ep.control["loop_policy_calls"] == STEPS
    for served, local in TEE:
        assert served.shape == (1, 4) and np.array_equal(served[0], local)


def _at_rest(robot: Ros2Backend) -> bool:
    state = robot.ros2_robot().get_observation()
    return state is not None and float(np.max(np.abs(state.velocity[:7]))) < 0.05


def test_server_death_or_silence_aborts_the_real_episode_and_holds_the_robot(twin, tmp_path):
    dead, port = start_server(
        "tests.remote_support:behaviour",
        tmp_path / "dead.log",
        env={"REMOTE_BEHAVIOUR": "die-after-5"},
    )
    silent, silent_port = start_server(
        "tests.remote_support:behaviour", tmp_path / "slow.log", env={"REMOTE_BEHAVIOUR": "slow"}
    )
    try:
        with backend(twin.domain_id) as robot:
            died = robot.run_episode(
                spec("dies", f"ws://127.0.0.1:{port}"), None, tmp_path / "a"
            ).episode
            # On the robot's (simulated) clock: it advances while the harness waits on it.
            assert wait_until(robot.ros2_robot(), lambda: _at_rest(robot), 5.0, 0.02)
            slow = robot.run_episode(
                spec("slow", f"ws://127.0.0.1:{silent_port}?timeout=0.5"), None, tmp_path / "b"
            ).episode
            assert wait_until(robot.ros2_robot(), lambda: _at_rest(robot), 5.0, 0.02)
    finally:
        stop_server(dead)
        stop_server(silent)
    assert dead.returncode == 3  # the served policy killed its server at the 6th act
    assert died.status == "aborted" and not died.scored
    assert died.status_reason.startswith(
        f"policy server ws://127.0.0.1:{port} closed the connection"
    )
    assert "safe stop" not in died.status_reason  # the hold was sent (else a note says why)
    assert died.control["abort_cause"] == "policy_server"
    assert died.control["loop_steps"] == 5 and died.control["policy_latency_ms"]["inferences"] == 5
    assert slow.status == "aborted" and slow.control["abort_cause"] == "policy_server"
    assert slow.status_reason == (
        f"policy server ws://127.0.0.1:{silent_port} did not answer within 0.5 s"
    )
    assert slow.control["loop_steps"] == 0
    for ep, sent in ((died, 5), (slow, 0)):
        sent_commands = commands(ep.artifacts[0].path)
        loop = [c for c in sent_commands if _tfs(c) == pytest.approx(0.02)]
        assert len(loop) == sent
        hold = sent_commands[-1]  # the safe-stop hold came last, in the form a JTC accepts
        assert (hold.header.stamp.sec, hold.header.stamp.nanosec) == (0, 0)
        assert _tfs(hold) == pytest.approx(0.1) and tuple(hold.joint_names) == ARM
        assert len(hold.points) == 1
    # Exported as LeRobot frames: the 5 steps of the first; the second never made a step.
    result = export_lerobot([died, slow], tmp_path / "dataset")
    assert (result.episodes, result.frames, result.skipped) == (1, 5, 1)


def test_a_served_joint_chunk_is_executed_whole_one_inference_per_chunk(twin, tmp_path):
    server, port = start_server(
        "tests.remote_support:behaviour",
        tmp_path / "chunk.log",
        env={"REMOTE_BEHAVIOUR": "hold-chunk"},
    )
    try:
        with backend(twin.domain_id, steps=10) as robot:
            ep = robot.run_episode(spec("chunk", f"ws://127.0.0.1:{port}"), None, tmp_path).episode
    finally:
        stop_server(server)
    assert ep.status == "ok", ep.status_reason
    # 10 steps from chunks of 3: inferences at steps 1, 4, 7 and 10.
    assert ep.control["loop_steps"] == 10 and ep.control["loop_policy_calls"] == 4
    assert ep.control["policy_latency_ms"]["inferences"] == 4
    loop = [c for c in commands(ep.artifacts[0].path) if _tfs(c) == pytest.approx(0.02)]
    assert len(loop) == 10
    # Joint-space targets go out as served (the posture seen first), not through the Cartesian
    # controller.
    first = np.array(loop[0].points[0].positions)
    for command in loop:
        np.testing.assert_allclose(command.points[0].positions, first, atol=1e-6)
