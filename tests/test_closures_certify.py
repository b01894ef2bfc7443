"""`certify` decides the robotics closures from the store; external closures need an auditor.

The window: the example protocol (its 14-day drift calendar, days 0, 7, 14, its maintenance audit
on E and its expansion audit of live object tracking) on MuJoCo only. Every manifest row has a
sim and a real episode of the protocol's policy; sim succeeds everywhere; on day 14 the real side
fails on 4 of its 25 rows. The expansion's pre and ablated conditions ran on the sim side: they
fail every push row and succeed every pick-and-place row. The exposure ledger holds 500 h, with
no incidents.

Hand-computed (seed §3.1 E, §3.4, §7; SS = 1 without incidents, L = 0, U = 1 so E = Ê):
    day 0 and day 7: AR = 25/25, S2R = 1 − |1 − 1| = 1 → E = 1 = C₀; α·C₀ = 0.8 · 1 = 0.8
    day 14: AR = 21/25 = 0.84, S2R = 1 − |1 − 0.84| = 0.84 → E = (0.84 · 1 · 0.84)^(1/3)
            = 0.7056^(1/3) = 0.890265 ≥ 0.8 (pass or inconclusive on its bootstrap bound)
    expansion on push (15 rows: 5 instances × 3 days) vs pick-and-place (15 control rows):
            post − pre = 1 − 0 on push, 1 − 1 on pick → ΔC_DiD = 1; ablated − pre = 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import ExposureEntry
from embodied_eval.store.core import Store
from embodied_eval.store.signing_keys import create_private_key

pytestmark = pytest.mark.timeout(240)


def write_protocol(folder: Path, *, closures: bool = True) -> Path:
    text = example_protocol_path().read_text(encoding="utf-8")
    text = text.replace("bootstrap_resamples = 2000", "bootstrap_resamples = 300")
    text = text.replace('engines = ["mujoco", "pybullet"]', 'engines = ["mujoco"]')
    if not closures:
        sections = re.split(r"(?m)^(?=\[)", text)
        text = "".join(s for s in sections if not s.startswith(("[maintenance]", "[expansion]")))
    path = folder / "protocol.toml"
    path.write_text(text, encoding="utf-8")
    return path


def build_store(folder: Path, protocol_path: Path) -> Path:
    protocol = load_protocol(protocol_path)
    db = folder / "store.db"
    manifest = plan_manifest(protocol)
    episodes = []
    day14_real = sorted(s.pair_id for s in manifest.side("real") if s.drift_name == "day14_worn")
    fails = set(day14_real[:4])
    for i, spec in enumerate(manifest.specs):
        q = 0.5 if spec.side == "real" and spec.pair_id in fails else 0.9
        episodes.append(
            spec.to_episode(q, duration_s=30.0, started_at=f"2026-11-02T10:{i % 60:02d}:00Z")
        )
    plan = protocol.expansion
    if plan is not None:
        for condition in ("pre", "ablated"):
            policy = plan.policy(condition)
            rows = plan_manifest(
                protocol, engines=["mujoco"], sim_policy=policy, real_policy=policy
            )
            for spec in rows.side("sim"):
                q = 0.0 if spec.family == "push" else 0.9
                episodes.append(spec.to_episode(q, duration_s=30.0))
    with Store(db) as store:
        store.write_manifest(
            manifest.manifest_hash, protocol.protocol_hash, protocol.window_id, manifest.to_dict()
        )
        store.write_episodes(episodes)
    from embodied_eval.plugins import INCIDENT_LOG, resolve

    with resolve(INCIDENT_LOG["open"])(db) as log:
        log.add_exposure(
            ExposureEntry(
                entry_id="EXP-1",
                window=protocol.window_id,
                start="2026-11-01T00:00:00Z",
                end="2026-11-29T00:00:00Z",
                active_hours=500.0,
                how_measured="robot_clock",
                robot_id=protocol.robot_id,
            )
        )
    return db


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("closures")
    protocol = write_protocol(tmp)
    db = build_store(tmp, protocol)
    key = tmp / "owner.pem"
    create_private_key(key)
    result = issue_certificate(protocol_path=protocol, db=db, key_path=key, out=tmp / "cert")
    return {"tmp": tmp, "protocol": protocol, "db": db, "key": key, "result": result}


def test_certificate_shows_the_computed_maintenance_closure(issued: dict[str, Any]) -> None:
    cert = issued["result"].certificate
    m = cert["closures"]["maintenance"]
    assert m["source"] == "computed" and m["index"] == "E"
    days = {d["day"]: d for d in m["days"]}
    assert sorted(days) == [0, 7, 14]
    assert days[0]["index"]["value"] == pytest.approx(1.0)
    assert m["threshold"] == pytest.approx(0.8)
    assert days[14]["index"]["value"] == pytest.approx(0.7056 ** (1 / 3), abs=1e-9)  # 0.890265
    assert days[14]["episodes"] == 25
    bound = days[14]["bound"]["low"]
    expected = "pass" if bound >= 0.8 else "inconclusive"
    assert m["verdict"] == expected
    assert days[14]["kinds"] == ["firmware", "friction", "lighting", "payload"]
    assert days[7]["kinds"] == ["friction", "lighting", "payload"]
    # The §7 AAI-2 gate reads the computed closure, named with its source.
    aai2 = cert["embodiment"]["gates"]["AAI-2"]["checks"]
    closure = next(c for c in aai2 if c["name"].startswith("maintenance closure"))
    assert closure["verdict"] == expected
    assert "computed from the store" in closure["detail"]
    # The level procedure sees the same audit under the protocol's α and Y.
    level_gate = next(g for g in cert["score"]["gates"] if "maintenance closure" in g["name"])
    assert level_gate["verdict"] == expected


def test_certificate_shows_the_computed_expansion_closure(issued: dict[str, Any]) -> None:
    x = issued["result"].certificate["closures"]["expansion"]
    assert x["source"] == "computed"
    assert x["rows"]["treated_rows"] == 15 and x["rows"]["control_rows"] == 15
    assert x["gain_did"]["value"] == pytest.approx(1.0)
    assert x["ablated_minus_pre"]["value"] == pytest.approx(0.0)
    gain = next(c for c in x["closure"]["checks"] if c["name"].startswith("gain"))
    assert gain["verdict"] == "pass"
    # ε = 0.05 on 15 rows: the 90 % Newcombe half-width of an all-concordant table,
    # z²/(15 + z²) = 2.705543/17.705543 = 0.152808, does not clear ε yet.
    removed = next(c for c in x["closure"]["checks"] if c["name"].startswith("|C(S_abl)"))
    assert removed["bound"] == pytest.approx(0.152808, abs=1e-6)
    assert removed["verdict"] == "inconclusive" and removed["remaining"]["samples"] > 0


def test_report_plots_the_index_over_the_drift_days(issued: dict[str, Any]) -> None:
    path = issued["result"].path
    html = (path / "report.html").read_text(encoding="utf-8")
    assert "Maintenance closure (computed from the store)" in html
    assert "Expansion closure (computed from the store)" in html
    assert 'id="plot-maintenance"' in html
    assert (path / "plots" / "maintenance.png").read_bytes()[:4] == b"\x89PNG"


def test_bundle_verifies_and_closures_recompute(issued: dict[str, Any]) -> None:
    verified = verify_bundle(issued["result"].path)
    recompute_check(verified, issued["db"])


def test_a_patch_recorded_later_changes_the_recomputed_closure(
    issued: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    from embodied_eval.store.patches import record_patch

    db = tmp_path / "store.db"
    shutil.copy(issued["db"], db)
    protocol = load_protocol(issued["protocol"])
    record_patch(
        db, window=protocol.window_id, kind="reteach", technician="tech-b", text="re-taught "
        "the push approach", drift="day07",
    )  # fmt: skip
    again = issue_certificate(
        protocol_path=issued["protocol"], db=db, key_path=issued["key"], out=tmp_path / "cert"
    )
    m = again.certificate["closures"]["maintenance"]
    assert m["verdict"] == "fail"
    assert [d["patches"] for d in m["days"]] == [0, 1, 0]
    with pytest.raises(EvalError, match=r"closures\.maintenance"):
        recompute_check(verify_bundle(issued["result"].path), db)


def test_a_drift_days_calibration_recorded_in_the_store_shows_and_recomputes(
    issued: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    from embodied_eval.embodiment.calibration_days import record_day_calibration
    from embodied_eval.store.core import transaction

    db = tmp_path / "store.db"
    shutil.copy(issued["db"], db)
    protocol = load_protocol(issued["protocol"])
    entry = {"value": 0.5, "low": 0.45, "high": 0.55, "unit": "kg", "identified": True}
    content = {"robot_id": protocol.robot_id, "parameters": {"payload": entry},
               "drift": {"name": "day14_worn", "day": 14}}  # fmt: skip
    with Store(db) as store, transaction(store.conn):
        record_day_calibration(store.conn, protocol.window_id, content, "f" * 64)
    assert issued["result"].certificate["closures"]["maintenance"]["calibration_by_day"] == []
    again = issue_certificate(
        protocol_path=issued["protocol"], db=db, key_path=issued["key"], out=tmp_path / "cert"
    )
    [row] = again.certificate["closures"]["maintenance"]["calibration_by_day"]
    assert (row["day"], row["drift"], row["source"]) == (14, "day14_worn", "store")
    assert row["parameters"] == {"payload": entry}
    page = (again.path / "report.html").read_text()
    assert "0.500 [0.450, 0.550]" in page
    recompute_check(verify_bundle(again.path), db)  # verify --db recomputes it from the store
    with pytest.raises(EvalError, match=r"closures\.maintenance"):
        recompute_check(verify_bundle(issued["result"].path), db)


def external(auditor: str | None) -> dict[str, Any]:
    audit: dict[str, Any] = {
        "baseline": 0.9,
        "checkpoints": [{"day": 14, "index": {"value": 0.85, "low": 0.8}}],
        "human_patches": 0,
        "drifts": ["payload", "friction", "lighting", "firmware"],
    }
    if auditor is not None:
        audit.update(auditor=auditor, date="2026-11-20")
    return {"closures": {"maintenance": [audit]}}


def test_external_closure_without_auditor_is_refused(issued: dict[str, Any]) -> None:
    evidence = issued["tmp"] / "unaudited.json"
    evidence.write_text(json.dumps(external(None)), encoding="utf-8")
    with pytest.raises(EvalError, match="names its auditor") as err:
        issue_certificate(
            protocol_path=issued["protocol"],
            db=issued["db"],
            key_path=issued["key"],
            out=issued["tmp"] / "refused",
            evidence_path=evidence,
        )
    assert err.value.key == "closures.maintenance[0].auditor"


def test_external_audited_closure_is_used_and_marked_when_nothing_is_computed(
    tmp_path: Path,
) -> None:
    protocol = write_protocol(tmp_path, closures=False)
    # Without [maintenance] the calendar's days are still run; only the evidence decides.
    db = build_store(tmp_path, protocol)
    key = tmp_path / "k.pem"
    create_private_key(key)
    evidence = tmp_path / "audited.json"
    evidence.write_text(json.dumps(external("Acme Robotics QA")), encoding="utf-8")
    cert = issue_certificate(
        protocol_path=protocol, db=db, key_path=key, out=tmp_path / "c", evidence_path=evidence
    ).certificate
    m = cert["closures"]["maintenance"]
    assert m["source"] == "external"
    assert m["audits"][0]["auditor"] == "Acme Robotics QA"
    # 0.85's bound 0.8 ≥ α·C₀ = 0.8 · 0.9 = 0.72; day 14 ≥ Y; no patches; all kinds: pass.
    assert m["audits"][0]["closure"]["verdict"] == "pass"
    aai2 = cert["embodiment"]["gates"]["AAI-2"]["checks"]
    closure = next(c for c in aai2 if c["name"].startswith("maintenance closure"))
    assert closure["verdict"] == "pass" and "external" in closure["detail"]
    assert cert["closures"]["expansion"] == {"source": None, "verdict": "evidence_missing"}


def test_metrics_shows_the_same_computed_closures(
    issued: dict[str, Any], capsys: pytest.CaptureFixture
) -> None:
    from embodied_eval.cli.main import main

    args = ["metrics", "--db", str(issued["db"]), "--protocol", str(issued["protocol"]), "--json"]
    assert main(args) == 0
    gates = json.loads(capsys.readouterr().out)["gates"]
    checks = {c["name"].split(" ")[0]: c for g in gates.values() for c in g["checks"]}
    cert = issued["result"].certificate["closures"]
    assert checks["maintenance"]["verdict"] == cert["maintenance"]["verdict"]
    assert checks["expansion"]["verdict"] == cert["expansion"]["verdict"] == "inconclusive"


def test_metrics_api_certify_and_verify_are_one_evaluation(
    issued: dict[str, Any], capsys: pytest.CaptureFixture
) -> None:
    """`metrics`, `ee.metrics`, `certify` and `verify --db` compute a window once, the same way:
    every estimate, gate and closure verdict agrees exactly (same seed rule, same closures)."""
    import embodied_eval as ee
    from embodied_eval.cli.main import main

    args = ["metrics", "--db", str(issued["db"]), "--protocol", str(issued["protocol"]), "--json"]
    assert main(args) == 0
    cli = json.loads(capsys.readouterr().out)
    api = json.loads(json.dumps(ee.metrics(issued["db"], issued["protocol"]).to_json()))
    certified = issued["result"].certificate["embodiment"]
    # `verify --db`: recomputes the certificate from the store and stops at any difference.
    recompute_check(verify_bundle(issued["result"].path), issued["db"])
    for name in ("AR", "AR_sim", "S2R", "SS", "E", "E_raw", "RA", "MTBSI_h"):
        assert cli[name] == api[name], name
        assert {k: cli[name][k] for k in ("value", "low", "high")} == {
            k: certified[name][k] for k in ("value", "low", "high")
        }, name
    assert cli["gate_bounds"] == api["gate_bounds"]
    assert cli["gates"] == api["gates"]
    for level, gate in certified["gates"].items():
        assert [c["verdict"] for c in cli["gates"][level]["checks"]] == [
            c["verdict"] for c in gate["checks"]
        ], level
