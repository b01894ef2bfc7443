"""A report that agrees with its verdict: the S2R the gates decided on per family next to the
headline, no family counts in value columns, and no plan sentence with thousands of trials."""

from __future__ import annotations

from embodied_eval.certificate.summary_html import _headline
from embodied_eval.scoring.verdict import MAX_PLANNED_TRIALS, next_steps, window_verdict


def check(name: str, verdict: str, **extra: object) -> dict[str, object]:
    return {"name": name, "verdict": verdict, "remaining": {}, **extra}


def test_a_plan_of_thousands_of_trials_is_not_reachable_at_this_rate():
    gates = {
        "AAI-2": {
            "checks": [
                check("S2R ≥ 0.6", "inconclusive", remaining={"trials": 5246.0}),
                check("RA ≥ 0.5", "inconclusive", remaining={"trials": 14.0}),
            ]
        }
    }
    steps = next_steps(window_verdict(gates, valid=True), has_evidence=True)
    assert MAX_PLANNED_TRIALS == 1000
    assert steps[0].startswith("Not reachable at this rate: S2R ≥ 0.6 would need more than 1,000")
    assert steps[1] == (
        "Run about 14 more trials to settle the 1 inconclusive check(s) (`embodied-eval plan` "
        "recomputes the amounts)."
    )
    assert not any("5246" in s for s in steps)
    # Only the far one: no "Run" sentence and no "collect more data" either.
    only = {"AAI-2": {"checks": [check("S2R ≥ 0.6", "inconclusive", remaining={"trials": 5246.0})]}}
    steps = next_steps(window_verdict(only, valid=True), has_evidence=True)
    assert len(steps) == 1 and steps[0].startswith("Not reachable at this rate")
    # 1,000 trials is still a plan.
    at_cap = {
        "AAI-2": {"checks": [check("AR ≥ 0.8", "inconclusive", remaining={"trials": 1000.0})]}
    }
    assert next_steps(window_verdict(at_cap, valid=True), has_evidence=True)[0].startswith(
        "Run about 1000 more trials"
    )


def test_the_headline_shows_the_per_family_s2r_the_gate_used():
    def s2r(value: float, bound: float) -> dict[str, object]:
        return {"value": value, "low": bound, "high": 1.0, "level": 0.95, "n": 4,
                "lower_bound": {"value": value, "low": bound, "high": 1.0}}  # fmt: skip

    cert = {
        "embodiment": {
            "S2R": s2r(1.0, 0.7),
            "S2R_by_family": {"drawer_open": s2r(0.5, 0.121), "push": s2r(1.0, 0.6)},
        },
        "window": {},
    }
    html = _headline(cert)
    assert '<div id="headline-S2R">' in html and "<b>1.000</b>" in html
    assert "S2R by family, as the S2R gates use it: drawer_open 0.500 (bound 0.121); " in html
    assert "push 1.000 (bound 0.600)." in html
