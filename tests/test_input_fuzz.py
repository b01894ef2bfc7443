"""Property-based fuzzing of every input kind a user hands the CLI.

Each kind starts from a valid input and applies random structural changes (keys or columns
dropped, duplicated, reordered, renamed, nested deeper) and value changes (NaN, ±inf, huge,
negative, empty, wrong type, control characters, other encodings, cut files). The property: the
reader returns a valid result or raises `EvalError` with a one-line message — never another
exception, never a hang — and a refused import leaves the store's bytes unchanged.

Profiles: `ci` (default, part of `make test`) and `fuzz` (`make fuzz`, many more examples),
chosen with the environment variable EMBODIED_EVAL_FUZZ_PROFILE.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import io
import json
import math
import os
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import load_protocol, protocol_from_mapping
from embodied_eval.scoring.evidence_fields import load_evidence
from embodied_eval.scoring.report import score_evidence

DATA = Path(__file__).parent / "data"
PROTOCOL = DATA / "embodiment_protocol.toml"
PAIRS = DATA / "embodiment_pairs_ss_pos.csv"

#: Examples per input kind in each profile (ci keeps the whole file to ~30 s on 2 busy cores).
EXAMPLES = {
    "ci": {
        "protocol": 150,
        "protocol_file": 60,
        "episodes": 60,
        "faults": 25,
        "incidents": 40,
        "evidence": 80,
        "bundle": 25,
        "robot": 60,
        "cli": 60,
    },
    "fuzz": {
        "protocol": 3000,
        "protocol_file": 1000,
        "episodes": 800,
        "faults": 300,
        "incidents": 500,
        "evidence": 1500,
        "bundle": 300,
        "robot": 1000,
        "cli": 1000,
    },
}
PROFILE = os.environ.get("EMBODIED_EVAL_FUZZ_PROFILE", "ci")


def fuzz_settings(kind: str) -> settings:
    return settings(
        max_examples=EXAMPLES[PROFILE][kind],
        deadline=None,
        derandomize=PROFILE == "ci",  # the CI profile is reproducible; `make fuzz` explores
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


# --------------------------------------------------------------------------- strange values

STRANGE = [
    math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-320, -1, -0.5, 0, 1.7, 2**53 + 1, 2**63,
    2**64, -(2**63) - 1, 10**30, "", " ", "forty", "x\x00y", "\u202e", "ä" * 3, "1e30", "nan",
    "-inf", "0x10", "2026-13-45", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", True, False,
    None, [], {}, [1, 2], {"k": math.nan}, [[[[[[[[1]]]]]]]],
]  # fmt: skip
strange_values = st.one_of(
    # a fresh copy each draw: mutating a shared [] or {} would change later draws
    st.sampled_from(STRANGE).map(copy.deepcopy),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(-5, 5), max_size=3),
)
strange_cells = st.one_of(
    st.sampled_from([s for s in STRANGE if isinstance(s, str)]),
    strange_values.map(lambda v: json.dumps(v) if not isinstance(v, str) else v),
    st.text(max_size=30),
)


def one_line(exc: EvalError) -> None:
    message = str(exc)
    assert message.strip(), "empty error message"
    assert "\n" not in message and "\r" not in message, message
    assert "Traceback" not in message


def outcome(call: Callable[[], Any]) -> Any:
    """`call()`'s result, or the EvalError it raised (checked to be one line)."""
    try:
        return call()
    except EvalError as exc:
        one_line(exc)
        return exc


def run_cli(args: list[str]) -> tuple[int, str]:
    """Run the CLI in-process: exit status and stderr; any failure is exactly one line."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main([str(a) for a in args])
    text = err.getvalue()
    if code != 0:
        assert code == 2, text  # a refusal, never a crash (a crash exits 1 with a log file)
        lines = text.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), text
    assert "Traceback" not in text
    return code, text


# --------------------------------------------------------------------------- tree mutation


def paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += paths(v, (*prefix, i))
    return out


def get(tree: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        tree = tree[p]
    return tree


@st.composite
def mutated_tree(draw: st.DrawFn, base: Any, max_ops: int = 3) -> Any:
    """`base` after 1..max_ops random structural or value changes."""
    tree = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_ops))):
        all_paths = paths(tree)
        path = draw(st.sampled_from(all_paths))
        if not path:
            continue
        parent, key = get(tree, path[:-1]), path[-1]
        op = draw(
            st.sampled_from(["value", "value", "value", "drop", "add", "dup", "nest", "rename"])
        )
        if op == "value":
            parent[key] = draw(strange_values)
        elif op == "drop":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "", "value", "x.y", "L"]))] = draw(strange_values)
        elif op == "dup" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif op == "nest":
            parent[key] = draw(st.sampled_from([[parent[key]], {"value": parent[key]}]))
        elif op == "rename" and isinstance(parent, dict):
            parent[f"{key}_"] = parent.pop(key)
    return tree


# --------------------------------------------------------------------------- protocols

BASE_PROTOCOL = tomllib.loads(PROTOCOL.read_text(encoding="utf-8"))
BASE_PROTOCOL["sampling"] = {"seeds_per_instance": 2, "drifts": ["nominal", "worn"]}
BASE_PROTOCOL["drift"] = {"nominal": {"day": 0}, "worn": {"day": 14, "friction_scale": 0.9}}
BASE_PROTOCOL["randomization"] = {"friction_scale": [0.9, 1.1]}
BASE_PROTOCOL["stopping"] = {"enabled": True, "method": "sprt", "p1": 0.9}


def test_base_protocol_is_valid():
    assert protocol_from_mapping(BASE_PROTOCOL).seeds_per_instance == 2


@fuzz_settings("protocol")
@given(mutated_tree(BASE_PROTOCOL))
def test_fuzz_protocol_mapping(data):
    result = outcome(lambda: protocol_from_mapping(data))
    if not isinstance(result, EvalError):  # accepted: every number in it is finite
        json.dumps(result.canonical(), allow_nan=False)
        assert 0.5 <= result.confidence < 1 and result.base_seed >= 0


@st.composite
def protocol_bytes(draw: st.DrawFn) -> bytes:
    text = PROTOCOL.read_text(encoding="utf-8")
    op = draw(st.sampled_from(["cut", "encode", "bom", "flip", "line"]))
    if op == "cut":
        return text.encode()[: draw(st.integers(0, len(text)))]
    if op == "encode":
        codec = draw(st.sampled_from(["utf-16", "utf-32", "latin-1", "cp1252"]))
        return text.replace("fixture", "fixtüre").encode(codec)
    if op == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if op == "flip":
        raw = bytearray(text.encode())
        i = draw(st.integers(0, len(raw) - 1))
        raw[i] = draw(st.integers(0, 255))
        return bytes(raw)
    lines = text.splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = draw(
        st.sampled_from(["x = nan", "x = inf", "[protocol]", 'name = """', "a.b.c = 1", "= 1"])
    )
    return "\n".join(lines).encode()


@fuzz_settings("protocol_file")
@given(protocol_bytes())
def test_fuzz_protocol_file(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("p") / "p.toml"
    path.write_bytes(data)
    outcome(lambda: load_protocol(path))


# --------------------------------------------------------------------------- episode files

HEADER = PAIRS.read_text().splitlines()[0].split(",")
ROWS = [line.split(",") for line in PAIRS.read_text().splitlines()[1:7]]


@st.composite
def table_text(draw: st.DrawFn, header: list[str], rows: list[list[str]]) -> bytes:
    header, rows = list(header), [list(r) for r in rows]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cell", "cell", "cell", "drop", "dup", "order", "extra", "row"]))
        col = draw(st.integers(0, len(header) - 1))
        if op == "cell" and rows:
            r = draw(st.integers(0, len(rows) - 1))
            rows[r][col] = draw(strange_cells)
        elif op == "drop" and len(header) > 1:
            del header[col]
            for row in rows:
                del row[col]
        elif op == "dup":
            header.append(header[col])
            for row in rows:
                row.append(row[col])
        elif op == "order":
            order = draw(st.permutations(range(len(header))))
            header = [header[i] for i in order]
            rows = [[row[i] for i in order] for row in rows]
        elif op == "extra":
            header.append(draw(st.sampled_from(["bogus", "", "success", "drift", "artifacts"])))
            for row in rows:
                row.append(draw(strange_cells))
        elif op == "row" and rows:
            rows.append(list(rows[draw(st.integers(0, len(rows) - 1))]))
    buffer = io.StringIO()
    import csv

    csv.writer(buffer).writerows([header, *rows])
    text = buffer.getvalue()
    ending = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "bom", "utf-16", "latin-1", "cut"]))
    if ending == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if ending == "cut":
        return text.encode()[: draw(st.integers(0, len(text)))]
    if ending in ("utf-16", "latin-1"):
        return text.replace("pick", "pïck").encode(ending, errors="replace")
    return text.encode("utf-8", errors="surrogatepass")


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("fuzz") / "s.db"
    assert main(["import", "episodes", str(PAIRS), "--db", str(db)]) == 0
    return db


def import_unchanged_on_refusal(db: Path, kind: str, path: Path) -> None:
    before = db.read_bytes()
    code, _ = run_cli(["import", kind, path, "--db", db])
    if code != 0:
        assert db.read_bytes() == before, "a refused import changed the store"


@fuzz_settings("episodes")
@given(data=table_text(HEADER, ROWS), suffix=st.sampled_from([".csv", ".csv", ".parquet"]))
def test_fuzz_episode_files(base_store, tmp_path_factory, data, suffix):
    folder = tmp_path_factory.mktemp("e")
    db = folder / "s.db"
    shutil.copy(base_store, db)
    path = folder / f"episodes{suffix}"
    path.write_bytes(data)  # a .parquet of CSV bytes is a malformed parquet file
    import_unchanged_on_refusal(db, "episodes", path)
    fresh = folder / "new.db"
    code, _ = run_cli(["import", "episodes", path, "--db", fresh])
    assert code == 0 or not fresh.exists(), "a refused import left a new store"


FAULT_HEADER = ["episode_id", "kind", "recovered", "repair_s"]
FAULT_ROWS = [["p01-real-a1", "grasp_slip", "true", "0"], ["p02-real-a1", "stall", "false", "30"]]


@fuzz_settings("faults")
@given(table_text(FAULT_HEADER, FAULT_ROWS))
def test_fuzz_fault_files(base_store, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("f")
    db = folder / "s.db"
    shutil.copy(base_store, db)
    path = folder / "faults.csv"
    path.write_bytes(data)
    import_unchanged_on_refusal(db, "faults", path)


INCIDENT_HEADER = ["incident_id", "occurred_at", "severity", "side", "episode_id", "source"]
INCIDENT_ROWS = [
    ["inc-1", "2026-11-03T09:10:00Z", "near_miss", "real", "p12-real-a1", "auto"],
    ["inc-2", "2026-11-03T09:30:00Z", "minor", "sim", "p13-sim-a1", "manual"],
]


@fuzz_settings("incidents")
@given(data=table_text(INCIDENT_HEADER, INCIDENT_ROWS), jsonl=st.booleans())
def test_fuzz_incident_files(base_store, tmp_path_factory, data, jsonl):
    folder = tmp_path_factory.mktemp("i")
    db = folder / "s.db"
    shutil.copy(base_store, db)
    if jsonl:  # the same rows as JSON Lines (cells become JSON values when they parse)
        import csv

        text = data.decode("utf-8", errors="replace")
        try:
            rows = list(csv.reader(io.StringIO(text, newline="")))
        except csv.Error:
            return
        lines = []
        for row in rows[1:]:
            item: dict[str, Any] = {}
            for name, cell in zip(rows[0], row, strict=False):
                try:
                    item[name] = json.loads(cell)
                except ValueError:
                    item[name] = cell
            lines.append(json.dumps(item))
        path = folder / "incidents.jsonl"
        path.write_text("\n".join(lines))
    else:
        path = folder / "incidents.csv"
        path.write_bytes(data)
    import_unchanged_on_refusal(db, "incidents", path)


# --------------------------------------------------------------------------- evidence

BASE_EVIDENCE: dict[str, Any] = {
    "schema": "embodied-eval/evidence/1",
    "axes": {
        "A": {"value": 0.8, "low": 0.7, "high": 0.9},
        "G": {"raw": 0.5, "L": 0.2, "U": 0.9},
        "P": {"value": 0.6},
        "M": {"value": 0.7, "replicates": [0.6, 0.7, 0.8]},
        "$": {"raw": 5.0, "L": 1.0, "U": 9.0},
        "T": {"value": 0.5},
        "R": {"value": 0.4},
        "S": {"value": 0.5},
        "W": {"value": 0.6},
    },
    "kappa": {
        "kappa_star": 0.1,
        "checkpoints": [{"t": 0, "R": 1, "C": 0.4}, {"t": 10, "R": 2, "C": 0.5}],
    },
    "closures": {
        "maintenance": [
            {"baseline": 0.8, "checkpoints": [{"day": 30, "index": 0.79}], "drifts": ["worn"]}
        ],
        "expansion": [
            {
                "name": "gripper",
                "pre": 0.5,
                "post": 0.7,
                "ablated": 0.5,
                "control_pre": 0.5,
                "control_post": 0.5,
            }
        ],
    },
    "chc": {"vrp_at_k": {"value": 0.9, "low": 0.85, "high": 0.95}, "wm_span": 5},
    "tools": {"n_tools": 3, "success_under_mild_shift": 0.8},
    "policy": {"kappa_days": 30},
}


def test_base_evidence_scores():
    report = score_evidence(BASE_EVIDENCE, None, np.random.default_rng(0), n_resamples=100)
    assert report.index is not None and 0 < report.index.value <= 1


@fuzz_settings("evidence")
@given(mutated_tree(BASE_EVIDENCE, max_ops=2))
def test_fuzz_evidence(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("ev") / "ev.json"
    try:
        path.write_text(json.dumps(data), encoding="utf-8")
    except ValueError:
        return
    loaded = outcome(lambda: load_evidence(path))
    if isinstance(loaded, EvalError):
        return
    result = outcome(
        lambda: score_evidence(loaded, None, np.random.default_rng(0), n_resamples=100)
    )
    if not isinstance(result, EvalError):
        for axis in result.axes.values():  # an accepted axis value is a number in [0, 1]
            assert axis.value.value is None or 0.0 <= axis.value.value <= 1.0


@fuzz_settings("evidence")
@given(strange_values)
def test_fuzz_gate_evidence_values(value):
    from embodied_eval.embodiment.gates import evidence_check
    from embodied_eval.scoring.gate_checks import Verdict

    for item in (value, {"value": value}, {"value": 0.8, "low": value, "high": 0.9}):
        check = outcome(lambda item=item: evidence_check("P ≥ 0.7", "P", {"P": item}, 0.7))
        if not isinstance(check, EvalError) and check.verdict is Verdict.PASS:
            assert check.value is not None and 0.7 <= check.value <= 1.0


# --------------------------------------------------------------------------- bundles


@pytest.fixture(scope="module")
def base_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from embodied_eval.certificate.bundle import write_bundle
    from embodied_eval.store.signing_keys import create_private_key, load_private_key

    tmp = tmp_path_factory.mktemp("bundle")
    create_private_key(tmp / "k.pem")
    out = tmp / "bundle"
    write_bundle(
        out,
        {"format": "embodied-eval-certificate/1"},
        {"a.txt": b"a"},
        load_private_key(tmp / "k.pem"),
    )
    return out


@fuzz_settings("bundle")
@given(data=st.data())
def test_fuzz_bundle(base_bundle, tmp_path_factory, data):
    from embodied_eval.certificate.verify import verify_bundle

    bundle = tmp_path_factory.mktemp("b") / "bundle"
    shutil.copytree(base_bundle, bundle)
    target = data.draw(
        st.sampled_from(["signature", "certificate.json", "a.txt", "public_key.pem"])
    )
    op = data.draw(st.sampled_from(["tree", "bytes", "fifo", "link", "remove", "folder"]))
    path = bundle / target
    if op == "tree" and target in ("signature", "certificate.json"):
        tree = json.loads(path.read_text())
        mutated = data.draw(mutated_tree(tree, max_ops=2))
        path.write_text(json.dumps(mutated, allow_nan=True))
    elif op == "bytes":
        raw = bytearray(path.read_bytes())
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
        path.write_bytes(bytes(raw))
    elif op == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif op == "link":
        path.unlink()
        os.symlink(data.draw(st.sampled_from([target, "/dev/zero", "a.txt", "missing"])), path)
    elif op == "remove":
        path.unlink()
    elif op == "folder":
        path.unlink()
        path.mkdir()
    result = outcome(lambda: verify_bundle(bundle))
    assert isinstance(result, EvalError) or op in ("tree",), "a changed bundle verified"


# --------------------------------------------------------------------------- robot profiles

BASE_ROBOT: dict[str, Any] = {
    "domain_id": 7,
    "robot_id": "panda-1",
    "namespace": "/panda",
    "record": True,
    "deadlines": {"discovery_s": 5.0, "episode_s": 600.0},
}


@fuzz_settings("robot")
@given(mutated_tree(BASE_ROBOT, max_ops=2))
def test_fuzz_robot_profile(data):
    from real_bridge.bridge_config import BridgeConfig, config_from_mapping

    outcome(lambda: config_from_mapping(BridgeConfig, data))


def test_dates_in_trees_survive_mutation():
    # the protocol tree holds TOML dates; mutation copies them (sanity check of the harness)
    tree = copy.deepcopy(BASE_PROTOCOL)
    assert isinstance(tree["window"]["start"], dt.date)


# --------------------------------------------------------------------------- command lines

REPORT = [
    "incidents", "report", "--event-type", "protective_stop", "--reporter", "me",
    "--occurred", "2026-11-03T10:10:00Z", "--window", "fixture-2026-11", "--stop-category", "1",
]  # fmt: skip
EXPOSURE = [
    "incidents", "exposure", "add", "--window", "fixture-2026-11", "--start",
    "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z", "--hours", "1", "--how-measured",
    "robot_clock",
]  # fmt: skip
COMMANDS = [
    [*REPORT, "--force", "{}"],
    [*REPORT, "--separation", "{}"],
    [*REPORT, "--damage-cost", "{}"],
    [*REPORT, "--episode-id", "{}"],
    [*REPORT, "--body-region", "{}", "--force", "10"],
    [*REPORT[:4], "{}", *REPORT[5:]],
    [*EXPOSURE[:7], "{}", *EXPOSURE[8:]],
    [*EXPOSURE[:11], "{}", *EXPOSURE[12:]],
    ["incidents", "rates", "--level", "{}", "--protocol", str(PROTOCOL)],
    ["incidents", "show", "{}"],
    ["plan", "rate", "--max-per-100h", "{}"],
    ["plan", "success", "--threshold", "0.9", "--trials", "{}"],
    ["plan", "mtbsi", "--min-hours", "{}", "--observed", "1"],
    ["protocol", "check", "{}"],
    ["score", "{}"],
    ["import", "{}", str(PAIRS)],
    ["export", "episodes", "--out", "{}.csv", "--window", "none"],
]
cli_values = st.one_of(
    st.sampled_from([str(s) for s in STRANGE if not isinstance(s, (list, dict))]),
    st.text(max_size=30).filter(lambda t: "/" not in t and not t.startswith("-")),
)


@fuzz_settings("cli")
@given(command=st.sampled_from(COMMANDS), value=cli_values)
def test_fuzz_command_lines(base_store, tmp_path_factory, monkeypatch, command, value):
    folder = tmp_path_factory.mktemp("c")
    db = folder / "s.db"
    shutil.copy(base_store, db)
    monkeypatch.chdir(folder)  # anything a command writes lands in this folder
    args = [value if a == "{}" else a.replace("{}", value) for a in command]
    before = store_rows(db)
    code, _ = run_cli([*args, "--db", db])
    if code != 0:  # a read command may add the incident log's empty tables; never a row
        assert store_rows(db) == before, "a refused command changed the store's rows"


def store_rows(db: Path) -> dict[str, list[str]]:
    """Every row of every table but the schema versions (the store's data, not its schema)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if r[0] != "schema_migrations" and not r[0].startswith("sqlite_")
        ]
        rows = {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    return {t: r for t, r in rows.items() if r}
