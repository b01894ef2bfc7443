"""What voids a certificate: a later firmware/software/policy version record, a drift-day
calibration beyond tolerance, the end of its validity period; `verify --db` names the record."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.validity import add_months, record_version, void_since
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.cli.main import main
from embodied_eval.embodiment.calibration_days import record_day_calibration
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.store.core import Store, transaction
from embodied_eval.store.signing_keys import create_private_key
from tests.test_certificate import build_window

pytestmark = pytest.mark.timeout(240)


def calibration(db: Path, window: str, robot: str, payload: float) -> None:
    content = {"drift": {"name": "nominal", "day": 0}, "robot_id": robot, "window": window,
               "parameters": {"payload": {"value": payload, "low": payload - 0.1,
                                          "high": payload + 0.1, "unit": "kg"}}}  # fmt: skip
    with Store(db, create=False) as store, transaction(store.conn):
        record_day_calibration(store.conn, window, content, f"{payload:064.3f}"[-64:])


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("validity")
    protocol_path, db = build_window(tmp)
    protocol = load_protocol(protocol_path)
    robot = protocol.robot_id
    # Earned with firmware 2.0.3 and a payload calibrated at 1.2 kg.
    record_version(db, component="robot_firmware", version="2.0.3", robot_id=robot,
                   author="tech-a")  # fmt: skip
    calibration(db, protocol.window_id, robot, 1.2)
    key = tmp / "owner.pem"
    create_private_key(key)
    out = tmp / "bundle"
    issue_certificate(protocol_path=protocol_path, db=db, key_path=key, out=out)
    cert = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    return {"tmp": tmp, "db": db, "out": out, "cert": cert, "protocol": protocol}


def test_the_certificate_states_what_voids_it(issued: dict[str, Any]) -> None:
    cert, protocol = issued["cert"], issued["protocol"]
    validity = cert["validity"]
    issued_day = dt.date.fromisoformat(cert["issued_at"][:10])
    # 12 months (the default) after the issue date, same day of the month.
    assert validity["expires"] == add_months(issued_day, 12).isoformat()
    assert add_months(dt.date(2026, 1, 31), 1) == dt.date(2026, 2, 28)  # shorter month
    assert validity["protocol_hash"] == protocol.protocol_hash
    assert validity["versions"]["robot_firmware"]["version"] == "2.0.3"
    assert validity["versions"]["robot_software"] is None
    assert validity["calibration"]["parameters"] == {"payload": 1.2}
    assert validity["calibration"]["drift_tolerance"] == 0.25
    assert any("robot firmware" in s and "'2.0.3'" in s for s in validity["void_if"])
    html = (issued["out"] / "report.html").read_text(encoding="utf-8")
    assert f"Valid until <strong>{validity['expires']}</strong>" in html
    # It holds now, and its numbers (validity included) recompute from the store.
    assert void_since(cert, issued["db"]) is None
    recompute_check(verify_bundle(issued["out"]), issued["db"])


def test_a_later_firmware_version_voids_it_and_verify_names_the_record(
    issued: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    db = tmp_path / "store.db"
    shutil.copy(issued["db"], db)
    robot = issued["protocol"].robot_id
    # Neither the same version again nor another robot's firmware voids it.
    record_version(db, component="robot_firmware", version="2.0.3", robot_id=robot, author="b")
    record_version(db, component="robot_firmware", version="9.9", robot_id="robot-2", author="b")
    assert main(["verify", str(issued["out"]), "--db", str(db)]) == 0
    capsys.readouterr()
    record = record_version(db, component="robot_firmware", version="2.1.0", robot_id=robot,
                            author="tech-b")  # fmt: skip
    assert main(["verify", str(issued["out"]), "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "numbers recompute from the store" in out
    assert f"void since version record {record}" in out
    assert "robot firmware 2.1.0, certified with 2.0.3" in out
    assert main(["verify", str(issued["out"]), "--db", str(db), "--json"]) == 1
    assert record in json.loads(capsys.readouterr().out)["void_since"]


def test_calibration_drift_beyond_tolerance_voids_it(issued: dict[str, Any], tmp_path) -> None:
    import shutil

    db = tmp_path / "store.db"
    shutil.copy(issued["db"], db)
    window, robot = issued["protocol"].window_id, issued["protocol"].robot_id
    calibration(db, window, robot, 1.45)  # |1.45 − 1.2| = 0.25 ≤ 0.25 · 1.2 = 0.30: holds
    assert void_since(issued["cert"], db) is None
    calibration(db, window, robot, 1.55)  # 0.35 > 0.30: void
    why = void_since(issued["cert"], db)
    assert why is not None and why.startswith("calibration record CAL-")
    assert "payload 1.55, certified 1.2 (tolerance 0.25 relative)" in why


def test_the_end_of_the_validity_period_voids_it(issued: dict[str, Any]) -> None:
    expires = dt.date.fromisoformat(issued["cert"]["validity"]["expires"])
    assert void_since(issued["cert"], issued["db"], now=expires) is None
    why = void_since(issued["cert"], issued["db"], now=expires + dt.timedelta(days=1))
    assert why == f"{expires.isoformat()}: the validity period ended"


def test_bad_version_records_are_refused(issued: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="component"):
        record_version(issued["db"], component="gripper", version="1", robot_id="r", author="a")
    with pytest.raises(EvalError, match="version: required"):
        record_version(issued["db"], component="policy", version=" ", robot_id="r", author="a")
