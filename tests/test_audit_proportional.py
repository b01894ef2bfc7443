"""The AR correction's Se and Sp come from a proportional sample of the audit's labels.

The audit draws its family × verdict strata at different rates; counts from such a sample are not
the window's. `proportional_labels` keeps the same share of every judged stratum (the smallest
labelled share), in a fixed order (SHA-256 of the episode id), and leaves cannot-judge episodes
out. Values by hand from that rule.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from embodied_eval.embodiment.judge import judge_summary
from embodied_eval.embodiment.window_audit import proportional_labels
from tests.conftest import make_episode
from tests.test_judge_accuracy import DETECTOR, real_episodes

pytestmark = pytest.mark.timeout(60)


def order(episode_id: str) -> str:
    return hashlib.sha256(episode_id.encode("utf-8")).hexdigest()


def judged(name: str, family: str, success: bool):
    return make_episode(
        episode_id=name,
        pair_id=name,
        family=family,
        task_id=f"{family}/{'block_forward' if family == 'push' else 'cube_center'}",
        quality=0.9 if success else 0.1,
        judge=dict(DETECTOR),
    )


def test_the_same_share_of_every_stratum_is_kept_by_hand() -> None:
    eps = [judged(f"s{i}", "pick_place", True) for i in range(10)]
    eps += [judged(f"f{i}", "pick_place", False) for i in range(5)]
    eps += [judged(f"u{i}", "push", True) for i in range(6)]
    labels = {f"s{i}": "success" for i in range(4)} | {"s4": "cannot_tell"}
    labels |= {f"f{i}": "failure" for i in range(4)} | {f"u{i}": "success" for i in range(6)}
    got = proportional_labels(eps, labels)
    # Labelled shares: pick_place/success 4/10 (s4 names no truth), pick_place/failure 4/5,
    # push/success 6/6; f = 0.4, so the strata keep ⌊0.4·10⌋ = 4, ⌊0.4·5⌋ = 2, ⌊0.4·6⌋ = 2.
    assert got.fraction == pytest.approx(0.4)
    assert got.strata == {
        "pick_place/success": (10, 4, 4),
        "pick_place/failure": (5, 4, 2),
        "push/success": (6, 6, 2),
    }
    failures = sorted((f"f{i}" for i in range(4)), key=order)[:2]
    pushes = sorted((f"u{i}" for i in range(6)), key=order)[:2]
    assert set(got.labels) == {"s0", "s1", "s2", "s3", *failures, *pushes}
    assert got.missing == ""
    # A stratum with judged episodes but no label: nothing can be kept.
    none = proportional_labels(eps, {k: v for k, v in labels.items() if not k.startswith("f")})
    assert none.fraction == 0.0 and none.labels == {} and none.missing == "pick_place/failure"


def disproportionate_window():
    """80 episodes, 48 judged successes (p = 0.6). The audit labelled every judged success
    (p000–p044 true: TP 45; p045–p047 false: FP 3) but 24 of the 32 judged failures (p048–p062
    true: FN 15; p063–p071 false: TN 9) — counted as they stand: Se 45/60, Sp 9/12."""
    labels = {i: i < 45 or 48 <= i < 63 for i in range(72)}
    return real_episodes(48, 80, DETECTOR, labels)


def test_a_disproportionate_audit_is_corrected_on_its_proportional_sample() -> None:
    real = disproportionate_window()
    s = judge_summary(real, True, np.random.default_rng(4), 300, 0.95)
    assert s.corrected is not None and s.sample is not None
    # f = min(48/48, 24/32) = 0.75: every labelled failure stays, 48·24//32 = 36 of the 48
    # judged successes stay (the first in SHA-256 order of their ids).
    kept = sorted((f"p{i:03d}-real-a1" for i in range(48)), key=order)[:36]
    tp = sum(1 for e in kept if int(e[1:4]) < 45)
    fp = 36 - tp
    assert s.sample.fraction == 0.75 and len(s.sample.labels) == 60
    se, sp = tp / (tp + 15), 9 / (9 + fp)
    rogan_gladen = (0.6 + sp - 1) / (se + sp - 1)
    assert s.corrected.value == pytest.approx(rogan_gladen, abs=1e-12)
    # It is the window's 0.6·PPV + 0.4·(1 − NPV) on the kept sample; the counts as they stand
    # would have given (0.6 + 0.75 − 1)/(0.75 + 0.75 − 1) = 0.7.
    assert rogan_gladen == pytest.approx(0.6 * tp / 36 + 0.4 * 15 / 24, abs=1e-12)
    assert abs(s.corrected.value - 0.7) > 0.05
    shown = s.to_json(0.95)["AR_corrected_bound"]["sample"]
    assert shown["fraction"] == 0.75
    assert shown["strata"]["pick_place/success"] == {"judged": 48, "labelled": 48, "kept": 36}


def test_cannot_judge_labels_do_not_enter_the_correction() -> None:
    from tests.test_judge_accuracy import audited_window

    real = audited_window()
    base = judge_summary(real, True, np.random.default_rng(4), 300, 0.95)
    hidden = [
        make_episode(
            episode_id=f"c{i}-real-a1",
            pair_id=f"c{i}",
            status="aborted",
            status_reason="cannot judge: object hidden",
            judge={},
            audited_success=True,
            control={"detector": {**DETECTOR, "success": None}},
        )
        for i in range(5)
    ]
    with_cj = judge_summary(
        real, True, np.random.default_rng(4), 300, 0.95, window_real=real + hidden
    )
    assert base.corrected is not None and with_cj.corrected is not None
    assert with_cj.corrected.value == base.corrected.value
    # The reported accuracy counts them (a cannot-judge true success lowers Se): 33/49.
    assert with_cj.accuracy["all"].cannot_judge_success == 5
    assert with_cj.accuracy["all"].sensitivity().value == pytest.approx(33 / 49)
