"""`trial record`: the start time, the summary to confirm, and runs without any input."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from embodied_eval.cli.main import app, main
from embodied_eval.manifest import plan_manifest, write_manifest_file
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.store.core import Store

ROOT = Path(__file__).resolve().parents[1]
#: Every answer that has no default, as flags.
REQUIRED = [
    "--technician", "Ana", "--quality", "0.9", "--duration", "95s", "--no-faults",
    "--no-incidents",
]  # fmt: skip


@pytest.fixture(scope="module")
def protocol():
    return load_protocol(example_protocol_path())


@pytest.fixture
def setup(tmp_path, protocol):
    manifest = plan_manifest(protocol)
    path = write_manifest_file(manifest, tmp_path)
    base = ["trial", "record", "--db", str(tmp_path / "t.db"), "--manifest", str(path)]
    return {"db": tmp_path / "t.db", "base": base, "real": manifest.side("real")}


def stored(setup):
    if not setup["db"].exists():
        return []
    with Store(setup["db"]) as store:
        return store.episodes()


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _cli(setup, *args: str, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "embodied_eval.cli.main", *setup["base"], *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_q_star_of_the_example_protocol_is_0_8(protocol):
    # The refusals below are written for q* = 0.8 (success z = 1{q ≥ q*}).
    assert {t.target_quality for t in plan_manifest(protocol).side("real")} == {0.8}


# --------------------------------------------------------------------------- without a terminal


def test_flags_only_with_stdin_closed_store_without_asking(setup):
    before = _now()
    done = _cli(setup, *REQUIRED)  # no --notes, --status, --succeeded, --started-at
    after = _now()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "?" not in done.stdout and "Summary" not in done.stdout  # nothing was asked
    (ep,) = stored(setup)
    assert ep.episode_id == setup["real"][0].episode_id
    assert ep.status == "ok" and ep.quality == 0.9 and ep.success
    assert ep.audited_success is True  # default: succeeded = q ≥ q* (0.9 ≥ 0.8)
    assert ep.duration_s == 95.0 and ep.interventions == 0 and ep.control["notes"] == ""
    started = datetime.fromisoformat(ep.started_at.replace("Z", "+00:00"))
    assert ep.started_at.endswith("Z") and before <= started <= after  # default: now


def test_missing_required_flags_name_the_flag_and_store_nothing(setup):
    done = _cli(setup, "--no-input", "--technician", "Ana", "--duration", "95s")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: missing --quality, --fault or --no-faults, --incident")
    # Without --no-input and with stdin closed, input ends at the first missing answer.
    done = _cli(setup, *[a for a in REQUIRED if a not in ("--duration", "95s")])
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "nothing was stored" in done.stderr and "--duration" in done.stderr
    assert stored(setup) == []


def test_explicit_start_time_is_stored_in_utc(setup):
    assert main([*setup["base"], *REQUIRED, "--started-at", "2026-11-03T10:00:00+01:00"]) == 0
    (ep,) = stored(setup)
    assert ep.started_at == "2026-11-03T09:00:00Z"  # 10:00 at +01:00 is 09:00 UTC


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("yesterday", "not an ISO-8601 time"),
        ("2026-11-03T09:00:00", "has no timezone"),
        ("2026-11-03", "has no timezone"),
        ((_now() + timedelta(hours=2)).isoformat(), "is in the future"),
        ("1999-12-31T23:00:00Z", "before 2000"),
        ("0001-01-01T00:00:00Z", "not a plausible time"),
    ],
)
def test_bad_start_times_are_refused(setup, capsys, value, says):
    assert main([*setup["base"], *REQUIRED, "--started-at", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --started-at: ") and err.count("\n") == 1 and says in err
    assert stored(setup) == []


# --------------------------------------------------------------------------- contradictions


@pytest.mark.parametrize(
    ("quality", "succeeded", "status", "says"),
    [
        ("0.5", "yes", "ok", "below the success threshold q* = 0.8"),
        ("0.79", "yes", "ok", "below the success threshold"),
        ("0.8", "no", "ok", "reaches the success threshold"),  # q = q* is a success
        ("0.95", "no", "ok", "reaches the success threshold"),
        ("0.5", "yes", "aborted", "below the success threshold"),
    ],
)
def test_contradictory_answers_are_refused(setup, capsys, quality, succeeded, status, says):
    flags = [a for a in REQUIRED if a != "0.9"]
    flags.remove("--quality")
    args = [*flags, "--quality", quality, "--succeeded", succeeded, "--status", status]
    assert main([*setup["base"], *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: contradictory answers: ") and err.count("\n") == 1
    assert says in err
    assert stored(setup) == []


def test_consistent_answers_at_the_threshold_are_accepted(setup):
    flags = [a for a in REQUIRED if a not in ("--quality", "0.9")]
    assert main([*setup["base"], *flags, "--quality", "0.8", "--succeeded", "yes"]) == 0
    assert main([*setup["base"], *flags, "--quality", "0.9", "--succeeded", "no",
                 "--status", "safety_stop"]) == 0  # fmt: skip
    first, second = sorted(stored(setup), key=lambda e: e.started_at + e.episode_id)[:2]
    assert {(e.quality, e.success, e.audited_success) for e in (first, second)} == {
        (0.8, True, True),  # 0.8 ≥ q* 0.8
        (0.9, False, False),  # a safety stop is not a success whatever q
    }


# --------------------------------------------------------------------------- prompts


def test_summary_is_shown_and_confirmed_before_storing(setup):
    answers = "\n".join(
        [
            "Bo",  # technician
            "2026-11-03T07:30:00-02:00",  # start time (09:30 UTC)
            "",  # outcome: ok
            "0.85",  # quality
            "",  # succeeded: default y (0.85 ≥ 0.8)
            "2m",  # duration
            "1",  # interventions
            "",  # notes
            "y",  # store it
        ]
    )
    args = [*setup["base"], "--no-faults", "--no-incidents"]
    result = CliRunner().invoke(app, args, input=answers + "\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Start time, ISO 8601 with timezone (Enter = now) [" in out  # the default is shown
    summary = out[out.index("Summary of episode") :]
    for line in (
        "technician     Bo",
        "started at     2026-11-03T09:30:00Z (UTC)",
        "outcome        ok",
        "quality q      0.85 (q* = 0.8; success z = 1)",
        "succeeded      yes",
        "duration       120 s",
        "interventions  1",
        "faults         none",
        "incidents      none",
    ):
        assert line in summary, line
    assert summary.index("notes") < summary.index("Store this episode? (y/n)")
    (ep,) = stored(setup)
    assert ep.started_at == "2026-11-03T09:30:00Z" and ep.duration_s == 120.0
    assert ep.interventions == 1 and ep.control["entered_by"] == "Bo"


def test_default_start_time_is_now_and_declining_stores_nothing(setup):
    args = [*setup["base"], "--technician", "Bo", "--no-faults", "--no-incidents"]
    script = ["", "ok", "0.3", "", "45s", "0", "", "n"]  # start time: Enter = now; decline
    result = CliRunner().invoke(app, args, input="\n".join(script) + "\n")
    assert result.exit_code == 1
    assert "not stored: nothing was written" in result.output
    assert stored(setup) == []

    before = _now()
    script[-1] = "y"
    result = CliRunner().invoke(app, args, input="\n".join(script) + "\n")
    after = _now()
    assert result.exit_code == 0, result.output
    (ep,) = stored(setup)
    started = datetime.fromisoformat(ep.started_at.replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= started <= after
    assert ep.quality == 0.3 and not ep.success and ep.audited_success is False


def test_yes_skips_the_confirmation(setup):
    args = [*setup["base"], "--yes", "--technician", "Bo", "--quality", "0.9", "--no-faults",
            "--no-incidents"]  # fmt: skip
    # --duration is missing, so the answers not given are asked: start time, outcome,
    # succeeded, duration, interventions, notes — but no summary and no confirmation.
    result = CliRunner().invoke(app, args, input="\n\n\n1min\n\n\n")
    assert result.exit_code == 0, result.output
    assert "Duration" in result.output
    assert "Store this episode?" not in result.output and "Summary" not in result.output
    (ep,) = stored(setup)
    assert ep.duration_s == 60.0 and ep.status == "ok" and ep.audited_success is True
