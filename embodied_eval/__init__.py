"""embodied-eval: paired sim/real evaluation of robot policies.

The package `embodied_eval` holds the data contract (`records`), protocol files, the SQLite store,
statistics, the embodiment metrics, the shared AAI scoring core, the paired-trial runner, the
certificate and the CLI. Simulators (`sim_suites`), robots (`real_bridge`) and the incident log
(`incident_logging`) depend on it, never the other way round: they are reached through
`embodied_eval.plugins`.
"""

__version__ = "0.1.0"

from embodied_eval.errors import EvalError

__all__ = ["EvalError", "__version__"]
