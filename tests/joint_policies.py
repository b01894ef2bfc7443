"""Joint-space test policies shared by the real-side tests (over ROS 2 and in process)."""

from __future__ import annotations

import numpy as np

#: A posture with the hand low over the table: TCP at z = 0.131 m (home's is at 0.401 m).
LOW_Q = np.array([0.0, 0.5, 0.0, -1.9, 0.0, 2.4, 0.785398])


class ReachDown:
    """A joint-space policy that lowers the hand to LOW_Q over 50 steps (cosine profile: peak
    1.4 rad/s and 4.4 rad/s² on joint 2, within its 2.175 rad/s and 7.5 rad/s²) and stays."""

    name = "tests.joint_policies:reach_down"
    command_space = "joint_position"

    def reset(self, seed=None):
        self.calls = 0

    def act(self, obs):
        if self.calls == 0:
            self.q0 = np.asarray(obs["joint_pos"][:7], dtype=float)
        self.calls += 1
        s = 0.5 * (1.0 - np.cos(np.pi * min(self.calls, 50) / 50))
        return self.q0 + s * (LOW_Q - self.q0)


def reach_down(task_id=None, **_):
    return ReachDown()
