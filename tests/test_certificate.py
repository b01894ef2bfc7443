"""Certification end to end on a store built by importing episodes and recording incidents.

The window (built by `build_window`): the example battery on MuJoCo only, one seed per instance,
so 25 pairs (five families × five instances), each with one sim and one real episode, all escrowed in a manifest. Outcomes are
fixed by hand: sim fails on 2 pairs, real fails on 4 (the 2 sim failures among them); the
exposure ledger holds 500 h; one near-miss (a protective stop) is recorded on the real robot.

Hand-computed values (seed §3.1, §7; the project's statistics notes):
    AR      = 21/25 = 0.84
    AR_sim  = 23/25 = 0.92 (paired)
    S2R     = 1 − |0.92 − 0.84| = 0.92
    ν_nm    = 100 · 1/500 = 0.2 per 100 h;  ν_min = ν_maj = ν_crit = 0
    SS      = 1 − min(1, 0.25 · 0.2) = 0.95
    Ê       = (0.84 · 0.95 · 0.92)^(1/3) = 0.73416^(1/3) = 0.90212…;  E = φ_E(Ê) = Ê (L = 0,
              U = 1)
    near-miss rate, Garwood 95 %: [χ²(0.025; 2), χ²(0.975; 4)] / (2 · 500) · 100
                               = [0.050636, 11.143287] / 10 = [0.0050636, 1.1143287]
    zero-event one-sided 95 % bound (minor/major/critical): χ²(0.95; 2)/(2 · 500) · 100
                               = 5.991465 / 10 = 0.5991465 per 100 h
    MTBSI   = 500 h / 1 = 500 h
    index   = exp(Σ w_x ln x / Σ w_x) with robotics weights (Σ w = 10.95), the software axes
              all 0.8 and E = Ê: exp((9.7 ln 0.8 + 1.25 ln Ê) / 10.95)
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import ExposureEntry
from embodied_eval.store.core import Store
from embodied_eval.store.signing_keys import create_private_key

pytestmark = pytest.mark.timeout(180)

#: Pairs (by sorted pair id) on which each side fails.
SIM_FAILS = (0, 1)
REAL_FAILS = (0, 1, 2, 3)
EXPOSURE_H = 500.0
SOFTWARE_AXES = ("A", "G", "P", "M", "T", "R", "S", "W", "$")


def single_day(text: str) -> str:
    """The protocol text without its drift calendar: only the day-0 drift is sampled and the
    closure audits (which need the calendar) are left out."""
    sections = re.split(r"(?m)^(?=\[)", text)
    kept = [s for s in sections if not s.startswith(("[maintenance]", "[expansion]"))]
    out = "".join(kept)
    return re.sub(r"(?m)^drifts = \[.*\]$", 'drifts = ["nominal"]', out)


def write_protocol(folder: Path) -> Path:
    """The example protocol on MuJoCo only, day 0 of its drift calendar, with fewer bootstrap
    resamples (faster tests)."""
    text = single_day(example_protocol_path().read_text(encoding="utf-8"))
    text = text.replace("bootstrap_resamples = 2000", "bootstrap_resamples = 300")
    text = text.replace('engines = ["mujoco", "pybullet"]', 'engines = ["mujoco"]')
    path = folder / "protocol.toml"
    path.write_text(text, encoding="utf-8")
    return path


def incident_log(db: Path) -> Any:
    """The incident log, reached the way the harness reaches it."""
    from embodied_eval.plugins import INCIDENT_LOG, resolve

    return resolve(INCIDENT_LOG["open"])(db)


def record_incident(db: Path, window: str, **fields: Any) -> None:
    """Report one manual incident through the incident log's API (classified on the way in)."""
    from incident_logging.record import IncidentRecord

    base: dict[str, Any] = {
        "window": window,
        "event_type": "protective_stop",
        "source": "manual",
        "provisional_severity": "near_miss",
        "reporter": "tech-a",
        "reporter_role": "technician",
        "side": "real",
    }
    base.update(fields)
    with incident_log(db) as log:
        log.report(IncidentRecord(**base))


def build_window(
    tmp_path: Path,
    *,
    near_miss: bool = True,
    recordings: bool = False,
    judge: dict[str, str] | None = None,
) -> tuple[Path, Path]:
    """A store holding the fixed window described in the module docstring.

    With `recordings`, each failed real episode carries a camera recording (MCAP, see
    `tests.camera_recording`) under `tmp_path/run/`. With `judge`, the real episodes name it.

    Returns:
        (protocol file, store file).
    """
    protocol_path = write_protocol(tmp_path)
    protocol = load_protocol(protocol_path)
    db = tmp_path / "store.db"
    manifest = plan_manifest(protocol)
    pair_ids = sorted({s.pair_id for s in manifest.specs})
    fails = {"sim": {pair_ids[i] for i in SIM_FAILS}, "real": {pair_ids[i] for i in REAL_FAILS}}
    episodes = []
    for i, spec in enumerate(manifest.specs):
        quality = 0.5 if spec.pair_id in fails[spec.side] else 0.9
        # The manifest's rows are first attempts carrying the protocol's window and hash.
        episode = spec.to_episode(
            quality, duration_s=30.0, started_at=f"2026-11-02T10:{i % 60:02d}:00Z"
        )
        if recordings and spec.side == "real" and spec.pair_id in fails["real"]:
            from tests.camera_recording import RECORDED_COLOURS, write_camera_mcap

            safe = "".join(c if c.isalnum() else "_" for c in spec.episode_id)
            artifact = write_camera_mcap(tmp_path / "run" / f"{safe}.mcap", RECORDED_COLOURS)
            episode = replace(episode, artifacts=(artifact,))
        if judge is not None and spec.side == "real":
            episode = replace(episode, judge=dict(judge))
        episodes.append(episode)
    with Store(db) as store:
        store.write_manifest(
            manifest.manifest_hash, protocol.protocol_hash, protocol.window_id, manifest.to_dict()
        )
        store.write_episodes(episodes)
    with incident_log(db) as log:
        log.add_exposure(
            ExposureEntry(
                entry_id="EXP-1",
                window=protocol.window_id,
                start="2026-11-01T00:00:00Z",
                end="2026-11-29T00:00:00Z",
                active_hours=EXPOSURE_H,
                how_measured="robot_clock",
                robot_id=protocol.robot_id,
            )
        )
    if near_miss:
        real_episode = next(e for e in episodes if e.side == "real")
        record_incident(
            db,
            protocol.window_id,
            incident_id="INC-nm-1",
            occurred_at="2026-11-10T12:00:00Z",
            stop_category=2,
            episode_id=real_episode.episode_id,
            what_happened="protective stop <script>alert(1)</script> near the fixture",
        )
    return protocol_path, db


def write_evidence(folder: Path) -> Path:
    """Software-only axes all at 0.8, and a resource card."""
    evidence = {
        "axes": {x: {"value": 0.8} for x in SOFTWARE_AXES},
        "subject": {
            "resource_card": {
                "declared_priors": ["scripted grasp primitives", "analytic IK"],
                "training": {"sim_steps": 2000000, "demonstrations": 50, "real_hours": 3.5},
            }
        },
    }
    path = folder / "evidence.json"
    path.write_text(json.dumps(evidence), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def window(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("window")
    protocol, db = build_window(tmp)
    key = tmp / "keys" / "owner.pem"
    create_private_key(key)
    evidence = write_evidence(tmp)
    out = tmp / "bundle"
    issue_certificate(protocol_path=protocol, db=db, key_path=key, out=out, evidence_path=evidence)
    return {"tmp": tmp, "protocol": protocol, "db": db, "key": key, "out": out}


def certificate(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "certificate.json").read_text(encoding="utf-8"))


def test_certificate_numbers_match_hand_computation(window: dict[str, Path]) -> None:
    cert = certificate(window["out"])
    emb = cert["embodiment"]
    assert emb["AR"]["value"] == pytest.approx(0.84, abs=1e-12)
    assert emb["AR_sim"]["value"] == pytest.approx(0.92, abs=1e-12)
    assert emb["S2R"]["value"] == pytest.approx(0.92, abs=1e-12)
    assert emb["SS"]["value"] == pytest.approx(0.95, abs=1e-12)
    e_raw = (0.84 * 0.95 * 0.92) ** (1 / 3)  # 0.73416^(1/3) = 0.90212…
    assert emb["E_raw"]["value"] == pytest.approx(e_raw, rel=1e-12)
    assert emb["E"]["value"] == pytest.approx(e_raw, rel=1e-12)
    assert cert["window"]["valid"] is True
    assert cert["window"]["exposure_hours"] == EXPOSURE_H
    rates = emb["rates_per_100h"]
    assert rates["near_miss"]["value"] == pytest.approx(0.2, rel=1e-12)
    assert rates["near_miss"]["low"] == pytest.approx(0.0050636, rel=1e-4)
    assert rates["near_miss"]["high"] == pytest.approx(1.1143287, rel=1e-6)
    bounds = cert["incidents"]["zero_event_bounds"]
    assert set(bounds) == {"minor", "major", "critical"}
    assert bounds["minor"]["high"] == pytest.approx(0.5991465, rel=1e-6)
    assert emb["MTBSI_h"]["value"] == pytest.approx(500.0)
    assert cert["incidents"]["counts"] == {"near_miss": 1, "minor": 0, "major": 0, "critical": 0}


def test_index_uses_robotics_weights_and_e_from_the_store(window: dict[str, Path]) -> None:
    cert = certificate(window["out"])
    score = cert["score"]
    assert score["profile"] == "robotics"
    e = (0.84 * 0.95 * 0.92) ** (1 / 3)
    # Σ w over the nine software axes = 1+1+1.1+1+1.1+1.5+1+1+1 = 9.7; w_E = 1.25; Σ = 10.95.
    expected = math.exp((9.7 * math.log(0.8) + 1.25 * math.log(e)) / 10.95)
    assert score["index"] == pytest.approx(expected, rel=1e-9)
    assert score["axes"]["E"]["raw"] == pytest.approx(e, rel=1e-12)
    assert score["axes"]["E"]["value"] == pytest.approx(e, rel=1e-12)
    # The robotics gates reached the level assignment.
    names = [g["name"] for g in score["gates"]]
    assert "AAI-2 (Robotics)" in names
    assert cert["level"]["assigned"] == f"AAI-{cert['level']['level']}"
    assert cert["level"]["level"] == score["level"]  # a valid window is not capped


def test_certificate_bookkeeping(window: dict[str, Path]) -> None:
    cert = certificate(window["out"])
    protocol = load_protocol(window["protocol"])
    assert cert["protocol"]["hash"] == protocol.protocol_hash
    assert len(cert["manifests"]) == 1
    assert cert["manifests"][0]["episodes"] == 50
    sides = cert["trials"]["by_side"]
    assert sides["sim"]["planned"] == 25 and sides["sim"]["run"] == 25
    assert sides["real"]["planned"] == 25 and sides["real"]["run"] == 25
    with incident_log(window["db"]) as log:
        count, head = log.head()
    assert cert["incidents"]["chain"]["head_hash"] == head
    assert cert["incidents"]["chain"]["record_count"] == count
    assert isinstance(cert["rng"]["seed"], int)
    assert cert["software"]["name"] == "embodied-eval"
    card = cert["resource_card"]
    assert "analytic IK" in card["declared_priors"]
    assert card["training"] == {"sim_steps": 2000000, "demonstrations": 50, "real_hours": 3.5}
    assert cert["signer"]["key_fingerprint"] == verify_bundle(window["out"]).key_fingerprint
    files = sorted(p.relative_to(window["out"]).as_posix() for p in window["out"].rglob("*"))
    assert files == [
        "certificate.json",
        "evidence.json",
        "plots",
        "plots/embodiment.png",
        "plots/frontier.png",
        "plots/incident_rates.png",
        "plots/reliability.png",
        "plots/success_by_family.png",
        "protocol.toml",
        "public_key.pem",
        "report.html",
        "signature",
    ]


def test_report_escapes_text_and_has_every_section(window: dict[str, Path]) -> None:
    html = (window["out"] / "report.html").read_text(encoding="utf-8")
    for section in ("technicians", "safety", "certification", "integrity"):
        assert f'<section id="{section}">' in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count('src="data:image/png;base64,') == 5


def test_round_trip_verify_recomputes_from_the_store(
    window: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(window["out"]), "--db", str(window["db"])]) == 0
    out = capsys.readouterr().out
    assert "numbers recompute from the store" in out


def test_verify_notices_a_changed_store(window: dict[str, Path], tmp_path: Path) -> None:
    """A store that gained an episode after certification no longer reproduces the numbers."""
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(window["db"], db)
    protocol = load_protocol(window["protocol"])
    with Store(db) as store:
        ep = store.episodes(window=protocol.window_id, side="real")[0]
        store.write_episode(ep.replace(episode_id=ep.episode_id + "-x", attempt=2))
    verified = verify_bundle(window["out"])
    with pytest.raises(EvalError, match="episodes digest changed"):
        recompute_check(verified, db)


def test_verify_notices_a_rewritten_certificate_number(
    window: dict[str, Path], tmp_path: Path
) -> None:
    """A certificate re-signed with edited numbers passes the signature but not recomputation."""
    from embodied_eval.certificate.bundle import write_bundle
    from embodied_eval.store.signing_keys import load_private_key

    cert = certificate(window["out"])
    cert["embodiment"]["AR"]["value"] = 0.95
    files = {
        p.relative_to(window["out"]).as_posix(): p.read_bytes()
        for p in window["out"].rglob("*")
        if p.is_file() and p.name not in ("certificate.json", "signature", "public_key.pem")
    }
    forged = tmp_path / "forged"
    write_bundle(forged, cert, files, load_private_key(window["key"]))
    verified = verify_bundle(forged)
    with pytest.raises(EvalError, match=r"embodiment\.AR\.value is 0\.95 but recomputes to 0\.84"):
        recompute_check(verified, window["db"])


def test_broken_incident_chain_refuses_certification(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol, db = build_window(tmp_path)
    # Someone with the file drops the append-only triggers and edits a record.
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER incident_chain_no_update")
    conn.execute(
        "UPDATE incident_chain SET body = replace(body, 'near the fixture', 'far away') "
        "WHERE body LIKE '%near the fixture%'"
    )
    conn.commit()
    conn.close()
    key = tmp_path / "k.pem"
    out = tmp_path / "bundle"
    rc = main(
        [
            "certify",
            "--protocol",
            str(protocol),
            "--db",
            str(db),
            "--key",
            str(key),
            "--create-key",
            "--out",
            str(out),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: incident log")
    assert "does not verify" in err
    assert not out.exists()


def test_critical_incident_invalidates_the_window(tmp_path: Path) -> None:
    protocol_path, db = build_window(tmp_path)
    protocol = load_protocol(protocol_path)
    record_incident(
        db,
        protocol.window_id,
        incident_id="INC-crit-1",
        occurred_at="2026-11-12T09:30:00Z",
        event_type="contact",
        injury_level="hospitalisation",
        measurements={
            "body_region": "upper_arm",
            "contact_type": "quasi_static",
            "contact_force_n": 400.0,
        },
        what_happened="operator hospitalised after a contact",
    )
    key = tmp_path / "k.pem"
    create_private_key(key)
    issued = issue_certificate(
        protocol_path=protocol_path,
        db=db,
        key_path=key,
        out=tmp_path / "bundle",
        evidence_path=write_evidence(tmp_path),
    )
    cert = issued.certificate
    assert cert["window"]["valid"] is False
    assert "INC-crit-1" in cert["window"]["invalid_reason"]
    # §3.1: any critical ⇒ SS = 0, so Ê = E = 0; §7: the window is invalid ⇒ nothing certified.
    assert cert["embodiment"]["SS"]["value"] == 0.0
    assert cert["embodiment"]["E"]["value"] == 0.0
    assert cert["level"]["level"] == 0
    assert cert["level"]["assigned"] == "AAI-0"
    assert "invalid window" in cert["level"]["reason"]
    for name in ("AAI-2", "AAI-3", "AAI-4"):
        assert cert["embodiment"]["gates"][name]["verdict"] == "fail"
    html = (issued.path / "report.html").read_text(encoding="utf-8")
    assert "Window invalid" in html
    verify_bundle(issued.path)
    recompute_check(verify_bundle(issued.path), db)


def test_cli_certify_makes_a_key_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol, db = build_window(tmp_path, near_miss=False)
    key = tmp_path / "new.pem"
    out = tmp_path / "bundle"
    args = ["certify", "--protocol", str(protocol), "--db", str(db), "--key", str(key)]
    assert main([*args, "--create-key", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "created key" in text and "report" in text
    assert main(["verify", str(out), "--db", str(db), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] is True and result["recomputed"] is True
    # Without evidence the software axes are missing: the index is undefined, and says why.
    cert = certificate(out)
    assert cert["score"]["index"] is None
    assert set(cert["score"]["missing_axes"]) == set(SOFTWARE_AXES)
    # A second run into the same folder is refused; the key is not overwritten.
    assert main([*args, "--out", str(out)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main([*args, "--create-key", "--out", str(tmp_path / "b2")]) == 2
    assert "already exists" in capsys.readouterr().err


def test_evidence_may_not_supply_e(tmp_path: Path) -> None:
    protocol, db = build_window(tmp_path, near_miss=False)
    key = tmp_path / "k.pem"
    create_private_key(key)
    evidence = tmp_path / "e.json"
    evidence.write_text(json.dumps({"axes": {"E": {"value": 0.99}}}), encoding="utf-8")
    with pytest.raises(EvalError, match="certify computes E"):
        issue_certificate(
            protocol_path=protocol, db=db, key_path=key, out=tmp_path / "b", evidence_path=evidence
        )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("certificate.json", "certificate.json"),
        ("report.html", "report.html"),
        ("plots/reliability.png", "plots/reliability.png"),
        ("protocol.toml", "protocol.toml"),
        ("evidence.json", "evidence.json"),
        ("signature", "signature"),
        ("missing:plots/frontier.png", "plots/frontier.png"),
        ("extra:plots/extra.png", "plots/extra.png"),
    ],
)
def test_cli_verify_names_the_tampered_file(
    window: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: str,
    named: str,
) -> None:
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(window["out"], bundle)
    if change.startswith("missing:"):
        (bundle / change.split(":", 1)[1]).unlink()
    elif change.startswith("extra:"):
        (bundle / change.split(":", 1)[1]).write_bytes(b"\x89PNG extra")
    else:
        path = bundle / change
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01  # one bit of one byte
        path.write_bytes(bytes(data))
    assert main(["verify", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: verification failed: {named}:")


def test_protocol_owner_key_from_the_incident_log_signs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A passphrase-protected key made by `keys create --role protocol_owner` certifies, and the
    certificate names its registered holder and role."""
    protocol, db = build_window(tmp_path, near_miss=False)
    monkeypatch.setenv("OWNER_PW", "correct horse")
    key = tmp_path / "owner.pem"
    assert (
        main(
            [
                "keys",
                "create",
                "--role",
                "protocol_owner",
                "--holder",
                "Dana Owner",
                "--out",
                str(key),
                "--passphrase-env",
                "OWNER_PW",
                "--db",
                str(db),
            ]
        )
        == 0
    )
    out = tmp_path / "bundle"
    args = ["certify", "--protocol", str(protocol), "--db", str(db), "--key", str(key)]
    assert main([*args, "--out", str(out)]) == 2
    assert "--passphrase-env" in capsys.readouterr().err
    assert main([*args, "--out", str(out), "--passphrase-env", "OWNER_PW"]) == 0
    signer = certificate(out)["signer"]
    assert signer["registered_in_incident_log"] == {
        "holder": "Dana Owner",
        "role": "protocol_owner",
    }
    assert "Dana Owner (protocol_owner)" in (out / "report.html").read_text(encoding="utf-8")


def test_window_without_real_episodes_or_manifest_still_certifies(tmp_path: Path) -> None:
    """Imported sim episodes only: E is undefined, planned counts unknown; the report says so."""
    protocol_path, db = build_window(tmp_path, near_miss=False)
    protocol = load_protocol(protocol_path)
    sim_only = tmp_path / "sim.db"
    with Store(db) as full, Store(sim_only) as store:
        store.write_episodes(full.episodes(window=protocol.window_id, side="sim"))
    key = tmp_path / "k.pem"
    create_private_key(key)
    issued = issue_certificate(
        protocol_path=protocol_path, db=sim_only, key_path=key, out=tmp_path / "b"
    )
    cert = issued.certificate
    assert cert["embodiment"]["E"]["value"] is None
    assert cert["manifests"] == []
    assert cert["trials"]["by_side"]["real"] == {
        "planned": None,
        "run": 0,
        "episodes": 0,
        "scored": 0,
        "aborted": 0,
        "error": 0,
        "retries": 0,
    }
    assert cert["frontier"] is None
    html = (issued.path / "report.html").read_text(encoding="utf-8")
    assert "No manifest is escrowed for this window" in html
    recompute_check(verify_bundle(issued.path), sim_only)
