"""run_episode: determinism, protocol settings, records, plugins, twin-robot entry point."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import sim_suites
from embodied_eval.errors import EvalError
from embodied_eval.plugins import SIM_ENGINES, resolve
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import Episode, EpisodeSpec
from sim_suites import episode as episode_module
from sim_suites.episode import run_episode
from sim_suites.policies import RandomPolicy, load_policy
from sim_suites.tasks import TASK_SPECS

pytestmark = pytest.mark.timeout(300)


def make_spec(
    task_id: str = "push/block_left", engine: str = "mujoco", **kw: object
) -> EpisodeSpec:
    fields: dict[str, object] = {
        "episode_id": "ep-1",
        "pair_id": "pair-1",
        "side": "sim",
        "family": task_id.split("/")[0],
        "task_id": task_id,
        "seed": 42,
        "drift_name": "nominal",
        "engine": engine,
        "window": "w-1",
        "protocol_hash": "a" * 64,
        "attempt": 2,
    }
    fields.update(kw)
    return EpisodeSpec(**fields)  # type: ignore[arg-type]


def test_plugin_registry_points_at_run_episode() -> None:
    assert resolve(SIM_ENGINES["mujoco"]) is run_episode
    assert resolve(SIM_ENGINES["pybullet"]) is run_episode


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_same_spec_same_episode_with_fresh_or_reused_env(engine: str) -> None:
    spec = make_spec(engine=engine)
    first = run_episode(spec)
    again = run_episode(spec)
    episode_module._ENV_CACHE.clear()
    fresh = run_episode(spec)
    assert first.episode == again.episode == fresh.episode
    assert first.safety_events == fresh.safety_events
    ep = first.episode
    # Identity fields are copied from the spec.
    assert (ep.episode_id, ep.pair_id, ep.seed, ep.attempt) == ("ep-1", "pair-1", 42, 2)
    assert (ep.window, ep.protocol_hash) == ("w-1", "a" * 64)
    assert ep.started_at == "1970-01-01T00:00:00Z"
    assert Episode.from_json(ep.to_json()) == ep
    # Another seed gives another episode.
    other = run_episode(make_spec(engine=engine, seed=43)).episode
    assert other.randomization != ep.randomization


def test_protocol_supplies_targets_ranges_steps_and_start_time() -> None:
    protocol = load_protocol(example_protocol_path())
    spec = make_spec("drawer_open/sticky_short_pull", target_quality=0.5)
    ep = run_episode(spec, protocol).episode
    # The protocol's q* (0.8) wins over the spec's; its DR knobs are what was sampled.
    assert ep.target_quality == 0.8
    sampled = {k: v for k, v in ep.randomization.items() if k != "not_applied"}
    assert sorted(sampled) == sorted(protocol.randomization)
    # A drawer is no free part: the part's yaw and size are recorded as not applied, with why.
    assert sorted(ep.randomization["not_applied"]) == ["object_size_scale", "object_yaw_rad"]
    low, high = protocol.randomization["friction_scale"]
    assert low <= ep.randomization["friction_scale"] <= high
    assert ep.started_at == "2026-11-01T00:00:00Z"
    assert ep.control["tracking_tolerance_m"] == 0.03  # battery.drawer_open.qc_tolerance
    short = run_episode(spec, protocol, max_steps=10).episode
    assert short.actions == 10 and short.status == "ok" and not short.success


def test_drift_is_recorded_and_applied() -> None:
    drift = {"payload_kg": 0.5, "latency_steps": 2, "firmware": "5.0.0"}
    spec = make_spec("pick_place/cube_far", drift_name="day14", drift=drift)
    ep = run_episode(spec).episode
    assert ep.drift == {"name": "day14", **drift}
    env = episode_module.cached_env("pick_place/cube_far", "mujoco")
    assert env.params.physics.payload_kg == 0.5
    # Firmware 5.0.0 adds one step of latency and softens the servos to 0.7.
    assert env.params.action_latency_steps == 3 and env.params.firmware == "5.0.0"
    assert env.params.physics.actuator_gain_scale == pytest.approx(0.7)


def test_record_dir_writes_a_reproducible_trajectory(tmp_path: Path) -> None:
    spec = make_spec()
    a = run_episode(spec, record_dir=tmp_path / "a").episode
    b = run_episode(spec, record_dir=tmp_path / "b").episode
    (art_a,) = a.artifacts
    (art_b,) = b.artifacts
    data = Path(art_a.path).read_bytes()
    assert art_a.sha256 == hashlib.sha256(data).hexdigest() == art_b.sha256
    assert art_a.size_bytes == len(data)
    with np.load(art_a.path) as trace:
        assert trace["action"].shape == (a.actions, 4)
        assert trace["tcp"].shape == (a.actions, 3)


def test_user_errors() -> None:
    with pytest.raises(EvalError, match="unknown task"):
        run_episode(make_spec("push/block_upside_down"))
    with pytest.raises(EvalError, match="belongs to 'push'"):
        run_episode(make_spec(family="pick_place"))
    with pytest.raises(EvalError, match="'ros2' is a robot backend"):
        make_spec(engine="ros2")  # the manifest row itself is refused
    with pytest.raises(EvalError, match="not a sim engine"):
        run_episode(make_spec(engine="external"))
    with pytest.raises(EvalError, match="no attribute"):
        run_episode(make_spec(policy="sim_suites.policies:expert"))


def test_policies_load_by_import_path_and_random_is_seeded() -> None:
    for path in ("sim_suites.policies:scripted", "sim_suites.policies:null"):
        assert hasattr(load_policy(path, "push/block_left"), "act")
    policy = load_policy("sim_suites.policies:random", "push/block_left")
    assert isinstance(policy, RandomPolicy)
    obs: dict[str, np.ndarray] = {}
    policy.reset(7)
    first = [policy.act(obs) for _ in range(3)]
    policy.reset(7)
    second = [policy.act(obs) for _ in range(3)]
    np.testing.assert_array_equal(np.array(first), np.array(second))
    assert all(a.dtype == np.float32 and np.all(np.abs(a) <= 1) for a in first)
    ep = run_episode(make_spec(), policy="sim_suites.policies:random", max_steps=50).episode
    assert ep.policy == "sim_suites.policies:random" and not ep.success


def test_twin_robot_entry_point_steps_with_reality_gap() -> None:
    gap = sim_suites.RealityGap(
        friction_scale=0.8, object_mass_scale=1.3, actuator_delay_s=0.02, payload_kg=0.2
    )
    env = sim_suites.make_env("pick_place/cube_near", "mujoco", reality_gap=gap, randomization={})
    policy = load_policy("sim_suites.policies:scripted", "pick_place/cube_near")
    try:
        obs, info = env.reset(seed=3)
        policy.reset(3)
        assert env.control_dt == pytest.approx(0.02)
        assert env.params.physics.payload_kg == 0.2 and env.params.actuator_delay_s == 0.02
        assert env.command_delay_s == pytest.approx(0.02)  # commands reach the follower late
        assert info["randomization"] == {}
        for _ in range(400):
            obs, _, terminated, truncated, info = env.step(policy.act(obs))
            if terminated or truncated:
                break
        assert info["status"] == "ok"
        assert info["t_s"] == pytest.approx(env.episode_summary()["steps"] * 0.02)
    finally:
        env.close()
    spec = make_spec("pick_place/cube_near")
    ep = run_episode(spec, reality_gap=gap).episode
    assert ep.randomization["reality_gap"]["payload_kg"] == 0.2


@pytest.mark.slow
def test_reference_ar_agrees_across_engines() -> None:
    """Nominal reference AR over all 25 instances (1 seed each) per engine.

    Both engines run the same controller, policy and scene, so they should agree up to contact
    details. With n = 25 per engine and AR near 0.95, the standard error of a difference of two
    proportions is √(2·0.95·0.05/25) ≈ 0.062; the tolerance, 0.15, is about 2.4 of those. Each engine on
    its own must reach AR ≥ 0.85 (the reference policy "succeeds on most nominal instances").
    """
    ar: dict[str, float] = {}
    for engine in ("mujoco", "pybullet"):
        wins = [
            run_episode(
                make_spec(task_id, engine=engine, episode_id=f"{task_id}-{engine}", seed=9)
            ).episode.success
            for task_id in TASK_SPECS
            # The mobile family drives through a room for ~25 s per episode; its reference is
            # checked on its own (tests/test_mobile_manipulation.py).
            if TASK_SPECS[task_id].family != "mobile_pick_place"
        ]
        ar[engine] = float(np.mean(wins))
    print(f"nominal reference AR: {ar}")
    assert ar["mujoco"] >= 0.85 and ar["pybullet"] >= 0.85
    assert abs(ar["mujoco"] - ar["pybullet"]) <= 0.15
