"""Small real episode functions and a robot backend for the runner tests (no tests in here).

They live in an importable module so spawned pool workers and CLI subprocesses can load them by
"tests.test_runner_support:<name>". Run as `python -m tests.test_runner_support ARGS` it is the
`embodied-eval` CLI with the sim engines pointed at `fake_episode` (for kill/resume tests).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.protocol.reader import Protocol, protocol_from_mapping
from embodied_eval.records import Episode, EpisodeOutcome, EpisodeSpec, SafetyEvent, utc_now_iso

HERE = "tests.test_runner_support"
#: Seconds each fake sim episode sleeps (set by the kill/resume tests).
SLEEP_ENV = "RUNNER_TEST_SLEEP_S"


def tiny_protocol(**changes: Any) -> Protocol:
    """One family of 5 instances (the admissible minimum), 2 drifts, 2 seeds: 20 pairs.

    `changes` patch sections key by key; `battery` and `drift` are replaced whole. The "fake"
    robot backend is registered first, as a lab registers its backend before loading a protocol.
    """
    from embodied_eval.plugins import ROBOT_BACKENDS

    ROBOT_BACKENDS.setdefault("fake", f"{HERE}:FakeBackend")
    data: dict[str, Any] = {
        "protocol": {"name": "runner-tiny", "version": "1", "base_seed": 7},
        "window": {"id": "w-test", "start": "2026-11-01", "end": "2026-11-30"},
        "battery": {
            "push": {
                "target_quality": 0.5,
                "instances": [f"push/block_{i}" for i in range(5)],
            }
        },
        "drift": {"nominal": {"day": 0}, "worn": {"day": 14, "friction_scale": 0.9}},
        "sampling": {"seeds_per_instance": 2, "real_fraction": 0.4},
        "sim": {
            "engines": ["mujoco", "pybullet"],
            "max_steps": 20,
            "policy": f"{HERE}:fake_policy",
        },
        "real": {"backend": "fake"},
    }
    for section, values in changes.items():
        if section in ("battery", "drift"):  # replaced whole
            data[section] = values
        else:  # other sections: keys patched
            data[section] = {**data.get(section, {}), **values}
    return protocol_from_mapping(data)


def fake_policy(*_args: Any, **_kwargs: Any) -> Any:
    """A policy factory the fake engines never call (the spec only names it)."""
    raise NotImplementedError


def _episode(spec: EpisodeSpec, quality: float, status: str = "ok", **extra: Any) -> Episode:
    return spec.to_episode(quality, status=status, started_at=utc_now_iso(), **extra)


def fake_quality(spec: EpisodeSpec) -> float:
    """A deterministic q in [0, 1) from the spec's seed, engine and drift."""
    salt = sum(map(ord, spec.engine + spec.drift_name))
    return float(np.random.default_rng([spec.seed, salt]).random())


def fake_episode(
    spec: EpisodeSpec,
    protocol: Protocol | None = None,
    *,
    max_steps: int | None = None,
    record_dir: Path | None = None,
    **_: Any,
) -> EpisodeOutcome:
    """A sim episode: q from the seed; a contact safety event when q < 0.2; optional sleep."""
    time.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    q = fake_quality(spec)
    events: tuple[SafetyEvent, ...] = ()
    if q < 0.2:
        events = (SafetyEvent(kind="contact", contact_force_n=40.0 + 100 * q, step=3),)
    return EpisodeOutcome(episode=_episode(spec, q, actions=max_steps or 0), safety_events=events)


def _first_of(spec: EpisodeSpec, task_id: str) -> bool:
    return spec.task_id == task_id and spec.attempt == 1 and spec.pair_id.endswith(":s0")


def crashing_episode(spec: EpisodeSpec, *args: Any, **kwargs: Any) -> EpisodeOutcome:
    """Kills its worker process (os._exit) on attempt 1 of push/block_1's s0 pairs."""
    if _first_of(spec, "push/block_1"):
        time.sleep(0.05)
        os._exit(3)
    return fake_episode(spec, *args, **kwargs)


def raising_episode(spec: EpisodeSpec, *args: Any, **kwargs: Any) -> EpisodeOutcome:
    """Raises on attempt 1 of push/block_2's s0 pairs."""
    if _first_of(spec, "push/block_2"):
        raise RuntimeError("gripper model exploded")
    return fake_episode(spec, *args, **kwargs)


def hanging_episode(spec: EpisodeSpec, *args: Any, **kwargs: Any) -> EpisodeOutcome:
    """Hangs (sleeps an hour) on attempt 1 of push/block_3's s0 pairs."""
    if _first_of(spec, "push/block_3"):
        time.sleep(3600)
    return fake_episode(spec, *args, **kwargs)


def mislabelling_episode(spec: EpisodeSpec, *args: Any, **kwargs: Any) -> EpisodeOutcome:
    """Returns an episode with the wrong seed (an engine bug the runner must catch)."""
    outcome = fake_episode(spec, *args, **kwargs)
    return EpisodeOutcome(episode=outcome.episode.replace(seed=spec.seed + 1))


def cartpole_quality(rollout: Any) -> float:
    """q = the fraction of the step limit the pole stayed up."""
    return rollout.steps / rollout.max_steps


def balance_policy(env: Any, seed: int) -> Any:
    """Push the cart toward the side the pole is falling to (angle + angular velocity)."""
    return lambda obs: int(obs[2] + obs[3] > 0)


#: (db path, protocol name) of each call to `recording_ingest`.
INGEST_CALLS: list[tuple[str, str]] = []


def recording_ingest(db_path: Any, protocol: Protocol) -> int:
    """Stands in for the incident log's ingest_safety_events and remembers being called."""
    INGEST_CALLS.append((str(db_path), protocol.name))
    return 0


class FakeBackend:
    """A robot backend whose episodes succeed with probability `p` (deterministic per seed).

    Options: p (success probability), abort (every episode aborts), fail_connect, raise_on
    (task id whose attempt-1 episodes raise), sleep_s (seconds per episode).
    """

    def __init__(
        self,
        protocol: Protocol,
        p: float = 0.5,
        abort: bool = False,
        fail_connect: bool = False,
        raise_on: str = "",
        sleep_s: float = 0.0,
    ) -> None:
        self.protocol = protocol
        self.p = float(p)
        self.abort = abort
        self.fail_connect = fail_connect
        self.raise_on = raise_on
        self.sleep_s = float(sleep_s)
        self.connected = False

    def connect(self) -> None:
        if self.fail_connect:
            from embodied_eval.errors import EvalError

            raise EvalError("robot at 10.0.0.2 did not answer (is the bridge running?)")
        self.connected = True

    def disconnect(self) -> None:
        self.connected = False

    def attach_live(self, live: object) -> None:
        self.live = live

    def __enter__(self) -> FakeBackend:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def run_episode(
        self, spec: EpisodeSpec, protocol: Protocol, record_dir: Path | None
    ) -> EpisodeOutcome:
        assert self.connected
        time.sleep(self.sleep_s)
        if self.raise_on and spec.task_id == self.raise_on and spec.attempt == 1:
            raise ConnectionError("bridge lost")
        if self.abort:
            return EpisodeOutcome(
                episode=_episode(spec, 0.0, "aborted", status_reason="protective stop latched")
            )
        u = float(np.random.default_rng([spec.seed, 99]).random())
        q = 1.0 if u < self.p else 0.0
        return EpisodeOutcome(episode=_episode(spec, q, duration_s=30.0))


def main(argv: list[str]) -> int:
    """The CLI with sim engines and the "fake" robot backend pointed at this module."""
    from embodied_eval.cli.main import main as cli_main
    from embodied_eval.plugins import ROBOT_BACKENDS, SIM_ENGINES

    for engine in ("mujoco", "pybullet"):
        SIM_ENGINES[engine] = f"{HERE}:fake_episode"
    ROBOT_BACKENDS["fake"] = f"{HERE}:FakeBackend"
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
