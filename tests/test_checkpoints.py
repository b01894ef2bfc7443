"""Countersigned checkpoints: a history rewritten and re-signed by its writer is caught.

The writer holds the store and every key registered in it (here tom's): the attacks below
rewrite a record, re-hash every record after it and re-sign every signed record with tom's key,
with the append-only triggers dropped and put back — so the chains alone verify again. Only the
second party's countersignature (sally's key, never registered in the store) anchors the heads.

The store (hand count): 80 episodes imported from tests/data/embodiment_pairs_ss_pos.csv = 80
episode records + 1 import record = trial-ledger records 1–81; the incident log holds tom's key
(record 1), the threshold table (2) and the first incident (3). The checkpoint (ledger record 82)
names ledger 81 and incident log 3; sally's countersignature is ledger record 83; a second
incident after it is incident-log record 4.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.store import hashchain
from embodied_eval.store import signing_keys as keylib
from embodied_eval.store.checkpoints import tsa_token_facts
from tests.test_incident_cli import fails, ok, run

pytestmark = pytest.mark.timeout(120)

PAIRS = Path(__file__).parent / "data" / "embodiment_pairs_ss_pos.csv"
WINDOW = "fixture-2026-11"


def report(capsys, db: Path, occurred: str, *extra: str) -> None:
    ok(capsys, "incidents", "report", "--window", WINDOW, "--reporter", "amy",
       "--occurred", occurred, "--db", str(db), *extra)  # fmt: skip


@pytest.fixture(scope="module")
def countersigned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store with a checkpoint countersigned by sally, and one incident after it."""
    from embodied_eval.cli.main import main

    folder = tmp_path_factory.mktemp("cp")
    db = folder / "s.db"

    def cli(*args: str) -> None:
        assert main([*args, "--db", str(db)]) == 0

    cli("import", "episodes", str(PAIRS), "--importer", "amy")
    cli(
        "keys",
        "create",
        "--role",
        "technician",
        "--holder",
        "tom",
        "--out",
        str(folder / "tom.pem"),
    )
    keylib.create_private_key(folder / "sally.pem")  # the second party's own key, not registered
    cli("incidents", "report", "--window", WINDOW, "--reporter", "amy", "--occurred",
        "2026-11-02T10:00:00Z", "--event-type", "contact", "--force", "500", "--contact-with",
        "visitor")  # fmt: skip
    cli("store", "checkpoint", "--key", str(folder / "tom.pem"), "--out", str(folder / "cp.json"))
    cp = json.loads((folder / "cp.json").read_text())
    cli("store", "countersign", cp["checkpoint_id"], "--key", str(folder / "sally.pem"),
        "--holder", "sally", "--out", str(folder / "cp-signed.json"))  # fmt: skip
    cli("incidents", "report", "--window", WINDOW, "--reporter", "amy", "--occurred",
        "2026-11-03T10:00:00Z", "--event-type", "protective_stop", "--stop-category", "1")  # fmt: skip
    return {"folder": folder, "db": db, "cp": cp}


@pytest.fixture
def lab(countersigned, tmp_path: Path) -> dict[str, Any]:
    for name in ("s.db", "tom.pem", "sally.pem", "cp.json", "cp-signed.json"):
        shutil.copy(countersigned["folder"] / name, tmp_path / name)
    return {**countersigned, "folder": tmp_path, "db": tmp_path / "s.db"}


def rewrite(
    db: Path, table: str, seq: int, change: Callable[[dict[str, Any]], None], key_file: Path
) -> None:
    """What the writer can do: edit record `seq`, re-hash every record from it on, re-sign each
    signed one with the writer's key, and put the append-only triggers back."""
    key = keylib.load_private_key(key_file)
    fingerprint = keylib.fingerprint(key.public_key())
    with sqlite3.connect(db) as conn:
        triggers = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,)
        ).fetchall()
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        rows = conn.execute(
            f"SELECT seq, body, prev_hash FROM {table} WHERE seq >= ? ORDER BY seq", (seq,)
        ).fetchall()
        prev = rows[0][2]
        for at, body, _ in rows:
            env = json.loads(body)
            if at == seq:
                change(env)
            if env.get("signer"):
                assert env["signer"] == fingerprint  # every signature here is the writer's
            new_body = hashchain.canonical_body(env)
            digest = hashchain.record_hash(new_body, prev)
            signature = keylib.sign(key, digest) if env.get("signer") else None
            conn.execute(
                f"UPDATE {table} SET body = ?, prev_hash = ?, hash = ?, signature = ? "
                "WHERE seq = ?",
                (new_body, prev, digest, signature, at),
            )
            prev = digest
        for _, sql in triggers:
            conn.execute(sql)


def downgrade(env: dict[str, Any]) -> None:
    """The first incident, rewritten: 50 N instead of 500 N, a near-miss instead of critical."""
    env["data"]["measurements"]["contact_force_n"] = 50.0
    env["data"]["provisional_severity"] = "near_miss"


def verify(capsys, db: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "store", "verify", "--db", str(db), *extra)


def test_a_countersigned_store_verifies_and_lists_what_is_not_yet_anchored(lab, capsys):
    code, out, err = verify(capsys, lab["db"])
    assert code == 0, err
    cid = lab["cp"]["checkpoint_id"]
    assert lab["cp"]["trial_ledger"]["seq"] == 81 and lab["cp"]["incident_log"]["seq"] == 3
    flat = " ".join(out.split())
    assert (
        f"anchored by 1 countersigned checkpoint(s), last {cid}; not yet anchored: trial-ledger "
        "records 82–83, incident-log record 4" in flat
    )
    assert f"checkpoint {cid} (" in flat and "countersigned by sally" in flat
    data = json.loads(verify(capsys, lab["db"], "--json")[1])
    assert data["not_yet_anchored"] == {
        "after": cid,
        "trial_ledger": [82, 83],
        "incident_log": [4, 4],
    }
    (cp,) = data["checkpoints"]
    assert cp["ledger_seq"] == 82 and cp["countersigned_by"][0]["holder"] == "sally"


def test_rewritten_and_resigned_before_the_checkpoint_is_caught_naming_it(lab, capsys):
    db, cid = lab["db"], lab["cp"]["checkpoint_id"]
    rewrite(db, "incident_chain", 3, downgrade, lab["folder"] / "tom.pem")
    # The incident log alone verifies: the writer re-hashed and re-signed it.
    assert json.loads(ok(capsys, "incidents", "verify", "--db", str(db), "--json"))["ok"]
    code, _, err = verify(capsys, db)
    assert code == 1
    line = " ".join(err.split())
    assert f"checkpoint: record seq 82 ({cid}): history rewritten before countersigned " in line
    assert f"checkpoint {cid}" in line and "countersigned by sally (key" in line
    assert "incident-log record 3 now hashes to" in line


def test_rewriting_the_trial_ledger_before_the_checkpoint_is_caught(lab, capsys):
    db, cid = lab["db"], lab["cp"]["checkpoint_id"]
    with sqlite3.connect(db) as conn:
        (seq,) = conn.execute("SELECT seq FROM episode_chain WHERE kind = 'import'").fetchone()

    def importer(env: dict[str, Any]) -> None:
        env["data"]["importer"] = "mallory"

    rewrite(db, "episode_chain", seq, importer, lab["folder"] / "tom.pem")
    code, _, err = verify(capsys, db)
    assert code == 1
    line = " ".join(err.split())
    assert f"record seq 82 ({cid}): checkpoint {cid} names trial-ledger record 81" in line
    assert "the history before the checkpoint was rewritten" in line

    # Rewriting the checkpoint too (its heads and digest) breaks sally's countersignature.
    def new_heads(env: dict[str, Any]) -> None:
        from embodied_eval.store.checkpoints import payload_digest

        with sqlite3.connect(db) as conn:
            (head,) = conn.execute("SELECT hash FROM episode_chain WHERE seq = 81").fetchone()
        env["data"]["trial_ledger"]["hash"] = head
        env["data"]["digest"] = payload_digest(env["data"])

    rewrite(db, "episode_chain", 82, new_heads, lab["folder"] / "tom.pem")
    code, _, err = verify(capsys, db)
    assert code == 1
    line = " ".join(err.split())
    assert f"a countersignature of checkpoint {cid} by sally names another digest" in line


def test_a_rewrite_after_the_last_checkpoint_is_reported_not_yet_anchored(lab, capsys):
    db = lab["db"]

    def quieter(env: dict[str, Any]) -> None:
        env["data"]["what_happened"] = "nothing to see"

    rewrite(db, "incident_chain", 4, quieter, lab["folder"] / "tom.pem")
    code, out, err = verify(capsys, db)
    assert code == 0, err  # nothing outside the writer's reach names record 4 yet
    assert "not yet anchored: trial-ledger records 82–83, incident-log record 4" in " ".join(
        out.split()
    )


def test_the_second_partys_file_catches_a_rewrite_that_removed_the_checkpoint(lab, capsys):
    db, cid = lab["db"], lab["cp"]["checkpoint_id"]
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER episode_chain_no_delete")
        conn.execute("DELETE FROM episode_chain WHERE seq >= 82")
        conn.execute(
            "CREATE TRIGGER episode_chain_no_delete BEFORE DELETE ON episode_chain BEGIN "
            "SELECT RAISE(ABORT, 'the trial ledger is append-only: records are never deleted'); END"
        )
    rewrite(db, "incident_chain", 3, downgrade, lab["folder"] / "tom.pem")
    code, out, _ = verify(capsys, db)
    assert code == 0 and "no countersigned checkpoint; not yet anchored" in " ".join(out.split())
    code, _, err = verify(capsys, db, "--checkpoint", str(lab["folder"] / "cp-signed.json"))
    assert code == 1
    line = " ".join(err.split())
    assert f"history rewritten before countersigned checkpoint {cid}" in line
    assert "incident-log record 3 now hashes to" in line


def test_countersigning_needs_a_second_party(lab, capsys):
    db, cid, folder = lab["db"], lab["cp"]["checkpoint_id"], lab["folder"]
    before = db.read_bytes()
    line = fails(capsys, "store", "countersign", cid, "--key", str(folder / "tom.pem"),
                 "--holder", "tom", "--db", str(db))  # fmt: skip
    assert "needs a second party's key" in line
    line = fails(capsys, "store", "countersign", "CP-nope", "--key", str(folder / "sally.pem"),
                 "--holder", "sally", "--db", str(db))  # fmt: skip
    assert "no checkpoint 'CP-nope'" in line
    assert db.read_bytes() == before


def test_a_forged_countersignature_is_caught(lab, capsys):
    db, cid = lab["db"], lab["cp"]["checkpoint_id"]
    other = keylib.generate_key()

    def forge(env: dict[str, Any]) -> None:
        env["data"]["signature"] = keylib.sign(other, env["data"]["digest"])

    rewrite(db, "episode_chain", 83, forge, lab["folder"] / "tom.pem")
    code, _, err = verify(capsys, db)
    assert code == 1
    assert f"countersignature of checkpoint {cid} by sally does not verify" in " ".join(err.split())


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command (a TSA)")
def test_an_rfc3161_token_from_a_tsa_is_stored_and_its_imprint_checked(lab, capsys):
    # A real RFC 3161 time-stamping authority: OpenSSL's `ts -reply` with its own certificate.
    folder, db, cp = lab["folder"], lab["db"], lab["cp"]
    tsa = folder / "tsa"
    tsa.mkdir()
    (tsa / "serial").write_text("01\n")
    (tsa / "tsa.cnf").write_text(
        "[ tsa ]\ndefault_tsa = tsa1\n[ tsa1 ]\nserial = ./serial\nsigner_cert = ./tsa.crt\n"
        "signer_key = ./tsa.key\nsigner_digest = sha256\ndefault_policy = 1.2.3.4.1\n"
        "digests = sha256\naccuracy = secs:1\ness_cert_id_alg = sha256\n"
    )

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tsa, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "tsa.key", "-out", "tsa.crt", "-days", "2", "-subj", "/CN=lab TSA",
            "-addext", "extendedKeyUsage=critical,timeStamping")  # fmt: skip
    openssl("ts", "-query", "-digest", cp["digest"], "-sha256", "-cert", "-out", "q.tsq")
    openssl("ts", "-reply", "-queryfile", "q.tsq", "-config", "tsa.cnf", "-out", "r.tsr")
    token = (tsa / "r.tsr").read_bytes()
    assert tsa_token_facts(token, cp["digest"])["gen_time"] is not None
    out = ok(capsys, "store", "countersign", cp["checkpoint_id"], "--tsa-token",
             str(tsa / "r.tsr"), "--db", str(db))  # fmt: skip
    assert "RFC 3161 token" in out and "imprint matches" in out
    data = json.loads(verify(capsys, db, "--json")[1])
    (checkpoint,) = data["checkpoints"]
    methods = [c["method"] for c in checkpoint["countersigned_by"]]
    assert methods == ["ed25519", "rfc3161"]
    # A token over another digest is refused, the store unchanged.
    openssl("ts", "-query", "-digest", "ab" * 32, "-sha256", "-out", "q2.tsq")
    openssl("ts", "-reply", "-queryfile", "q2.tsq", "-config", "tsa.cnf", "-out", "r2.tsr")
    before = db.read_bytes()
    line = fails(capsys, "store", "countersign", cp["checkpoint_id"], "--tsa-token",
                 str(tsa / "r2.tsr"), "--db", str(db))  # fmt: skip
    assert "does not time-stamp this checkpoint" in line
    assert db.read_bytes() == before


def test_the_certificate_lists_its_checkpoints(tmp_path: Path, capsys):
    from embodied_eval.certificate.issue import issue_certificate
    from tests.test_certificate import build_window, certificate, write_evidence

    protocol, db = build_window(tmp_path)
    ok(capsys, "keys", "create", "--role", "technician", "--holder", "tom",
       "--out", str(tmp_path / "tom.pem"), "--db", str(db))  # fmt: skip
    keylib.create_private_key(tmp_path / "sally.pem")
    out = ok(capsys, "store", "checkpoint", "--key", str(tmp_path / "tom.pem"), "--db", str(db),
             "--json")  # fmt: skip
    cp = json.loads(out)
    ok(capsys, "store", "countersign", cp["checkpoint_id"], "--key", str(tmp_path / "sally.pem"),
       "--holder", "sally", "--db", str(db))  # fmt: skip
    owner = tmp_path / "owner.pem"
    keylib.create_private_key(owner)
    bundle = tmp_path / "bundle"
    issue_certificate(
        protocol_path=protocol,
        db=db,
        key_path=owner,
        out=bundle,
        evidence_path=write_evidence(tmp_path),
    )
    (listed,) = certificate(bundle)["ledger"]["checkpoints"]
    assert listed["checkpoint_id"] == cp["checkpoint_id"]
    assert listed["trial_ledger"] == cp["trial_ledger"]
    assert listed["incident_log"] == cp["incident_log"]
    assert [c["holder"] for c in listed["countersigned_by"]] == ["sally"]
    html = (bundle / "report.html").read_text(encoding="utf-8")
    assert cp["checkpoint_id"] in html and "countersigned by sally" in html
