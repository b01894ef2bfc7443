"""`run_episode`: one simulated episode of a manifest row, returned as an `EpisodeOutcome`.

This is the sim engine the harness reaches through `embodied_eval.plugins.SIM_ENGINES`. It is
deterministic for a given spec: the same spec (and protocol, policy, faults) gives an identical
`Episode`, `started_at` included (it is a parameter; by default it is derived from the protocol's
window start, or the Unix epoch without a protocol).

Randomness comes from `spec.seed` only, split by `embodied_eval.seeds.episode_seeds` into the pair's
scene seed (placement, yaw, size: shared with the real half), the sim-only physics seed (domain
randomization, sensor noise, fault timing) and the policy seed (shared with the real half). The
record's `scene` says where the task object started.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from embodied_eval.protocol.policy_contract import CLIP, ActionCheck
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Artifact, EpisodeOutcome, EpisodeSpec
from embodied_eval.rollout.trajectory import record_observation, write_trajectory
from embodied_eval.seeds import episode_seeds
from sim_suites.env import ENGINES
from sim_suites.faults import FaultRequest
from sim_suites.policies import Policy, load_policy
from sim_suites.registration import TaskEnv, task_env
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.tasks import registered_family, task_spec
from sim_suites.variations import DEFAULT_RANDOMIZATION, RealityGap

#: Environments kept per (task, engine, mode, arm) so consecutive episodes skip the model build.
#: Resets restore the whole simulator state, so reuse does not change results (tested).
_ENV_CACHE: dict[tuple[str, str, str, str], TaskEnv] = {}
_ENV_CACHE_MAX = 8


def cached_env(
    task_id: str, engine: str, observation_mode: str = "state", robot: str = "panda"
) -> TaskEnv:
    """A process-local environment for (task, engine, observation mode, arm), built on first
    use."""
    key = (task_id, engine, observation_mode, robot)
    env = _ENV_CACHE.get(key)
    if env is None:
        if len(_ENV_CACHE) >= _ENV_CACHE_MAX:
            oldest = next(iter(_ENV_CACHE))
            _ENV_CACHE.pop(oldest).close()
        env = task_env(task_id, engine, robot=robot, observation_mode=observation_mode)
        _ENV_CACHE[key] = env
    return env


def run_episode(
    spec: EpisodeSpec,
    protocol: Protocol | None = None,
    *,
    policy: str | Policy | None = None,
    faults: Iterable[str | FaultRequest] = (),
    max_steps: int | None = None,
    record_dir: str | Path | None = None,
    reality_gap: RealityGap | None = None,
    started_at: str | None = None,
    safety: SafetyLimits | None = None,
    grasp: str | None = None,
) -> EpisodeOutcome:
    """Run one simulated episode of a manifest row.

    Args:
        spec: the manifest row; `spec.engine` is "mujoco" or "pybullet".
        protocol: supplies DR ranges (`[randomization]`), max_steps, q* and the QC tolerance of
            the instance, and safety thresholds; None uses the defaults (mild DR, the family's
            `max_steps` (400 at a table), the task's q*).
        policy: a policy object or import path; None uses `spec.policy`.
        faults: fault kinds or `FaultRequest`s to inject (none by default).
        max_steps: overrides the protocol's max_steps (control steps at 50 Hz; without either,
            the family's `max_steps`).
        record_dir: if given, the per-step trajectory is written there as
            `<episode_id>.npz` and listed in `Episode.artifacts`: `action`, `tcp`, `object`,
            `q` after each step, and `time` plus every observation array as `obs.<key>` as
            the policy saw it before each action (read by `embodied-eval export lerobot`).
        reality_gap: extra physics offsets (the twin robot's "real" world).
        started_at: ISO-8601 start time to record; None derives it deterministically.
        safety: monitor limits; None uses the protocol's thresholds over the defaults.
        grasp: "contact" or "assisted" (see `sim_suites.grasping`); None uses the protocol's
            `[sim] grasp` (default "contact"). The mode is recorded in `control["grasp_mode"]`.
    Returns:
        the Episode record plus the SafetyEvents the monitors emitted.
    """
    if spec.engine not in ENGINES:
        raise EvalError(
            f"engine: {spec.engine!r} is not a sim engine ({', '.join(ENGINES)})", key="engine"
        )
    task = task_spec(spec.task_id)
    if task.family != spec.family:
        raise EvalError(
            f"family: task {spec.task_id!r} belongs to {task.family!r}, not {spec.family!r}",
            key="family",
        )
    target_quality = spec.target_quality
    qc_tolerance = None
    randomization: dict[str, Any] = dict(DEFAULT_RANDOMIZATION)
    steps = registered_family(task.family).max_steps
    limits = safety or SafetyLimits()
    grasp_mode = grasp or (protocol.sim_grasp if protocol is not None else "contact")
    if protocol is not None:
        inst = protocol.instance(spec.task_id)
        target_quality = inst.target_quality
        qc_tolerance = inst.qc_tolerance
        randomization = {k: tuple(v) for k, v in protocol.randomization.items()}
        steps = protocol.max_steps
        if safety is None:
            limits = SafetyLimits.from_thresholds(protocol.safety_thresholds)
    if max_steps is not None:
        steps = max_steps
    if started_at is None:
        started_at = (
            f"{protocol.window_start.isoformat()}T00:00:00Z"
            if protocol is not None
            else "1970-01-01T00:00:00Z"
        )

    calibration = None
    if protocol is not None and protocol.sim_calibration and reality_gap is None:
        calibration, reality_gap = calibrated_gap(protocol)
    agent = load_policy(policy if policy is not None else spec.policy, spec.task_id)
    # A policy that sees through cameras says so (`observation_mode`); others get state.
    mode = getattr(agent, "observation_mode", "state")
    arm = protocol.sim_robot if protocol is not None else "panda"  # `[sim] robot`
    env = cached_env(spec.task_id, spec.engine, mode, arm)
    env.configure(
        randomization=randomization,
        drift=spec.drift,
        reality_gap=reality_gap,
        safety=limits,
        faults=faults,
        max_steps=steps,
        target_quality=target_quality,
        qc_tolerance_m=qc_tolerance,
        grasp=grasp_mode,
    )
    policy_name = policy if isinstance(policy, str) else getattr(agent, "name", spec.policy)
    seeds = episode_seeds(spec.seed)
    agent.reset(seeds.policy)
    obs, reset_info = env.reset(seed=seeds.physics, options={"scene_seed": seeds.scene})
    trace: dict[str, list[np.ndarray]] = {"action": [], "tcp": [], "object": [], "q": []}
    record = record_dir is not None
    trace_action, trace_tcp = trace["action"], trace["tcp"]
    trace_object, trace_q = trace["object"], trace["q"]
    actions = 0
    space = cast(spaces.Box, env.action_space)
    check = ActionCheck(
        str(policy_name),
        space.shape,
        space.low,
        space.high,
        clip=protocol is not None and protocol.out_of_range_actions == CLIP,
    )
    pending: deque[np.ndarray] = deque()
    while True:
        if not pending:
            # A chunk (H, 4) runs row by row before the policy is asked again.
            pending.extend(check.rows(agent.act(obs), actions))
        action = pending.popleft()
        if record:
            # What the policy saw when it chose this action (images included), for exports.
            record_observation(trace, obs, actions * env.control_dt)
        obs, _, terminated, truncated, _ = env.step(action)
        actions += 1
        if record:
            # The observation's arrays are fresh each step, so keeping references is safe. The
            # object's track is the true one (camera observations carry no object pose).
            trace_action.append(np.asarray(action, dtype=np.float64))
            trace_tcp.append(obs["tcp_pos"])
            trace_object.append(env.object_point)
            trace_q.append(obs["joint_pos"])
        if terminated or truncated:
            break
    summary = env.episode_summary()
    summary["control"]["actions_clipped"] = check.clipped
    if hasattr(agent, "latency_summary"):
        # A remote policy: the inference round trips of this episode.
        summary["control"]["policy_latency_ms"] = agent.latency_summary()
    artifacts: tuple[Artifact, ...] = ()
    if record_dir is not None:
        artifacts = (write_trajectory(Path(record_dir), spec.episode_id, trace),)
    randomization_record = dict(reset_info["randomization"])
    if reset_info["invalid_draws"]:
        # Instances already done at reset: recorded, redrawn, never counted.
        randomization_record["invalid_draws"] = reset_info["invalid_draws"]
    if reset_info.get("not_applied"):
        # Knobs this family has nothing to act on (e.g. object size on a drawer), with why.
        randomization_record["not_applied"] = reset_info["not_applied"]
    if reality_gap is not None:
        randomization_record["reality_gap"] = reality_gap.to_dict()
    if calibration is not None:
        randomization_record["calibration"] = calibration
    # The record keeps the policy actually run, the protocol's q* for the instance and the
    # drift's name next to its parameters; everything else is the manifest row's.
    episode = spec.to_episode(
        round(summary["quality"], 12),
        policy=str(policy_name),
        target_quality=target_quality,
        status=summary["status"],
        duration_s=round(summary["duration_s"], 9),
        drift={"name": spec.drift_name, **dict(spec.drift)},
        randomization=_jsonable(randomization_record),
        scene=_jsonable(reset_info["scene"]),
        actions=actions,
        plan_depth=int(getattr(agent, "plan_depth", 0)),
        faults=summary["faults"],
        control=_jsonable(summary["control"]),
        qc=round(summary["qc"], 12),
        energy_wh=round(summary["energy_wh"], 12),
        started_at=started_at,
        artifacts=artifacts,
        status_reason=summary["status_reason"],
    )
    return EpisodeOutcome(episode=episode, safety_events=summary["safety_events"])


def calibrated_gap(protocol: Protocol) -> tuple[dict[str, Any], RealityGap]:
    """The protocol's calibration file, verified, as the episode's reality gap.

    Returns:
        (what the episode record keeps: the file's hash, the fields applied and the parameters
        a sim episode cannot apply, with why; the `RealityGap`), in the file's units (the delay
        in seconds, the bandwidth in Hz).

    Raises:
        EvalError: the file was edited, is missing or was fitted on another robot.
    """
    from embodied_eval.protocol.calibration_file import read_calibration

    cal = read_calibration(protocol.sim_calibration, robot_id=protocol.robot_id)
    fields = cal.sim_gap()
    record = {
        "sha256": cal.sha256,
        "applied": dict(sorted(fields.items())),
        "not_applied": sorted(cal.not_mapped()),
    }
    return record, RealityGap(**fields)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return round(float(value), 12)
    if isinstance(value, (np.integer,)):
        return int(value)
    return value
