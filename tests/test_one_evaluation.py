"""One evaluation of a window: `certify`, `verify --db`, `embodied-eval metrics` and
`ee.metrics` all reach `certificate.compute.evaluate_window`, which alone assembles the window's
inputs (`gather_inputs`) and computes its results (`compute_results`)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

import embodied_eval
from embodied_eval import api
from embodied_eval.certificate import compute
from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.cli.main import main
from embodied_eval.store.signing_keys import create_private_key
from tests.test_certificate import build_window, write_evidence

pytestmark = pytest.mark.timeout(240)

ROOT = Path(embodied_eval.__file__).resolve().parent.parent
PACKAGES = ("embodied_eval", "sim_suites", "real_bridge", "incident_logging")
#: The window-assembly functions and the one module allowed to call them (besides where they
#: are defined: `gather_inputs` in certificate/inputs.py, `compute_results` in compute.py).
ASSEMBLY = {"gather_inputs", "compute_results"}
ALLOWED = {
    Path("embodied_eval/certificate/compute.py"),
    Path("embodied_eval/certificate/inputs.py"),
}


def _comparable(inputs: Any) -> dict[str, Any]:
    """The inputs as compared: everything but the signer's registration (only `certify` has a
    signer) and the caller's notes."""
    out = {f.name: getattr(inputs, f.name) for f in dataclasses.fields(inputs)}
    out["chain"] = {k: v for k, v in out["chain"].items() if k != "signer_registration"}
    out["protocol"] = inputs.protocol.protocol_hash
    out.pop("notes")
    return out


def test_certify_verify_metrics_and_the_notebook_see_the_same_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol, db = build_window(tmp_path)
    key = tmp_path / "owner.pem"
    create_private_key(key)
    evidence = write_evidence(tmp_path)
    seen: dict[str, tuple[Any, int]] = {}
    real = compute.compute_results
    caller = {"name": ""}

    def recording(inputs: Any, evidence: Any, seed: int, **kw: Any) -> Any:
        seen[caller["name"]] = (inputs, seed)
        return real(inputs, evidence, seed, **kw)

    monkeypatch.setattr(compute, "compute_results", recording)
    caller["name"] = "metrics"
    assert main(["metrics", "--db", str(db), "--protocol", str(protocol), "--json"]) == 0
    capsys.readouterr()
    caller["name"] = "ee.metrics"
    api.metrics(db, protocol)
    caller["name"] = "certify"
    out = tmp_path / "bundle"
    issue_certificate(protocol_path=protocol, db=db, key_path=key, out=out, evidence_path=evidence)
    caller["name"] = "verify --db"
    recompute_check(verify_bundle(out), db)
    assert set(seen) == {"metrics", "ee.metrics", "certify", "verify --db"}
    first, seed = seen["metrics"]
    assert len(first.episodes) == 50  # 25 pairs (see tests/test_certificate.py)
    for name, (inputs, other_seed) in seen.items():
        assert other_seed == seed, name
        assert _comparable(inputs) == _comparable(first), name


def _assembly_uses(path: Path) -> list[str]:
    """Where a module imports or reaches a window-assembly function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"imports {a.name}" for a in node.names if a.name in ASSEMBLY]
        elif isinstance(node, ast.Attribute) and node.attr in ASSEMBLY:
            found.append(f"uses .{node.attr}")
    return found


def test_no_other_module_assembles_window_inputs() -> None:
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in ALLOWED:
                continue
            uses = _assembly_uses(path)
            if uses:
                offenders[str(rel)] = uses
    assert offenders == {}


def test_the_scan_sees_an_import(tmp_path: Path) -> None:
    """The scan above would catch a second window path (it is not vacuous)."""
    module = tmp_path / "second_path.py"
    module.write_text(
        "from embodied_eval.certificate.inputs import gather_inputs\n"
        "import embodied_eval.certificate.compute as c\nc.compute_results\n",
        encoding="utf-8",
    )
    assert _assembly_uses(module) == ["imports gather_inputs", "uses .compute_results"]
