"""A family defined outside the package (`tests/toy_family.py`) registered by one call: it is in
the task catalog (`protocol tasks`) and the Gymnasium registry, `run` runs it with its reference
policy, its defaults apply, and unregistering it leaves the built-in families as they were."""

from __future__ import annotations

import json
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import sim_suites.families
from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.protocol.model import family_names_hint
from embodied_eval.records import EpisodeSpec
from embodied_eval.store.core import Store
from sim_suites.env import PandaTaskEnv
from sim_suites.episode import run_episode
from sim_suites.tasks import (
    FAMILIES,
    TASK_SPECS,
    Family,
    TaskSpec,
    family_task_ids,
    register_family,
    unregister_family,
)
from tests.toy_family import NUDGE, Nudge, NudgeScript

pytestmark = pytest.mark.timeout(300)

INSTANCES = ["nudge/center", "nudge/left", "nudge/right", "nudge/near", "nudge/far"]

TOY_TOML = """
[protocol]
name = "toy-family"
version = "1"
base_seed = 3
[window]
id = "w-toy"
start = 2026-11-01
end = 2026-11-30
[battery.nudge]
target_quality = 0.8
instances = ["nudge/center", "nudge/left", "nudge/right", "nudge/near", "nudge/far"]
[drift.nominal]
day = 0
[sampling]
seeds_per_instance = 2
real_fraction = 0.0
[sim]
engines = ["mujoco"]
max_steps = 250
"""


@pytest.fixture
def nudge() -> Iterator[Family]:
    family = register_family(NUDGE)
    try:
        yield family
    finally:
        unregister_family("nudge")


def test_each_built_in_family_is_registered_from_its_own_module() -> None:
    modules = [m.name for m in pkgutil.iter_modules(sim_suites.families.__path__)]
    assert sorted(FAMILIES) == sorted(modules)
    assert {"drawer_open", "peg_insert", "pick_place", "push", "tool_use"} <= set(FAMILIES)
    for name, family in FAMILIES.items():
        assert family.task.__module__ == family.script.__module__ == f"sim_suites.families.{name}"
        assert family.instances == tuple(TASK_SPECS[t] for t in family_task_ids(name))


def test_one_call_puts_a_family_in_the_catalog_and_the_gym_registry(nudge: Family, capsys):
    assert main(["protocol", "tasks", "--json"]) == 0
    listing = {f["family"]: f for f in json.loads(capsys.readouterr().out)["families"]}
    assert listing["nudge"]["instances"] == INSTANCES
    assert listing["nudge"]["engines"] == ["mujoco", "pybullet"]
    assert "nudge" in family_names_hint()
    env = gym.make("embodied/Nudge-PyBullet-v0")
    try:
        assert isinstance(env.unwrapped, PandaTaskEnv)
        assert env.unwrapped.task.task_id == "nudge/center"  # the first instance
    finally:
        env.close()


def test_run_runs_the_toy_family_with_its_reference_policy(nudge: Family, tmp_path: Path, capsys):
    protocol = tmp_path / "toy.toml"
    protocol.write_text(TOY_TOML, encoding="utf-8")
    assert main(["protocol", "check", str(protocol)]) == 0
    db, out = tmp_path / "store.db", tmp_path / "out"
    argv = ["run", str(protocol), "--side", "sim", "--executor", "sequential"]
    assert main([*argv, "--db", str(db), "--out", str(out), "--no-progress"]) == 0
    with Store(db) as store:
        episodes = store.episodes(family="nudge")
    # 5 instances × 2 seeds × 1 engine × 1 drift.
    assert len(episodes) == 10
    assert sorted({e.task_id for e in episodes}) == sorted(INSTANCES)
    assert all(
        e.engine == "mujoco" and e.policy == "sim_suites.policies:scripted" for e in episodes
    )
    # The reference pushes every block to within the 2 cm tolerance (q ≥ 0.8).
    assert [e.status for e in episodes] == ["ok"] * 10
    assert all(e.success and e.quality >= 0.8 for e in episodes)


def test_the_family_defaults_apply_without_a_protocol(nudge: Family) -> None:
    spec = EpisodeSpec(
        episode_id="nudge-null",
        pair_id="p",
        side="sim",
        family="nudge",
        task_id="nudge/center",
        seed=1,
        drift_name="nominal",
        engine="mujoco",
    )
    ep = run_episode(spec, policy="sim_suites.policies:null").episode
    # The null policy never moves the block: truncated at the family's 250 steps = 5 s at 50 Hz.
    assert not ep.success and ep.status == "ok"
    assert ep.duration_s == pytest.approx(250 / 50, abs=0.05)
    with pytest.raises(EvalError, match="no camera reference"):
        run_episode(spec, policy="sim_suites.policies:vision")


def test_a_clash_with_a_registered_family_is_refused(nudge: Family) -> None:
    with pytest.raises(EvalError, match="'nudge' is already registered"):
        register_family(NUDGE)
    stray = TaskSpec("push/stray", (0.4, 0.0), (0.5, 0.0), tolerance_m=0.02, qc_tolerance_m=0.02)
    with pytest.raises(EvalError, match="must read 'nudge2/<instance>'"):
        register_family(Family(task=type("Nudge2", (Nudge,), {"family": "nudge2"}),
                               instances=(stray,), script=NudgeScript))  # fmt: skip
    assert "nudge2" not in FAMILIES and "push/stray" not in TASK_SPECS


def test_unregistering_leaves_the_built_in_families(capsys) -> None:
    families, catalog = list(FAMILIES), dict(TASK_SPECS)
    register_family(NUDGE)
    unregister_family("nudge")
    assert list(FAMILIES) == families
    assert dict(TASK_SPECS) == catalog
    assert not any(t.startswith("nudge/") for t in TASK_SPECS)
    assert "embodied/Nudge-MuJoCo-v0" not in gym.registry
    assert main(["protocol", "tasks", "--json"]) == 0
    families = [f["family"] for f in json.loads(capsys.readouterr().out)["families"]]
    assert "nudge" not in families
