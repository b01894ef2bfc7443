"""Episode functions for the real-Ray tests (imported by Ray workers)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from tests.test_runner_support import fake_episode


def slow_episode(spec: EpisodeSpec, protocol: Protocol | None = None, **kw: Any) -> EpisodeOutcome:
    """`fake_episode` after sleeping the instance's `params.sleep_s` seconds."""
    if protocol is not None:
        time.sleep(float(protocol.instance(spec.task_id).params.get("sleep_s", 0.0)))
    return fake_episode(spec, protocol, **kw)


def killable_episode(pid_dir: str, spec: EpisodeSpec) -> EpisodeOutcome:
    """On attempt 1 of push/block_1's s0 pair: say which process runs it, then wait to be killed.

    Every other episode (and the retry) is `fake_episode`.
    """
    if spec.task_id == "push/block_1" and spec.attempt == 1 and spec.pair_id.endswith(":s0"):
        tmp = Path(pid_dir) / "pid.tmp"
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, Path(pid_dir) / "pid")
        time.sleep(60)
    return fake_episode(spec)
