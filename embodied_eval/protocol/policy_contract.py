"""The policy contract, checked at every call: what a policy must return, and what happens when
it does not.

A policy's `act(observation)` returns one action, an array of the action space's shape (the
built-in sims: (4,) float, [vx, vy, vz, g] in [−1, 1]), or a chunk of H ≥ 1 actions, shape
(H, *shape), executed row by row before the policy is asked again. `check_actions` turns what
the policy returned into those rows or refuses it with one `EvalError`,
"policy P returned … at step k: expected …", which ends the episode `error` (never a crash deep
in the physics). A value outside the action space's bounds is refused too unless the protocol
says `[sim] out_of_range_actions = "clip"`; then it is clipped and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError

#: The protocol's choices for out-of-range actions (see `embodied_eval.protocol.model`).
REFUSE, CLIP = "refuse", "clip"


@dataclass
class ActionCheck:
    """Checks one policy's actions against a Box action space, for one episode.

    Attributes:
        policy: the policy's name, as errors print it.
        shape: the shape of one action, e.g. (4,).
        low, high: the action space's bounds (scalars or arrays of `shape`).
        clip: clip out-of-range values (and count them) instead of refusing them.
        clipped: actions clipped so far in this episode.
    """

    policy: str
    shape: tuple[int, ...]
    low: Any = -1.0
    high: Any = 1.0
    clip: bool = False
    clipped: int = 0

    @property
    def expected(self) -> str:
        chunk = ", ".join(["H", *map(str, self.shape)])
        return f"a float array of shape {self.shape} or a chunk of shape ({chunk})"

    def _refuse(self, returned: str, step: int, expected: str) -> EvalError:
        return EvalError(
            f"policy {self.policy} returned {returned} at step {step}: expected {expected}",
            key="policy",
        )

    def rows(self, action: Any, step: int) -> list[np.ndarray]:
        """The action(s) to execute, one row per control step (EvalError when refused)."""
        if action is None or isinstance(action, (str, bytes, Mapping)):
            raise self._refuse(type(action).__name__, step, self.expected)
        try:
            arr = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise self._refuse(
                f"a {type(action).__name__} that is not a numeric array", step, self.expected
            ) from None
        single = arr.shape == self.shape
        if single:
            block = arr[None, ...]
        elif arr.ndim == len(self.shape) + 1 and arr.shape[1:] == self.shape and arr.shape[0]:
            block = arr
        else:
            raise self._refuse(f"an array of shape {arr.shape}", step, self.expected)
        bad = ~np.isfinite(block)
        if bad.any():
            where = np.argwhere(bad)[0]
            raise self._refuse(
                f"{float(block[tuple(where)]):g} at {_index(where, single)}", step, "finite numbers"
            )
        low = np.broadcast_to(np.asarray(self.low, dtype=np.float64), self.shape)
        high = np.broadcast_to(np.asarray(self.high, dtype=np.float64), self.shape)
        outside = (block < low) | (block > high)
        if outside.any():
            if not self.clip:
                where = np.argwhere(outside)[0]
                raise self._refuse(
                    f"{float(block[tuple(where)]):g} at {_index(where, single)}",
                    step,
                    f"values within the action space [{_bounds(low)}, {_bounds(high)}] (or "
                    '[sim] out_of_range_actions = "clip" in the protocol to clip and count them)',
                )
            self.clipped += int(outside.reshape(len(block), -1).any(axis=1).sum())
            block = np.clip(block, low, high)
        return list(block)


def _index(where: np.ndarray, single: bool) -> str:
    """Where in the action ("index 1") or in the chunk ("row 2, index 1") a value sits."""
    parts = [int(i) for i in where]
    inner = parts[1:]
    at = f"index {inner[0]}" if len(inner) == 1 else f"index {tuple(inner)}"
    return at if single else f"row {parts[0]}, {at}"


def _bounds(values: np.ndarray) -> str:
    flat = np.unique(values)
    return f"{float(flat[0]):g}" if flat.size == 1 else np.array2string(values, precision=3)
