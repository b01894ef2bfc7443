"""Where the calibration's search stops, by hand: a search shaped by a stretch the replay does not
follow is searched again without it, and a fit without an actuator filter that fits better than
the filtered one is kept."""

from __future__ import annotations

import math

import numpy as np
import pytest

from real_bridge.calibration import fit as fit_module
from real_bridge.calibration import solve as solve_module
from real_bridge.calibration.intervals import PROFILE, ParameterEstimate
from real_bridge.calibration.replay import ReplayTrace
from real_bridge.calibration.residuals import EpisodeResidual

NO_TRACE = ReplayTrace(t=np.zeros(0), q=np.zeros((0, 9)), object_pos=np.zeros((0, 3)))
#: Controller updates of every stand-in episode: 2 s at 50 Hz.
T = 0.02 * np.arange(100)
#: The sensor's noise, ±0.5 mrad alternating from one update to the next.
NOISE = 0.5e-3 * np.where(np.arange(100) % 2 == 0, 1.0, -1.0)[:, None] * np.ones((1, 7))


class _Analytic:
    """Stands in for the replayer: each episode's joint residual is the noise, plus 0.1 rad per
    kg of payload off 0.4 kg, plus 1 rad per second of actuator time constant; episode
    `jump_episode` is 20 mrad further off from 1.0 s to 1.5 s while the payload is above
    0.42 kg (a contact that goes another way there)."""

    def __init__(self, jump_episode: int | None = None) -> None:
        self.jump_episode = jump_episode
        self.left_out: dict[int, list[tuple[float, float]]] = {}

    def leave_out(self, episode, stretches):
        self.left_out.setdefault(episode, []).extend(stretches)

    def _one(self, i: int, values) -> EpisodeResidual:
        offset = 0.1 * (values["payload"] - 0.4) + values.get("actuator_bandwidth", 0.0)
        joint = NOISE + offset
        if i == self.jump_episode and values["payload"] > 0.42:
            joint = joint + np.where((T >= 1.0) & (T < 1.5), 0.02, 0.0)[:, None]
        found = EpisodeResidual(joint=joint, object=np.zeros((0, 3)), trace=NO_TRACE, joint_t=T)
        return found.without(self.left_out.get(i, ()))

    def run(self, values, subset):
        return [self._one(i, values) for i in subset]

    def run_many(self, candidates, subset):
        return [self.run(values, subset) for values in candidates]


def _scripted_locate(monkeypatch, payloads: list[float]) -> list[float]:
    """Replace the least-squares search by one that ends at `payloads` in turn; returns the
    payloads each search started from."""
    starts: list[float] = []

    def locate(replayer, subset, names, start, max_nfev):
        starts.append(start["payload"])
        values = {**start, "payload": payloads[len(starts) - 1]}
        return solve_module._Point(values, replayer.run(values, subset)), None

    monkeypatch.setattr(solve_module, "_locate", locate)
    return starts


def test_a_search_shaped_by_a_stretch_the_replay_does_not_follow_is_done_again(monkeypatch):
    # The search on episode 0 ends at 0.43 kg, where its 1.0–1.5 s stretch is 20 mrad further
    # off. Stretch RMS there (1 mrad unit): every stretch √(0.5² + 3²) = 3.04, that one
    # √(0.5² + 23²) = 23.0 > 4 × 3.04 = 12.2: it is set aside, and it is in the searched episode,
    # so the search runs again from the same start (0.5 kg) and ends at 0.40 kg, whose loss on
    # episode 0 (noise alone) is below 0.43 kg's: 0.40 kg is kept.
    starts = _scripted_locate(monkeypatch, [0.43, 0.40])
    replayer = _Analytic(jump_episode=0)
    values = solve_module._search(replayer, [0, 1, 2], [0], ["payload"], {"payload": 0.5}, 60)
    assert replayer.left_out == {0: [(1.0, 1.5)]}
    assert starts == [0.5, 0.5]
    assert values["payload"] == 0.40


def test_a_search_is_not_done_again_for_a_stretch_outside_its_episodes(monkeypatch):
    # The same stretch in episode 1, which the search did not replay: it is set aside, and the
    # search's optimum stands (one search).
    starts = _scripted_locate(monkeypatch, [0.43, 0.40])
    replayer = _Analytic(jump_episode=1)
    values = solve_module._search(replayer, [0, 1, 2], [0], ["payload"], {"payload": 0.5}, 60)
    assert replayer.left_out == {1: [(1.0, 1.5)]}
    assert starts == [0.5]
    assert values["payload"] == 0.43


def test_a_search_done_again_that_ends_worse_is_not_kept(monkeypatch):
    # The second search ends at 0.36 kg: with the stretch set aside, episode 0 is 4 mrad off
    # everywhere there against 3 mrad at 0.43 kg (and the noise): a larger loss, so the first
    # search's optimum is kept.
    starts = _scripted_locate(monkeypatch, [0.43, 0.36])
    replayer = _Analytic(jump_episode=0)
    values = solve_module._search(replayer, [0, 1, 2], [0], ["payload"], {"payload": 0.5}, 60)
    assert starts == [0.5, 0.5]
    assert values["payload"] == 0.43


def test_an_unfiltered_fit_that_fits_better_is_kept(monkeypatch):
    # The fit stopped at τ = 5.6 ms, payload 0.392 kg: every entry 100 × (−0.008) + 5.6 = 4.8
    # mrad off (and the noise). Fitted again at τ = 0 (here: payload 0.4 kg, noise alone), the
    # sum of squares falls from 100·7·(4.8² + 0.5²) to 100·7·0.5² in the 1 mrad unit, far beyond
    # τ's 95 % bound: the unfiltered fit is kept with the refit's estimates and intervals, and
    # τ's interval is its profile's upwards from 0 on a 1 ms grid: at 1 ms every entry is 1 mrad
    # further off (cost 1400·(1.5² + 0.5²)/2 = 1750 against 350 and a bound of
    # 350·(1 + 1.96²/1398) = 350.96), so only 0 is inside and the interval is [0, 0.5 ms].
    refit = ParameterEstimate("payload", 0.4, 0.39, 0.41, True)

    def solve(replayer, fitting, search, names, start, max_iters, rng):
        assert search is None and list(names) == ["payload"] and start["actuator_bandwidth"] == 0
        return {"payload": refit}, {**start, "payload": 0.4}, replayer.run(start, fitting)

    monkeypatch.setattr(fit_module, "solve", solve)
    fitted = {
        "payload": ParameterEstimate("payload", 0.392, 0.386, 0.398, True),
        "actuator_bandwidth": ParameterEstimate("actuator_bandwidth", 0.0056, 0.0046, 0.0066, True),
    }
    values = {"payload": 0.392, "actuator_bandwidth": 0.0056}
    out = fit_module.unfiltered_also(
        _Analytic(), [0, 1], ["payload", "actuator_bandwidth"], fitted, values, 12,
        np.random.default_rng(0),
    )  # fmt: skip
    assert out == {"payload": 0.4, "actuator_bandwidth": 0.0}
    assert fitted["payload"] is refit
    tau = fitted["actuator_bandwidth"]
    assert (tau.value, tau.low, tau.method, tau.identified) == (0.0, 0.0, PROFILE, True)
    assert tau.high == pytest.approx(0.0005)
    assert math.isnan(tau.fitted)


def test_the_delays_verdict_follows_its_profile_interval(monkeypatch):
    # The Jacobian's finite difference over one control period says ±10.9 ms (not identified);
    # the profile on the physics step says [0.039, 0.041] s: ±1 ms, within the 10 ms resolution.
    residual = EpisodeResidual(joint=NOISE, object=np.zeros((0, 3)), trace=NO_TRACE, joint_t=T)
    jacobian_verdict = ParameterEstimate(
        "actuator_delay", 0.04, 0.0291, 0.0509, False, "actuator_bandwidth", -0.98,
        "its 95 % interval ±0.0109 is wider than ±0.01", design_effect=3.2,
    )  # fmt: skip

    class Found:
        def interval(self, effect):
            return 0.04, 0.039, 0.041

    monkeypatch.setattr(solve_module, "finite_difference_jacobian",
                        lambda *a: np.ones((NOISE.size, 1)))  # fmt: skip
    monkeypatch.setattr(solve_module, "smooth_rows", lambda *a: np.ones(NOISE.size, dtype=bool))
    monkeypatch.setattr(solve_module, "identifiability",
                        lambda *a: {"actuator_delay": jacobian_verdict})  # fmt: skip
    monkeypatch.setattr(solve_module, "profile", lambda *a: Found())
    point = solve_module._Point({"actuator_delay": 0.04}, [residual])
    found = solve_module._arm_estimates(None, [0], ["actuator_delay"], point, object())
    est = found["actuator_delay"]
    assert (est.low, est.high, est.method) == (0.039, 0.041, PROFILE)
    assert est.identified and est.reason == ""
    # A profile as wide as the Jacobian's keeps the verdict "not identified", with its own width.
    Found.interval = lambda self, effect: (0.04, 0.02, 0.06)
    jacobian_verdict.identified, jacobian_verdict.reason = True, ""
    est = solve_module._arm_estimates(None, [0], ["actuator_delay"], point, object())[
        "actuator_delay"]  # fmt: skip
    assert not est.identified and est.reason == "its 95 % interval ±0.02 is wider than ±0.01"
