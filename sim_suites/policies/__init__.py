"""Policies: the protocol every policy follows and the factories a protocol names.

A policy has `reset(seed)` and `act(obs) -> action` (a float32 array of the env's action space).
A protocol names a policy by import path, e.g. `sim_suites.policies:scripted`; the factory is
called with the task id (and keyword options) and returns a fresh policy:

- `scripted(task_id)`: the family's reference policy with recovery (its script, registered with
  the family: `sim_suites.families`), on state.
- `vision(task_id)`: the same policy finding the part in the scene camera's RGB-D images
  (`vision.py`); it asks for the `rgbd` observation mode and reads no object pose.
- `null(task_id)`: does nothing (holds still with the gripper open).
- `random(task_id, seed=None)`: uniform random actions from its own generator; `reset(seed)`
  re-seeds it, so a given episode seed gives the same actions.
- `degraded(task_id, action_noise=0.6, grasp_offset_m=0, slowdown=1)`: the reference policy with
  action noise, a misaligned grasp and/or a slowdown (`degraded.py`), for A/B comparisons.

Keyword options can ride on the import path after a `?`, as `key=value` pairs joined by `&`
(values read as JSON when they parse): `sim_suites.policies:degraded?action_noise=0.3`.

A policy named `ws://HOST:PORT` (or `wss://…`) is served by a policy server over the openpi
websocket protocol (`embodied_eval.remote.client.RemotePolicy`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import resolve
from embodied_eval.remote import is_remote_policy
from sim_suites.policies.degraded import DegradedPolicy, degraded
from sim_suites.policies.script_base import ScriptedPolicy
from sim_suites.policies.vision import VisionPolicy
from sim_suites.tasks import task_family


@runtime_checkable
class Policy(Protocol):
    """What the episode runner and the twin robot call."""

    name: str

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (a seed for policies with randomness)."""

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Action (4,) float32 in [−1, 1] for an observation."""


class NullPolicy:
    """Does nothing: zero velocity, gripper open. The floor every policy must beat."""

    name = "sim_suites.policies:null"

    def reset(self, seed: int | None = None) -> None:
        return None

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)


class RandomPolicy:
    """Uniform random actions in [−1, 1]⁴ from an explicit generator."""

    name = "sim_suites.policies:random"

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(self.seed if seed is None else seed)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.rng.uniform(-1.0, 1.0, size=4).astype(np.float32)


def scripted(task_id: str, **_: Any) -> ScriptedPolicy:
    """The reference policy of the task's family."""
    return task_family(task_id).script()


def vision(task_id: str, **_: Any) -> VisionPolicy:
    """The reference policy of the task's family, seeing the part through the scene camera."""
    return VisionPolicy(task_id)


def null(task_id: str | None = None, **_: Any) -> NullPolicy:
    """The null policy (task-independent)."""
    return NullPolicy()


def random(task_id: str | None = None, seed: int | None = None, **_: Any) -> RandomPolicy:
    """The random policy with an explicit seed (None: seeded by `reset(seed)`)."""
    return RandomPolicy(seed)


def policy_options(target: str) -> tuple[str, dict[str, Any]]:
    """Split `package.module:factory?key=value&key=value` into the path and keyword options."""
    path, _, query = target.partition("?")
    options: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise EvalError(f"policy {target!r}: option {item!r} is not key=value", key="policy")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return path, options


def load_policy(target: str | Policy | Callable[..., Policy], task_id: str) -> Policy:
    """A policy from an import path `package.module:factory[?key=value&...]`, a policy server
    URL (`ws://…`), a factory, or a policy object."""
    if is_remote_policy(target):
        from embodied_eval.remote.client import RemotePolicy

        return RemotePolicy(str(target), task_id)
    options: dict[str, Any] = {}
    if isinstance(target, str):
        path, options = policy_options(target)
        target = resolve(path)
    if isinstance(target, Policy):
        return target
    if callable(target):
        policy = target(task_id, **options)
        if not isinstance(policy, Policy):
            raise EvalError(
                f"policy factory {target!r} returned {type(policy).__name__}, "
                "which lacks reset(seed) / act(obs)",
                key="policy",
            )
        return policy
    raise EvalError(f"policy: cannot use {target!r} as a policy", key="policy")


__all__ = [
    "DegradedPolicy",
    "NullPolicy",
    "Policy",
    "RandomPolicy",
    "VisionPolicy",
    "degraded",
    "load_policy",
    "null",
    "policy_options",
    "random",
    "scripted",
    "vision",
]
