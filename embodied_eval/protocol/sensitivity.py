"""Sensitivity of a protocol's battery to each declared knob: a quick paired sweep.

For every knob the protocol declares — each `[randomization]` range end, each drift setting
that changes something, and the protocol's whole randomization at once — the reference policy runs
the same instances with the same seeds twice: once with everything nominal (no randomization, no
drift: the matched control arm) and once with only that knob moved. Per knob the sweep reports

- the change in success rate with Newcombe's paired interval (`paired_gap_interval`: a = both
  succeed, b = only the perturbed arm, c = only the control arm, d = neither), and
- the mean change in quality q with a paired bootstrap interval (instances resampled together),

and warns about knobs that change nothing (every pair has the same success and |Δq| ≤
INERT_QUALITY) and about families whose reference success under the protocol's randomization is
saturated (≥ SATURATED_HIGH or ≤ SATURATED_LOW), where the battery cannot tell policies apart.

Knobs that change only what the cameras see (`CAMERA_KNOBS`: lighting, colours, textures,
camera pose offsets, distractors) cannot move a policy that observes state; their arms, and a
nominal control arm of their own, run a camera policy instead (the engine's registered camera
reference policy, `embodied_eval.plugins.CAMERA_POLICIES`, or the one given), and their lines
say so.

The sweep is generic: it knows knobs only by these declared kinds and runs episodes through the
sim engine registry (`embodied_eval.plugins.SIM_ENGINES`), so any knob an engine makes real is
swept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import CAMERA_POLICIES, SIM_ENGINES, lookup
from embodied_eval.protocol.reader import CAMERA_KNOBS, Protocol
from embodied_eval.records import EpisodeSpec
from embodied_eval.stats.bootstrap import bootstrap_statistic
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.paired import paired_gap_interval

#: A knob whose every pair keeps its success and moves q by at most this changes nothing.
INERT_QUALITY = 0.005
#: Family success rates at or beyond these bounds cannot separate policies (seed §3 battery).
SATURATED_HIGH = 0.98
SATURATED_LOW = 0.02
#: Bootstrap resamples of the quality interval (the sweep is quick; the metrics use more).
QUALITY_RESAMPLES = 2000


@dataclass(frozen=True)
class Arm:
    """One perturbed arm: a knob at one setting, everything else nominal."""

    knob: str
    setting: str
    randomization: Mapping[str, tuple[float, float]]
    drift_name: str = "nominal"
    drift: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: The arm runs a camera policy (a knob of CAMERA_KNOBS), not the protocol's policy.
    camera: bool = False


@dataclass(frozen=True)
class KnobEffect:
    """Paired effect of one arm against the nominal control arm on one engine."""

    engine: str
    knob: str
    setting: str
    n: int
    success_nominal: float
    success_perturbed: float
    success_change: Estimate
    quality_change: Estimate
    changed_pairs: int
    inert: bool
    #: The policy both arms ran (the protocol's, or the camera policy for CAMERA_KNOBS).
    policy: str = ""
    camera: bool = False


@dataclass(frozen=True)
class SweepResult:
    """Effects per arm and engine, reference success per family, and warnings."""

    effects: tuple[KnobEffect, ...]
    #: (engine, family) -> (successes, n) of the reference policy under the protocol's DR.
    reference_success: Mapping[tuple[str, str], tuple[int, int]]
    warnings: tuple[str, ...]


def sweep_arms(protocol: Protocol) -> list[Arm]:
    """Every declared knob setting of `protocol`: range ends, drift settings, all DR at once."""
    arms: list[Arm] = []
    for knob, (low, high) in protocol.randomization.items():
        ends = [("low", low), ("high", high)] if high != low else [("value", low)]
        for label, value in ends:
            arms.append(
                Arm(knob, f"{label} {value:g}", {knob: (value, value)}, camera=knob in CAMERA_KNOBS)
            )
    for drift in protocol.drifts:
        if drift.params:
            arms.append(
                Arm(f"drift.{drift.name}", f"day {drift.day}", {}, drift.name, drift.params)
            )
    if protocol.randomization:
        arms.append(Arm("randomization", "all ranges", dict(protocol.randomization)))
    return arms


def saturation_warnings(
    rates: Mapping[tuple[str, str], tuple[int, int]], who: str = "reference policy"
) -> list[str]:
    """One warning per (engine, family) whose success rate is ≥ 0.98 or ≤ 0.02.

    Args:
        rates: (engine or side, family) -> (successes, episodes).
        who: whose success it is, for the message.
    """
    out = []
    for (where, family), (wins, n) in sorted(rates.items()):
        if n == 0:
            continue
        rate = wins / n
        if rate >= SATURATED_HIGH or rate <= SATURATED_LOW:
            side = "ceiling" if rate >= SATURATED_HIGH else "floor"
            out.append(
                f"saturated: {who} succeeds {wins}/{n} = {rate:.2f} on {family} ({where}), at "
                f"the {side}; this battery cannot tell policies apart there"
            )
    return out


def _mean_difference(perturbed: np.ndarray, nominal: np.ndarray) -> Any:
    """Mean paired difference; arrays [B, n] (vectorized bootstrap) or [n]."""
    return np.mean(perturbed - nominal, axis=-1)


def paired_quality_change(
    perturbed: np.ndarray, nominal: np.ndarray, rng: np.random.Generator, level: float
) -> Estimate:
    """Mean change in quality, perturbed − nominal, with a paired percentile bootstrap interval.

    Args:
        perturbed, nominal: (n,) qualities of the same instances and seeds.
    """
    if len(perturbed) < 2 or float(np.ptp(perturbed - nominal)) == 0.0:
        d = float(np.mean(perturbed - nominal)) if len(perturbed) else 0.0
        return Estimate(value=d, low=d, high=d, level=level, method="paired", n=len(perturbed))
    return bootstrap_statistic(
        (perturbed, nominal),
        _mean_difference,
        rng,
        resamples=QUALITY_RESAMPLES,
        level=level,
        paired=True,
        vectorized=True,
    )


@dataclass(frozen=True)
class _EngineSweep:
    """Plays arms on one engine: the same instances and seeds in every arm."""

    protocol: Protocol
    engine: str
    run: Any
    rows: Sequence[tuple[str, Any]]
    seeds: int
    max_steps: int | None

    def play(self, arm: Arm | None, policy: str) -> list[Any]:
        """The episodes of one arm (None: the nominal control arm) with `policy`."""
        ranges = {} if arm is None else dict(arm.randomization)
        proto = dataclasses.replace(self.protocol, randomization=ranges)
        out = []
        for k, (family, inst) in enumerate(self.rows):
            for s in range(self.seeds):
                spec = EpisodeSpec(
                    episode_id=f"sweep-{self.engine}-{k}-{s}",
                    pair_id=f"sweep-{k}-{s}",
                    side="sim",
                    family=family,
                    task_id=inst.task_id,
                    seed=self.protocol.base_seed + 1000 * k + s,
                    drift_name="nominal" if arm is None else arm.drift_name,
                    drift={} if arm is None else dict(arm.drift),
                    engine=self.engine,
                    policy=policy,
                    target_quality=inst.target_quality,
                )
                out.append(self.run(spec, proto, max_steps=self.max_steps).episode)
        return out


def knob_effect(
    engine: str,
    arm: Arm,
    episodes: Sequence[Any],
    control: Sequence[Any],
    policy: str,
    rng: np.random.Generator,
    level: float,
) -> KnobEffect:
    """The paired effect of one arm's episodes against the control arm's (same order)."""
    nominal_q = np.array([e.quality for e in control])
    nominal_z = np.array([e.success for e in control])
    q = np.array([e.quality for e in episodes])
    z = np.array([e.success for e in episodes])
    a = int(np.sum(z & nominal_z))
    b = int(np.sum(z & ~nominal_z))
    c = int(np.sum(~z & nominal_z))
    d = int(np.sum(~z & ~nominal_z))
    changed = int(np.sum((z != nominal_z) | (np.abs(q - nominal_q) > INERT_QUALITY)))
    return KnobEffect(
        engine=engine,
        knob=arm.knob,
        setting=arm.setting,
        n=len(q),
        success_nominal=float(nominal_z.mean()),
        success_perturbed=float(z.mean()),
        success_change=paired_gap_interval(a, b, c, d, level),
        quality_change=paired_quality_change(q, nominal_q, rng, level),
        changed_pairs=changed,
        inert=changed == 0,
        policy=policy,
        camera=arm.camera,
    )


def run_sweep(
    protocol: Protocol,
    *,
    engines: Sequence[str] | None = None,
    instances_per_family: int = 2,
    seeds: int = 1,
    max_steps: int | None = None,
    progress: Callable[[str], None] | None = None,
    camera_policy: str | None = None,
) -> SweepResult:
    """Run the paired sweep (see the module docstring).

    Args:
        protocol: the protocol whose declared knobs are swept.
        engines: sim engines to sweep (default: the protocol's).
        instances_per_family: the first this many instances of each family are run.
        seeds: seeds per instance (seed k of an instance is the same in every arm).
        max_steps: control steps per episode (default: the protocol's).
        progress: called with a short line after each arm.
        camera_policy: the policy the CAMERA_KNOBS arms run (default: the engine's registered
            camera reference policy, else the protocol's policy).
    Returns:
        the effects, the reference success per family (protocol DR, nominal drift), warnings.
    """
    if instances_per_family < 1 or seeds < 1:
        raise EvalError("sensitivity: need at least one instance per family and one seed")
    chosen = list(engines or protocol.engines)
    for engine in chosen:
        if engine not in SIM_ENGINES:
            raise EvalError(
                f"engine: {engine!r} is not a sim engine ({', '.join(sorted(SIM_ENGINES))})",
                key="engine",
            )
    rows = [
        (family, inst)
        for family, insts in protocol.families.items()
        for inst in insts[:instances_per_family]
    ]
    arms = sweep_arms(protocol)
    rng = np.random.default_rng(protocol.base_seed)
    level = protocol.confidence
    effects: list[KnobEffect] = []
    reference: dict[tuple[str, str], tuple[int, int]] = {}
    warnings: list[str] = []
    for engine in chosen:
        run = lookup(SIM_ENGINES, engine, "engine")
        policies = {
            False: protocol.sim_policy,
            True: camera_policy or CAMERA_POLICIES.get(SIM_ENGINES[engine], protocol.sim_policy),
        }
        sweep = _EngineSweep(protocol, engine, run, rows, seeds, max_steps)
        controls: dict[bool, list[Any]] = {False: sweep.play(None, policies[False])}
        under_dr = controls[False]  # the reference condition: the protocol's DR, nominal drift
        for arm in arms:
            policy = policies[arm.camera]
            if arm.camera not in controls:  # the camera policy's own nominal arm
                controls[arm.camera] = sweep.play(None, policy)
            episodes = sweep.play(arm, policy)
            if arm.knob == "randomization":
                under_dr = episodes
            effect = knob_effect(engine, arm, episodes, controls[arm.camera], policy, rng, level)
            effects.append(effect)
            if progress is not None:
                progress(
                    f"{engine} {arm.knob} {arm.setting}: {effect.changed_pairs}/{effect.n} "
                    "pairs changed"
                )
        for family in protocol.families:
            wins = [e.success for e in under_dr if e.family == family]
            reference[(engine, family)] = (int(sum(wins)), len(wins))
    by_knob: dict[tuple[str, str], list[KnobEffect]] = {}
    for eff in effects:
        by_knob.setdefault((eff.engine, eff.knob), []).append(eff)
    for (engine, knob), group in sorted(by_knob.items()):
        if all(e.inert for e in group):
            warnings.append(
                f"inert: {knob} changes nothing on {engine} at any declared setting "
                f"({', '.join(e.setting for e in group)}); widen its range or drop it"
            )
    warnings.extend(saturation_warnings(reference))
    return SweepResult(tuple(effects), reference, tuple(warnings))


def sweep_table(result: SweepResult) -> list[str]:
    """Lines of a plain-text table of a sweep (what `protocol check --sensitivity` prints)."""
    lines = [
        f"{'engine':9s} {'knob':28s} {'setting':16s} {'n':>3s} {'success nom→pert':>17s} "
        f"{'Δ success [CI]':>24s} {'Δ quality [CI]':>26s} changed"
    ]
    for e in result.effects:
        ds, dq = e.success_change, e.quality_change
        lines.append(
            f"{e.engine:9s} {e.knob:28s} {e.setting:16s} {e.n:3d} "
            f"{e.success_nominal:7.2f} → {e.success_perturbed:5.2f}   "
            f"{ds.value:+.2f} [{_fmt(ds.low)}, {_fmt(ds.high)}]      "
            f"{dq.value:+.3f} [{_fmt(dq.low, 3)}, {_fmt(dq.high, 3)}]   "
            f"{e.changed_pairs}/{e.n}{'  INERT' if e.inert else ''}"
            + (f"  (camera policy {e.policy})" if e.camera else "")
        )
    lines.append("reference success under the protocol's randomization (nominal drift):")
    for (engine, family), (wins, n) in sorted(result.reference_success.items()):
        lines.append(f"  {engine:9s} {family:12s} {wins}/{n} = {wins / n:.2f}")
    lines.extend(f"warning: {w}" for w in result.warnings)
    return lines


def _fmt(x: float | None, places: int = 2) -> str:
    return "n/a" if x is None else f"{x:+.{places}f}"
