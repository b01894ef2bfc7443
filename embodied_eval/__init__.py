"""embodied-eval: paired sim/real evaluation of robot policies.

The package `embodied_eval` holds the data contract (`records`), protocol files, the SQLite store,
statistics, the embodiment metrics, the shared AAI scoring core, the paired-trial runner, the
certificate and the CLI. Simulators (`sim_suites`), robots (`real_bridge`) and the incident log
(`incident_logging`) depend on it, never the other way round: they are reached through
`embodied_eval.plugins`.

For notebooks (`embodied_eval.api`, imported on first use so `import embodied_eval` stays cheap):

    import embodied_eval as ee
    store = ee.open_store("embodied-eval.db")
    frame = store.episodes(window="w1")
    report = ee.metrics(store, "protocol.toml")
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from embodied_eval.errors import EvalError

#: Names resolved from `embodied_eval.api` on first access.
_API = ("open_store", "metrics", "certify", "episodes_frame", "NotebookStore")

__all__ = ["EvalError", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from embodied_eval import api

        return getattr(api, name)
    raise AttributeError(f"module 'embodied_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
