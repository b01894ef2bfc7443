"""Run the twin robot in this process until SIGTERM/SIGINT.

Prints one JSON line `{"event": "ready", ...}` to stdout when the node serves its interface, and
`{"event": "exit", ...}` with its counters when it stops.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from real_bridge.discovery import configure_process
from real_bridge.twin.plant import Plant
from real_bridge.twin.settings import TwinSettings


def _say(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def run_twin(
    settings: TwinSettings, plant_factory: Callable[[TwinSettings], Plant] | None = None
) -> int:
    """Serve the twin robot until a signal asks it to stop; returns the exit status (0).

    Args:
        settings: the twin's settings (domain, names, gap, monitors, rate).
        plant_factory: builds the physics; default: the sim_suites plant (`SimSuitesPlant`).
    """
    configure_process(settings.bridge.domain_id, settings.bridge.discovery)
    if plant_factory is None:
        from real_bridge.twin.sim_plant import SimSuitesPlant

        plant_factory = SimSuitesPlant
    plant = plant_factory(settings)
    from rclpy.executors import ExternalShutdownException

    from real_bridge.twin.node import TwinNode

    node = TwinNode(settings, plant)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        node.shutdown()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        node.run(
            on_ready=lambda: _say(
                event="ready",
                pid=os.getpid(),
                domain_id=settings.bridge.domain_id,
                state_rate_hz=settings.state_rate_hz,
                joints=list(plant.joint_names),
            )
        )
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        node.close()
        _say(event="exit", **node.stats)
    return 0
