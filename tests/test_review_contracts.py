"""Contracts as the issues state them, checked end to end with hand-computed numbers.

Files in the issues' own column sets (episodes without a `window` column, incidents in the data
contract's columns), commands in the issues' own spelling (`keys create --role ROLE`,
`incidents rates --json`, `metrics --json`), and the numeric APIs called with plain Python and
numpy values.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embodied_eval.cli.main import main
from embodied_eval.embodiment import embodiment_raw, embodiment_score
from embodied_eval.embodiment.safety_metrics import mtbsi, safety_score
from embodied_eval.records import Episode, Fault
from embodied_eval.scoring import aai_index, uniformity
from embodied_eval.store.core import Store

pytestmark = pytest.mark.timeout(120)

#: The flat episode columns of the foundation issue (no `window` column).
EPISODE_COLUMNS = [
    "episode_id", "pair_id", "side", "family", "task_id", "seed", "policy", "engine", "quality",
    "target_quality", "status", "duration_s", "interventions", "energy_wh", "attempt",
    "started_at",
]  # fmt: skip

PROTOCOL = """
[protocol]
name = "review"
version = "1"
base_seed = 11
bootstrap_resamples = 200

[window]
id = "review-2026-11"
start = 2026-11-01
end = 2026-11-30

[battery.pick_place]
target_quality = 0.8
instances = ["pick_place/i0", "pick_place/i1", "pick_place/i2", "pick_place/i3", "pick_place/i4"]

[battery.push]
target_quality = 0.8
instances = ["push/i0", "push/i1", "push/i2", "push/i3", "push/i4"]
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def ok_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    return json.loads(out)


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def episode_rows(pairs: int, sim_ok: int, real_ok: int, real_s: float) -> list[dict]:
    """`pairs` sim/real pairs over two families; the first sim_ok / real_ok succeed."""
    rows = []
    for i in range(pairs):
        family = ("pick_place", "push")[i % 2]
        for side, success, engine, duration in (
            ("sim", i < sim_ok, "mujoco", 60.0),
            ("real", i < real_ok, "ros2", real_s),
        ):
            rows.append(
                {
                    "episode_id": f"p{i:02d}-{side}",
                    "pair_id": f"p{i:02d}",
                    "side": side,
                    "family": family,
                    "task_id": f"{family}/i{(i // 2) % 5}",
                    "seed": i,
                    "policy": "lab.policies:evaluated",
                    "engine": engine,
                    "quality": 0.9 if success else 0.3,
                    "target_quality": 0.8,
                    "status": "ok",
                    "duration_s": duration,
                    "interventions": 0,
                    "energy_wh": 1.0,
                    "attempt": 1,
                    "started_at": f"2026-11-{2 + i % 5:02d}T09:{i:02d}:00Z",
                }
            )
    return rows


@pytest.fixture
def protocol_file(tmp_path: Path) -> Path:
    path = tmp_path / "protocol.toml"
    path.write_text(PROTOCOL)
    return path


def test_imported_files_without_window_give_the_issue_example(
    tmp_path: Path, protocol_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 40 pairs, 34/40 sim and 30/40 real successes, 40 real episodes of 1800 s = 20 h, 2 near
    # misses (imported in the data contract's incident columns, no window column):
    # AR = 30/40 = 0.75, AR_sim = 34/40 = 0.85, S2R = 1 − |0.85 − 0.75| = 0.90,
    # ν_nm = 100·2/20 = 10 per 100 h, SS = 1 − min(1, 0.25·10) = 0, Ê = (0.75·0·0.9)^(1/3) = 0.
    db = str(tmp_path / "lab.db")
    episodes = write_csv(tmp_path / "eps.csv", EPISODE_COLUMNS, episode_rows(40, 34, 30, 1800.0))
    incidents = write_csv(
        tmp_path / "inc.csv",
        ["incident_id", "episode_id", "occurred_at", "severity", "source", "rule", "text"],
        [
            {"incident_id": "nm-1", "episode_id": "p01-real", "occurred_at":
             "2026-11-03T09:10:00Z", "severity": "near_miss", "source": "auto",
             "rule": "R1.stop", "text": "protective stop"},
            {"incident_id": "nm-2", "episode_id": "p07-real", "occurred_at":
             "2026-11-04T09:10:00Z", "severity": "near_miss", "source": "manual", "rule": "",
             "text": "close approach seen by the operator"},
        ],
    )  # fmt: skip
    assert run(capsys, "import", "episodes", str(episodes), "--db", db)[0] == 0
    assert run(capsys, "import", "incidents", str(incidents), "--db", db)[0] == 0
    out = ok_json(capsys, "metrics", "--db", db, "--protocol", str(protocol_file), "--json")
    assert out["exposure_hours"] == pytest.approx(20.0)
    assert out["AR"]["value"] == pytest.approx(0.75)
    assert out["AR_sim"]["value"] == pytest.approx(0.85)
    assert out["S2R"]["value"] == pytest.approx(0.90)
    assert out["rates_per_100h"]["near_miss"]["value"] == pytest.approx(10.0)
    assert out["SS"]["value"] == 0.0 and out["E_raw"]["value"] == 0.0
    assert any("without a window id" in n for n in out["notes"])
    # The rates command reads the same window: H from the real episode durations (no ledger).
    rates = ok_json(
        capsys, "incidents", "rates", "--db", db, "--protocol", str(protocol_file), "--json"
    )
    assert rates["exposure"]["how_measured"] == ["episode_durations"]
    assert rates["counts"]["near_miss"] == 2 and rates["SS"]["value"] == 0.0


@pytest.mark.parametrize(
    ("near_miss", "minor", "real_episodes", "nu_nm", "nu_min", "ss"),
    [
        # 2 near misses + 1 minor in 25 × 7200 s = 50 h: ν_nm = 200/50 = 4, ν_min = 100/50 = 2,
        # SS = 1 − min(1, 0.25·4 + 1·2) = 1 − min(1, 3) = 0.
        (2, 1, 25, 4.0, 2.0, 0.0),
        # Milder: 1 near miss in 50 × 7200 s = 100 h: ν_nm = 1, SS = 1 − 0.25·1 = 0.75.
        (1, 0, 50, 1.0, 0.0, 0.75),
    ],
)
def test_incident_rates_without_a_ledger(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    near_miss: int,
    minor: int,
    real_episodes: int,
    nu_nm: float,
    nu_min: float,
    ss: float,
) -> None:
    db = str(tmp_path / "lab.db")
    rows = [r for r in episode_rows(real_episodes, 0, 0, 7200.0) if r["side"] == "real"]
    for row in rows:
        row["pair_id"] = row["episode_id"]
    assert run(capsys, "import", "episodes", str(write_csv(
        tmp_path / "real.csv", EPISODE_COLUMNS, rows)), "--db", db)[0] == 0  # fmt: skip
    for n, severity in enumerate(["near_miss"] * near_miss + ["minor"] * minor):
        rc, _, err = run(
            capsys, "incidents", "report", "--severity", severity, "--reporter", "amy",
            "--window", "w", "--occurred", f"2026-11-0{n + 2}T10:00:00Z", "--db", db,
        )  # fmt: skip
        assert rc == 0, err  # no --event-type needed when the severity is judged
    out = ok_json(capsys, "incidents", "rates", "--window", "w", "--db", db, "--json")
    assert out["exposure_hours"] == pytest.approx(real_episodes * 2.0)
    assert out["rates_per_100h"]["near_miss"]["value"] == pytest.approx(nu_nm)
    assert out["rates_per_100h"]["minor"]["value"] == pytest.approx(nu_min)
    assert out["SS"]["value"] == pytest.approx(ss)
    assert "safety_score" not in out and "mtbsi_h" not in out  # each number once
    assert out["valid"] is True and out["invalid_reason"] is None


def test_keys_create_with_only_a_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    first = ok_json(capsys, "keys", "create", "--role", "reviewer", "--holder", "rita",
                    "--db", "k.db", "--json")  # fmt: skip
    second = ok_json(capsys, "keys", "create", "--role", "reviewer", "--holder", "rita",
                     "--db", "k.db", "--json")  # fmt: skip
    assert first["key_file"] == "rita-reviewer.pem" and second["key_file"] == "rita-reviewer-2.pem"
    assert (tmp_path / "rita-reviewer.pem").stat().st_mode & 0o077 == 0
    assert first["role"] == "reviewer" and first["fingerprint"] != second["fingerprint"]
    listed = ok_json(capsys, "keys", "list", "--db", "k.db", "--json")
    assert sorted(k["fingerprint"] for k in listed) == sorted(
        [first["fingerprint"], second["fingerprint"]]
    )


def test_plan_success_threshold_above_one_is_a_user_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = run(capsys, "plan", "success", "--threshold", "1.5")
    assert rc == 2 and err.strip().count("\n") == 0 and err.startswith("error: threshold")


def test_safety_score_accepts_sequences_and_numpy() -> None:
    # Counts in the order near_miss, minor, major, critical; 2 nm + 1 minor in 50 h → SS 0;
    # 1 nm in 100 h → 1 − 0.25 = 0.75; weights (0.25, 1, 5, 20) given as a tuple.
    assert safety_score([2, 1, 0, 0], 50.0) == 0.0
    counts: Any = np.array([1, 0, 0, 0])  # what a caller holding numpy counts passes
    assert safety_score(counts, np.float64(100), (0.25, 1, 5, 20)) == 0.75
    assert safety_score({"near_miss": np.int64(1)}, 100) == 0.75  # type: ignore[dict-item]
    # MTBSI = H / N = 100 / 2 = 50 h.
    assert mtbsi((1, 1, 0, 0), 100.0).value == pytest.approx(50.0)
    with pytest.raises(Exception, match="4 values"):
        safety_score([1, 0], 10.0)


def test_embodiment_score_default_anchors() -> None:
    # Ê = (0.75 · 0.9 · 0.9)^(1/3) = 0.6075^(1/3) = 0.846932; φ with (0, 1) is the identity,
    # with (0.5, 1): (0.846932 − 0.5)/0.5 = 0.693865.
    raw = embodiment_raw(0.75, 0.9, 0.9)
    assert raw == pytest.approx(0.846932, abs=1e-6)
    assert embodiment_score(raw) == pytest.approx(0.846932, abs=1e-6)
    assert embodiment_score(raw, 0.5, 1.0) == pytest.approx(0.693865, abs=1e-6)
    with pytest.raises(Exception, match="L < U"):
        embodiment_score(raw, 1.0, 1.0)


def test_records_accept_numpy_scalars_and_lists(tmp_path: Path) -> None:
    # What a caller holding numpy values naturally passes (hence Any for the type checker).
    numpy_values: dict[str, Any] = {
        "seed": np.int64(3),
        "quality": np.float64(0.85),
        "duration_s": np.float32(12.0),
        "faults": [Fault("grasp_slip", np.bool_(True), np.float64(4.0))],  # type: ignore[arg-type]
        "randomization": {"friction_scale": np.float64(0.95), "latency_steps": np.int64(1)},
    }
    ep = Episode(
        episode_id="e1",
        pair_id="p1",
        side="real",
        family="pick_place",
        task_id="pick_place/i0",
        policy="lab.policies:evaluated",
        engine="ros2",
        target_quality=0.8,
        **numpy_values,
    )
    assert type(ep.seed) is int and ep.success is True and isinstance(ep.faults, tuple)
    assert ep.faults[0].recovered_autonomously is True and ep.faults[0].episode_id == "e1"
    assert Episode.from_json(ep.to_json()) == ep
    with Store(tmp_path / "s.db") as store:
        assert store.write_episode(ep) and store.get_episode("e1") == ep


def test_aai_index_by_profile_name() -> None:
    values = {"A": 0.9, "G": 0.8, "P": 0.7, "M": 0.6, "T": 0.5,
              "R": 0.4, "S": 0.3, "E": 0.6, "W": 0.7, "$": 0.5}  # fmt: skip
    # robotics: W = 1+1+1.1+1+1.1+1.5+1+1.25+1+1 = 10.95;
    # Σ w ln x = ln.9 + ln.8 + 1.1 ln.7 + ln.6 + 1.1 ln.5 + 1.5 ln.4 + ln.3 + 1.25 ln.6 + ln.7
    #          + ln.5 = −6.26089; C = exp(−6.26089/10.95) = 0.564525.
    assert aai_index(values, "robotics") == pytest.approx(0.564525, abs=1e-6)
    # default without E: E is optional (weight 0), W = 9.5, Σ w ln x = −5.51738 → 0.559463.
    no_e = {k: v for k, v in values.items() if k != "E"}
    expected = math.exp(
        (sum(math.log(v) for k, v in no_e.items() if k != "R") + 1.5 * math.log(0.4)) / 9.5
    )
    assert aai_index(no_e) == pytest.approx(expected, rel=1e-12)
    assert aai_index(no_e) == pytest.approx(0.559463, abs=1e-6)
    # U = min / median = 0.3 / 0.6 = 0.5 over the ten axes.
    assert uniformity(values, "robotics") == pytest.approx(0.5)


def test_score_minimal_evidence_and_flat_axis_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    minimal = tmp_path / "minimal.json"
    minimal.write_text(json.dumps({"axes": {"A": {"value": 0.8}, "G": {"raw": 0.5, "L": 0.2,
                                                                      "U": 0.9}}}))  # fmt: skip
    out = ok_json(capsys, "score", str(minimal), "--profile", "default", "--json")
    for key in ("axes", "profile", "index", "index_jagged", "uniformity", "level", "gates"):
        assert key in out
    # φ_G(0.5) = (0.5 − 0.2)/(0.9 − 0.2) = 3/7; A given normalized keeps raw = null.
    assert out["axes"]["G"]["raw"] == 0.5 and out["axes"]["G"]["value"] == pytest.approx(3 / 7)
    assert out["axes"]["A"]["raw"] is None and out["axes"]["A"]["value"] == 0.8
    # A point without an interval never passes a threshold gate (only inconclusive).
    verdicts = {c["verdict"] for g in out["gates"] for c in g["checks"] if c["name"] == "A ≥ 0.5"}
    assert verdicts == {"inconclusive"}

    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"axes": {
        "A": {"value": 0.8, "low": 0.7, "high": 0.9},
        "G": {"raw": 0.5, "L": 0.2, "U": 0.9, "low": 0.4, "high": 0.6},
    }}))  # fmt: skip
    out = ok_json(capsys, "score", str(flat), "--json")
    # A: lower bound 0.7 ≥ 0.6 passes AAI-2's A gate; 0.7 < 0.75 ≤ 0.8 is inconclusive at AAI-3.
    checks = {(g["level"], c["name"]): c["verdict"] for g in out["gates"] for c in g["checks"]}
    assert checks[(2, "A ≥ 0.6")] == "pass" and checks[(3, "A ≥ 0.75")] == "inconclusive"
    # G: raw interval [0.4, 0.6] maps to [(0.4 − 0.2)/0.7, (0.6 − 0.2)/0.7] = [2/7, 4/7].
    g_interval = out["axes"]["G"]["interval"]
    assert g_interval["low"] == pytest.approx(2 / 7) and g_interval["high"] == pytest.approx(4 / 7)
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"axes": {"A": {"value": {"value": 0.8}, "low": 0.7}}}))
    rc, _, err = run(capsys, "score", str(twice))
    assert rc == 2 and "axes.A.low" in err and err.count("\n") == 1


def test_contract_incident_columns_take_the_episode_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "lab.db")
    rows = [{**r, "window": "w9"} for r in episode_rows(2, 2, 2, 600.0)]
    episodes = write_csv(tmp_path / "eps.csv", [*EPISODE_COLUMNS, "window"], rows)
    assert run(capsys, "import", "episodes", str(episodes), "--db", db)[0] == 0
    incidents = write_csv(
        tmp_path / "inc.csv",
        ["incident_id", "episode_id", "occurred_at", "severity", "source", "rule", "text"],
        [{"incident_id": "m-1", "episode_id": "p01-real", "occurred_at": "2026-11-03T09:10:00Z",
          "severity": "minor", "source": "auto", "rule": "R5.contact", "text": "bumped fixture"}],
    )  # fmt: skip
    assert run(capsys, "import", "incidents", str(incidents), "--db", db)[0] == 0
    (state,) = ok_json(capsys, "incidents", "list", "--db", db, "--json")
    record = state["incident"]
    assert record["window"] == "w9" and record["event_type"] == "other"
    assert (
        record["detector_rule_id"] == "R5.contact" and record["what_happened"] == "bumped fixture"
    )
    assert state["severity"] == "minor"
    # 2 real episodes × 600 s = 1/3 h; 1 minor → ν_min = 100 · 1 / (1/3) = 300 per 100 h.
    rates = ok_json(capsys, "incidents", "rates", "--window", "w9", "--db", db, "--json")
    assert rates["rates_per_100h"]["minor"]["value"] == pytest.approx(300.0)


def test_compute_embodiment_with_hours_and_a_protocol_path() -> None:
    from embodied_eval.embodiment import compute_embodiment
    from embodied_eval.protocol.reader import example_protocol_path
    from embodied_eval.records import Incident

    episodes = [
        Episode(
            episode_id=row["episode_id"], pair_id=row["pair_id"], side=row["side"],
            family=row["family"], task_id=row["task_id"], seed=row["seed"],
            policy=row["policy"], engine=row["engine"], quality=row["quality"],
            target_quality=row["target_quality"], duration_s=row["duration_s"],
        )
        for row in episode_rows(40, 34, 30, 1800.0)
    ]  # fmt: skip
    near_miss = [Incident(incident_id="nm", occurred_at="2026-11-03T10:00:00Z",
                          severity="near_miss")]  # fmt: skip
    report = compute_embodiment(
        episodes, [], near_miss, 100.0, str(example_protocol_path()),
        rng=np.random.default_rng(5), resamples=200,
    ).to_json()  # fmt: skip
    # H = 100 h given: ν_nm = 1 per 100 h, SS = 1 − 0.25 = 0.75; AR 0.75, S2R 0.90;
    # Ê = (0.75 · 0.75 · 0.90)^(1/3) = 0.50625^(1/3) = 0.796994; example anchors (0, 1): E = Ê.
    assert report["exposure_hours"] == 100.0 and report["exposure_source"] == "given"
    assert report["SS"]["value"] == pytest.approx(0.75)
    assert report["E_raw"]["value"] == pytest.approx(0.796994, abs=1e-6)
    assert report["E"]["value"] == pytest.approx(0.796994, abs=1e-6)


def test_incidents_without_window_count_where_their_episode_is(
    tmp_path: Path, protocol_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "lab.db")
    # Incidents first (no episode stored yet, so no window to take), then the episodes of w5.
    incidents = write_csv(
        tmp_path / "inc.csv",
        ["incident_id", "episode_id", "occurred_at", "severity", "source"],
        [{"incident_id": "mine", "episode_id": "p00-real", "occurred_at": "2026-11-03T09:10:00Z",
          "severity": "minor", "source": "manual"},
         {"incident_id": "other", "episode_id": "elsewhere", "occurred_at":
          "2026-11-03T09:20:00Z", "severity": "minor", "source": "manual"}],
    )  # fmt: skip
    assert run(capsys, "import", "incidents", str(incidents), "--db", db)[0] == 0
    rows = [{**r, "window": "w5"} for r in episode_rows(4, 4, 4, 3600.0)]
    episodes = write_csv(tmp_path / "eps.csv", [*EPISODE_COLUMNS, "window"], rows)
    assert run(capsys, "import", "episodes", str(episodes), "--db", db)[0] == 0
    # 4 real episodes × 1 h = 4 h; only "mine" names an episode of w5: ν_min = 100/4 = 25.
    out = ok_json(capsys, "metrics", "--db", db, "--protocol", str(protocol_file),
                  "--window", "w5", "--json")  # fmt: skip
    assert out["rates_per_100h"]["minor"]["value"] == pytest.approx(25.0)
    assert any("not counted" in n for n in out["notes"])
    rates = ok_json(capsys, "incidents", "rates", "--window", "w5", "--db", db, "--json")
    assert rates["counts"]["minor"] == 1 and len(rates["notes"]) == 2
