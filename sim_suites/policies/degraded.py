"""A degraded variant of the reference policy, for policy comparisons (A/B tests).

`DegradedPolicy` runs the family's scripted reference policy and corrupts what it commands:

- `action_noise`: Gaussian noise with this standard deviation (in normalized action units, the
  action space is [−1, 1]) added to every TCP velocity command, from the policy's own generator
  (`reset(seed)` re-seeds it, so an episode seed gives the same noise);
- `grasp_offset_m`: a constant lateral error (m) of the policy's belief of where things are,
  applied as a velocity bias that pulls the TCP off the waypoint (a misaligned grasp);
- `slowdown`: the commanded speed is multiplied by this factor in (0, 1] (a slower policy that
  may run out of steps).

With every knob at its neutral value (0, 0, 1) the variant acts exactly like the reference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from sim_suites.controller import V_MAX_MPS
from sim_suites.policies.script_base import GAIN, ScriptedPolicy
from sim_suites.tasks import task_family


class DegradedPolicy:
    """The reference policy of a family with action noise, a grasp offset and a slowdown."""

    name = "sim_suites.policies:degraded"

    def __init__(
        self,
        base: ScriptedPolicy,
        action_noise: float = 0.0,
        grasp_offset_m: float = 0.0,
        slowdown: float = 1.0,
        seed: int | None = None,
    ) -> None:
        if not 0.0 <= float(action_noise) <= 2.0:
            raise EvalError(f"action_noise: {action_noise} must be in [0, 2]", key="action_noise")
        if not 0.0 <= abs(float(grasp_offset_m)) <= 0.1:
            raise EvalError("grasp_offset_m: must be within ±0.1 m", key="grasp_offset_m")
        if not 0.0 < float(slowdown) <= 1.0:
            raise EvalError(f"slowdown: {slowdown} must be in (0, 1]", key="slowdown")
        self.base = base
        self.action_noise = float(action_noise)
        self.grasp_offset_m = float(grasp_offset_m)
        self.slowdown = float(slowdown)
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        self.base.reset(seed)
        self.rng = np.random.default_rng(self.seed if seed is None else seed)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        action = np.asarray(self.base.act(obs), dtype=np.float64).copy()
        v = action[:3] * self.slowdown
        if self.grasp_offset_m:
            # A belief shifted by the offset along x: the proportional law then steers there.
            v[0] += GAIN * self.grasp_offset_m / V_MAX_MPS
        if self.action_noise:
            v += self.rng.normal(0.0, self.action_noise, size=3)
        action[:3] = np.clip(v, -1.0, 1.0)
        return action.astype(np.float32)


#: Knobs of `degraded` and their defaults (the default variant has action noise 0.6).
KNOBS = {"action_noise": 0.6, "grasp_offset_m": 0.0, "slowdown": 1.0}


def degraded(task_id: str, seed: int | None = None, **options: Any) -> DegradedPolicy:
    """The degraded reference policy of the task's family (default: action noise 0.6).

    Knobs may be given in the policy path: `sim_suites.policies:degraded?action_noise=0.3`. The
    policy's `name` (what episodes record) repeats the knobs given, so two variants stay apart.
    """
    unknown = sorted(set(options) - set(KNOBS))
    if unknown:
        raise EvalError(
            f"degraded: unknown option(s) {', '.join(unknown)} (known: {', '.join(KNOBS)})",
            key="policy",
        )
    knobs = {**KNOBS, **options}
    policy = DegradedPolicy(
        task_family(task_id).script(),
        knobs["action_noise"],
        knobs["grasp_offset_m"],
        knobs["slowdown"],
        seed,
    )
    if options:
        policy.name += "?" + "&".join(f"{k}={json.dumps(v)}" for k, v in options.items())
    return policy
