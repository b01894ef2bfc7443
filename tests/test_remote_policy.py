"""Remote policies over the openpi websocket protocol, against a real `policy serve` process.

- openpi's own `WebsocketClientPolicy` (the `openpi-client` package) talks to our server;
- a sim run with `--policy ws://…` stores the same episodes as the in-process run;
- a server that dies mid-episode, or stops answering, gives an `aborted` episode saying why;
- a failing policy sends the client one line, never a traceback (that goes to the server log);
- the API key, action chunks and uint8 image observations.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Episode
from embodied_eval.remote import API_KEY_ENV
from embodied_eval.remote.client import RemotePolicy, RemotePolicyError, parse_policy_url
from embodied_eval.remote.server import PolicyServer
from embodied_eval.remote.wire import pack, unpack
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.runner.work import SimContext, run_sim_episode
from embodied_eval.store.core import Store
from tests.remote_support import start_server, stop_server

pytestmark = [
    pytest.mark.timeout(180),
    # openpi-client 0.1.2 opens its connection the way websockets 17 deprecates.
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning"),
]

SUPPORT = "tests.remote_support:behaviour"
PUSH = [f"push/block_{name}" for name in ("forward", "left", "right", "long", "diagonal")]


@pytest.fixture(scope="module")
def server_log(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server") / "server.log"


@pytest.fixture(scope="module")
def scripted_server(server_log: Path) -> Iterator[int]:
    proc, port = start_server("sim_suites.policies:scripted", server_log, "--task", PUSH[0])
    yield port
    stop_server(proc)


@pytest.fixture
def thread_server() -> Iterator[callable]:
    """Start in-process servers (in a thread) on free ports; stopped at teardown."""
    started: list[tuple[PolicyServer, threading.Thread]] = []

    def start(target: str = SUPPORT, **kw) -> PolicyServer:
        server = PolicyServer(target, port=0, **kw)
        ready = threading.Event()
        thread = threading.Thread(target=server.run, args=(lambda _: ready.set(),), daemon=True)
        thread.start()
        assert ready.wait(10)
        started.append((server, thread))
        return server

    yield start
    for server, thread in started:
        server.stop()
        thread.join(10)
        assert not thread.is_alive()


def test_wire_encoding_round_trips_arrays_and_matches_openpi():
    from openpi_client import msgpack_numpy

    obs = {
        "image": np.arange(128 * 128 * 3, dtype=np.uint8).reshape(128, 128, 3),
        "state": np.array([0.5, -1.25], dtype=np.float64),
        "step": np.int64(7),
        "prompt": "push the block",
    }
    ours = unpack(pack(obs))
    theirs = msgpack_numpy.unpackb(pack(obs))  # openpi reads what we write ...
    back = unpack(msgpack_numpy.packb(obs))  # ... and we read what openpi writes
    for decoded in (ours, theirs, back):
        assert decoded["image"].dtype == np.uint8 and decoded["image"].shape == (128, 128, 3)
        assert np.array_equal(decoded["image"], obs["image"])
        assert decoded["state"].tolist() == [0.5, -1.25]
        assert decoded["step"] == 7 and decoded["prompt"] == "push the block"
    with pytest.raises(ValueError):
        pack({"bad": np.array([1 + 2j])})


def test_openpi_client_talks_to_our_server_process(scripted_server: int):
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    from sim_suites.policies import scripted

    with urllib.request.urlopen(f"http://127.0.0.1:{scripted_server}/healthz", timeout=5) as r:
        assert r.status == 200
    client = WebsocketClientPolicy(host="127.0.0.1", port=scripted_server)
    meta = client.get_server_metadata()
    assert meta["server"] == "embodied-eval" and meta["policy"] == "sim_suites.policies:scripted"
    # The same observation to the served policy and to a fresh in-process one.
    local = scripted(PUSH[0])
    local.reset(None)
    obs = _push_observation()
    answer = client.infer(obs)
    expected = local.act(obs)
    assert answer["actions"].shape == (1, 4) and answer["actions"].dtype == np.float32
    assert np.array_equal(answer["actions"][0], expected)
    assert answer["server_timing"]["infer_ms"] >= 0.0
    second = client.infer(obs)
    assert "prev_total_ms" in second["server_timing"]
    assert np.array_equal(second["actions"][0], local.act(obs))


def _push_observation() -> dict:
    from sim_suites.episode import cached_env

    env = cached_env(PUSH[0], "mujoco")
    env.configure(max_steps=20)
    obs, _ = env.reset(seed=5)
    return {k: np.asarray(v) for k, v in obs.items()}


def _protocol(policy: str):
    return protocol_from_mapping(
        {
            "protocol": {"name": "remote", "version": "1", "base_seed": 3},
            "window": {"id": "w-remote", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "sim": {"engines": ["mujoco"], "max_steps": 60, "policy": policy},
        }
    )


def _by_task(db: Path) -> dict[str, Episode]:
    with Store(db) as store:
        return {e.task_id: e for e in store.episodes()}


def test_a_sim_run_over_the_websocket_matches_the_in_process_run(
    tmp_path: Path, scripted_server: int
):
    url = f"ws://127.0.0.1:{scripted_server}"
    for name, policy in (("local", "sim_suites.policies:scripted"), ("remote", url)):
        summary = run_trials(
            _protocol("sim_suites.policies:scripted"),
            RunOptions(sides=("sim",), executor="sequential", policy=policy),
            db_path=tmp_path / name / "store.db",
            out_dir=tmp_path / name / "out",
            show_progress=False,
        )
        assert summary.complete and summary.written == 5
    local, remote = (
        _by_task(tmp_path / "local" / "store.db"),
        _by_task(tmp_path / "remote" / "store.db"),
    )
    assert sorted(local) == sorted(remote) == sorted(PUSH)
    for task, ep in local.items():
        other = remote[task]
        latency = dict(other.control)["policy_latency_ms"]
        # One inference per step (the scripted policy sends chunks of one), all timed.
        assert latency["inferences"] == latency["steps"] == other.actions
        assert 0.0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
        assert other.policy == url and ep.seed == other.seed
        control = {k: v for k, v in other.control.items() if k != "policy_latency_ms"}
        same = ("quality", "status", "actions", "qc", "energy_wh", "duration_s", "faults")
        assert {k: getattr(ep, k) for k in same} == {k: getattr(other, k) for k in same}
        assert dict(ep.control) == control


def _run_one(tmp_path: Path, url: str):
    proto = _protocol(url)
    spec = plan_manifest(proto).specs[0]
    context = SimContext(
        protocol=proto,
        engine_targets={"mujoco": "sim_suites.episode:run_episode"},
        out_dir=str(tmp_path),
    )
    return run_sim_episode(context, spec).episode


def test_server_death_mid_episode_is_an_aborted_episode_with_its_reason(tmp_path: Path):
    proc, port = start_server(
        SUPPORT, tmp_path / "server.log", env={"REMOTE_BEHAVIOUR": "die-after-5"}
    )
    try:
        ep = _run_one(tmp_path, f"ws://127.0.0.1:{port}")
    finally:
        stop_server(proc)
    assert proc.returncode == 3  # the policy killed its server at the 6th act
    assert ep.status == "aborted" and not ep.scored
    assert f"policy server ws://127.0.0.1:{port} closed the connection" in ep.status_reason
    # Nothing listens any more: the next episode cannot even connect.
    again = _run_one(tmp_path, f"ws://127.0.0.1:{port}")
    assert again.status == "aborted" and "cannot reach policy server" in again.status_reason


def test_a_server_that_stops_answering_times_out_as_aborted(
    tmp_path: Path, thread_server, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("REMOTE_BEHAVIOUR", "slow")
    server = thread_server()
    ep = _run_one(tmp_path, f"ws://127.0.0.1:{server.port}?timeout=0.5")
    assert ep.status == "aborted"
    assert (
        ep.status_reason
        == f"policy server ws://127.0.0.1:{server.port} did not answer within 0.5 s"
    )


def test_a_failing_policy_sends_one_line_and_logs_the_traceback(
    scripted_server: int, server_log: Path
):
    policy = RemotePolicy(f"ws://127.0.0.1:{scripted_server}", PUSH[0])
    policy.reset(0)
    # The scripted policy reads obs["object_visible"] first: without it, it raises KeyError.
    with pytest.raises(RemotePolicyError) as info:
        policy.act({"image": np.zeros((2, 2, 3), np.uint8)})
    policy.close()
    assert str(info.value) == (
        f"policy server ws://127.0.0.1:{scripted_server} reported an error: "
        "error: KeyError: 'object_visible'"
    )
    text = server_log.read_text()
    assert "Traceback (most recent call last)" in text and "KeyError: 'object_visible'" in text


def test_the_api_key_is_required_when_set(thread_server, monkeypatch: pytest.MonkeyPatch):
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    server = thread_server(api_key="s3cret")
    url = f"ws://127.0.0.1:{server.port}"
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with pytest.raises(RemotePolicyError, match="HTTP 401"):
        RemotePolicy(url).reset(0)
    with pytest.raises(RemotePolicyError, match="HTTP 401"):
        RemotePolicy(url, api_key="wrong").reset(0)
    monkeypatch.setenv(API_KEY_ENV, "s3cret")
    policy = RemotePolicy(url, "echo")
    policy.reset(0)
    image = np.full((4, 4, 3), 10, np.uint8)
    assert policy.act({"image": image}).tolist() == [10.0, 10.0, 4.0, 1.0]
    policy.close()
    # openpi's client sends the same header.
    client = WebsocketClientPolicy(host="127.0.0.1", port=server.port, api_key="s3cret")
    assert client.infer({"image": image})["actions"].tolist() == [[10.0, 10.0, 4.0, 1.0]]
    # Health checks need no key.
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
        assert r.status == 200


def test_action_chunks_are_executed_before_asking_again(thread_server):
    server = thread_server(task="chunk")
    policy = RemotePolicy(f"ws://127.0.0.1:{server.port}")
    policy.reset(1)
    image = np.full((128, 128, 3), 51, np.uint8)  # mean 51 -> 0.2
    rows = [policy.act({"image": image}).tolist() for _ in range(7)]
    policy.close()
    # Chunks of 3: acts 1-3 from inference 1, 4-6 from inference 2, 7 from inference 3.
    assert [r[:2] for r in rows] == [[0, 1], [1, 1], [2, 1], [0, 2], [1, 2], [2, 2], [0, 3]]
    assert all(abs(r[2] - 0.2) < 1e-6 for r in rows)
    summary = policy.latency_summary()
    assert summary["inferences"] == 3 and summary["steps"] == 7


def test_policy_urls_are_checked():
    assert parse_policy_url("ws://gpu-box:8000?timeout=2.5") == ("ws://gpu-box:8000", 2.5)
    assert parse_policy_url("wss://gpu-box:443/pi0") == ("wss://gpu-box:443/pi0", 10.0)
    for bad in ("ws://:8000", "ws://host:port", "ws://host:1?timeout=0"):
        with pytest.raises(EvalError):
            parse_policy_url(bad)


def test_a_gymnasium_env_runs_a_served_policy(
    tmp_path: Path, thread_server, monkeypatch: pytest.MonkeyPatch
):
    from embodied_eval.runner.gym_side import GymSource

    monkeypatch.setenv("REMOTE_BEHAVIOUR", "zeros7")
    server = thread_server()
    options = RunOptions(
        sides=("sim",),
        executor="sequential",
        policy=f"ws://127.0.0.1:{server.port}",
        gym=GymSource("Pusher-v5", "tests.test_gym_envs:steps_quality"),
    )
    proto = _protocol("sim_suites.policies:scripted")
    summary = run_trials(
        proto, options, db_path=tmp_path / "s.db", out_dir=tmp_path / "o", show_progress=False
    )
    assert summary.written == 5 and summary.failed == 0
    for ep in _by_task(tmp_path / "s.db").values():
        assert ep.status == "ok" and ep.actions == 60 and ep.task_id == "Pusher-v5"
        assert ep.control["policy_latency_ms"]["inferences"] == 60


def test_wss_with_a_trusted_certificate(
    tmp_path: Path, thread_server, monkeypatch: pytest.MonkeyPatch
):
    from embodied_eval.remote.server import tls_context
    from tests.console_support import self_signed_tls

    cert, key = self_signed_tls(tmp_path)
    server = thread_server(task="echo", ssl_context=tls_context(str(cert), str(key)))
    image = np.full((4, 4, 3), 7, np.uint8)
    # Not trusted yet: the TLS handshake fails, said in one line.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(RemotePolicyError, match=r"cannot reach policy server wss://127\.0\.0\.1"):
        RemotePolicy(f"wss://127.0.0.1:{server.port}").reset(0)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    policy = RemotePolicy(f"wss://127.0.0.1:{server.port}")
    policy.reset(0)
    assert policy.act({"image": image}).tolist() == [7.0, 7.0, 4.0, 1.0]
    policy.close()


def test_served_factories_take_options_and_typos_fail_at_start(thread_server):
    server = thread_server("sim_suites.policies:random?seed=3")
    policy = RemotePolicy(f"ws://127.0.0.1:{server.port}", PUSH[0])
    policy.reset(None)  # no seed sent: the factory's seed=3 option decides
    expected = np.random.default_rng(3).uniform(-1.0, 1.0, size=4).astype(np.float32)
    assert np.array_equal(policy.act({"x": np.zeros(1)}), expected)
    policy.reset(5)  # a seed sent with episode_start re-seeds the served policy
    expected = np.random.default_rng(5).uniform(-1.0, 1.0, size=4).astype(np.float32)
    assert np.array_equal(policy.act({"x": np.zeros(1)}), expected)
    policy.close()
    with pytest.raises(EvalError, match="no attribute 'scriptd'"):
        PolicyServer("sim_suites.policies:scriptd")
