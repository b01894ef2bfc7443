"""AR_ppi's validity floor: where the cluster PPI interval is used, and the coverage the
simulation showed there (see `stats.ppi`'s module docstring and `stats.coverage_ppi`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Validity floor (module docstring): labelled pairs, clusters, real-rate range, events from
#: the edge.
MIN_PAIRS = 100
MIN_CLUSTERS = 40
RATE_RANGE = (0.2, 0.8)
EDGE_EVENTS = 5
#: Simulated coverage at the floor, only windows above it counted (`coverage_ppi.floor_coverage`;
#: the table: benchmarks/coverage.py --only-ppi-floor). Worst cell over two runs of the grid
#: (seeds 7 and 11); at a true rate of 0.2 only the windows whose observed rate reached the range
#: count (about half of them). Monte-Carlo s.e. ≈ 0.006 per cell.
FLOOR_COVERAGE: dict[str, Any] = {
    "grid": "40 task instances, 100 and 200 labelled pairs, 2000 sim episodes, ICC 0/0.1/0.2, "
    "sim good/biased/useless, true real rate 0.2/0.3/0.5/0.7/0.8",
    "reps_per_cell": 1500,
    "runs": 2,
    "gate_bound_worst_rate_0.3_to_0.8": 0.9522,
    "gate_bound_worst": 0.9325,
    "two_sided_95_worst_rate_0.3_to_0.8": 0.9310,
    "two_sided_95_worst": 0.9275,
}


@dataclass(frozen=True)
class PPIFloor:
    """The validity floor a fit is judged against (module docstring). The default is this
    version's; `verify --db` passes a certificate's own floor when it was issued under another.

    Attributes:
        pairs: fewest labelled pairs. task_instances: fewest clusters (cluster version).
        rate_range: (low, high) the real rate must lie in, or None (no range: earlier floors).
        events_from_edge: the real rate at least this many events over n from 0 and 1.
        gate_two_sided: the AR gate's bound is the low end of the two-sided interval at the
            protocol's level (whose coverage the simulation shows); False: the low end of the
            (2·level − 1) interval, as earlier floors had it.
    """

    pairs: int = MIN_PAIRS
    task_instances: int = MIN_CLUSTERS
    rate_range: tuple[float, float] | None = RATE_RANGE
    events_from_edge: int = EDGE_EVENTS
    gate_two_sided: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "task_instances": self.task_instances,
            "events_from_edge": self.events_from_edge,
            "variance": "non-degenerate",
            **({"rate_range": list(self.rate_range)} if self.rate_range is not None else {}),
            **(
                {"gate_bound": "low end of the two-sided interval at the protocol's level"}
                if self.gate_two_sided
                else {}
            ),
        }

    @classmethod
    def from_json(cls, data: Any) -> PPIFloor:
        """The floor a certificate states ({"pairs", "task_instances", "events_from_edge",
        "rate_range" (absent: none)}); this version's when `data` is not such a mapping."""
        if not isinstance(data, dict):
            return cls()
        try:
            rng = data.get("rate_range")
            return cls(
                pairs=int(data["pairs"]),
                task_instances=int(data["task_instances"]),
                rate_range=None if rng is None else (float(rng[0]), float(rng[1])),
                events_from_edge=int(data["events_from_edge"]),
                gate_two_sided="gate_bound" in data,
            )
        except (KeyError, TypeError, ValueError, IndexError):
            return cls()
