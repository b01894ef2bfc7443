"""A request another thread hands to the twin's control loop and waits for (`TwinNode`).

The scene reset is asked for by the ROS service's thread but runs on the control loop's thread:
the camera's GL context lives there, and a new scene's first render must not stall the state
stream later. The asking thread waits (up to a deadline) for the loop to serve it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Handoff:
    """One pending request at a time (the caller's lock guards `pending`)."""

    def __init__(self) -> None:
        self.pending: tuple[threading.Event, list[tuple[bool, str]]] | None = None

    def ask(self, lock: threading.RLock, timeout_s: float) -> tuple[bool, str]:
        """Ask the loop and wait for its (success, message); (False, why) past `timeout_s`."""
        done: threading.Event = threading.Event()
        result: list[tuple[bool, str]] = []
        with lock:
            self.pending = (done, result)
        if not done.wait(timeout_s) or not result:
            return False, f"reset did not finish within {timeout_s:g} s"
        return result[0]

    def serve(self, run: Callable[[], tuple[bool, str]]) -> None:
        """On the loop's thread, lock held: run the pending request, if any, and answer it."""
        if self.pending is not None:
            done, result = self.pending
            self.pending = None
            result.append(run())
            done.set()
