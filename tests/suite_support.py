"""A small protocol and manifest rows for the standard-suite engines' tests (Meta-World, LIBERO)."""

from __future__ import annotations

from collections.abc import Sequence

from embodied_eval.records import EpisodeSpec

PROTOCOL = """
[protocol]
name = "{suite}-test"
version = "1"
base_seed = 3
m_min = 1

[window]
id = "w-{suite}"
start = "2026-11-01"
end = "2026-11-30"

[battery.{suite}]
target_quality = 0.5
instances = {instances}

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 1
real_fraction = {real_fraction}

[randomization]
{randomization}

[sim]
engines = ["{suite}"]
policy = "{policy}"
max_steps = {max_steps}
"""


def suite_protocol_text(
    suite: str,
    instances: Sequence[str],
    *,
    policy: str,
    max_steps: int,
    randomization: str = "",
    real_fraction: float = 0.0,
) -> str:
    """A one-family protocol on the suite engine `suite` (sim only unless `real_fraction`)."""
    return PROTOCOL.format(
        suite=suite,
        instances=list(instances),
        randomization=randomization,
        real_fraction=real_fraction,
        policy=policy,
        max_steps=max_steps,
    )


def suite_spec(task_id: str, seed: int, policy: str, episode_id: str) -> EpisodeSpec:
    """A sim manifest row of the suite named by `task_id`'s first part."""
    suite = task_id.split("/")[0]
    return EpisodeSpec(
        episode_id=episode_id,
        pair_id=f"p-{seed}",
        side="sim",
        family=suite,
        task_id=task_id,
        seed=seed,
        drift_name="nominal",
        engine=suite,
        policy=policy,
        target_quality=0.5,
    )
