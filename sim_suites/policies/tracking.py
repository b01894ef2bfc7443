"""Object tracking as a perception capability an expansion audit can attribute (seed §3.4).

The reference scripts read the object's pose every control step (live tracking). Without that
pipeline a policy localises the object once, at its first sighting, and afterwards knows only
what its own hand tells it: while the object is grasped it moves with the hand (the offset seen at
the grasp is kept). That is enough when the object stays put until grasped (pick-and-place), not
when the task moves it without a grasp (pushing). The example protocol's expansion audit
compares:

- `one_shot` (S_pre): the reference script on the first sighting only,
- `scripted` (S_post): the reference script with live tracking,
- `tracking_off` (S_abl): S_post with the tracking pipeline disabled (its pose input held at the
  first sighting), run as its own condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sim_suites.policies.script_base import ScriptedPolicy
from sim_suites.tasks import task_family


class FirstSighting:
    """Wraps a policy so it sees the object's pose as first sighted (or carried), not tracked."""

    def __init__(self, inner: ScriptedPolicy, name: str) -> None:
        self.inner = inner
        self.name = name
        self.sighting: np.ndarray | None = None
        self.in_hand: np.ndarray | None = None

    @property
    def plan_depth(self) -> int:
        return int(self.inner.plan_depth)

    def reset(self, seed: int | None = None) -> None:
        self.sighting = None
        self.in_hand = None
        self.inner.reset(seed)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        tcp = np.asarray(obs["tcp_pos"], dtype=float)
        if self.sighting is None and obs["object_visible"][0] >= 0.5:
            self.sighting = np.array(obs["object_pos"], dtype=float)
        if self.sighting is None:
            return self.inner.act(obs)
        if obs["grasped"][0] > 0.5:
            if self.in_hand is None:  # the grasp: the object is now where the hand holds it
                self.in_hand = self.sighting - tcp
            self.sighting = tcp + self.in_hand
        else:
            self.in_hand = None
        return self.inner.act({**obs, "object_pos": self.sighting.copy()})


def one_shot(task_id: str, **_: Any) -> FirstSighting:
    """S_pre: the family's reference script on a one-shot localisation."""
    return FirstSighting(task_family(task_id).script(), "sim_suites.policies.tracking:one_shot")


def tracking_off(task_id: str, **_: Any) -> FirstSighting:
    """S_abl: the tracking policy with its tracking pipeline disabled."""
    return FirstSighting(task_family(task_id).script(), "sim_suites.policies.tracking:tracking_off")
