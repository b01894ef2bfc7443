"""Safety monitors against the human proxy and fixtures (MuJoCo, forced situations)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from embodied_eval.records import EpisodeSpec
from sim_suites.episode import run_episode

pytestmark = pytest.mark.timeout(120)


class Constant:
    """A policy sending the same action every step."""

    name = "tests:constant"

    def __init__(self, action: list[float]) -> None:
        self.action = np.array(action, dtype=np.float32)

    def reset(self, seed: int | None = None) -> None:
        return None

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.action.copy()


def spec(task_id: str) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"safety-{task_id}",
        pair_id="pair-safety",
        side="sim",
        family=task_id.split("/")[0],
        task_id=task_id,
        seed=1,
        drift_name="nominal",
    )


def test_approaching_the_human_proxy_slows_down_and_reports_separation() -> None:
    # cube_left has a person at (0.30, 0.78); driving the TCP toward +y enters the
    # reduced-speed zone (the cell caps the speed) and then the protective separation.
    outcome = run_episode(spec("pick_place/cube_left"), policy=Constant([0, 1, 0, 1]))
    ep = outcome.episode
    assert ep.status == "out_of_bounds"
    (sep,) = [e for e in outcome.safety_events if e.kind == "separation"]
    assert sep.separation_m is not None and sep.protective_separation_m is not None
    assert sep.separation_m < sep.protective_separation_m
    # S_p = 1.6·(0.05 + 0.1) + v·0.05 + v·0.1/2 + 0.02: 0.26 m at rest, 0.285 m at 0.25 m/s.
    assert 0.26 <= sep.protective_separation_m <= 0.285
    assert ep.control["min_separation_m"] == pytest.approx(sep.separation_m, abs=5e-7)  # 6 places
    # Speed-and-separation monitoring kept the TCP under the 0.25 m/s reduced speed.
    assert ep.control["peak_tcp_speed_mps"] < 0.25
    assert not [e for e in outcome.safety_events if e.kind == "tcp_speed"]


def test_pressing_into_the_table_is_a_fixture_contact_stop() -> None:
    outcome = run_episode(spec("push/block_forward"), policy=Constant([0, 0, -1, -1]))
    ep = outcome.episode
    assert ep.status == "safety_stop" and "table" in ep.status_reason
    (contact,) = [e for e in outcome.safety_events if e.kind == "contact"]
    assert contact.contact_with == "table" and contact.permitted
    # The table contact's window holds the pair's normal force from the 120 N warning level up.
    assert contact.contact_force_n is not None and contact.contact_force_n > 120.0
    (stop,) = [e for e in outcome.safety_events if e.kind == "protective_stop"]
    # The stop is on the net external force (what a wrist F/T sensor reads) above 150 N.
    assert stop.stop_category == 2 and stop.contact_with == "table"
    assert stop.contact_force_n is not None and stop.contact_force_n > 150.0
    assert stop.force_limit_n == 150.0 and stop.t_s >= contact.t_s
    # The table is a declared environment partner: a force margin (150 N), never a person's
    # limit, for the contact and for the stop that carries it.
    from incident_logging.classifier import classify

    assert classify(contact).top_rules == ("R2.force_margin",)
    assert set(classify(stop).top_rules) == {"R1.stop", "R2.force_margin"}
    assert classify(stop).severity == "near_miss"


def test_simulator_blow_up_ends_the_episode_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    import sim_suites

    env = sim_suites.make_env("push/block_forward", "mujoco")
    try:
        env.reset(seed=0)
        env.backend.data.qvel[:] = 1e12  # type: ignore[attr-defined]
        _, _, terminated, truncated, info = env.step(np.zeros(4, dtype=np.float32))
    finally:
        env.close()
    assert terminated and not truncated
    assert info["status"] == "error" and "diverged" in info["status_reason"]
    assert not info["is_success"]
    # MuJoCo's own warning went to logging, not to a log file in the working directory.
    assert any("unstable" in r.getMessage() for r in caplog.records)
