"""Policies served in the remote-policy tests (imported by the server process), and starting
`embodied-eval policy serve` as a process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class ScriptedBehaviour:
    """Behaviour picked by $REMOTE_BEHAVIOUR or the task name.

    - "die-after-N": acts normally, then kills the whole server process at act N+1;
    - "slow": sleeps 3 s per act (longer than the client's timeout in the test);
    - "zeros7": a zero action for Gymnasium's Pusher-v5;
    - "chunk": returns a chunk of 3 actions, row i = [i, count, mean(image)/255, 1];
    - "echo": returns [mean(image), image[0,0,0], shape[0], 1] from a uint8 `image` observation;
    - "hold-chunk": a joint-position policy (real side) returning chunks of 3 targets, all the
      arm posture (`joint_pos[:7]`) it saw at its first act.
    """

    name = "tests.remote_support:behaviour"

    def __init__(self, task: str | None) -> None:
        # $REMOTE_BEHAVIOUR wins over the task a client names (the sim runner sends its own).
        self.task = os.environ.get("REMOTE_BEHAVIOUR") or task or "echo"
        self.count = 0
        self.q0: np.ndarray | None = None

    @property
    def command_space(self) -> str:
        return "joint_position" if self.task == "hold-chunk" else "cartesian"

    def reset(self, seed: int | None = None) -> None:
        self.count = 0
        self.q0 = None

    def act(self, obs: Mapping[str, Any]) -> np.ndarray:
        self.count += 1
        if self.task.startswith("die-after-"):
            if self.count > int(self.task.rsplit("-", 1)[1]):
                os._exit(3)
            return np.zeros(4, dtype=np.float32)
        if self.task == "slow":
            time.sleep(3.0)
            return np.zeros(4, dtype=np.float32)
        if self.task == "zeros7":
            assert np.asarray(obs["observation"]).shape == (23,)  # Pusher-v5's observation
            return np.zeros(7, dtype=np.float32)
        if self.task == "hold-chunk":
            if self.q0 is None:
                self.q0 = np.asarray(obs["joint_pos"][:7], dtype=np.float32)
            return np.repeat(self.q0[None, :], 3, axis=0)
        image = np.asarray(obs["image"])
        if self.task == "chunk":
            mean = float(image.mean()) / 255.0
            return np.array([[i, self.count, mean, 1.0] for i in range(3)], dtype=np.float32)
        return np.array([image.mean(), image[0, 0, 0], image.shape[0], 1.0], dtype=np.float32)


def behaviour(task_id: str | None = None, **_: Any) -> ScriptedBehaviour:
    return ScriptedBehaviour(task_id)


ROOT = Path(__file__).resolve().parents[1]


def start_server(target: str, log: Path, *args: str, env: dict | None = None):
    """`embodied-eval policy serve TARGET --port 0` as a process; returns (process, port)."""
    command = [sys.executable, "-m", "embodied_eval", "policy", "serve", target, "--port", "0"]
    proc = subprocess.Popen(
        [*command, "--log-file", str(log), *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"on ws://127\.0\.0\.1:(\d+)", line)
    assert match, f"server did not start: {line!r}"
    return proc, int(match.group(1))


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)
