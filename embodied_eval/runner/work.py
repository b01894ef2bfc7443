"""The function an executor runs for one sim episode, in whichever process it lands.

`run_sim_episode(context, spec)` never raises for a failure inside the episode: it returns an
`error` outcome with the traceback as an artifact. `functools.partial(run_sim_episode, context)`
pickles, so the same function runs in the sequential, local-pool and Ray executors.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from embodied_eval.plugins import resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.remote.client import RemotePolicyError
from embodied_eval.runner.gym_side import GYM_ENGINE, GymSource, run_gym_episode
from embodied_eval.runner.outcomes import Stopwatch, artifact_dir, checked_outcome, error_outcome


@dataclass(frozen=True)
class SimContext:
    """Everything a worker needs besides the spec (pickled once per task).

    Attributes:
        protocol: the protocol the manifest came from.
        engine_targets: engine name -> "module:function" running one episode, resolved from
            `embodied_eval.plugins.SIM_ENGINES` in the parent so workers see the same choice.
        out_dir: the run's output folder (artifacts go under `<out_dir>/artifacts/`).
        record: pass a record_dir to the engine (recordings become artifacts).
        max_steps: the step limit per episode (the protocol's `[sim] max_steps`).
        gym: the external Gymnasium source, when the sim side is one.
    """

    protocol: Protocol
    engine_targets: Mapping[str, str]
    out_dir: str
    record: bool = False
    max_steps: int | None = None
    gym: GymSource | None = None


def run_sim_episode(context: SimContext, spec: EpisodeSpec) -> EpisodeOutcome:
    """Run one sim episode; any exception becomes an `error` outcome with its traceback.

    Args:
        context: the run's `SimContext`.
        spec: the manifest row (side "sim").

    Returns:
        The engine's outcome, checked against the spec (`checked_outcome`).
    """
    watch = Stopwatch()
    record_dir = artifact_dir(context.out_dir, spec.episode_id) if context.record else None
    try:
        if spec.engine == GYM_ENGINE:
            if record_dir is not None:
                Path(record_dir).mkdir(parents=True, exist_ok=True)
            outcome: object = run_gym_episode(
                spec,
                context.gym or GymSource(gym_id=""),
                protocol=context.protocol,
                max_steps=context.max_steps or context.protocol.max_steps,
                started_at=watch.started_at,
                record_dir=record_dir,
            )
        else:
            engine = resolve(context.engine_targets[spec.engine])
            if record_dir is not None:
                Path(record_dir).mkdir(parents=True, exist_ok=True)
            outcome = engine(
                spec,
                context.protocol,
                max_steps=context.max_steps or context.protocol.max_steps,
                record_dir=record_dir,
                started_at=watch.started_at,  # when it really started (the record's timeline)
            )
        return checked_outcome(spec, outcome)
    except RemotePolicyError as exc:
        # The policy lives elsewhere and stopped answering: the episode could not finish.
        return error_outcome(
            spec,
            str(exc),
            status="aborted",
            started_at=watch.started_at,
            duration_s=watch.elapsed_s,
        )
    except Exception as exc:
        return error_outcome(
            spec,
            f"{type(exc).__name__}: {exc}",
            traceback_text=traceback.format_exc(),
            out_dir=context.out_dir,
            started_at=watch.started_at,
            duration_s=watch.elapsed_s,
        )


__all__ = ["GYM_ENGINE", "GymSource", "SimContext", "run_sim_episode"]
