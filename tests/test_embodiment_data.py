"""Embodiment fixtures: loaders for tests/data/embodiment_* and checks that the CSV files hold
the hand-designed tables the other embodiment tests compute by hand.

Fixture "ss0" (embodiment_pairs_ss0.csv): 40 pairs on 2 families × 5 task instances; paired table
a = 28 (both succeed), b = 6 (sim only), c = 2 (real only), d = 4 (both fail), so sim 34/40 and
real 30/40; per family a, b, c, d = 14, 3, 1, 2. Real episodes last 1800 s (40 × 0.5 h = 20 h),
sim episodes 60 s. Incidents: 2 real near-misses.

Fixture "ss_pos" (embodiment_pairs_ss_pos.csv): a, b, c, d = 34, 4, 2, 0 (sim 38/40, real 36/40),
per family 17, 2, 1, 0; real episodes 1800 s and 50 Wh each. Exposure ledger: 100 h + 100 h
watched + 10 h blind. Incidents: 1 counted real near-miss, 1 sim-side minor, 1 real minor that
does not count toward the window. Faults: grasp_slip 5/6 recovered (one repair 600 s),
occlusion 3/4 recovered (one repair 1200 s).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from embodied_eval.interchange.tables import episodes_from_frame, faults_from_frame, read_table
from embodied_eval.protocol.reader import Protocol, load_protocol
from embodied_eval.records import Episode, ExposureEntry, Fault, Incident

DATA = Path(__file__).parent / "data"


def _bool(text: Any) -> bool:
    return str(text).strip().lower() == "true"


def load_protocol_fixture() -> Protocol:
    return load_protocol(DATA / "embodiment_protocol.toml")


def load_episodes(name: str) -> list[Episode]:
    return episodes_from_frame(read_table(DATA / f"embodiment_pairs_{name}.csv"))


def load_faults(name: str) -> list[Fault]:
    return faults_from_frame(read_table(DATA / f"embodiment_faults_{name}.csv"))


def load_incidents(name: str) -> list[Incident]:
    out = []
    for row in read_table(DATA / f"embodiment_incidents_{name}.csv").to_dict(orient="records"):
        data = {str(k): v for k, v in row.items() if v != ""}
        for flag in ("counts_toward_window", "reviewed"):
            data[flag] = _bool(data[flag])
        out.append(Incident.from_dict(data))
    return out


def load_exposure(name: str) -> list[ExposureEntry]:
    out = []
    for row in read_table(DATA / f"embodiment_exposure_{name}.csv").to_dict(orient="records"):
        data = {str(k): v for k, v in row.items()}
        data["active_hours"] = float(data["active_hours"])
        data["blind"] = _bool(data["blind"])
        out.append(ExposureEntry.from_dict(data))
    return out


def paired_table(episodes: list[Episode]) -> dict[str, int]:
    """{a, b, c, d} of the pairs: a both succeed, b sim only, c real only, d both fail."""
    sides: dict[str, dict[str, bool]] = {}
    for e in episodes:
        sides.setdefault(e.pair_id, {})[e.side] = e.success
    table = dict.fromkeys("abcd", 0)
    for z in sides.values():
        table["abcd"[(not z["sim"]) * 2 + (not z["real"])]] += 1
    return table


def test_fixture_ss0_holds_the_designed_table():
    eps = load_episodes("ss0")
    assert paired_table(eps) == {"a": 28, "b": 6, "c": 2, "d": 4}
    # a + b = 34 sim successes, a + c = 30 real successes.
    assert sum(e.success for e in eps if e.side == "sim") == 34
    assert sum(e.success for e in eps if e.side == "real") == 30
    # 40 real episodes × 1800 s = 72 000 s = 20 h.
    assert sum(e.duration_s for e in eps if e.side == "real") == 72_000
    assert [i.severity for i in load_incidents("ss0")] == ["near_miss", "near_miss"]


def test_fixture_ss_pos_holds_the_designed_table():
    eps = load_episodes("ss_pos")
    assert paired_table(eps) == {"a": 34, "b": 4, "c": 2, "d": 0}
    per_family = {
        fam: paired_table([e for e in eps if e.family == fam]) for fam in ("pick_place", "push")
    }
    assert per_family == {f: {"a": 17, "b": 2, "c": 1, "d": 0} for f in per_family}
    assert [(x.active_hours, x.blind) for x in load_exposure("ss_pos")] == [
        (100.0, False),
        (100.0, False),
        (10.0, True),
    ]
    faults = load_faults("ss_pos")
    assert Counter((f.kind, f.recovered_autonomously) for f in faults) == {
        ("grasp_slip", True): 5,
        ("grasp_slip", False): 1,
        ("occlusion", True): 3,
        ("occlusion", False): 1,
    }
