"""Any registered Gymnasium environment as the sim side of a paired trial.

Two ways to name the environment:

- `--gym-id ID`: every sim episode runs `ID` and is recorded under family = task = `ID` (never
  under the protocol's unrelated task ids); seeds, pairs and episode ids stay the manifest's.
- `--engine gymnasium` with instances mapped in the protocol (`env_id`, `make_kwargs` in
  `[battery.<family>] instances`): each episode runs its instance's environment and is recorded
  under the protocol's task id.

The environment is made with `gymnasium.make(env_id, **make_kwargs)`, randomized where it exposes
its physics (`gym_physics`), reset with the spec's seed and stepped by the policy until it
terminates, truncates or reaches the protocol's `max_steps`. `duration_s` is simulated time,
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

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from embodied_eval.canonical import atomic_write_bytes
from embodied_eval.errors import EvalError
from embodied_eval.plugins import SUITE_POLICIES, resolve
from embodied_eval.protocol.policy_contract import CLIP, ActionCheck
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec
from embodied_eval.remote import is_remote_policy
from embodied_eval.remote.client import RemotePolicy
from embodied_eval.runner.gym_physics import apply_randomization, step_energy_j

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
        artifacts = (write_trace(Path(record_dir), spec.episode_id, trace),)
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


def write_trace(folder: Path, episode_id: str, trace: Mapping[str, list[Any]]) -> Artifact:
    """Write a per-step trajectory as `<folder>/trajectory.npz` (atomic) and describe it."""
    import io

    buffer = io.BytesIO()
    arrays = {k: np.asarray(v) for k, v in trace.items()}
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    data = buffer.getvalue()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trajectory.npz"
    digest = atomic_write_bytes(path, data)
    return Artifact(
        path=str(path.resolve()), sha256=digest, kind="trajectory", size_bytes=len(data)
    )
