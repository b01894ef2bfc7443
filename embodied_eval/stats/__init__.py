"""Statistics: every number the harness prints goes through here.

Pure functions on arrays; each returns an `Estimate` (point, interval, level, method, n, sided).
Methods and verified test vectors: the project's statistics notes.
"""

from embodied_eval.stats.estimate import Estimate

__all__ = ["Estimate"]
