"""Each drift day's calibration beside the maintenance closure's index: recorded in the store's
trial ledger, read back per calendar day (a file passed in replaces the store's record of its
drift), shown in the certificate's closures section and its report, refused when edited.

The numbers are the hand-written calibrations below, carried through unchanged; the report's
delay column is the delay in ms (0.02 s → 20, its interval [0.015, 0.025] s → [15, 25]).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embodied_eval.certificate.closures import StoreClosures, closures_section
from embodied_eval.certificate.closures_html import closures_html
from embodied_eval.embodiment.calibration_days import (
    calibration_by_day,
    file_day_calibrations,
    record_day_calibration,
    stored_day_calibrations,
)
from embodied_eval.embodiment.maintenance import maintenance_audit
from embodied_eval.errors import EvalError
from embodied_eval.protocol.calibration_file import write_calibration
from embodied_eval.store.core import Store, transaction
from embodied_eval.store.verify_store import verify_store
from tests.test_closures_audit import day, maintenance


def content(drift: str, day_no: int, payload: tuple[float, float, float], robot: str = "twin"):
    p, lo, hi = payload
    return {
        "format": 1,
        "robot_id": robot,
        "window": "w-closures",
        "parameters": {
            "payload": {"value": p, "low": lo, "high": hi, "unit": "kg", "identified": True},
            "friction": {"value": 0.9, "low": 0.8, "high": 1.0, "unit": "", "identified": True},
            "actuator_delay": {
                "value": 0.02, "low": 0.015, "high": 0.025, "unit": "s", "identified": True
            },
            "actuator_gain": {"value": 0.7, "low": 0.6, "high": 0.8, "unit": "", "identified": True},
        },
        "drift": {"name": drift, "day": day_no},
    }  # fmt: skip


def test_rows_follow_the_calendar_and_the_last_record_of_a_drift_wins() -> None:
    records: list[dict[str, Any]] = [
        {"drift": "d7", "source": "store", "content_sha256": "a",
         "parameters": content("d7", 7, (0.1, 0.0, 0.2))["parameters"]},
        {"drift": "d0", "source": "store", "content_sha256": "b",
         "parameters": content("d0", 0, (0.0, 0.0, 0.05))["parameters"]},
        {"drift": "d7", "source": "file", "content_sha256": "c",
         "parameters": content("d7", 7, (0.5, 0.45, 0.55))["parameters"]},
    ]  # fmt: skip
    rows = calibration_by_day([("d0", 0), ("d7", 7), ("d14", 14)], records)
    assert [(r["day"], r["drift"], r["source"], r["content_sha256"]) for r in rows] == [
        (0, "d0", "store", "b"), (7, "d7", "file", "c")]  # fmt: skip
    # Only payload, friction and delay are shown, in that order.
    assert list(rows[1]["parameters"]) == ["payload", "friction", "actuator_delay"]
    assert rows[1]["parameters"]["payload"] == {
        "value": 0.5, "low": 0.45, "high": 0.55, "unit": "kg", "identified": True}  # fmt: skip


def test_store_records_verify_and_show_beside_the_index(tmp_path: Path) -> None:
    proto = maintenance(["d0", "d7", "d14"])
    db = tmp_path / "store.db"
    episodes = day("d0", 20) + day("d7", 19) + day("d14", 18)
    with Store(db) as store:
        store.write_episodes(episodes)
        with transaction(store.conn):
            record_day_calibration(
                store.conn, "w-closures", content("d0", 0, (0.0, 0.0, 0.05)), "h0"
            )
            record_day_calibration(
                store.conn, "w-closures", content("d7", 7, (0.5, 0.45, 0.55)), "h7"
            )
            record_day_calibration(store.conn, "other", content("d14", 14, (1.0, 0.9, 1.1)), "hx")
        stored = stored_day_calibrations(store.conn, "w-closures")
    assert [(r["drift"], r["day"], r["content_sha256"]) for r in stored] == [
        ("d0", 0, "h0"), ("d7", 7, "h7")]  # fmt: skip
    assert verify_store(db).ok  # a calibration record is chained like any other
    result = maintenance_audit(episodes, [], [], proto, rng=np.random.default_rng(1))
    section = closures_section(StoreClosures(result, None, tuple(stored)), None, {})
    rows = section["maintenance"]["calibration_by_day"]
    assert [(r["day"], r["source"]) for r in rows] == [(0, "store"), (7, "store")]
    page = closures_html({"closures": section}, {})
    assert "delay (ms)" in page and "payload (kg)" in page
    # Day 7's row: its index, then the measured payload, friction and delay (ms).
    row7 = page[page.index("<td>7</td>") :].split("</tr>")[0]
    assert "0.500 [0.450, 0.550]" in row7
    assert "0.900 [0.800, 1]" in row7
    assert "20 [15, 25]" in row7
    # Day 14 was not calibrated: dashes.
    row14 = page[page.index("<td>14</td>") :].split("</tr>")[0]
    assert row14.count("<td>—</td>") == 3


def test_files_passed_in_are_verified(tmp_path: Path) -> None:
    good = tmp_path / "cal-d7.toml"
    digest = write_calibration(good, content("d7", 7, (0.5, 0.45, 0.55)))
    [row] = file_day_calibrations([good], "twin")
    assert (row["drift"], row["day"], row["content_sha256"], row["source"]) == (
        "d7", 7, digest, "file")  # fmt: skip
    with pytest.raises(EvalError, match="fitted on robot"):
        file_day_calibrations([good], "other-robot")
    edited = tmp_path / "edited.toml"
    edited.write_text(good.read_text().replace("0.45", "0.40"))
    with pytest.raises(EvalError, match="edited"):
        file_day_calibrations([edited], "twin")
    plain = content("d7", 7, (0.5, 0.45, 0.55))
    del plain["drift"]
    write_calibration(tmp_path / "plain.toml", plain)
    with pytest.raises(EvalError, match="--by-drift"):
        file_day_calibrations([tmp_path / "plain.toml"], "twin")
