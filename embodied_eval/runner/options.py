"""How to run a protocol: `RunOptions` (the `embodied-eval run` options) checked into settings.

`run_settings` checks the options against the protocol and the registries (sim engines, robot
backends, Gymnasium ids) and fixes the engines, policies and real-side engine name the manifest is
planned with; `check_importable` resolves what the selected sides will import, so a typo fails
before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.manifest import Manifest, plan_manifest
from embodied_eval.plugins import (
    ROBOT_BACKENDS,
    ROBOT_ENGINES,
    SIM_ENGINES,
    SUITE_CHECKS,
    SUITE_ENGINES,
    SUITE_POLICIES,
    resolve,
)
from embodied_eval.protocol.reader import Protocol
from embodied_eval.protocol.task_catalog import check_instances
from embodied_eval.records import SIDES
from embodied_eval.remote import is_remote_policy
from embodied_eval.remote.client import parse_policy_url
from embodied_eval.runner.backend import backend_target
from embodied_eval.runner.work import GYM_ENGINE, GymSource

#: Bounds of the run options (a larger value is a typing mistake).
MAX_RETRIES = 1000
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_WORKERS = 4096

EXECUTORS = ("sequential", "local", "ray")


@dataclass(frozen=True)
class RunOptions:
    """How to run a protocol (the `embodied-eval run` options).

    Attributes:
        sides: which sides to run now ("sim", "real"); the manifest always plans both.
        engines: sim engines (default: the protocol's `[sim] engines`; "gymnasium" with `gym`).
        policy: "module:factory" for both sides instead of the protocol's policies.
        executor / workers: how sim episodes fan out ("sequential", "local", "ray").
        max_retries: retries per manifest row after an error/aborted attempt.
        timeout_s: wall-clock limit per sim episode, s (local and ray executors).
        robot_backend: registered backend name or "module:factory" (default: `[real] backend`).
        robot_options: keyword arguments for the backend factory.
        gym: an external Gymnasium environment as the sim side.
        record: let sim engines write recordings as artifacts (real episodes always record).
        ray_address / ray_working_dir: Ray cluster to join and code folder to ship.
        dry_run: plan and escrow the manifest, report, run nothing.
    """

    sides: tuple[str, ...] = SIDES
    engines: tuple[str, ...] | None = None
    policy: str | None = None
    executor: str = "local"
    workers: int | None = None
    max_retries: int = 1
    timeout_s: float | None = None
    robot_backend: str | None = None
    robot_options: Mapping[str, Any] = field(default_factory=dict)
    gym: GymSource | None = None
    record: bool = False
    ray_address: str | None = None
    ray_working_dir: str | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class RunSettings:
    """The options resolved against the protocol: what the manifest is planned with."""

    engines: tuple[str, ...]
    engine_targets: dict[str, str]
    sim_policy: str
    real_policy: str
    real_backend: str
    real_engine: str
    sim_source: str
    sim_task: str = ""


def run_settings(protocol: Protocol, options: RunOptions) -> RunSettings:
    """Check the options against the protocol and the registries; EvalError on anything wrong."""
    bad = [s for s in options.sides if s not in SIDES]
    if bad or not options.sides:
        raise EvalError(f"--side: {bad or '[]'} is not sim, real or both", key="side")
    if options.executor not in EXECUTORS:
        raise EvalError(
            f"--executor {options.executor!r} is not one of {', '.join(EXECUTORS)}", key="executor"
        )
    if options.max_retries < 0:
        raise EvalError("--max-retries: must be 0 or more", key="max_retries")
    if options.max_retries > MAX_RETRIES:
        raise EvalError(f"--max-retries: must be at most {MAX_RETRIES}", key="max_retries")
    if options.timeout_s is not None and not (
        math.isfinite(options.timeout_s) and options.timeout_s > 0
    ):
        raise EvalError("--timeout: must be a positive number of seconds", key="timeout")
    if options.timeout_s is not None and options.timeout_s > MAX_TIMEOUT_S:
        raise EvalError(f"--timeout: must be at most {MAX_TIMEOUT_S:g} s (a week)", key="timeout")
    if options.workers is not None and options.workers < 1:
        raise EvalError("--workers: must be at least 1", key="workers")
    if options.workers is not None and options.workers > MAX_WORKERS:
        raise EvalError(f"--workers: must be at most {MAX_WORKERS}", key="workers")
    sim_task = ""
    gym_engine = options.gym is not None or tuple(options.engines or ()) == (GYM_ENGINE,)
    if gym_engine:
        from embodied_eval.runner.gym_side import RANDOM_POLICY, check_gym_id, env_name

        gym = options.gym or GymSource(gym_id="")
        if options.engines and tuple(options.engines) != (GYM_ENGINE,):
            raise EvalError("--engine cannot be combined with --gym-id", key="engine")
        if gym.gym_id:
            check_gym_id(gym.gym_id)
            sim_task = env_name(gym.gym_id)
        else:
            unmapped = [i.task_id for i in protocol.instances if not i.env_id]
            if unmapped:
                raise EvalError(
                    f"--engine gymnasium: instance {unmapped[0]!r} has no env_id; map every "
                    "instance in [battery.<family>] instances (env_id, make_kwargs) or pass "
                    "--gym-id",
                    key="env_id",
                )
            for env_id in sorted({i.env_id for i in protocol.instances}):
                check_gym_id(env_id)
        engines: tuple[str, ...] = (GYM_ENGINE,)
        targets: dict[str, str] = {}
        if options.policy is None and "sim" in options.sides:
            raise EvalError(
                "--gym-id / --engine gymnasium: name the policy with --policy module:factory, "
                "a factory(env, seed) -> act(observation) -> action (or ws://HOST:PORT); the "
                f"protocol's [sim] policy {protocol.sim_policy!r} is a policy for the built-in "
                f"sims and is not replaced silently. --policy {RANDOM_POLICY} runs uniform "
                "random actions",
                key="policy",
            )
        sim_policy = options.policy or RANDOM_POLICY
        sim_source = gym.label
    else:
        engines = tuple(options.engines or protocol.engines)
        unknown = [e for e in engines if e not in SIM_ENGINES]
        if unknown:
            raise EvalError(
                f"--engine {unknown[0]!r} is not a registered sim engine (known: "
                f"{', '.join(sorted([*SIM_ENGINES, GYM_ENGINE]))})",
                key="engine",
            )
        targets = {e: SIM_ENGINES[e] for e in engines}
        check_sim_only(protocol, engines, options.sides)
        if "sim" in options.sides:
            check_instances(protocol, engines)
        sim_policy = options.policy or protocol.sim_policy
        sim_source = ""
    backend = options.robot_backend or protocol.real_backend
    real_engine = ROBOT_ENGINES.get(backend, backend) if backend in ROBOT_BACKENDS else "external"
    return RunSettings(
        engines=engines,
        engine_targets=targets,
        sim_policy=sim_policy,
        real_policy=options.policy or protocol.real_policy,
        real_backend=backend,
        real_engine=real_engine,
        sim_source=sim_source,
        sim_task=sim_task,
    )


def check_sim_only(protocol: Protocol, engines: tuple[str, ...], sides: tuple[str, ...]) -> None:
    """A standard suite (`SUITE_ENGINES`) has no real counterpart: refuse a real side."""
    suites = [e for e in engines if e in SUITE_ENGINES]
    if not suites:
        return
    if sides == ("real",) or ("real" in sides and protocol.real_fraction > 0):
        raise EvalError(
            f"engine {suites[0]!r} is a standard suite with no real counterpart: set [sampling] "
            "real_fraction = 0 or run --side sim",
            key="side",
        )


def check_importable(settings: RunSettings, options: RunOptions) -> None:
    """Resolve what the selected sides will import, so a typo fails before anything runs."""
    if "real" in options.sides:
        backend_target(settings.real_backend)
        if is_remote_policy(settings.real_policy):
            parse_policy_url(settings.real_policy)
    if "sim" in options.sides:
        for engine, target in settings.engine_targets.items():
            resolve(target)
            if engine in SUITE_CHECKS and target == SIM_ENGINES.get(engine):
                resolve(SUITE_CHECKS[engine])()  # the suite's package installed and importable
        if is_remote_policy(settings.sim_policy):
            parse_policy_url(settings.sim_policy)
        else:
            resolve(SUITE_POLICIES.get(settings.sim_policy, settings.sim_policy))
        if options.gym is not None and options.gym.quality:
            resolve(options.gym.quality)


def plan_for(protocol: Protocol, options: RunOptions) -> Manifest:
    """The manifest `run_trials` would run for these options (nothing written)."""
    s = run_settings(protocol, options)
    return plan_manifest(
        protocol,
        engines=s.engines,
        sim_policy=s.sim_policy,
        real_policy=s.real_policy,
        real_engine=s.real_engine,
        sim_source=s.sim_source,
        sim_task=s.sim_task,
    )
