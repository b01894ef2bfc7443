"""The measured accuracy of the harness's success detector, stored with it (by name and version).

The accuracy is measured on the twin, against its oracle (the twin's ground truth, recorded
beside each detector-judged episode and never used to judge one): `benchmarks/judge_accuracy.py`
runs twin episodes across families, drift days and policies (the reference policy and degraded
ones, so there are failures to measure specificity on) and writes the counts to
`real_bridge/data/judge_accuracy.json`, keyed by detector name, then version:

    {"scene-detector": {"1.0.0": {"true_positive": 50, "false_negative": 2, "false_positive": 1,
      "true_negative": 60, "cannot_judge": 3, "episodes": 116, "measured_on": "...",
      "by_family": {"pick_place": {...same counts...}, ...}}}}

The table (Se, Sp, Wilson intervals) is computed from those counts by
`embodied_eval.embodiment.detector_accuracy`. It is a benchmark: reports show it labelled
"benchmark (twin vs its oracle), not this window's audit", with its hash; a window's accuracy,
and the judge correction, come from that window's own audit (`embodied-eval trial audit`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from embodied_eval.embodiment.detector_accuracy import counts_of
from embodied_eval.errors import EvalError

#: Where the measured counts ship, next to the detector.
ACCURACY_PATH = Path(__file__).parent / "data" / "judge_accuracy.json"


def load_accuracy_file(path: str | Path = ACCURACY_PATH) -> dict[str, Any]:
    """The stored counts ({} when the file does not exist)."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise EvalError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise EvalError(f"{p}: expected an object keyed by detector name")
    return data


def stored_accuracy(
    name: str, version: str, path: str | Path = ACCURACY_PATH
) -> dict[str, Any] | None:
    """The stored measurement of detector `name` `version` (counts, by family, provenance), or
    None when it was never measured."""
    entry = load_accuracy_file(path).get(name, {}).get(version)
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise EvalError(f"judge accuracy of {name} {version}: expected an object")
    counts_of(entry, f"{name} {version}")  # validated here, before anyone uses it
    return dict(entry)
