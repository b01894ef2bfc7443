"""One episode on a made Gymnasium environment: reset, the policy's checked actions, the record.

The loop every environment that is not one of the project's own sims runs through: a Gymnasium
environment named by `--gym-id` or the protocol (`embodied_eval.runner.gym_side`) and the
standard suites' own environments (`sim_suites.suites`, Meta-World and LIBERO). It sits below the
runner so the suites can use it without importing the runner.

A policy is "module:factory" with `factory(env, seed) -> act`, `act(observation) -> action`, or a
policy server `ws://HOST:PORT` (an array observation is sent as `{"observation": array}`). Its
actions are checked as every policy's are (`policy_contract`): an element of the environment's
action space (a Box action may come as a chunk of rows), finite, within the bounds unless the
protocol says `[sim] out_of_range_actions = "clip"`. Quality q comes from a quality function
(taking a `GymRollout`) or, without one, from the environment's own success flag at the last step.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import SUITE_POLICIES, resolve
from embodied_eval.protocol.policy_contract import CLIP, ActionCheck
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec
from embodied_eval.remote import is_remote_policy
from embodied_eval.remote.client import RemotePolicy
from embodied_eval.rollout.gym_physics import step_energy_j
from embodied_eval.rollout.trajectory import write_trajectory


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


def rollout_quality(
    rollout: GymRollout,
    quality_fn: Callable[[GymRollout], float] | None,
    success_key: str = "is_success",
) -> float:
    """q for one rollout: the quality function's value, or 1{info[success_key]} without one.

    Raises ValueError when the environment reports no `success_key` and no function was given,
    or when the function returns something outside [0, 1].
    """
    if quality_fn is None:
        if success_key not in rollout.final_info:
            raise ValueError(
                f"the environment's info has no {success_key!r}; pass --quality "
                "module:function to score its rollouts"
            )
        return 1.0 if bool(rollout.final_info[success_key]) else 0.0
    value = float(quality_fn(rollout))
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"the quality function returned {value!r}; q must lie in [0, 1]")
    return value


@dataclass(frozen=True)
class EnvEpisode:
    """How one episode runs on an environment that is already made (and randomized).

    Attributes:
        env_id: what the record's `control.env_id` names.
        reset_seed: the seed `reset` gets (None: the environment was seeded when it was made).
        policy_seed: the seed a policy factory gets, `factory(env, policy_seed)`.
        quality: "module:function" resolved, or None for 1{info[success_key]} at the last step.
        success_key: the info key of the environment's own success signal.
        randomization: what was applied and what not; None: the environment reports it at
            reset, in `info["randomization"]`.
        control: further entries of the record's `control` (e.g. the suite and its version).
    """

    env_id: str
    reset_seed: int | None
    policy_seed: int
    quality: Callable[[GymRollout], float] | None = None
    success_key: str = "is_success"
    randomization: Mapping[str, Any] | None = None
    control: Mapping[str, Any] = field(default_factory=dict)


def run_env_episode(
    spec: EpisodeSpec,
    env: Any,
    how: EnvEpisode,
    *,
    protocol: Protocol,
    max_steps: int,
    started_at: str,
    record_dir: Path | None = None,
    t0: float | None = None,
) -> EpisodeOutcome:
    """Reset a made environment, let the spec's policy act until the episode ends, record it.

    The rollout stops when the environment terminates or truncates or after `max_steps`.
    `duration_s` is simulated time, `env.unwrapped.dt` × steps, when the environment exposes
    `dt` (wall time since `t0` otherwise). With `record_dir` the per-step trajectory is written
    there (`time`, `action`, the observation as `obs.observation` or, for a dict, `obs.<key>`,
    and the rendered frame as `obs.camera` when the env renders "rgb_array"). A reset `info`
    carrying `scene` gives the record's `scene`.

    The environment is not closed here: whoever made it closes it.
    """
    t_start = time.monotonic() if t0 is None else t0
    trace: dict[str, list[Any]] = {"time": [], "action": []}
    observation, info = env.reset(seed=how.reset_seed)
    randomization = (
        dict(how.randomization)
        if how.randomization is not None
        else dict(info.get("randomization", {}))
    )
    scene = dict(info.get("scene", {}))
    dt = getattr(env.unwrapped, "dt", None)
    step_dt = float(dt) if isinstance(dt, (int, float)) and dt > 0 else None
    remote = RemotePolicy(spec.policy, spec.task_id) if is_remote_policy(spec.policy) else None
    if remote is not None:
        remote.reset(how.policy_seed)
        act = remote_act(remote)
    else:
        factory = resolve(SUITE_POLICIES.get(spec.policy, spec.policy))
        act = gym_act(factory(env, how.policy_seed), spec.policy)
    next_action = ActionSource(env, spec.policy, act, protocol.out_of_range_actions == CLIP)
    camera = record_dir is not None and getattr(env, "render_mode", None) == "rgb_array"
    total, steps, terminated, truncated, energy_j = 0.0, 0, False, False, 0.0
    while steps < max_steps and not (terminated or truncated):
        action = next_action(observation, steps)
        if record_dir is not None:
            trace["time"].append(steps * (step_dt or 0.0))
            trace["action"].append(np.asarray(action, dtype=np.float64))
            parts = (
                observation if isinstance(observation, Mapping) else {"observation": observation}
            )
            for key, value in parts.items():
                trace.setdefault(f"obs.{key}", []).append(np.asarray(value))
            if camera:
                # The rendered frame of the state the policy acted on, as a camera stream.
                trace.setdefault("obs.camera", []).append(np.asarray(env.render(), np.uint8))
        observation, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        if step_dt is not None:
            energy_j += step_energy_j(env, step_dt)
    rollout = GymRollout(
        total_reward=total,
        steps=steps,
        max_steps=max_steps,
        terminated=bool(terminated),
        truncated=bool(truncated),
        final_info=dict(info),
    )
    quality = rollout_quality(rollout, how.quality, how.success_key)
    artifacts: tuple[Artifact, ...] = ()
    if record_dir is not None and steps:
        artifacts = (write_trajectory(Path(record_dir), spec.episode_id, trace),)
    duration = steps * step_dt if step_dt is not None else time.monotonic() - t_start
    episode = spec.to_episode(
        quality,
        status="ok",
        duration_s=round(duration, 9),
        actions=steps,
        control={
            "env_id": how.env_id,
            **dict(how.control),
            "total_reward": total,
            "steps": steps,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "duration_source": "simulated" if step_dt is not None else "wall",
            "actions_clipped": next_action.clipped(),
            **({"policy_latency_ms": remote.latency_summary()} if remote is not None else {}),
        },
        randomization=randomization,
        scene=scene,
        drift={"name": spec.drift_name, **dict(spec.drift), "applied": False},
        energy_wh=round(energy_j / 3600.0, 12),
        started_at=started_at,
        artifacts=artifacts,
    )
    return EpisodeOutcome(episode=episode)


def gym_act(made: Any, policy: str) -> Callable[[Any], Any]:
    """The `act` a Gymnasium policy factory returned, or an EvalError saying what was wrong."""
    if callable(made):
        return cast(Callable[[Any], Any], made)
    hint = (
        " (an object with reset/act is a policy for the built-in sims, made by factory(task_id))"
        if hasattr(made, "act")
        else ""
    )
    raise EvalError(
        f"policy {policy}: with a Gymnasium environment a policy is factory(env, seed) -> "
        f"act(observation) -> action; the factory returned a {type(made).__name__}, which is "
        f"not callable{hint}",
        key="policy",
    )


class ActionSource:
    """The checked actions of a Gymnasium policy, step by step (see `policy_contract`).

    A Box action space: each `act` result is checked (type, shape or a chunk of rows, finite,
    within the bounds unless `clip`) and a chunk runs row by row. Any other space: the action
    must be an element of it.
    """

    def __init__(self, env: Any, policy: str, act: Callable[[Any], Any], clip: bool) -> None:
        from gymnasium import spaces

        self.act = act
        self.space = env.action_space
        self.policy = policy
        self.check = (
            ActionCheck(policy, tuple(self.space.shape), self.space.low, self.space.high, clip)
            if isinstance(self.space, spaces.Box)
            else None
        )
        self.pending: deque[Any] = deque()

    def __call__(self, observation: Any, step: int) -> Any:
        if self.pending:
            return self.pending.popleft()
        action = self.act(observation)
        if self.check is None:
            if not self.space.contains(action):
                raise EvalError(
                    f"policy {self.policy} returned {action!r} at step {step}: expected an "
                    f"element of {self.space}",
                    key="policy",
                )
            return action
        rows = self.check.rows(action, step)
        self.pending.extend(row.astype(self.space.dtype) for row in rows[1:])
        return rows[0].astype(self.space.dtype)

    def clipped(self) -> int:
        return self.check.clipped if self.check is not None else 0


def remote_act(remote: RemotePolicy) -> Callable[[Any], Any]:
    """`act(observation)` through a policy server: a dict observation is sent as it is, an
    array as `{"observation": array}`."""

    def act(observation: Any) -> Any:
        obs = observation if isinstance(observation, Mapping) else {"observation": observation}
        return remote.act(obs)

    return act
