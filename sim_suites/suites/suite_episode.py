"""One manifest row on a standard suite's own environment, the same way for every suite."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.rollout.env_episode import EnvEpisode, run_env_episode
from embodied_eval.seeds import episode_seeds


def check_suite_engine(spec: EpisodeSpec, suite: str) -> None:
    """Refuse a manifest row of another engine."""
    if spec.engine != suite:
        raise EvalError(f"engine: {spec.engine!r} is not {suite!r}", key="engine")


def run_suite_episode(
    spec: EpisodeSpec,
    protocol: Protocol,
    env: Any,
    *,
    env_id: str,
    control: Mapping[str, Any],
    max_steps: int | None = None,
    record_dir: str | Path | None = None,
    started_at: str | None = None,
) -> EpisodeOutcome:
    """Run `spec` on the suite's environment `env` (closed afterwards): the suite's reset from the
    pair's seed, the policy's seed from its policy stream, success from the suite's own
    `info["success"]`, `control` (the suite's provenance) on the record.

    Args:
        max_steps: overrides the protocol's step limit.
        record_dir: the per-step trajectory is written there when given.
        started_at: ISO UTC start time (default: the protocol window's first day).
    """
    try:
        how = EnvEpisode(
            env_id=env_id,
            reset_seed=spec.seed,
            policy_seed=episode_seeds(spec.seed).policy,
            success_key="success",
            control=dict(control),
        )
        return run_env_episode(
            spec,
            env,
            how,
            protocol=protocol,
            max_steps=max_steps or protocol.max_steps,
            started_at=started_at or f"{protocol.window_start.isoformat()}T00:00:00Z",
            record_dir=Path(record_dir) if record_dir is not None else None,
        )
    finally:
        env.close()
