"""Any registered Gymnasium environment as the sim side of a paired trial.

The environment is made with `gymnasium.make(gym_id)`, reset with the spec's seed and stepped by
the policy until it terminates, truncates or reaches the protocol's `max_steps`. Quality q comes
from a quality function ("module:function" taking a `GymRollout`) or, without one, from
`info["is_success"]` at the last step (the gymnasium-robotics convention): q = 1 if it is true,
else 0. Success z = 1{q ≥ q*} as for every episode.

A policy is "module:factory" with `factory(env, seed) -> act`, `act(observation) -> action`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from embodied_eval.errors import EvalError
from embodied_eval.plugins import resolve
from embodied_eval.records import EpisodeOutcome, EpisodeSpec

if TYPE_CHECKING:
    from embodied_eval.runner.work import GymSource

#: The policy used on a Gymnasium source when none is given: uniform random actions.
RANDOM_POLICY = "embodied_eval.runner.gym_side:random_policy"


@dataclass(frozen=True)
class GymRollout:
    """What a quality function sees of one rollout.

    Attributes:
        total_reward: sum of rewards over the rollout.
        steps: environment steps taken.
        max_steps: the step limit it ran under.
        terminated / truncated: how the environment ended it (both False when the step limit
            stopped it first).
        final_info: the `info` dict of the last step (of reset when no step was taken).
    """

    total_reward: float
    steps: int
    max_steps: int
    terminated: bool
    truncated: bool
    final_info: Mapping[str, Any] = field(default_factory=dict)


def random_policy(env: Any, seed: int) -> Callable[[Any], Any]:
    """Uniform random actions from the environment's action space, seeded with the spec's seed."""
    env.action_space.seed(seed)
    return lambda _observation: env.action_space.sample()


def check_gym_id(gym_id: str) -> None:
    """Raise EvalError unless `gym_id` is a registered Gymnasium environment id."""
    import gymnasium

    try:
        gymnasium.spec(gym_id)
    except Exception as exc:
        raise EvalError(
            f"--gym-id {gym_id!r} is not a registered Gymnasium environment ({exc})", key="gym_id"
        ) from None


def rollout_quality(rollout: GymRollout, quality_fn: Callable[[GymRollout], float] | None) -> float:
    """q for one rollout: the quality function's value, or 1{info["is_success"]} without one.

    Raises ValueError when the environment reports no `is_success` and no function was given, or
    when the function returns something outside [0, 1].
    """
    if quality_fn is None:
        if "is_success" not in rollout.final_info:
            raise ValueError(
                "the environment's info has no 'is_success'; pass --quality module:function "
                "to score its rollouts"
            )
        return 1.0 if bool(rollout.final_info["is_success"]) else 0.0
    value = float(quality_fn(rollout))
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"the quality function returned {value!r}; q must lie in [0, 1]")
    return value


def run_gym_episode(
    spec: EpisodeSpec, source: GymSource, *, max_steps: int, started_at: str
) -> EpisodeOutcome:
    """Run one episode of `spec` on the Gymnasium environment `source.gym_id`.

    Args:
        spec: the manifest row (engine "gymnasium").
        source: environment id, quality function and `make` keyword arguments.
        max_steps: step limit.
        started_at: ISO UTC time the attempt started.

    Returns:
        An `ok` episode with q from `rollout_quality`; `control` holds the total reward, the
        step count and how the rollout ended. duration_s is wall-clock seconds.
    """
    import gymnasium

    quality_fn = resolve(source.quality) if source.quality else None
    factory = resolve(spec.policy)
    t0 = time.monotonic()
    env = gymnasium.make(source.gym_id, **dict(source.make_kwargs))
    try:
        observation, info = env.reset(seed=spec.seed)
        act = factory(env, spec.seed)
        total, steps, terminated, truncated = 0.0, 0, False, False
        while steps < max_steps and not (terminated or truncated):
            observation, reward, terminated, truncated, info = env.step(act(observation))
            total += float(reward)
            steps += 1
    finally:
        env.close()
    rollout = GymRollout(
        total_reward=total,
        steps=steps,
        max_steps=max_steps,
        terminated=bool(terminated),
        truncated=bool(truncated),
        final_info=dict(info),
    )
    quality = rollout_quality(rollout, quality_fn)
    episode = spec.to_episode(
        quality,
        status="ok",
        duration_s=time.monotonic() - t0,
        actions=steps,
        control={
            "total_reward": total,
            "steps": steps,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        },
        started_at=started_at,
    )
    return EpisodeOutcome(episode=episode)
