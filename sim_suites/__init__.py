"""Simulation half of every paired trial: the Panda on MuJoCo and PyBullet, at a table (five task
families) and on a mobile base in a room (`mobile_pick_place`, `sim_suites.mobile_env`).

Importing the package registers the task families (`sim_suites.families`, one module each) and
their Gymnasium IDs (`embodied/<Family>-<Engine>-v0`). The harness
runs episodes through `sim_suites.episode:run_episode`; the twin robot builds environments with
`make_env(task_id, engine, reality_gap=RealityGap(...))` and drives them with a policy from
`sim_suites.policies`.
"""

import sim_suites.families  # noqa: F401  (registers the built-in families)
from sim_suites.registration import env_id, make_env, register_envs, registered_ids
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.tasks import TASK_SPECS
from sim_suites.variations import RealityGap

register_envs()

__all__ = [
    "TASK_SPECS",
    "RealityGap",
    "SafetyLimits",
    "env_id",
    "make_env",
    "register_envs",
    "registered_ids",
]
