"""The twin's object tracker as a sensor: noise, latency and dropouts while the hand hides the object.

A lab's tag tracker or motion-capture system is not the scene's truth: it is noisy, it reports a
pose some time after the moment it describes, and it loses the object when the hand covers it.
`TrackerSensor` turns the twin's true object pose into what such a tracker publishes, with the
knobs of the twin's reality gap (`TwinGap`):

- noise: each published position gets N(0, `object_pose_noise_m`²) per axis;
- latency: a reading published at time t describes the scene at t − `tracker_latency_s` and is
  stamped with that earlier time (so the delay shows in a recording as receive time − stamp);
- dropouts: nothing is published for a moment when, at that moment, the hand (TCP) was over the
  tracked point — within `tracker_occlusion_radius_m` horizontally, from `OVER_MIN_M` up to
  `tracker_occlusion_height_m` above it (an overhead tracker; a hand beside the object at its
  height, pushing it, does not hide it) — or (with `tracker_hidden_when_held`) held the object.

Nothing here imports ROS: the twin node feeds it the truth every tick and publishes its readings.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from real_bridge.twin.settings import TwinGap

#: The hand hides the object from above only: at least this far above its tracked point, m.
OVER_MIN_M = 0.03


@dataclass(frozen=True)
class TrackerReading:
    """One published tracker pose: when it was true (stamp, ns), position (3,) and quaternion
    (4, w first)."""

    stamp_ns: int
    position: np.ndarray
    quat: np.ndarray


def hand_occludes(
    gap: TwinGap, point: np.ndarray, tcp: np.ndarray, holding: bool
) -> bool:
    """Whether the hand hides the tracked `point` from the tracker (see the module docstring)."""
    if holding and gap.tracker_hidden_when_held:
        return True
    if gap.tracker_occlusion_radius_m <= 0:
        return False
    horizontal = float(np.hypot(tcp[0] - point[0], tcp[1] - point[1]))
    above = float(tcp[2] - point[2])
    return horizontal <= gap.tracker_occlusion_radius_m and OVER_MIN_M <= above <= (
        gap.tracker_occlusion_height_m
    )


class TrackerSensor:
    """The tracker of one twin (see the module docstring).

    Args:
        gap: the twin's reality gap (noise, latency and occlusion knobs).
    """

    def __init__(self, gap: TwinGap) -> None:
        self.gap = gap
        self._truth: deque[tuple[float, int, np.ndarray, np.ndarray, bool]] = deque()
        self.dropouts = 0

    def reset(self) -> None:
        """Forget the history (a new scene)."""
        self._truth.clear()

    def observe(
        self,
        sim_s: float,
        stamp_ns: int,
        pose: tuple[np.ndarray, np.ndarray] | None,
        tcp: np.ndarray,
        holding: bool,
    ) -> None:
        """Record the truth at simulation time `sim_s` (stamped `stamp_ns`)."""
        if pose is None:
            return
        point, quat = pose
        hidden = hand_occludes(self.gap, point, tcp, holding)
        self._truth.append((sim_s, stamp_ns, np.array(point, float), np.array(quat, float), hidden))

    def reading(self, sim_s: float, rng: np.random.Generator) -> TrackerReading | None:
        """What the tracker publishes at `sim_s`: the newest truth at least `tracker_latency_s`
        old, with noise; None before there is one or while the hand hid the object then."""
        due = sim_s - self.gap.tracker_latency_s + 1e-9
        chosen = None
        while self._truth and self._truth[0][0] <= due:
            chosen = self._truth.popleft()
        if chosen is None:
            return None
        # Keep the chosen sample: the next reading may be due before a newer one is old enough.
        self._truth.appendleft(chosen)
        _, stamp_ns, point, quat, hidden = chosen
        if hidden:
            self.dropouts += 1
            return None
        noise = self.gap.object_pose_noise_m
        position = point + rng.normal(0.0, noise, 3) if noise > 0 else point.copy()
        return TrackerReading(stamp_ns, position, quat.copy())
