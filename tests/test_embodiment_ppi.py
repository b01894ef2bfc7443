"""AR_ppi in the embodiment report: beside AR by default, in E and the AR gate when opted in."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.stats.ppi import ppi_mean_clustered
from embodied_eval.stats.ppi_floor import PPIFloor
from tests.conftest import make_episode
from tests.test_embodiment_data import (
    DATA,
    load_episodes,
    load_exposure,
    load_faults,
    load_incidents,
    load_protocol_fixture,
)

pytestmark = pytest.mark.timeout(60)

#: The fixture (80 pairs, 10 task instances, real rate 0.9) is below this version's floor; the
#: hand values below are checked against the earlier floor (50 pairs, 10 instances, no rate
#: range), which `verify --db` still applies to certificates issued under it.
EARLIER_FLOOR = PPIFloor(pairs=50, task_instances=10, rate_range=None, gate_two_sided=False)


def report(episodes, protocol=None, floor=EARLIER_FLOOR):
    return compute_embodiment(
        episodes,
        load_faults("ss_pos"),
        load_incidents("ss_pos"),
        load_exposure("ss_pos"),
        protocol or load_protocol_fixture(),
        rng=np.random.default_rng(2),
        resamples=500,
        ppi_floor=floor,
    )


def unpaired_sim(episodes, per_task=2, fail_every=5):
    """Extra sim episodes with no real episode (new pair ids), success except every 5th."""
    tasks = sorted({e.task_id for e in episodes if e.side == "real"})
    out, k = [], 0
    for task in tasks:
        for j in range(per_task):
            k += 1
            out.append(
                make_episode(
                    episode_id=f"u{k}-sim-a1", pair_id=f"u{k}", side="sim", engine="mujoco",
                    task_id=task, family=task.split("/")[0], seed=900 + j,
                    quality=0.5 if k % fail_every == 0 else 0.9, window="fixture-2026-11",
                )
            )  # fmt: skip
    return out


def ppi_protocol():
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["embodiment"]["ar_estimator"] = "ppi"
    return protocol_from_mapping(data)


def doubled(episodes):
    """The fixture run twice: every pair again under a new pair id (same instances, seeds + 50)."""
    copies = []
    for e in episodes:
        pair = f"{e.pair_id}b"
        copies.append(
            e.replace(
                pair_id=pair,
                episode_id=e.episode_id.replace(e.pair_id, pair, 1),
                seed=e.seed + 50,
            )
        )
    return list(episodes) + copies


def test_ar_ppi_beside_ar_by_hand():
    # Fixture ss_pos run twice: 80 pairs in 10 task instances (8 each), real 72/80 with two real
    # failures in each of cube_2, cube_3, block_2, block_3; every sim episode is paired, so λ = 0
    # and AR_ppi is the real mean 0.9 (above the floor: 80 ≥ 50 pairs, 10 instances, 0.9 is
    # more than 5/80 from 1). Jackknife over the 10 instances: leaving out an instance with 8
    # successes gives 64/72 = 0.888889 (6 of them), with 6 gives 66/72 = 0.916667 (4 of them);
    # V = 9/10 · (6 · 0.011111² + 4 · 0.016667²) = 9/10 · 0.00185185 = 0.00166667;
    # half = t(0.975; 9) · √V = 2.262157 · 0.040825 = 0.092351 → [0.807649, 0.992351];
    # the classical variance is the same, so n_eff = 80.
    out = report(doubled(load_episodes("ss_pos"))).to_json()
    ppi = out["AR_ppi"]
    assert ppi["value"] == pytest.approx(0.9)
    assert ppi["low"] == pytest.approx(0.807649, abs=1e-5)
    assert ppi["high"] == pytest.approx(0.992351, abs=1e-5)
    assert ppi["effective_n"] == pytest.approx(80.0)
    assert ppi["pairs"] == 80 and ppi["valid"] is True and ppi["below_floor"] == []
    assert ppi["lambda"] == 0.0 and ppi["clusters"] == 10 and ppi["in_use"] is False
    assert "jackknife" in ppi["method"] and "task instance" in ppi["method"]
    assert "reported beside AR" in ppi["method"]
    # Default protocol: AR's gate bound stays exact Clopper-Pearson.
    assert "Clopper" in out["gate_bounds"]["AR"]["method"]
    assert ppi["floor"] == {"pairs": 50, "task_instances": 10, "events_from_edge": 5,
                            "variance": "non-degenerate"}  # fmt: skip


def test_this_versions_floor_states_its_coverage_and_refuses_the_fixture():
    out = report(doubled(load_episodes("ss_pos")), floor=None).to_json()
    ppi = out["AR_ppi"]
    assert ppi["valid"] is False and ppi["in_use"] is False
    assert ppi["below_floor"] == [
        "80 labelled pair(s), fewer than 100",
        "10 cluster(s), fewer than 40",
        "real rate 0.9 outside 0.2–0.8, where the interval's coverage was shown",
    ]
    floor = ppi["floor"]
    assert (floor["pairs"], floor["task_instances"], floor["rate_range"]) == (100, 40, [0.2, 0.8])
    # The simulated coverage at the floor is stated (stats/ppi_floor.py, from the grid).
    assert floor["coverage"]["gate_bound_worst_rate_0.3_to_0.8"] >= 0.94
    assert floor["gate_bound"].startswith("low end of the two-sided interval")


def test_ar_ppi_uses_unpaired_sim_episodes():
    eps = doubled(load_episodes("ss_pos"))
    extra = unpaired_sim(eps)
    rep = report(eps + extra)
    # The same fit done directly on arrays built from the episodes.
    tasks = sorted({e.task_id for e in eps if e.side == "real"})
    idx = {t: i for i, t in enumerate(tasks)}
    sim = {e.pair_id: e for e in eps if e.side == "sim"}
    real = sorted((e for e in eps if e.side == "real"), key=lambda e: e.pair_id)
    direct = ppi_mean_clustered(
        [e.success for e in real],
        [sim[e.pair_id].success for e in real],
        [idx[e.task_id] for e in real],
        [e.success for e in extra],
        [idx[e.task_id] for e in extra],
        0.95,
    )
    ppi = rep.to_json()["AR_ppi"]
    assert ppi["value"] == pytest.approx(direct.estimate.value)
    assert ppi["lambda"] == pytest.approx(direct.lam)
    assert ppi["sim_unpaired"] == 20 and ppi["pairs"] == 80 and ppi["valid"] is True
    assert ppi["effective_n"] == pytest.approx(direct.effective_n, rel=1e-3)


def agreeing_sim(episodes):
    """The fixture with every paired sim episode given its real twin's outcome (sim = real)."""
    real_q = {e.pair_id: e.quality for e in episodes if e.side == "real"}
    return [
        e if e.side == "real" else e.replace(quality=real_q.get(e.pair_id, e.quality))
        for e in episodes
    ]


def test_opt_in_puts_ar_ppi_into_e_and_the_gate_and_says_so():
    base = agreeing_sim(doubled(load_episodes("ss_pos")))
    eps = base + unpaired_sim(base, per_task=4, fail_every=3)
    rep = report(eps, ppi_protocol())
    out = rep.to_json()
    ar_ppi = out["AR_ppi"]["value"]
    assert out["AR_ppi"]["in_use"] is True
    assert out["AR_ppi"]["lambda"] > 0.5 and ar_ppi < out["AR"]["value"]
    # Ê = (AR_ppi · SS · S2R)^(1/3) with the report's own SS and S2R.
    expected = (ar_ppi * out["SS"]["value"] * out["S2R"]["value"]) ** (1 / 3)
    assert out["E_raw"]["value"] == pytest.approx(expected)
    assert "AR_ppi" in out["E"]["method"]
    assert "prediction-powered" in out["gate_bounds"]["AR"]["method"]
    assert out["gate_bounds"]["AR"]["sided"] == "lower"
    assert any("ar_estimator = 'ppi'" in n for n in out["notes"])
    # The classical AR is still reported unchanged.
    classical = report(eps).to_json()
    assert out["AR"] == classical["AR"]
    assert not math.isclose(out["E_raw"]["value"], classical["E_raw"]["value"])
