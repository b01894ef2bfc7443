"""The policy contract: a policy's bad output ends the episode `error` naming the policy, the
value and the step; out-of-range actions are clipped only when the protocol says so, and counted;
chunks run row by row; the Gymnasium path's own contract and its refusals."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.policy_contract import ActionCheck
from embodied_eval.protocol.reader import (
    example_protocol_path,
    load_protocol,
    protocol_from_mapping,
)
from embodied_eval.store.core import Store
from sim_suites.episode import run_episode

pytestmark = pytest.mark.timeout(300)

HERE = "tests.test_policy_contract"


class Scripted:
    """Returns `actions[k]` at call k (the last one after that) and counts its calls."""

    def __init__(self, name: str, *actions: Any) -> None:
        self.name = name
        self.actions = actions
        self.calls = 0

    def reset(self, seed: int | None = None) -> None:
        self.calls = 0

    def act(self, obs: Any) -> Any:
        out = self.actions[min(self.calls, len(self.actions) - 1)]
        self.calls += 1
        return out


STILL = np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)


def spec_and_protocol(**sim: Any):
    """The example protocol (with `[sim]` keys added) and its push/rubber_forward MuJoCo row."""
    text = example_protocol_path().read_text(encoding="utf-8")
    marker = 'policy = "sim_suites.policies:scripted"\n'
    extra = "".join(f'{key} = "{value}"\n' for key, value in sim.items())
    protocol = protocol_from_mapping(tomllib.loads(text.replace(marker, marker + extra, 1)))
    manifest = plan_manifest(protocol, engines=["mujoco"])
    spec = next(s for s in manifest.side("sim") if s.task_id == "push/rubber_forward")
    return spec, protocol


@pytest.mark.parametrize(
    ("returned", "needle"),
    [
        (
            np.array([0.0, np.nan, 0.0, 1.0]),
            "returned nan at index 1 at step 2: expected finite numbers",
        ),
        (
            np.zeros(7),
            "returned an array of shape (7,) at step 2: expected a float array of shape (4,) or a chunk of shape (H, 4)",
        ),
        ("open", "returned str at step 2: expected a float array of shape (4,)"),
        (None, "returned NoneType at step 2"),
        ({"vx": 0.1}, "returned dict at step 2"),
        (
            np.array([1.5, 0.0, 0.0, 1.0]),
            "returned 1.5 at index 0 at step 2: expected values within the action space [-1, 1]",
        ),
    ],
)
def test_bad_policy_output_is_refused_naming_policy_value_and_step(returned, needle):
    spec, protocol = spec_and_protocol()
    policy = Scripted("lab:bad", STILL, STILL, returned)
    with pytest.raises(EvalError) as err:
        run_episode(spec, protocol, policy=policy, max_steps=10)
    assert str(err.value).startswith("policy lab:bad returned ")
    assert needle in str(err.value)


def test_out_of_range_actions_are_clipped_and_counted_only_when_the_protocol_says_so():
    spec, protocol = spec_and_protocol(out_of_range_actions="clip")
    assert protocol.out_of_range_actions == "clip"
    # Steps 0 and 1 hold still; from step 2 on every action has vx = 1.7 (clipped to 1).
    policy = Scripted("lab:eager", STILL, STILL, np.array([1.7, 0.0, 0.0, 1.0]))
    outcome = run_episode(spec, protocol, policy=policy, max_steps=10)
    assert outcome.episode.actions == 10
    assert outcome.episode.control["actions_clipped"] == 8
    # The same actions within range: nothing clipped.
    policy = Scripted("lab:calm", STILL, STILL, np.array([1.0, 0.0, 0.0, 1.0]))
    assert (
        run_episode(spec, protocol, policy=policy, max_steps=10).episode.control["actions_clipped"]
        == 0
    )


def test_the_action_rule_is_in_the_protocol_hash_only_when_not_the_default():
    _, default = spec_and_protocol()
    _, explicit = spec_and_protocol(out_of_range_actions="refuse")
    _, clip = spec_and_protocol(out_of_range_actions="clip")
    assert (
        default.protocol_hash
        == explicit.protocol_hash
        == load_protocol(example_protocol_path()).protocol_hash
    )
    assert clip.protocol_hash != default.protocol_hash
    with pytest.raises(EvalError, match=r"sim\.out_of_range_actions"):
        spec_and_protocol(out_of_range_actions="wrap")


def test_a_chunk_runs_row_by_row_before_the_policy_is_asked_again():
    spec, protocol = spec_and_protocol()
    chunk = np.tile(STILL, (4, 1))
    policy = Scripted("lab:chunky", chunk)
    outcome = run_episode(spec, protocol, policy=policy, max_steps=10)
    assert outcome.episode.actions == 10
    # 10 steps from chunks of 4: calls at steps 0, 4 and 8.
    assert policy.calls == 3


def test_action_check_by_hand():
    check = ActionCheck("p", (2,), low=-1.0, high=1.0, clip=True)
    rows = check.rows([[0.5, 2.0], [-3.0, 0.0], [0.1, 0.2]], step=4)
    assert [r.tolist() for r in rows] == [[0.5, 1.0], [-1.0, 0.0], [0.1, 0.2]]
    assert check.clipped == 2
    with pytest.raises(EvalError, match=r"returned an array of shape \(0, 2\) at step 5"):
        check.rows(np.zeros((0, 2)), step=5)
    with pytest.raises(EvalError, match=r"returned inf at row 1, index 0 at step 6"):
        check.rows([[0.0, 0.0], [np.inf, 0.0]], step=6)


# --------------------------------------------------------------------------- Gymnasium path

GYM_PROTOCOL = """
[protocol]
name = "gym-contract"
version = "1"
base_seed = 5

[window]
id = "w-gym"
start = 2026-11-01
end = 2026-11-30

[battery.reach]
target_quality = 0.5
instances = ["reach/a", "reach/b", "reach/c", "reach/d", "reach/e"]

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 1
real_fraction = 0.0

[sim]
max_steps = 5
"""


def steps_quality(rollout: Any) -> float:
    return rollout.steps / rollout.max_steps


def nan_policy(env: Any, seed: int) -> Any:
    """A Pusher-v5 policy whose third action is NaN."""
    calls = [0]

    def act(_obs: Any) -> Any:
        calls[0] += 1
        a = np.zeros(env.action_space.shape, dtype=np.float32)
        if calls[0] == 3:
            a[0] = np.nan
        return a

    return act


def gym_run(tmp_path: Path, *extra: str) -> list[str]:
    proto = tmp_path / "p.toml"
    proto.write_text(GYM_PROTOCOL)
    return [
        "run", str(proto), "--side", "sim", "--gym-id", "Pusher-v5",
        "--quality", f"{HERE}:steps_quality", "--executor", "sequential", "--max-retries", "0",
        "--db", str(tmp_path / "s.db"), "--out", str(tmp_path / "o"), "--no-progress", *extra,
    ]  # fmt: skip


def test_gym_without_a_policy_is_refused_not_replaced(tmp_path: Path, capsys):
    assert main(gym_run(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "name the policy with --policy module:factory" in err
    assert "'sim_suites.policies:scripted' is a policy for the built-in sims" in err
    assert not (tmp_path / "s.db").exists()


def test_gym_with_a_built_in_sim_policy_says_what_the_contract_is(tmp_path: Path, capsys):
    assert main(gym_run(tmp_path, "--policy", "sim_suites.policies:random")) == 2
    err = capsys.readouterr().err
    assert "5 of the 5 episode(s) settled by this run ended `error`" in err
    assert "factory(env, seed) -> act(observation) -> action" in err
    assert "returned a RandomPolicy, which is not callable" in err
    assert "'RandomPolicy' object is not callable" not in err


def test_gym_nan_action_ends_the_episode_error_naming_the_step(tmp_path: Path, capsys):
    assert main(gym_run(tmp_path, "--policy", f"{HERE}:nan_policy")) == 2
    assert (
        f"policy {HERE}:nan_policy returned nan at index 0 at step 2"
        in capsys.readouterr().err
    )
    with Store(tmp_path / "s.db") as store:
        episodes = store.episodes()
    assert len(episodes) == 5 and all(e.status == "error" for e in episodes)
    assert "expected finite numbers" in episodes[0].status_reason
