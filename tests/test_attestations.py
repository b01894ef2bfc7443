"""The audited delivery attestation (§7 AAI-4) travels from the evidence file to the AAI-4 gate."""

from __future__ import annotations

import pytest

from embodied_eval.certificate.compute import gate_evidence
from embodied_eval.embodiment.gates import evidence_check
from embodied_eval.errors import EvalError
from embodied_eval.scoring import score_evidence
from embodied_eval.scoring.gate_checks import Verdict

AXES = {"A": {"value": 0.8}}


def test_delivery_attestation_reaches_the_aai4_check():
    ev = {
        "axes": AXES,
        "attestations": {
            "delivery": {"verdict": "pass", "auditor": "J. Rivera", "date": "2026-11-20"}
        },
    }
    report = score_evidence(ev, "default", None)
    assert report.to_json()["attestations"]["delivery"]["auditor"] == "J. Rivera"
    gates_in = gate_evidence(report)
    check = evidence_check("delivery", "delivery_attestation", gates_in)
    assert check.verdict is Verdict.PASS
    assert "J. Rivera" in check.detail and "2026-11-20" in check.detail


def test_without_an_attestation_the_check_is_evidence_missing():
    check = evidence_check(
        "delivery", "delivery_attestation", gate_evidence(score_evidence({"axes": AXES}))
    )
    assert check.verdict is Verdict.EVIDENCE_MISSING


@pytest.mark.parametrize(
    ("item", "key"),
    [
        ({"verdict": "pass", "date": "2026-11-20"}, "attestations.delivery.auditor"),
        ({"verdict": "great", "auditor": "x", "date": "d"}, "attestations.delivery.verdict"),
        ({"verdict": "pass", "auditor": "x", "date": "d", "cost": 3}, "attestations.delivery.cost"),
    ],
)
def test_bad_attestations_name_the_key(item, key):
    with pytest.raises(EvalError) as info:
        score_evidence({"axes": AXES, "attestations": {"delivery": item}})
    assert info.value.key == key
    with pytest.raises(EvalError, match="unknown attestation"):
        score_evidence({"axes": AXES, "attestations": {"warranty": item}})
