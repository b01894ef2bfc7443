"""The paired-trial runner: plan the manifest, run sim and real episodes, record, resume, stop.

- `plan`: the manifest (seed escrow) drawn from the protocol's sampling law μ.
- `executors`: sequential and local process pool executors behind `map_episodes`, and
  `make_executor`; `ray_executor` the Ray one; both build on `executor_base` (retry rules,
  batching), so neither imports the other.
- `backend`: the `RobotBackend` interface the real side runs through.
- `trials`: `run_trials`, what `embodied-eval run` calls.
- `stopping`: anytime-valid stopping of the real side against the AR gate.
- `gym_side`: any registered Gymnasium environment as the sim side (`gym_physics`: randomization
  and energy through a MuJoCo model).

Names are imported lazily: pool workers import `embodied_eval.runner.executors` and `.work`
only, and must not pay for the store (pandas) and the CLI on every start.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BackendFactory": "embodied_eval.runner.backend",
    "RobotBackend": "embodied_eval.runner.backend",
    "GymSource": "embodied_eval.runner.gym_side",
    "Manifest": "embodied_eval.manifest",
    "derive_seed": "embodied_eval.manifest",
    "plan_manifest": "embodied_eval.manifest",
    "RunSummary": "embodied_eval.runner.summary",
    "RunOptions": "embodied_eval.runner.options",
    "plan_for": "embodied_eval.runner.options",
    "run_trials": "embodied_eval.runner.trials",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'embodied_eval.runner' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
