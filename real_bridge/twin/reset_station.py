"""The twin's automated reset station: the scene-reset service (std_srvs/Trigger) after a manifest
(`real_bridge.interface`).

The service's callback only queues the request and waits: the reset runs on the control loop's
thread (the camera's GL context lives there, and a new scene's first render must not stall the
state stream later), between ticks, with the node's lock held. One reset per manifest published:
the harness publishes the manifest before every reset it asks for and resends an unanswered
request (`deadlines.resend_s`), so a request with no new manifest since the last reset is
answered with that reset's result — resetting again would restart the scene (and the twin's
noise) under a harness that already goes on from the first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: How long the service's callback waits for the control loop to run the reset, s.
RESET_WAIT_S = 30.0


class ResetStation:
    """The manifests heard, the request waiting for the control loop and the last reset done.

    Args:
        lock: the node's lock (guards everything here).
        stats: the node's counters (`resets_repeated`: requests answered without a reset).
    """

    def __init__(self, lock: threading.RLock, stats: dict[str, int]) -> None:
        self.lock = lock
        self.stats = stats
        self.manifest_text: str | None = None
        self._manifests_heard = 0
        #: (manifests heard, result) of the last reset.
        self._last: tuple[int, tuple[bool, str]] | None = None
        self._request: tuple[threading.Event, dict[str, Any]] | None = None

    def on_manifest(self, msg: Any) -> None:
        """The manifest subscription's callback."""
        with self.lock:
            self.manifest_text = str(msg.data)
            self._manifests_heard += 1

    def on_request(self, request: Any, response: Any) -> Any:
        """The service's callback: queue the reset and wait for the control loop to run it."""
        done = threading.Event()
        result: dict[str, Any] = {}
        with self.lock:
            self._request = (done, result)
        if not done.wait(RESET_WAIT_S):
            response.success = False
            response.message = f"reset did not finish within {RESET_WAIT_S:.0f} s"
            return response
        response.success, response.message = result["success"], result["message"]
        return response

    def serve(self, reset: Callable[[str], tuple[bool, str]]) -> None:
        """Run a queued request (control thread, lock held): `reset(manifest_text)` resets the
        scene and returns (ok, the answer) — unless no manifest came since the last reset."""
        if self._request is None:
            return
        done, result = self._request
        self._request = None
        result["success"], result["message"] = self._answer(reset)
        done.set()

    def _answer(self, reset: Callable[[str], tuple[bool, str]]) -> tuple[bool, str]:
        if self.manifest_text is None:
            return False, "no manifest received yet"
        last = self._last
        if last is not None and last[0] == self._manifests_heard:
            self.stats["resets_repeated"] += 1
            return last[1]
        answer = reset(self.manifest_text)
        self._last = (self._manifests_heard, answer)
        return answer
