"""Evidence files, `score_evidence` and `embodied-eval score`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.scoring import schema_path, score_evidence
from embodied_eval.scoring.evidence import POLICY_KEYS, TOP_KEYS, read_gate_result
from embodied_eval.scoring.gate_checks import GateCheck, GateResult, Verdict
from embodied_eval.scoring.levels import LevelPolicy

pytestmark = pytest.mark.timeout(120)

MINIMAL = {
    "axes": {
        "A": {"value": 0.8}, "G": {"raw": 0.5, "L": 0.2, "U": 0.9}, "P": {"value": 0.6},
        "M": {"value": 0.7}, "T": {"value": 0.5}, "R": {"value": 0.4}, "S": {"value": 0.5},
        "W": {"value": 0.6}, "$": {"raw": 5.0, "L": 1.0, "U": 9.0},
    }
}  # fmt: skip


def write(tmp_path: Path, data: object, name: str = "evidence.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def run_json(capsys, args: list[str]) -> dict:
    rc = main(["score", *args, "--json", "--resamples", "200"])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def test_minimal_evidence_cli_json(tmp_path, capsys):
    out = run_json(capsys, [str(write(tmp_path, MINIMAL))])
    for key in ("axes", "profile", "index", "index_jagged", "uniformity", "level", "gates"):
        assert key in out
    assert out["profile"] == "default"
    g = out["axes"]["G"]
    # G = (0.5 − 0.2)/(0.9 − 0.2) = 0.428571, raw 0.5 kept
    assert g["raw"] == 0.5 and g["value"] == pytest.approx(0.3 / 0.7)
    assert out["axes"]["A"]["raw"] is None and out["axes"]["A"]["value"] == 0.8
    assert out["axes"]["$"]["value"] == pytest.approx(0.5)  # (5 − 1)/(9 − 1)
    # E absent: optional in Table 1, so W = 10 − 0.5 = 9.5 and
    # ln C = (ln .8 + ln 3/7 + ln .6 + ln .7 + ln .5 + 1.5 ln .4 + ln .5 + ln .6 + ln .5)/9.5
    #      = (−0.223144 − 0.847298 − 0.510826 − 0.356675 − 0.693147 − 1.374436 − 0.693147
    #         − 0.510826 − 0.693147)/9.5 = −5.902645/9.5 = −0.621331 → C = 0.537229
    assert out["index"] == pytest.approx(0.537229, abs=1e-6)
    # U = min/median = 0.4/0.5 = 0.8; AAI* = 0.537229 · √0.8 = 0.480512
    assert out["uniformity"] == pytest.approx(0.8)
    assert out["index_jagged"] == pytest.approx(0.480512, abs=1e-6)
    assert out["level"] == 0 and out["weights"]["E"] == 0.0
    assert any("E not supplied" in n for n in out["notes"])
    assert out["seed"] == 0


def test_profiles_change_the_index(tmp_path, capsys):
    p = write(tmp_path, {**MINIMAL, "profile": "software"})
    sw = run_json(capsys, [str(p)])
    assert sw["profile"] == "software"
    # software: W = 10.25; ln C = (−5.902645 + 0.25(ln .6 + ln .7 + ln .5))/10.25
    #   = (−5.902645 − 0.390162)/10.25 = −0.613933 → 0.541218
    assert sw["index"] == pytest.approx(0.541218, abs=1e-6)
    rob = run_json(capsys, [str(p), "--profile", "robotics"])  # the option overrides the file
    assert rob["profile"] == "robotics" and rob["index"] is None
    assert rob["missing_axes"] == ["E"]


def test_zero_axis_gives_zero_index(tmp_path, capsys):
    data = json.loads(json.dumps(MINIMAL))
    data["axes"]["R"] = {"value": 0.0}
    out = run_json(capsys, [str(write(tmp_path, data))])
    assert out["index"] == 0.0 and out["index_jagged"] == 0.0 and out["uniformity"] == 0.0
    assert out["gradient"]["R"] is None  # ∂C/∂R is infinite at R = 0: reported as null
    assert any("index is 0" in n for n in out["notes"])


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"axes": {"G": {"raw": 0.5, "L": 0.9, "U": 0.2}}}, "axes.G"),
        ({"axes": {"A": {"value": 1.3}}}, "axes.A.value"),
        ({"axes": {"A": {"value": 0.5, "raw": 0.5}}}, "axes.A"),
        ({"axes": {"$": {"raw": 5.0}}}, "axes.$"),
        ({"axes": {"Q": {"value": 0.5}}}, "axes.Q"),
        ({"axis": {}}, "evidence.axis"),
        ({"schema": "embodied-eval/evidence/9"}, "schema"),
        ({"axes": {"E": {"value": 0.5}}, "robotics": {"E": {"value": 0.5}}}, "robotics.E"),
        (
            {"kappa": {"families": {"web": {"checkpoints": [{"t": 0, "R": 1, "C": 0.5}]}}}},
            "kappa.families.web.checkpoints",
        ),
        ({"closures": {"maintenance": [{"baseline": 0.5}]}}, "closures.maintenance[0]"),
        (
            {
                "robotics": {
                    "gates": [
                        {"name": "AAI-2 (Robotics)", "checks": [{"name": "E", "verdict": "ok"}]}
                    ]
                }
            },
            "robotics.gates[0].checks[0].verdict",
        ),
    ],
)
def test_bad_evidence_names_the_key(tmp_path, capsys, data, key):
    rc = main(["score", str(write(tmp_path, data))])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("error: ") and "\n" not in err
    assert key in err


def test_unreadable_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["score", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "missing.json")]) == 2


def test_schema_documents_what_the_reader_accepts():
    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    assert set(schema["properties"]) == set(TOP_KEYS)
    assert set(schema["properties"]["policy"]["properties"]) == set(POLICY_KEYS)
    assert set(POLICY_KEYS) <= set(LevelPolicy.__dataclass_fields__)
    assert schema["examples"][0] == MINIMAL


def test_full_example_reaches_aai2():
    example = json.loads(schema_path().read_text(encoding="utf-8"))["examples"][1]
    report = score_evidence(example, None, np.random.default_rng(0), n_resamples=400)
    # every AAI-2 check clears on its lower bound (e.g. $: (4.6 − 1)/8 = 0.45 ≥ 0.4; maintenance
    # lows 0.50 ≥ 0.8 · 0.55 = 0.44 over 8 ≥ 7 days; the κ series rises at every step), while
    # AAI-3 fails on P = 0.62 < 0.7 among others
    assert report.profile == "software" and report.level == 2
    assert {g.gate.name for g in report.assignment.blocking()} >= {
        "AAI-3 axis thresholds (Table 1)"
    }
    js = report.to_json()
    json.dumps(js, allow_nan=False)  # no NaN or ∞ in the report
    assert js["kappa"]["families"]["web"]["kappa"]["low"] > 0
    assert js["closures"]["maintenance"][0]["verdict"] == "pass"
    # without an rng there is no κ interval, so κ > 0 cannot be demonstrated
    assert score_evidence(example, None, None).level == 1


def test_robotics_report_feeds_e_and_gates():
    gate2 = GateResult(
        "AAI-2 (Robotics)", (GateCheck("E ≥ 0.60", Verdict.PASS, 0.6, ">=", 0.7, 0.65),)
    )
    assert read_gate_result(gate2.to_json(), "g") == gate2  # round trip of the report's JSON
    data = {
        **json.loads(json.dumps(MINIMAL)),
        "robotics": {
            "E": {"raw": {"value": 0.81, "low": 0.75, "high": 0.86}, "L": 0.5, "U": 1.0},
            "gates": [gate2.to_json()],
        },
    }
    report = score_evidence(data, "robotics", np.random.default_rng(1), n_resamples=200)
    assert report.axes["E"].x == pytest.approx(0.62)  # (0.81 − 0.5)/0.5
    assert report.index is not None and report.missing_axes == ()
    names = [g.gate.name for g in report.assignment.gates if g.level == 2]
    assert "AAI-2 (Robotics)" in names and "AAI-3 (Robotics)" not in names
    assert report.policy.maintenance_days == 14.0


def test_dynamics_section_from_overall_checkpoints():
    cps = [{"t": d, "R": 2.0 * d, "C": 0.4 + 0.01 * d + 0.0005 * d * d} for d in range(10)]
    data = {**MINIMAL, "kappa": {"checkpoints": cps, "link": "identity"}}
    report = score_evidence(data, None, np.random.default_rng(2), n_resamples=200)
    dyn = report.dynamics
    assert dyn is not None
    # C = 0.4 + 0.005 R + 0.000125 R² exactly: curvature d²C/dR² = 0.00025 on the raw scale
    assert dyn["curvature"]["curvature"]["value"] == pytest.approx(0.00025)
    # window: κ̄ = (C₉ − C₀)/(R₉ − R₀) = (0.09 + 0.0405)/18 = 0.00725; v̄ = 18/9 = 2 per day
    assert dyn["window"]["kappa_bar"] == pytest.approx(0.00725)
    assert dyn["window"]["v_bar"] == pytest.approx(2.0)


@pytest.mark.slow
def test_console_script_exit_code(tmp_path):
    exe = Path(sys.executable).parent / "embodied-eval"
    bad = write(tmp_path, {"axes": {"G": {"raw": 0.5, "L": 0.9, "U": 0.2}}})
    proc = subprocess.run([str(exe), "score", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: axes.G")
    good = write(tmp_path, MINIMAL, "good.json")
    proc = subprocess.run(
        [str(exe), "score", str(good)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "AAI-Index" in proc.stdout


def test_api_rejects_unknown_profile():
    with pytest.raises(EvalError, match="profile"):
        score_evidence(MINIMAL, "marine")


def test_minimal_evidence_reports_a_partial_index_but_no_certified_index(tmp_path):
    """A = 0.8 and G = φ(0.5; 0.2, 0.9) = 0.3/0.7 = 0.428571 with equal weights:
    partial index = sqrt(0.8 × 0.428571) = sqrt(0.342857) = 0.585540."""
    from embodied_eval.scoring import score_evidence

    ev = {"axes": {"A": {"value": 0.8}, "G": {"raw": 0.5, "L": 0.2, "U": 0.9}}}
    out = score_evidence(ev, "default", None).to_json()
    assert out["index"] is None
    assert out["index_partial"] == pytest.approx(0.585540, abs=1e-6)
    assert out["axes"]["G"]["raw"] == 0.5
    assert out["axes"]["G"]["value"] == pytest.approx(0.428571, abs=1e-6)
