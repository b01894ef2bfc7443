"""The judge audited on the window's own episodes: the draw, the labels, Se/Sp and the planner."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.cli.main import main
from embodied_eval.embodiment.window_audit import (
    audit_accuracy,
    audits_for_width,
    cp_width,
    draw_audit,
)
from embodied_eval.errors import EvalError
from embodied_eval.records import Artifact
from embodied_eval.store import ledger
from embodied_eval.store.core import Store
from tests.conftest import make_episode

pytestmark = pytest.mark.timeout(120)

DETECTOR = {"kind": "detector", "name": "scene-detector", "version": "1.0.0"}


def _episode(i: int, family: str, success: bool, tmp: Path | None = None, **kw: Any) -> Any:
    arts: tuple[Artifact, ...] = ()
    if tmp is not None:  # a stored recording, as the store verifies it
        f = tmp / f"p{i:02d}-{kw.get('attempt', 1)}.mcap"
        f.write_bytes(f"recording {i}".encode())
        arts = (Artifact(path=str(f), sha256=hashlib.sha256(f.read_bytes()).hexdigest(),
                         kind="mcap"),)  # fmt: skip
    fields: dict[str, Any] = {
        "episode_id": f"p{i:02d}-real-a1",
        "pair_id": f"p{i:02d}",
        "family": family,
        "task_id": f"{family}/t{i % 3}",
        "seed": i,
        "quality": 0.9 if success else 0.5,
        "window": "w1",
        "judge": dict(DETECTOR),
        "artifacts": arts,
        "started_at": f"2026-11-02T10:{i:02d}:00Z",
    }
    fields.update(kw)
    return make_episode(**fields)


def window_episodes(tmp: Path | None = None) -> list[Any]:
    """pick_place p01–p12 (p01–p08 judged successes), push p13–p20 (p13–p16 successes); p21
    (pick_place) and p22 (push): a cannot-judge first attempt, then a scored retry."""
    eps = [_episode(i, "pick_place", i <= 8, tmp) for i in range(1, 13)]
    eps += [_episode(i, "push", i <= 16, tmp) for i in range(13, 21)]
    for i, family, ok in ((21, "pick_place", True), (22, "push", False)):
        eps.append(
            _episode(
                i,
                family,
                False,
                tmp,
                status="aborted",
                status_reason="cannot judge: object hidden",
                # As the runner stores it: no verdict, so no judge; the detector that tried
                # is in control.
                judge={},
                control={"detector": {**DETECTOR, "success": None}},
            )
        )
        eps.append(
            _episode(i, family, ok, tmp, episode_id=f"p{i:02d}-real-a2", attempt=2,
                     started_at=f"2026-11-02T11:{i:02d}:00Z")
        )  # fmt: skip
    return eps


def test_se_and_sp_of_a_20_label_audit_by_hand() -> None:
    # 12 true successes: the judge said success on 10, failure on 1, could not judge 1;
    # 8 true failures: failure on 7, success on 1.
    triples = (
        [("pick_place", "success", "success")] * 10
        + [("pick_place", "failure", "success")]
        + [("pick_place", "cannot_judge", "success")]
        + [("pick_place", "failure", "failure")] * 7
        + [("pick_place", "success", "failure")]
    )
    acc = audit_accuracy(triples)
    assert list(acc) == ["all", "pick_place"]
    se, sp = acc["pick_place"].sensitivity(), acc["pick_place"].specificity()
    # Cannot-judge on a true success is in Se's denominator, not its numerator: Se = 10/12.
    assert (se.value, se.n) == (10 / 12, 12) and (sp.value, sp.n) == (7 / 8, 8)
    # Clopper–Pearson 95 %: scipy.stats.beta.ppf(0.025, 10, 3) = 0.515862,
    # beta.ppf(0.975, 11, 2) = 0.979137; beta.ppf(0.025, 7, 2) = 0.473490,
    # beta.ppf(0.975, 8, 1) = 0.996840.
    assert (se.low, se.high) == (
        pytest.approx(0.515862, abs=1e-6),
        pytest.approx(0.979137, abs=1e-6),
    )
    assert (sp.low, sp.high) == (
        pytest.approx(0.473490, abs=1e-6),
        pytest.approx(0.996840, abs=1e-6),
    )
    assert acc["all"] == acc["pick_place"]
    # A label that names no truth counts in no rate.
    more = audit_accuracy([*triples, ("push", "success", "cannot_tell")])
    assert more["all"].positives == 12 and more["all"].cannot_tell == 1
    with pytest.raises(EvalError, match="label"):
        audit_accuracy([("push", "success", "maybe")])


def test_planner_by_hand() -> None:
    # Width of the 95 % CP interval of 9/10: beta.ppf(0.975, 10, 1) − beta.ppf(0.025, 9, 2)
    # = 0.997471 − 0.554984 = 0.442487.
    assert cp_width(9, 10) == pytest.approx(0.442487, abs=1e-6)
    # At accuracy 0.5 (k = round(m/2), Python rounding) the widths from beta.ppf are:
    # m = 37 → 18/37: 0.656003 − 0.319214 = 0.336789 > 1/3; m = 38 → 19/38: 0.666211 −
    # 0.333789 = 0.332422 ≤ 1/3: 38 true successes and 38 true failures.
    plan = audits_for_width(1 / 3, 0.75, accuracy=0.5)
    assert plan["per_outcome"] == 38
    # Sp's denominator is the true failures, a quarter of the audits: ⌈38 / 0.25⌉ = 152.
    assert plan["audits"] == 152
    with pytest.raises(EvalError, match="--width"):
        audits_for_width(1.5, 0.5)


def test_the_draw_is_reproducible_and_takes_every_cannot_judge_episode() -> None:
    eps = window_episodes()
    draw = draw_audit(eps, seed=11, per_stratum=2)
    assert draw == draw_audit(list(reversed(eps)), seed=11, per_stratum=2)
    assert {"p21-real-a1", "p22-real-a1"} <= set(draw.episode_ids)
    # Strata (window, drawn): pick_place success p01–p08 + p21-a2 = 9; failure p09–p12 = 4;
    # push success p13–p16 = 4; failure p17–p20 + p22-a2 = 5; one cannot-judge each.
    assert dict(draw.strata) == {
        "pick_place/cannot_judge": [1, 1],
        "pick_place/failure": [4, 2],
        "pick_place/success": [9, 2],
        "push/cannot_judge": [1, 1],
        "push/failure": [5, 2],
        "push/success": [4, 2],
    }
    assert len(draw.episode_ids) == 10
    others = {draw_audit(eps, seed=s, per_stratum=2).episode_ids for s in range(12, 20)}
    assert len(others) > 1  # the seed chooses


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "store.db"
    with Store(path) as store:
        for e in window_episodes(tmp_path):
            store.write_episode(e)
        store.write_episode(_episode(30, "push", True, tmp_path, window="w2"))
    return str(path)


def test_cli_draws_labels_and_refuses_an_episode_outside_the_window(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trial", "audit", "--window", "w1", "--seed", "5", "--per-stratum", "2",
                 "--db", db]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "seed 5, 10 episode(s)" in out
    assert "p21-real-a1  pick_place  judge: cannot_judge  recording: " in out
    assert "p21-1.mcap" in out.split("p21-real-a1  pick_place")[1].splitlines()[0]
    with Store(Path(db), create=False) as store:
        (draw,) = ledger.rows(store.conn, "kind = 'audit_draw'")
    assert draw.data["seed"] == 5 and draw.data["detector"]["name"] == "scene-detector"
    assert len(draw.data["detector"]["code_hash"]) == 64
    # The recorded seed redraws the same sample.
    again = draw_audit(window_episodes(), draw.data["seed"], draw.data["per_stratum"])
    assert list(again.episode_ids) == draw.data["episode_ids"]

    label = ["trial", "audit", "--db", db, "--by", "tina", "--label"]
    assert main([*label, "p01-real-a1", "success"]) == 0
    assert "p01-real-a1 is success (judge said success), by tina" in capsys.readouterr().out
    for bad, why in (("p30-real-a1", "not a judged real episode of window 'w1'"),
                     ("nope", "not a judged real episode of window 'w1'")):  # fmt: skip
        assert main([*label, bad, "failure"]) == 2
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main([*label, "p01-real-a1", "maybe"]) == 2
    assert "expected one of success, failure, cannot_tell" in capsys.readouterr().err
    assert main(["store", "verify", "--db", db]) == 0
    capsys.readouterr()
    # The planner at the window's judged rate: 13 successes of 22 scored (p01–p08, p21-a2;
    # p13–p16) = 0.5909; width 0.3325 at accuracy 0.5 needs m = 38 (see the planner test),
    # so max(⌈38/0.5909⌉, ⌈38/0.4091⌉) = max(65, 93) = 93 audits.
    plan = ["trial", "audit", "--window", "w1", "--width", "0.3325", "--accuracy", "0.5"]
    assert main([*plan, "--db", db, "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["success_rate"] == pytest.approx(13 / 22) and planned["audits"] == 93


def test_metrics_name_the_audit_sample_and_the_measured_se_sp(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from embodied_eval.certificate.html_parts import judge_line

    assert main(["metrics", "--db", db, "--window", "w1", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["judge"]["accuracy"] is None
    assert "No audit of the detector on this window" in judge_line(before["judge"])
    assert main(["trial", "audit", "--window", "w1", "--seed", "5", "--db", db]) == 0
    labels = {
        "p01-real-a1": "success", "p02-real-a1": "success", "p09-real-a1": "success",
        "p21-real-a1": "success", "p10-real-a1": "failure", "p11-real-a1": "failure",
        "p03-real-a1": "failure", "p22-real-a1": "failure", "p13-real-a1": "cannot_tell",
    }  # fmt: skip
    for eid, lab in labels.items():
        assert main(["trial", "audit", "--db", db, "--by", "tina", "--label", eid, lab]) == 0
    capsys.readouterr()
    assert main(["metrics", "--db", db, "--window", "w1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    acc = out["judge"]["accuracy"]
    # By hand: true successes p01, p02 (judged success), p09 (judged failure), p21 (cannot
    # judge) → Se = 2/4; true failures p10, p11 (judged failure), p03 (judged success), p22
    # (cannot judge) → Sp = 2/4. CP 95 % of 2/4: beta.ppf(0.025, 2, 3) = 0.067586,
    # beta.ppf(0.975, 3, 2) = 0.932414.
    assert acc["sensitivity"]["value"] == 0.5 and acc["sensitivity"]["n"] == 4
    assert acc["specificity"]["value"] == 0.5 and acc["specificity"]["n"] == 4
    assert acc["sensitivity"]["low"] == pytest.approx(0.067586, abs=1e-6)
    assert acc["sensitivity"]["high"] == pytest.approx(0.932414, abs=1e-6)
    assert acc["by_family"]["pick_place"]["cannot_judge_success"] == 1
    assert acc["by_family"]["push"]["cannot_judge_failure"] == 1
    assert acc["audited_episodes"] == sorted(k for k, v in labels.items() if v != "cannot_tell")
    note = next(n for n in out["notes"] if "judge audit" in n)
    assert "(seed 5, " in note and "9 episode(s) labelled" in note and "1 cannot_tell" in note
    # The same Se/Sp chained as a judge_accuracy record naming the detector and its code.
    assert main(["trial", "audit", "--window", "w1", "--measure", "--db", db, "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["accuracy"]["all"]["sensitivity"] == acc["sensitivity"]
    assert measured["accuracy"]["all"]["specificity"] == acc["specificity"]
    assert measured["accuracy"]["push"]["cannot_tell"] == 1 and len(measured["labels"]) == 9
    assert measured["detector"]["name"] == "scene-detector"
    assert len(measured["detector"]["code_hash"]) == 64
    with Store(Path(db), create=False) as store:
        (row,) = ledger.rows(store.conn, "kind = 'judge_accuracy'")
    assert row.record_id == measured["record_id"]
    text = judge_line(out["judge"])
    assert "Accuracy on this window's audit (8 labelled episodes" in text
    assert "sensitivity 0.500 [0.068, 0.932]" in text


def test_the_certificate_names_its_audit_sample_and_the_measured_se_sp(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import html

    from embodied_eval.certificate.issue import issue_certificate
    from embodied_eval.protocol.reader import load_protocol
    from embodied_eval.store.signing_keys import create_private_key
    from tests.test_certificate import build_window, write_evidence

    protocol_path, db = build_window(tmp_path, judge=DETECTOR)
    window = load_protocol(protocol_path).window_id
    assert main(["trial", "audit", "--window", window, "--seed", "3", "--per-stratum", "2",
                 "--db", str(db)]) == 0  # fmt: skip
    with Store(db, create=False) as store:
        real = store.episodes(window=window, side="real")
    failed = [e.episode_id for e in real if not e.success]
    passed = [e.episode_id for e in real if e.success]
    assert len(failed) == 4 and len(passed) == 21  # tests/test_certificate.py: real fails 4/25
    # Labels: the judge's 4 failures — 3 truly failures, 1 truly a success; 4 of its successes,
    # truly successes. Se = 4/(4 + 1) = 0.8; Sp = 3/3 = 1.
    labels = {**dict.fromkeys(failed[:3], "failure"), failed[3]: "success",
              **dict.fromkeys(passed[:4], "success")}  # fmt: skip
    for eid, lab in labels.items():
        assert main(["trial", "audit", "--db", str(db), "--by", "tina", "--label", eid, lab]) == 0
    capsys.readouterr()
    key = tmp_path / "owner.pem"
    create_private_key(key)
    out = tmp_path / "bundle"
    issue_certificate(
        protocol_path=protocol_path,
        db=db,
        key_path=key,
        out=out,
        evidence_path=write_evidence(tmp_path),
    )
    cert = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    judge = cert["embodiment"]["judge"]
    acc = judge["accuracy"]
    # CP 95 %: 4/5 → [beta.ppf(0.025, 4, 2), beta.ppf(0.975, 5, 1)] = [0.283582, 0.994949];
    # 3/3 → [beta.ppf(0.025, 3, 1), 1] = [0.292402, 1].
    assert (acc["sensitivity"]["value"], acc["sensitivity"]["n"]) == (0.8, 5)
    assert acc["sensitivity"]["low"] == pytest.approx(0.283582, abs=1e-6)
    assert acc["sensitivity"]["high"] == pytest.approx(0.994949, abs=1e-6)
    assert (acc["specificity"]["value"], acc["specificity"]["n"]) == (1.0, 3)
    assert acc["specificity"]["low"] == pytest.approx(0.292402, abs=1e-6)
    assert acc["audited_episodes"] == sorted(labels)
    note = next(n for n in cert["embodiment"]["notes"] if "judge audit" in n)
    assert "(seed 3, " in note and "8 episode(s) labelled" in note
    # The shipped benchmark is shown beside it, labelled and hashed, never as this window's.
    from embodied_eval.canonical import canonical_hash
    from real_bridge.judge_accuracy import stored_accuracy

    bench = judge["benchmark"]
    assert bench["label"] == "benchmark (twin vs its oracle), not this window's audit"
    assert bench["sha256"] == canonical_hash(stored_accuracy("scene-detector", "1.0.0"))
    page = html.unescape((out / "report.html").read_text(encoding="utf-8"))
    assert "Accuracy on this window's audit (8 labelled episodes" in page
    assert "sensitivity 0.800 [0.284, 0.995]" in page
