"""Typed Parquet export of episodes: the schema read back with pyarrow, and exact re-import."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from embodied_eval.cli.main import main
from embodied_eval.interchange.tables import episodes_from_frame, read_table
from embodied_eval.records import Artifact
from embodied_eval.store.core import Store
from tests.conftest import make_episode


def _episodes():
    """Dict fields as real runs fill them: keys missing in some rows, explicit nulls, an int in
    one row and a float in another, nested dicts, a key with text in one row and a number in
    another, lists, empty dicts, artifacts with and without a size."""
    return [
        make_episode(
            episode_id="e1",
            quality=0.9,
            started_at="2026-11-02T10:00:00+01:00",
            drift={"name": "day07", "friction_scale": 1, "applied": True},
            control={
                "min_separation_m": None,
                "policy_latency_ms": {"p50": 3.5, "p99": 9.0},
                "steps": 120,
                "mode": "contact",
                "joint_limits": [1.0, 2.5],
            },
            cost={"robot_hours": 0.25},
            artifacts=(Artifact(path="/r/e1.npz", sha256="a" * 64, kind="trace", size_bytes=10),),
            audited_success=True,
            qc=0.001,
        ),
        make_episode(
            episode_id="e2",
            side="sim",
            engine="mujoco",
            quality=0.5,
            started_at="2026-11-02T10:05:00Z",
            drift={"name": "day08", "friction_scale": 0.85, "applied": False},
            control={"min_separation_m": 0.41, "steps": 80, "mode": 2, "extra": {"a": None}},
            artifacts=(Artifact(path="/r/e2.mp4", sha256="b" * 64),),
        ),
        make_episode(
            episode_id="e3",
            pair_id="p0002",
            status="aborted",
            quality=0.0,
            started_at="2026-11-03T08:00:00",
        ),
    ]


def _export(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "s.db"
    with Store(db) as store:
        for ep in _episodes():
            store.write_episode(ep)
    out = tmp_path / "episodes.parquet"
    assert main(["export", "episodes", "--out", str(out), "--db", str(db)]) == 0
    return db, out


def test_exported_parquet_schema_is_typed(tmp_path: Path):
    _, out = _export(tmp_path)
    schema = pq.read_schema(out)
    types = {f.name: f.type for f in schema}
    assert types["success"] == pa.bool_()
    assert types["audited_success"] == pa.bool_()
    assert types["started_at"] == pa.timestamp("us", tz="UTC")
    for name in ("seed", "interventions", "attempt", "actions", "plan_depth"):
        assert types[name] == pa.int64(), name
    for name in ("quality", "target_quality", "duration_s", "energy_wh", "qc"):
        assert types[name] == pa.float64(), name
    for name in ("episode_id", "side", "status", "window", "protocol_hash", "status_reason"):
        assert types[name] == pa.string(), name
    assert types["drift"] == pa.struct(
        [("applied", pa.bool_()), ("friction_scale", pa.float64()), ("name", pa.string())]
    )
    control = types["control"]
    assert pa.types.is_struct(control)
    assert control.field("min_separation_m").type == pa.float64()
    assert control.field("steps").type == pa.int64()
    assert control.field("policy_latency_ms").type == pa.struct(
        [("p50", pa.float64()), ("p99", pa.float64())]
    )
    assert control.field("joint_limits").type == pa.list_(pa.float64())
    # "mode" is text in one row and a number in another: the one field that keeps JSON text.
    assert control.field("mode").type == pa.string()
    assert types["cost"] == pa.map_(pa.string(), pa.float64())
    assert types["artifacts"] == pa.list_(
        pa.struct(
            [("path", pa.string()), ("sha256", pa.string()), ("kind", pa.string()),
             ("size_bytes", pa.int64())]
        )
    )  # fmt: skip
    assert "randomization" not in types  # empty in every row
    # No other text column holds JSON: every string column is a plain field.
    string_columns = {n for n, t in types.items() if t == pa.string()}
    assert string_columns == {
        "episode_id", "pair_id", "side", "family", "task_id", "policy", "engine", "status",
        "status_reason", "window", "protocol_hash",
    }  # fmt: skip

    table = pq.read_table(out)
    rows = {r["episode_id"]: r for r in table.to_pylist()}
    # 10:00 at +01:00 is 09:00 UTC.
    assert rows["e1"]["started_at"].isoformat() == "2026-11-02T09:00:00+00:00"
    assert rows["e3"]["started_at"].isoformat() == "2026-11-03T08:00:00+00:00"  # no offset: UTC
    assert [rows[e]["success"] for e in ("e1", "e2", "e3")] == [True, False, False]
    assert [rows[e]["audited_success"] for e in ("e1", "e2", "e3")] == [True, None, None]
    assert rows["e2"]["drift"]["friction_scale"] == 0.85
    assert rows["e1"]["cost"] == [("robot_hours", 0.25)]
    frame = pq.read_table(out).to_pandas()
    assert str(frame["started_at"].dtype) == "datetime64[us, UTC]"
    assert frame["success"].dtype == bool


def test_exported_parquet_reimports_exactly(tmp_path: Path, capsys):
    db, out = _export(tmp_path)
    back = {e.episode_id: e for e in episodes_from_frame(read_table(out))}
    with Store(db) as store:
        stored = {e.episode_id: e for e in store.episodes()}
    assert back == stored
    assert back["e1"].control["min_separation_m"] is None  # the explicit null survives
    assert "min_separation_m" in back["e1"].control and "extra" not in back["e1"].control
    assert back["e2"].control["extra"] == {"a": None} and back["e2"].control["mode"] == 2
    # The column holds 09:00 UTC; the record's own spelling comes back from the file's metadata.
    assert back["e1"].started_at == "2026-11-02T10:00:00+01:00"
    capsys.readouterr()
    assert main(["import", "episodes", str(out), "--db", str(db)]) == 0
    assert "imported 0 new episodes" in capsys.readouterr().out
    fresh = tmp_path / "fresh.db"
    assert main(["import", "episodes", str(out), "--db", str(fresh)]) == 0
    assert main(["import", "episodes", str(out), "--db", str(fresh)]) == 0
    assert "nothing changed" in capsys.readouterr().out
