"""A request another thread hands to the twin's control loop and waits for (`TwinNode`).

The scene reset is asked for by the ROS service's thread but runs on the control loop's thread:
the camera's GL context lives there, and a new scene's first render must not stall the state
stream later. The asking thread waits (up to a deadline) for the loop to serve it.

One reset per manifest: the harness publishes the manifest before every reset it asks for and
resends an unanswered request (`deadlines.resend_s`); a request with no new manifest since the
last one served is answered with that one's result — resetting again would restart the scene (and
the twin's noise) under a harness that already goes on from the first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Handoff:
    """One pending request at a time (the caller's lock guards `pending`)."""

    def __init__(self) -> None:
        self.pending: tuple[threading.Event, list[tuple[bool, str]]] | None = None
        self._served: tuple[int, tuple[bool, str]] | None = None
        #: Manifests heard so far (the caller counts them in, lock held).
        self.manifests = 0
        #: Requests answered with the result of the one already served for the same manifest.
        self.repeated = 0

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
        """On the loop's thread, lock held: run the pending request, if any, and answer it —
        unless no manifest came since the last one served (module docstring)."""
        manifest = self.manifests
        if self.pending is not None:
            done, result = self.pending
            self.pending = None
            if self._served is not None and self._served[0] == manifest:
                self.repeated += 1
                result.append(self._served[1])
            else:
                answer = run()
                self._served = (manifest, answer)
                result.append(answer)
            done.set()
