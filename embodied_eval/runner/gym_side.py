"""Any registered Gymnasium environment as the sim side of a paired trial.

Two ways to name the environment:

- `--gym-id ID`: every sim episode runs `ID` and is recorded under family = task = `ID` (never
  under the protocol's unrelated task ids); seeds, pairs and episode ids stay the manifest's.
- `--engine gymnasium` with instances mapped in the protocol (`env_id`, `make_kwargs` in
  `[battery.<family>] instances`): each episode runs its instance's environment and is recorded
  under the protocol's task id.

The environment is made with `gymnasium.make(env_id, **make_kwargs)`, randomized where it exposes
its physics (`gym_physics`), reset with the spec's seed and stepped by the policy until it
terminates, truncates or reaches the protocol's `max_steps` (the loop of every made environment,
`embodied_eval.rollout.env_episode`). `duration_s` is simulated time,
`env.unwrapped.dt` × steps, when the environment exposes `dt` (wall time otherwise, and
`control.duration_source` says which). Quality q comes
from a quality function ("module:function" taking a `GymRollout`) or, without one, from
`info["is_success"]` at the last step (the gymnasium-robotics convention): q = 1 if it is true,
else 0. Success z = 1{q ≥ q*} as for every episode.

A policy is "module:factory" with `factory(env, seed) -> act`, `act(observation) -> action`, or a
policy server `ws://HOST:PORT` (an array observation is sent as `{"observation": array}`). It
must be named (`--policy`): the protocol's `[sim] policy` is a policy for the built-in sims and is
never silently replaced. Its actions are checked as every policy's are (`policy_contract`): an
element of the environment's action space (a Box action may come as a chunk of rows), finite,
within the bounds unless the protocol says `[sim] out_of_range_actions = "clip"`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.rollout.env_episode import EnvEpisode, run_env_episode
from embodied_eval.rollout.gym_physics import apply_randomization

#: Engine name of sim episodes run on an external Gymnasium environment.
GYM_ENGINE = "gymnasium"


@dataclass(frozen=True)
class GymSource:
    """An external Gymnasium environment used as the sim side.

    Attributes:
        gym_id: a registered environment id, e.g. "Pusher-v5"; empty: each protocol instance
            names its own (`env_id`, `make_kwargs`).
        quality: "module:function" mapping a `GymRollout` to q in [0, 1]; empty: read success
            from `info["is_success"]` at the last step (the gymnasium-robotics convention).
        make_kwargs: keyword arguments for `gymnasium.make`.
    """

    gym_id: str
    quality: str = ""
    make_kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What the run key records about this source."""
        return f"gym:{self.gym_id or 'protocol'}|quality:{self.quality or 'is_success'}"


#: The policy used on a Gymnasium source when none is given: uniform random actions.
RANDOM_POLICY = "embodied_eval.runner.gym_side:random_policy"


def random_policy(env: Any, seed: int) -> Callable[[Any], Any]:
    """Uniform random actions from the environment's action space, seeded with the spec's seed."""
    env.action_space.seed(seed)
    return lambda _observation: env.action_space.sample()


def check_gym_id(gym_id: str) -> None:
    """Raise EvalError unless `gym_id` is a registered Gymnasium environment id.

    "module:EnvId" first imports `module` (which registers its environments), as
    `gymnasium.make` does, e.g. "gymnasium_robotics:PointMaze_UMaze-v3".
    """
    import importlib

    import gymnasium

    module, _, name = gym_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        gymnasium.spec(name)
    except Exception as exc:
        raise EvalError(
            f"--gym-id {gym_id!r} is not a registered Gymnasium environment ({exc})", key="gym_id"
        ) from None


def env_name(gym_id: str) -> str:
    """The environment's own id, without a "module:" prefix (what episodes are recorded under)."""
    return gym_id.rpartition(":")[2]


def gym_target(
    spec: EpisodeSpec, source: GymSource, protocol: Protocol
) -> tuple[str, dict[str, Any]]:
    """(env id, make kwargs) for a spec: the source's id, else the protocol instance's mapping."""
    if source.gym_id:
        return source.gym_id, dict(source.make_kwargs)
    inst = protocol.instance(spec.task_id)
    if not inst.env_id:
        raise EvalError(
            f"task {spec.task_id!r} has no env_id in the protocol; map every instance "
            "(env_id, make_kwargs) or pass --gym-id",
            key="env_id",
        )
    return inst.env_id, {**dict(source.make_kwargs), **dict(inst.make_kwargs)}


def run_gym_episode(
    spec: EpisodeSpec,
    source: GymSource,
    *,
    protocol: Protocol,
    max_steps: int,
    started_at: str,
    record_dir: Path | None = None,
) -> EpisodeOutcome:
    """Run one episode of `spec` on its Gymnasium environment.

    Args:
        spec: the manifest row (engine "gymnasium").
        source: environment id (or the protocol's mapping), quality function, `make` kwargs.
        protocol: supplies the `[randomization]` ranges and the instance mapping.
        max_steps: step limit.
        started_at: ISO UTC time the attempt started.
        record_dir: when given, the per-step trajectory is written there (see `run_env_episode`).

    Returns:
        An `ok` episode with q from `rollout_quality`; `control` holds the total reward, the
        step count and how the rollout ended; `randomization` what was applied and what not.
    """
    import gymnasium

    quality_fn = resolve(source.quality) if source.quality else None
    env_id, make_kwargs = gym_target(spec, source, protocol)
    t0 = time.monotonic()
    env = gymnasium.make(env_id, **make_kwargs)
    rng = np.random.default_rng(np.random.SeedSequence([int(spec.seed) % 2**63, 0x67796D]))
    try:
        randomization = apply_randomization(env, protocol.randomization, rng)
        how = EnvEpisode(
            env_id=env_id,
            reset_seed=spec.seed,
            policy_seed=spec.seed,
            quality=quality_fn,
            randomization=randomization,
        )
        return run_env_episode(
            spec,
            env,
            how,
            protocol=protocol,
            max_steps=max_steps,
            started_at=started_at,
            record_dir=record_dir,
            t0=t0,
        )
    finally:
        env.close()
