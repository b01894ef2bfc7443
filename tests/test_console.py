"""The live console without a browser: its numbers from a stored window, the token, the
read-only store, and stop/pause of a live sim run through the API (chained ledger records, a
non-zero exit, resumable).

Numbers are the hand-checked vectors of notes/statistics.md (see tests/console_support.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from embodied_eval.console.access import Operators, TLSFiles
from embodied_eval.console.app import ConsoleServer
from embodied_eval.console.window import window_view
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.live import operator_requests
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store
from embodied_eval.store.verify_store import verify_store
from tests.console_support import self_signed_tls, stored_window

pytestmark = [pytest.mark.timeout(300)]


def get(url: str, token: str | None = None, header: bool = False) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if header and token else {}
    if token and not header:
        url += ("&" if "?" in url else "?") + f"token={token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post(url: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body or {}).encode()
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_window_view_has_the_stores_numbers(tmp_path: Path):
    protocol, db, manifest_hash = stored_window(tmp_path)
    view = window_view(db, protocol, max_retries=0)
    assert view["manifest_hash"] == manifest_hash
    rows = {(r["side"], r["drift_day"]): r for r in view["rows"]}
    real0 = rows[("real", 0)]
    assert (real0["planned"], real0["done"], real0["scored"], real0["successes"]) == (18, 13, 12, 9)
    assert (real0["aborted"], real0["errors"]) == (1, 0)
    # Wilson 95 % of 9/12: [0.4677, 0.9111] (notes/statistics.md).
    assert real0["interval"] == pytest.approx([0.4677, 0.9111], abs=5e-5)
    real7 = rows[("real", 7)]
    assert (real7["done"], real7["scored"], real7["successes"]) == (18, 18, 18)
    sim0, sim7 = rows[("sim", 0)], rows[("sim", 7)]
    assert (sim0["done"], sim0["successes"], sim0["scored"]) == (4, 3, 4)
    assert (sim7["done"], sim7["interval"]) == (0, None)
    assert view["sides"]["real"]["done"] == 31 and view["sides"]["real"]["planned"] == 36
    assert view["sides"]["sim"]["done"] == 4
    # Nothing ran in the last minutes and no run is attached: no ETA.
    assert view["sides"]["sim"]["eta_s"] is None
    # The mixture confidence sequence at 27/30: [0.6513, 0.9921]; AR ≥ 0.75 undecided.
    stopping = view["stopping"]
    assert (stopping["trials"], stopping["successes"], stopping["decision"]) == (30, 27, "continue")
    assert stopping["interval"] == pytest.approx([0.6513, 0.9921], abs=5e-5)
    # With one retry allowed, the aborted row is due again, not done.
    again = window_view(db, protocol, max_retries=1)
    real0 = next(r for r in again["rows"] if r["side"] == "real" and r["drift_day"] == 0)
    assert (real0["done"], real0["aborted"]) == (12, 0)


def test_every_request_needs_an_operators_token_and_the_store_is_only_read(tmp_path: Path):
    protocol, db, _ = stored_window(tmp_path)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    operators = Operators.issue(["ana", "bo"])
    with ConsoleServer(db, protocol, port=0, max_retries=0, operators=operators) as server:
        base = server.url.split("/?")[0]
        assert server.url.startswith("http://127.0.0.1:") and server.token in server.url
        assert server.url_for("bo") == f"{base}/?token={operators.tokens['bo']}"
        for path in ("/", "/api/state", "/api/events", "/api/frame.jpg", "/files/x/0"):
            assert get(base + path)[0] == 401
            assert get(base + path, "not-the-token")[0] == 401
            assert get(base + path, operators.tokens["ana"][:-1])[0] == 401  # a prefix
            assert get(base + path, "t%C3%A9")[0] == 401  # not ASCII: refused, not an error
        assert post(base + "/api/stop", "wrong")[0] == 401
        status, body = get(base + "/api/state", server.token)
        assert status == 200
        state = json.loads(body)
        assert state["user"] == "ana"
        assert state["window"]["real_successes"] == 27 and state["window"]["real_scored"] == 30
        # Each operator's own token, and the page greets its holder.
        assert json.loads(get(base + "/api/state", operators.tokens["bo"])[1])["user"] == "bo"
        # The store's view is shared: its file links carry no one's token.
        assert "token=" not in json.dumps(state["window"])
        assert get(base + "/api/state", server.token, header=True)[0] == 200
        page = get(base + "/", server.token)[1].decode()
        assert "console-window" in page and "<script>" in page
        # No run attached: stop and pause are refused, nothing written.
        status, body = post(base + "/api/stop", server.token)
        assert status == 409 and "--console-port" in body["error"]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    with Store(db, read_only=True) as store, pytest.raises(sqlite3.OperationalError):
        store.conn.execute("DELETE FROM schema_migrations")


class EventStream:
    """The console's server-sent events read with urllib: (event name, data) one at a time."""

    def __init__(self, url: str) -> None:
        self.response = urllib.request.urlopen(url, timeout=30)

    def next(self) -> tuple[str, dict]:
        name, data = "message", ""
        while True:
            line = self.response.readline().decode("utf-8").rstrip("\r\n")
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif not line and data:
                return name, json.loads(data)

    def until(self, name: str, test, timeout_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            assert time.monotonic() < deadline, f"no {name} event in {timeout_s} s"
            got, data = self.next()
            if got == name and test(data):
                return data

    def close(self) -> None:
        self.response.close()


def test_the_event_stream_shows_the_runs_status_whatever_the_order_of_connect_and_start(
    tmp_path: Path,
):
    protocol, db, _ = stored_window(tmp_path)
    live = LiveState("ana")
    with ConsoleServer(db, protocol, live=live, port=0, max_retries=0) as server:
        base = server.url.split("/?")[0]
        early = EventStream(f"{base}/api/events?token={server.token}")
        name, first = early.next()
        assert (name, first["run"]["status"]) == ("state", "idle")
        live.attach_run({"run_id": "r1", "window": "w"}, lambda: None, lambda request: "OPR-1")
        # Connected before the run started: told as soon as it runs, not at the next store read.
        assert early.until("run", lambda d: True)["status"] == "running"
        late = EventStream(f"{base}/api/events?token={server.token}")
        name, first = late.next()
        assert (name, first["run"]["status"], first["run"]["run_id"]) == ("state", "running", "r1")
        assert [e["kind"] for e in first["events"]] == ["run"]  # read together with the status
        live.request("pause", "bo")
        for stream in (early, late):
            assert stream.until("run", lambda d: True)["status"] == "paused"
        early.close()
        late.close()


def test_an_address_other_machines_reach_needs_tls_or_insecure_remote(tmp_path: Path):
    protocol, db, _ = stored_window(tmp_path)
    with pytest.raises(EvalError, match=r"console: --host 0\.0\.0\.0 can be reached from other"):
        ConsoleServer(db, protocol, host="0.0.0.0", port=0).start()
    with ConsoleServer(db, protocol, host="0.0.0.0", port=0, insecure_remote=True) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert get(base + "/api/state")[0] == 401
        assert get(base + "/api/state", server.token)[0] == 200
    # Over TLS it may listen there; the client trusts the self-signed certificate.
    cert, key = self_signed_tls(tmp_path)
    tls = TLSFiles(cert, key)
    with ConsoleServer(db, protocol, host="0.0.0.0", port=0, tls=tls) as server:
        assert server.url.startswith("https://0.0.0.0:")
        trusted = ssl.create_default_context(cafile=str(cert))
        url = f"https://127.0.0.1:{server.port}/api/state?token={server.token}"
        with urllib.request.urlopen(url, context=trusted, timeout=30) as r:
            assert r.status == 200 and json.loads(r.read())["user"] == server.operators.first
        with pytest.raises(OSError):  # plain HTTP is not served there (connection dropped)
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/state", timeout=30)


def test_a_missing_store_is_a_one_line_error(tmp_path: Path):
    with pytest.raises(EvalError, match="does not exist"):
        Store(tmp_path / "nope.db", read_only=True)
    assert not (tmp_path / "nope.db").exists()


# --------------------------------------------------------------------------- a live sim run

PUSH = ["push/block_forward", "push/block_left", "push/block_right", "push/block_long",
        "push/block_diagonal"]  # fmt: skip
SIM_PROTOCOL = {
    "protocol": {"name": "console-live", "version": "1", "base_seed": 5},
    "window": {"id": "w-live", "start": "2026-11-01", "end": "2026-11-30"},
    "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
    "drift": {"nominal": {"day": 0}},
    "sampling": {"seeds_per_instance": 4, "real_fraction": 0.0},
    "sim": {"engines": ["mujoco"], "max_steps": 60},
}


SIM_TOML = """
[protocol]
name = "console-live"
version = "1"
base_seed = 5
[window]
id = "w-live"
start = 2026-11-01
end = 2026-11-30
[battery.push]
target_quality = 0.8
instances = ["push/block_forward", "push/block_left", "push/block_right", "push/block_long",
  "push/block_diagonal"]
[drift.nominal]
day = 0
[sampling]
seeds_per_instance = 4
real_fraction = 0.0
[sim]
engines = ["mujoco"]
max_steps = 60
"""


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_pause_and_stop_through_the_api_are_chained_and_the_run_resumes(tmp_path: Path):
    pytest.importorskip("sim_suites.episode")
    protocol = protocol_from_mapping(SIM_PROTOCOL)
    db, out = tmp_path / "store.db", tmp_path / "out"
    live = LiveState("ana")
    operators = Operators.issue(["ana", "bo"])
    stored: list[int] = []
    result: dict = {}

    def run() -> None:
        result["summary"] = run_trials(
            protocol,
            RunOptions(sides=("sim",), executor="sequential"),
            db_path=db,
            out_dir=out,
            show_progress=False,
            live=live,
        )

    with ConsoleServer(db, protocol, live=live, port=0, operators=operators) as server:
        base = server.url.split("/?")[0]
        thread = threading.Thread(target=run)
        thread.start()
        wait_for(lambda: sum(e["kind"] == "episode" for e in live.events_since(0)) >= 2)
        # Who asks is the token's operator; a name in the body is refused, nothing recorded.
        status, body = post(base + "/api/pause", operators.tokens["bo"], {"user": "ana"})
        assert status == 400 and "no fields (got user)" in body["error"]
        assert not live.paused and live.requests == []
        status, paused = post(base + "/api/pause", operators.tokens["bo"])
        assert status == 200 and paused["by"] == "bo" and paused["via"] == "api"
        # Paused: at most the episode in progress is stored, then nothing for a while.
        time.sleep(1.5)
        count = sum(e["kind"] == "episode" for e in live.events_since(0))
        time.sleep(1.5)
        assert sum(e["kind"] == "episode" for e in live.events_since(0)) == count
        assert json.loads(get(base + "/api/state", server.token)[1])["run"]["status"] == "paused"
        status, stopped = post(base + "/api/stop", operators.tokens["ana"], {})
        assert status == 200 and stopped["by"] == "ana"
        thread.join(60)
        stored.append(count)
    summary = result["summary"]
    assert summary.interrupted and not summary.complete
    assert [r["action"] for r in summary.operator] == ["pause", "stop"]
    records = operator_requests(db, "w-live")
    assert [(r["action"], r["by"], r["via"]) for r in records] == [
        ("pause", "bo", "api"),
        ("stop", "ana", "api"),
    ]
    assert all(r["run_id"] == summary.run_id for r in records)
    with Store(db) as store:
        assert len(store.episodes()) == stored[0] < 20
    assert verify_store(db).ok  # the operator records are part of a valid chain
    # Re-running the same command finishes the window.
    again = run_trials(
        protocol, RunOptions(sides=("sim",), executor="sequential"), db_path=db, out_dir=out,
        show_progress=False,
    )  # fmt: skip
    assert again.complete and again.written == 20 - stored[0]


def _cli() -> list[str]:
    return [sys.executable, "-m", "embodied_eval"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.getcwd()}


def test_the_cli_run_keeps_tokens_out_of_its_output_and_a_stop_names_its_operator(
    tmp_path: Path,
):
    pytest.importorskip("sim_suites.episode")
    protocol_file = tmp_path / "p.toml"
    protocol_file.write_text(SIM_TOML, encoding="utf-8")
    db, out, tokens = tmp_path / "store.db", tmp_path / "out", tmp_path / "secrets" / "tokens.json"
    args = [*_cli(), "run", str(protocol_file), "--side", "sim", "--executor", "sequential",
            "--db", str(db), "--out", str(out), "--no-progress"]  # fmt: skip
    stdout = (tmp_path / "stdout.txt").open("w")
    run = subprocess.Popen(
        [
            *args,
            "--console-port",
            "0",
            "--user",
            "cli-user",
            "--user",
            "other",
            "--foxglove-port",
            "0",
            "--token-file",
            str(tokens),
        ],
        stderr=subprocess.PIPE,
        stdout=stdout,
        text=True,
        env=_env(),
    )
    try:
        assert run.stderr is not None
        lines = [run.stderr.readline() for _ in range(3)]
        found = re.match(r"console: (http://127\.0\.0\.1:\d+)/$", lines[0].strip())
        assert found, lines
        base = found.group(1)
        fox = re.match(r"foxglove: (ws://127\.0\.0\.1:\d+/)$", lines[1].strip())
        assert fox, lines
        assert lines[2].startswith("operators cli-user, other: sign-in links ")
        assert f"for scripts in {tokens} (mode 0600" in lines[2]
        assert tokens.stat().st_mode & 0o777 == 0o600
        saved = json.loads(tokens.read_text())
        assert saved["console"] == base + "/" and saved["foxglove"] == fox.group(1)
        assert list(saved["operators"]) == ["cli-user", "other"]
        token = saved["operators"]["other"]
        assert get(base + "/api/state")[0] == 401
        assert get(base + "/api/state", saved["operators"]["cli-user"])[0] == 200

        def stored() -> int:
            state = json.loads(get(base + "/api/state", token)[1])
            return int(state["window"].get("sides", {}).get("sim", {}).get("done", 0))

        wait_for(lambda: stored() >= 1)
        status, stop = post(base + "/api/stop", token)
        assert status == 200 and stop["by"] == "other"
        rest = run.stderr.read()
        assert run.wait(60) == 130
    finally:
        run.kill()
        stdout.close()
    assert "stopped from the console by other" in rest and "Traceback" not in rest
    assert [(r["action"], r["by"]) for r in operator_requests(db)] == [("stop", "other")]
    assert not tokens.exists()  # removed when the run ended
    # No token anywhere the run wrote: its stdout/stderr and every file it left.
    captured = "".join(lines) + rest + (tmp_path / "stdout.txt").read_text()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 3
    for secret in saved["operators"].values():
        assert secret not in captured
        assert not [p for p in written if secret.encode() in p.read_bytes()]
    again = subprocess.run(args, capture_output=True, text=True, timeout=240, env=_env())
    assert again.returncode == 0, again.stderr
    with Store(db) as store:
        assert len(store.episodes()) == 20


def test_cli_refuses_a_remote_address_without_tls_in_one_line(tmp_path: Path):
    _, db, _ = stored_window(tmp_path)
    protocol = tmp_path / "protocol.toml"
    console = subprocess.run(
        [
            *_cli(),
            "console",
            "--db",
            str(db),
            "--protocol",
            str(protocol),
            "--port",
            "0",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert console.returncode == 2 and "Traceback" not in console.stderr
    assert len(console.stderr.strip().splitlines()) == 1
    assert "--host 0.0.0.0 can be reached from other machines" in console.stderr
    assert "--insecure-remote" in console.stderr and "--tls-cert" in console.stderr
    store = tmp_path / "new.db"
    run = subprocess.run(
        [
            *_cli(),
            "run",
            str(protocol),
            "--side",
            "sim",
            "--db",
            str(store),
            "--no-progress",
            "--foxglove-port",
            "0",
            "--foxglove-host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "Foxglove: --foxglove-host 0.0.0.0 can be reached from other machines" in run.stderr
    assert not store.exists()  # refused before the run began


def test_cli_console_refuses_a_store_without_the_protocols_manifest(tmp_path: Path):
    _, db, _ = stored_window(tmp_path)
    other = tmp_path / "other.toml"
    other.write_text(
        (tmp_path / "protocol.toml").read_text().replace('name = "console-window"', 'name = "x"'),
        encoding="utf-8",
    )
    done = subprocess.run(
        [*_cli(), "console", "--db", str(db), "--protocol", str(other), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert done.returncode == 2
    assert "holds no manifest of protocol 'x'" in done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(r"run it first", done.stderr)
