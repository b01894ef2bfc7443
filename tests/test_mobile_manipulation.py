"""Mobile manipulation: the mobile Panda in a room drawn from the scene seed, in both engines.

Hand-computed values:

- Shortest path on the fixed floor plan `OPEN_ROOM` (no counters, no clutter, doorway centred at
  y = 1.0 m, robot radius r = 0.45 m): the partition's south panel (x ∈ [4.45, 4.55]) ends at
  y = 1.0 − 0.65 = 0.35 m; its octagon's top edge is at y = 0.35 + r = 0.80 m between
  x = 4.5 ± (0.05 + r·tan 22.5°) = 4.5 ± 0.236396 m. From (1, 0) to (8, 0) the path runs to
  (4.263604, 0.8), along to (4.736396, 0.8), down to (8, 0):
  2·√(3.263604² + 0.8²) + 0.472792 = 2·3.360225 + 0.472792 = 7.193242 m.
- SPL (Anderson et al. 2018, eq. 1) of S = (1, 1, 1), l = (6, 5, 4), p = (8, 5, 2):
  (6/8 + 5/5 + 4/4) / 3 = 0.91667; with S = (1, 0, 1): (0.75 + 0 + 1) / 3 = 0.58333.
- Protective separation at rest (SafetyLimits defaults): S_p = 1.6·(0.05 + 0.1) + 0.02 = 0.26 m;
  a robot stopped by the monitored stop keeps at least that from the person.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

import sim_suites.families.mobile_pick_place as mobile_tasks
from embodied_eval.records import Episode, EpisodeSpec
from embodied_eval.seeds import episode_seeds
from sim_suites.episode import run_episode
from sim_suites.families.mobile_pick_place import MobilePickPlace, MobilePickPlaceScript
from sim_suites.human import Walk
from sim_suites.mobile_env import MobileTaskEnv
from sim_suites.mobile_metrics import collisions_per_metre, spl, success_rate
from sim_suites.room import FloorPlan, path_length, shortest_path
from sim_suites.tasks import TASK_SPECS
from sim_suites.variations import DEFAULT_RANDOMIZATION

pytestmark = pytest.mark.timeout(600)

ENGINES = ("mujoco", "pybullet")
TASK = "mobile_pick_place/cube_across"
OPEN_ROOM = FloorPlan(doorway_y=1.0, counters=(), clutter=(), start=(1.0, 0.0, 0.0))


def spec(engine: str, seed: int, task_id: str = TASK) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"m-{engine}-{seed}",
        pair_id=f"p-{seed}",
        side="sim",
        family="mobile_pick_place",
        task_id=task_id,
        seed=seed,
        drift_name="nominal",
        engine=engine,
    )


def play(env: MobileTaskEnv, seed: int, scene_seed: int) -> dict:
    """Run the scripted policy for one episode; the episode summary."""
    policy = MobilePickPlaceScript()
    policy.reset(seed)
    obs, _ = env.reset(seed=seed, options={"scene_seed": scene_seed})
    while True:
        obs, _, terminated, truncated, _ = env.step(policy.act(obs))
        if terminated or truncated:
            return env.episode_summary()


# --------------------------------------------------------------------------- metrics by hand


def test_shortest_path_on_a_fixed_floor_plan_by_hand():
    path = shortest_path(np.array([1.0, 0.0]), np.array([8.0, 0.0]), OPEN_ROOM.obstacles())
    assert path is not None
    assert path_length(path) == pytest.approx(7.193242, abs=2e-3)
    # The doorway straight ahead: a straight line, 7 m.
    ahead = dataclasses.replace(OPEN_ROOM, doorway_y=0.0)
    straight = shortest_path(np.array([1.0, 0.0]), np.array([8.0, 0.0]), ahead.obstacles())
    assert straight is not None and path_length(straight) == pytest.approx(7.0, abs=1e-9)
    # A closed doorway: no path.
    closed = dataclasses.replace(OPEN_ROOM, doorway_blocked=True)
    assert shortest_path(np.array([1.0, 0.0]), np.array([8.0, 0.0]), closed.obstacles()) is None


def test_spl_success_and_collisions_per_metre_by_hand():
    assert spl([1, 1, 1], [6.0, 5.0, 4.0], [8.0, 5.0, 2.0]) == pytest.approx(0.916667, abs=1e-6)
    assert spl([1, 0, 1], [6.0, 5.0, 4.0], [8.0, 5.0, 2.0]) == pytest.approx(0.583333, abs=1e-6)
    assert success_rate([True, False, True, True]) == 0.75
    assert collisions_per_metre(3, 12.0) == 0.25
    assert collisions_per_metre(0, 0.0) == 0.0


# --------------------------------------------------------------------------- the scene


def test_the_same_scene_seed_gives_the_same_start_in_both_engines():
    starts = {}
    for engine in ENGINES:
        env = MobileTaskEnv(TASK, engine)
        env.reset(seed=3, options={"scene_seed": 1234})
        base, _ = env.backend.base_state()
        cube, _ = env.backend.body_pose("cube")
        starts[engine] = (base, cube, env.start_scene)
        env.close()
    (b1, c1, s1), (b2, c2, s2) = starts.values()
    np.testing.assert_allclose(b1, b2, atol=1e-6)
    np.testing.assert_allclose(c1, c2, atol=1e-6)
    assert s1 == s2
    # Another scene seed, another room.
    env = MobileTaskEnv(TASK, "mujoco")
    env.reset(seed=3, options={"scene_seed": 1235})
    assert env.start_scene != s1
    env.close()


# --------------------------------------------------------------------------- the reference


#: The nominal runs' horizon: each places by about step 1250 (about 25 s of the robot's time);
#: 1600 steps bound the failures' cost.
NOMINAL_STEPS = 1600


@functools.cache
def nominal_episodes(engine: str) -> tuple[Episode, ...]:
    """The reference on ten nominal manifest seeds (the longest runs of this module: once per
    engine, shared by the tests that need a nominal episode)."""
    return tuple(run_episode(spec(engine, s), max_steps=NOMINAL_STEPS).episode for s in range(10))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_scripted_policy_succeeds_on_nominal_seeds(engine: str):
    episodes = nominal_episodes(engine)
    wins = [e.success for e in episodes]
    assert sum(wins) >= 8, [(e.status, e.quality) for e in episodes]
    for e in episodes:
        c = e.control
        assert e.status == "ok" and c["collisions"] == 0
        assert c["shortest_path_m"] > 0 and c["path_length_m"] > 0
        # SPL term of the episode: S · l / max(p, l).
        expected = e.success * c["shortest_path_m"] / max(c["path_length_m"], c["shortest_path_m"])
        assert c["spl"] == pytest.approx(expected, abs=1e-6)
        assert (c["time_to_goal_s"] is not None) == e.success


@pytest.mark.parametrize("engine", ENGINES)
def test_scripted_policy_fails_when_the_doorway_is_blocked(engine: str, monkeypatch):
    blocked = "mobile_pick_place/doorway_blocked"
    base = TASK_SPECS[TASK]
    monkeypatch.setitem(
        TASK_SPECS,
        blocked,
        dataclasses.replace(base, task_id=blocked, extra={**base.extra, "doorway_blocked": 1}),
    )
    # The script finds no route once it holds the cube (about step 400) and holds still.
    env = MobileTaskEnv(blocked, engine, max_steps=600)
    summary = play(env, seed=0, scene_seed=0)
    env.close()
    assert summary["status"] == "ok" and summary["quality"] < 0.8
    assert summary["control"]["shortest_path_m"] is None and summary["control"]["spl"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_scripted_policy_fails_on_a_slippery_floor(engine: str):
    # A nominal episode that placed the cube, replayed with the wheels on a tenth of the floor's
    # friction: the same room, seeds and DR draws (the floor's friction is drawn after the
    # default knobs, from the same stream) and the same horizon.
    nominal = next(e for e in nominal_episodes(engine) if e.success)
    seeds = episode_seeds(nominal.seed)
    slippery = {**DEFAULT_RANDOMIZATION, "floor_friction_scale": (0.1, 0.1)}
    env = MobileTaskEnv(TASK, engine, randomization=slippery, max_steps=NOMINAL_STEPS)
    policy = MobilePickPlaceScript()
    policy.reset(seeds.policy)
    obs, info = env.reset(seed=seeds.physics, options={"scene_seed": seeds.scene})
    assert info["scene"] == nominal.scene
    drawn = {k: v for k, v in info["randomization"].items() if k != "floor_friction_scale"}
    assert drawn and {k: nominal.randomization[k] for k in drawn} == pytest.approx(drawn, abs=1e-9)
    while True:
        obs, _, terminated, truncated, _ = env.step(policy.act(obs))
        if terminated or truncated:
            break
    summary = env.episode_summary()
    env.close()
    assert nominal.quality >= 0.8 and summary["quality"] < 0.8
    # On the slippery floor the wheels turned on while the base slid: the odometry ran ahead of
    # the robot (on the nominal floor it stayed within centimetres).
    assert summary["control"]["odometry_error_m"] > 0.1
    assert nominal.control["odometry_error_m"] < 0.1


@pytest.mark.parametrize("engine", ENGINES)
def test_base_knobs_change_the_physics(engine: str):
    """Drive 1.5 m straight and stop: each base knob moves where the base ends up (or, for the
    odometry's error, where the robot thinks it is)."""

    def drive(**knobs: float) -> tuple[np.ndarray, np.ndarray]:
        ranges = {k: (v, v) for k, v in knobs.items()}
        env = MobileTaskEnv(TASK, engine, randomization=ranges)
        env.reset(seed=0, options={"scene_seed": 7})
        for k in range(150):
            forward = 0.5 if k < 100 else 0.0
            env.step(np.array([0, 0, 0.3 if k < 50 else 0, 1, forward, 0, 0, 0], np.float32))
        pose, odometry = env.backend.base_state()[0].copy(), env.odometry.copy()
        env.close()
        return pose, odometry

    nominal, odo = drive()
    np.testing.assert_allclose(nominal[:2], odo[:2], atol=0.005)
    for knob, value, at_least in (
        ("floor_friction_scale", 0.1, 0.05),
        ("wheel_slip_scale", 20.0, 0.002),
        ("base_mass_scale", 3.0, 1e-6),
    ):
        pose, _ = drive(**{knob: value})
        assert np.linalg.norm(pose[:2] - nominal[:2]) > at_least, knob
    pose, odo = drive(odometry_drift=0.1)
    np.testing.assert_allclose(pose, nominal, atol=1e-9)  # the robot drives the same …
    assert np.linalg.norm(odo[:2] - nominal[:2]) > 0.05  # … and believes it went farther


# --------------------------------------------------------------------------- safety


@pytest.mark.parametrize("engine", ENGINES)
def test_separation_monitor_stops_the_base_when_the_person_steps_into_its_path(
    engine: str, monkeypatch
):
    # A room with the doorway straight ahead; the person waits 3 s beside the route, steps onto
    # it 3 m ahead of the robot, stands there 3 s and walks on.
    monkeypatch.setattr(mobile_tasks, "draw_floor_plan", lambda rng, blocked=False: OPEN_ROOM_AHEAD)
    walk = Walk(((4.0, -1.9), (4.0, 0.0), (4.0, 1.9)), speed_mps=1.0, hold_s=3.0)
    monkeypatch.setattr(MobilePickPlace, "walk", lambda self, rng, goal: walk)
    env = MobileTaskEnv(TASK, engine, randomization={})
    env.reset(seed=0)
    forward = np.array([0, 0, 0, 1, 0.3, 0, 0, 0], np.float32)  # 0.3 m/s straight at the door
    speeds, stopped_at, events = [], [], []
    for _ in range(600):
        _, _, terminated, truncated, info = env.step(forward)
        speeds.append(info["base_speed_mps"])
        events.extend(info["safety_events"])
        if info["monitored_stop"]:
            stopped_at.append(info["t_s"])
        assert not terminated and not truncated
    summary = env.episode_summary()
    env.close()
    t = np.arange(1, 601) * 0.02
    # While the person stands on the route (4.9–7.9 s) the base comes to rest …
    standing = (t > 4.9) & (t < 7.9)
    assert min(np.asarray(speeds)[standing]) < 0.01
    assert stopped_at and 4.9 < min(stopped_at) < 7.9
    # … short of them: more than S_p at rest (0.26 m), never touching.
    assert summary["control"]["min_separation_m"] > 0.26
    assert not [e for e in events if e.kind in ("contact", "protective_stop")]
    assert summary["status"] == "ok"
    # Once they walked on, the base drives again.
    assert np.mean(np.asarray(speeds)[t > 10.0]) > 0.25


@pytest.mark.parametrize("engine", ENGINES)
def test_the_nearest_part_query_is_the_least_separation(engine: str, monkeypatch):
    # The person 1.5 m ahead of the robot: each part's distance, and the nearest in one query.
    monkeypatch.setattr(mobile_tasks, "draw_floor_plan", lambda rng, blocked=False: OPEN_ROOM_AHEAD)
    walk = Walk(((2.6, 0.3),), speed_mps=1.0)
    monkeypatch.setattr(MobilePickPlace, "walk", lambda self, rng, goal: walk)
    env = MobileTaskEnv(TASK, engine, randomization={})
    env.reset(seed=0)
    parts = env._human.part_names
    env.step(np.zeros(8, np.float32))
    each = env.backend.separation(parts, 4.0)
    nearest = env.backend.nearest(parts, 4.0)
    far = env.backend.nearest(parts, 0.2)
    env.close()
    assert 0.5 < nearest < 1.6
    assert nearest == pytest.approx(min(each.values()), abs=1e-9)
    assert far == 0.2  # all farther than the range: the range


OPEN_ROOM_AHEAD = FloorPlan(
    doorway_y=0.0,
    counters=((2.5, 2.15), (6.3, -2.15), (2.5, -2.15)),
    clutter=(),
    start=(1.0, 0.0, 0.0),
)


# --------------------------------------------------------------------------- downstream

MOBILE_PROTOCOL = """
[protocol]
name = "mobile-lab"
version = "1"
base_seed = 11
m_min = 1

[window]
id = "w-mobile"
start = "2026-11-01"
end = "2026-11-30"

[battery.mobile_pick_place]
target_quality = 0.8
instances = ["mobile_pick_place/cube_across"]

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 1
real_fraction = 0.0

[randomization]
friction_scale = [0.9, 1.1]
floor_friction_scale = [0.8, 1.2]
base_mass_scale = [0.9, 1.1]
odometry_drift = [-0.005, 0.005]

[sim]
engines = ["mujoco", "pybullet"]
# What runs end to end is checked here, not whether the cube arrives (the reference's own
# test): 100 steps (2 s) of each episode.
max_steps = 100
"""


def test_the_family_is_listed_and_runs_in_a_sim_protocol_in_both_engines(tmp_path, capsys):
    from embodied_eval.cli.main import main
    from embodied_eval.store.core import Store

    assert main(["protocol", "tasks"]) == 0
    listing = capsys.readouterr().out
    assert "mobile_pick_place  (engines: mujoco, pybullet)" in listing
    assert "mobile_pick_place/cube_across" in listing
    proto = tmp_path / "protocol.toml"
    proto.write_text(MOBILE_PROTOCOL)
    db = tmp_path / "s.db"
    args = ["run", str(proto), "--side", "sim", "--executor", "sequential"]
    code = main([*args, "--db", str(db), "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    with Store(db) as store:
        episodes = store.episodes()
    assert sorted(e.engine for e in episodes) == ["mujoco", "pybullet"]
    for e in episodes:
        assert e.family == "mobile_pick_place" and e.status == "ok"
        assert {"spl", "collisions_per_m", "time_to_goal_s", "min_separation_m"} <= set(e.control)
        assert set(e.randomization) >= {"floor_friction_scale", "base_mass_scale"}
    # The pair's two engines start from one room.
    assert episodes[0].scene == episodes[1].scene


# --------------------------------------------------------------------------- fetch and deliver

DELIVER = "mobile_pick_place/deliver_to_person"


def test_the_receiver_stands_beyond_the_hand_over_point_and_the_base_before_it():
    from sim_suites.room import handover_stand

    env = MobileTaskEnv(DELIVER, "mujoco")
    env.reset(seed=0, options={"scene_seed": 5})
    goal = env.goal
    person = env._human.xy
    env.close()
    side = 1.0 if goal[1] >= 0 else -1.0
    # The person: 0.7 m beyond the point from the centre line, standing off it (|y| ≥ 0.9 m),
    # in the far half; the point at a standing person's hand height, 0.85 m.
    assert person[0] == pytest.approx(goal[0], abs=1e-12)
    assert person[1] - goal[1] == pytest.approx(side * 0.7, abs=1e-12)
    assert 0.9 <= abs(person[1]) <= 1.3 and 5.8 <= person[0] <= 7.6
    assert goal[2] == 0.85
    # The base: 0.62 m from the point on the centre line's side, facing the person (±90°).
    stand = handover_stand(goal, env.plan.obstacles())
    assert stand is not None
    np.testing.assert_allclose(
        stand, [goal[0], goal[1] - side * 0.62, side * np.pi / 2], atol=1e-12
    )


@pytest.mark.slow
def test_the_reference_hands_the_cube_to_the_person():
    # About 1350 steps: drive, pick, drive through the doorway, hold the cube out 0.7 m in
    # front of the person and keep it there. (One engine: the family's physics in both engines
    # is the nominal test's; this is the task's geometry and completion rule.)
    e = run_episode(spec("mujoco", 0, DELIVER), max_steps=1600).episode
    c = e.control
    assert e.status == "ok" and e.success, (e.quality, c)
    assert c["time_to_goal_s"] is not None and c["collisions"] == 0
    # Near the person the robot kept more than S_p at rest plus the margin (0.26 + 0.1 m).
    assert c["min_separation_m"] > 0.36
    assert c["shortest_path_m"] > 0 and 0 < c["spl"] <= 1


def test_the_mobile_lab_example_protocol_names_every_mobile_instance():
    from embodied_eval.protocol.reader import example_protocol_path, load_protocol

    path = example_protocol_path().with_name("mobile_lab_protocol.toml")
    protocol = load_protocol(path)
    assert {i.family for i in protocol.instances} == {"mobile_pick_place"}
    listed = {i.task_id for i in protocol.instances}
    assert listed == {t for t, s in TASK_SPECS.items() if s.family == "mobile_pick_place"}
    assert protocol.max_steps == 3000 and protocol.engines == ("mujoco", "pybullet")
