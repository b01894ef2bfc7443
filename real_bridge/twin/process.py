"""Start and stop the twin robot as a separate OS process (for tests, the demo and benchmarks).

`TwinProcess` runs `python -m real_bridge.twin ...` with this process's environment passed through
unchanged plus the domain id and the discovery profile, waits for the twin's "ready" line, and
always kills it on exit (SIGTERM, then SIGKILL after a grace period), including when the caller
fails. The twin runs in its own session so a signal aimed at it never reaches the caller.
Nothing here imports rclpy.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from embodied_eval.errors import EvalError
from real_bridge.discovery import ros_environment


def twin_arguments(options: Mapping[str, Any]) -> list[str]:
    """Command-line flags of `python -m real_bridge.twin` from keyword options.

    `time_scale=4` → `--time-scale 4`; `True` → `--flag`; `False`/None → omitted.
    """
    args: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        else:
            args += [flag, str(value)]
    return args


class TwinProcess:
    """The twin robot in a child process.

    Args:
        domain_id: ROS_DOMAIN_ID for the twin (and for the bridge that talks to it).
        discovery: "loopback" (default), "system" or a Fast DDS XML path.
        ready_timeout_s: how long to wait for the twin's ready line.
        **options: twin flags (see `embodied-eval twin run --help`), e.g. `tracker_latency_s=0.1`,
            `stop_at_s=0.5`, `force_limit_n=40`.
    """

    def __init__(
        self,
        domain_id: int,
        *,
        discovery: str = "loopback",
        ready_timeout_s: float = 60.0,
        **options: Any,
    ) -> None:
        self.domain_id = domain_id
        self.discovery = discovery
        self.ready_timeout_s = ready_timeout_s
        self.args = [
            sys.executable,
            "-m",
            "real_bridge.twin",
            "--domain-id",
            str(domain_id),
            "--discovery",
            discovery,
            *twin_arguments(options),
        ]
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        self.ready: dict[str, Any] = {}
        self.exit_info: dict[str, Any] = {}
        self._stderr: IO[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise EvalError("twin: not started")
        return self.proc.pid

    def start(self) -> TwinProcess:
        """Spawn the twin and wait for it to report ready; EvalError (with its log) otherwise."""
        env = ros_environment(self.domain_id, self.discovery)
        self._stderr = tempfile.TemporaryFile(mode="w+", prefix="twin-stderr-")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            info = _json_line(line)
            if info.get("event") == "ready":
                self.ready = info
                return self
        log = self.stderr_text()[-2000:]
        self.stop()
        raise EvalError(f"twin did not become ready within {self.ready_timeout_s:.0f} s: {log}")

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            info = _json_line(line)
            if info.get("event") == "exit":
                self.exit_info = info
            self.lines.put(line)

    def stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the twin at once (simulates the robot process dying)."""
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM, wait up to `grace_s`, then SIGKILL; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        if self._reader is not None:
            self._reader.join(2.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> TwinProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None


def _json_line(line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def shm_leftovers(before: set[str] | None = None) -> set[str]:
    """Fast DDS shared-memory files in /dev/shm (not in `before`); empty where there is none."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        return set()
    now = {p.name for p in shm.iterdir() if "fastdds" in p.name or "fastrtps" in p.name}
    return now - (before or set())
