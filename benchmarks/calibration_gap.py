"""What calibration buys on a twin robot with a known gap, measured.

Starts the twin with a known reality gap (payload 0.4 kg, actuator delay 40 ms, object friction
× 0.7, on top of the twin's fixed joint damping × 1.3; no other gap), runs the reference policy
on the real side over ROS 2 with recording (`--real` episodes cycling over one instance of each
family, seeds 1, 2, …), calibrates from the recordings, then runs the sim half of every pair
(same task and seed) with the nominal simulator and with the calibration. Prints:

- the recovered parameters against the truth, with their 95 % intervals and identifiability;
- the validation residuals before and after;
- per family and overall: real and sim success rates, the paired sim–real outcome agreement and
  S2R (1 − |gap|, Newcombe), before and after;
- PPI++ for the real success rate with `--unpaired` extra sim episodes per family: λ and the
  effective number of real trials, before and after.

Run: .venv/bin/python benchmarks/calibration_gap.py [--real 24] [--unpaired 40] [--steps 400]
     [--twin actuator_gain=0.5 ...] (a gap that changes the sim's outcomes: see docs/technician.md)
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.records import Episode, EpisodeSpec
from embodied_eval.stats.paired import sim_to_real_agreement
from embodied_eval.stats.ppi import ppi_mean, ppi_validity
from embodied_eval.stats.proportions import wilson_bounds
from real_bridge.bridge_config import Deadlines, LoopSettings, load_bridge_config, profile_path
from real_bridge.calibration.fit import calibrate_episodes
from real_bridge.calibration.params import bandwidth_hz
from real_bridge.calibration.recorded import read_recorded_episode
from real_bridge.discovery import domain_id_for_test
from real_bridge.ros2_backend import Ros2Backend
from real_bridge.twin.process import TwinProcess

TASKS = (
    "pick_place/cube_center",
    "push/block_forward",
    "drawer_open/drawer_center",
    "peg_insert/peg_center",
)
#: The twin's gap: these, and no other (the twin's joint damping × 1.3 has no flag: it stays).
TWIN_FLAGS: dict[str, Any] = {
    "payload_kg": 0.4,
    "actuator_delay_s": 0.04,
    "friction_scale": 0.7,
    "link_mass_scale": 1.0,
    "object_mass_scale": 1.0,
    "actuator_bandwidth_hz": 0.0,
    "contact_timeconst_s": 0.0,
    "actuator_gain_scale": 1.0,
    "sensor_noise_std": 0.0005,
}
TRUTH = {
    "payload": 0.4,
    "actuator_delay": 0.04,
    "friction": 0.7,
    "joint_damping": 1.3,
    "actuator_gain": 1.0,
    "actuator_bandwidth": 0.0,
}
#: The twin's flag behind each fitted parameter the benchmark can change with `--twin`.
FLAG_OF = {
    "payload": "payload_kg",
    "actuator_delay": "actuator_delay_s",
    "friction": "friction_scale",
    "actuator_gain": "actuator_gain_scale",
    "actuator_bandwidth": "actuator_bandwidth_hz",
}
PARAMS = ["payload", "actuator_delay", "actuator_gain", "actuator_bandwidth", "joint_damping",
          "friction"]  # fmt: skip


def spec(i: int, side: str, engine: str, offset: int = 0) -> EpisodeSpec:
    task = TASKS[i % len(TASKS)]
    pair = f"gap-{i + offset}"
    return EpisodeSpec(
        episode_id=f"{pair}-{side}-{engine}-a1", pair_id=pair, side=side,
        family=task.split("/")[0], task_id=task, seed=1 + (i + offset) // len(TASKS),
        drift_name="nominal", engine=engine,
    )  # fmt: skip


def success(ep: Episode) -> int:
    return int(ep.status == "ok" and ep.quality >= ep.target_quality)


def run_real(n: int, steps: int, record_dir: Path) -> list[Episode]:
    # The twin on its simulated clock: real outcomes come from the gap, not this machine's load.
    config = load_bridge_config(profile_path("twin_sim")).replace(
        domain_id=domain_id_for_test(77),
        deadlines=Deadlines(discovery_s=20.0, service_s=5.0, state_stale_s=1.0, judge_s=5.0),
        loop=LoopSettings(judge="oracle", max_steps=steps, use_sim_time=True),
    )
    out = []
    flags = {**TWIN_FLAGS, "sim_time": True}
    with TwinProcess(config.domain_id, **flags), Ros2Backend(None, config=config) as robot:
        for i in range(n):
            ep = robot.run_episode(spec(i, "real", "ros2"), None, record_dir).episode
            out.append(ep)
            print(f"  real {ep.episode_id}: {ep.status} q={ep.quality:.2f}", flush=True)
    return out


def run_sim(specs: list[EpisodeSpec], steps: int, gap: Any) -> list[Episode]:
    from sim_suites.episode import run_episode

    return [run_episode(s, None, max_steps=steps, reality_gap=gap).episode for s in specs]


def agreement_rows(real: list[Episode], sim: list[Episode]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r, s in zip(real, sim, strict=True):
        groups[r.family].append((success(s), success(r)))
        groups["all"].append((success(s), success(r)))
    rows = {}
    for family, pairs in groups.items():
        a = sum(1 for s, r in pairs if s and r)
        b = sum(1 for s, r in pairs if s and not r)
        c = sum(1 for s, r in pairs if r and not s)
        d = sum(1 for s, r in pairs if not s and not r)
        s2r = sim_to_real_agreement(a, b, c, d)
        rows[family] = {
            "n": len(pairs), "real": (a + c) / len(pairs), "sim": (a + b) / len(pairs),
            "agree": (a + d) / len(pairs), "s2r": s2r.value, "s2r_low": s2r.low,
            "s2r_high": s2r.high,
        }  # fmt: skip
    return rows


def fit_and_report(recs: list[Any], workers: int) -> dict[str, float]:
    """Calibrate from the recordings, print the estimates against the truth and the validation,
    and return the sim reality gap's fields the calibration sets."""
    from embodied_eval.protocol.calibration_file import NOT_MAPPED, SIM_FIELDS

    started = time.monotonic()
    result = calibrate_episodes(recs, PARAMS, workers=workers)
    print(f"calibration: {len(recs)} recordings, {time.monotonic() - started:.0f} s, "
          f"{result.evaluations} replays of the fitting set; set aside (the replay could not "
          f"follow them): {', '.join(result.set_aside) or 'none'}; stretches: "
          f"{', '.join(result.set_aside_stretches) or 'none'}")  # fmt: skip
    print("\n| parameter | truth | estimate | 95 % interval | truth inside | design effect | "
          "identified | partner |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, e in result.estimates.items():
        value, low, high, truth = e.value, e.low, e.high, TRUTH[name]
        if name == "actuator_bandwidth":  # shown as a bandwidth, Hz (∞ = unfiltered)
            value, low, high, truth = (bandwidth_hz(e.value), bandwidth_hz(e.high),
                                       bandwidth_hz(e.low), truth or math.inf)  # fmt: skip
        partner = f"{e.partner} ({e.correlation:+.2f})" if e.partner else "—"
        inside = "yes" if low <= truth <= high else "no"
        print(f"| {name} | {truth:g} | {value:.4g} | [{low:.4g}, {high:.4g}] | {inside} | "
              f"{e.design_effect:.2f} | {'yes' if e.identified else 'no: ' + e.reason} | "
              f"{partner} |")  # fmt: skip
    methods = sorted({e.method for e in result.estimates.values() if e.method})
    print(f"intervals: {'; '.join(methods)}")
    print(f"\nvalidation ({len(result.validation)} episodes): joints "
          f"{result.before['joint_rms_mrad']:.2f} → {result.after['joint_rms_mrad']:.2f} mrad RMS, "
          f"object {result.before['object_rms_mm']:.2f} → {result.after['object_rms_mm']:.2f} mm"
          " RMS")  # fmt: skip
    # As a calibration file applies them to the sim half: the delay in seconds, the fitted time
    # constant as its bandwidth (an unfiltered actuator, τ = 0, leaves the sim unfiltered).
    fields: dict[str, float] = {}
    for n, v in result.values.items():
        est = result.estimates.get(n)
        if n not in SIM_FIELDS or est is None or not est.identified:
            continue
        value = bandwidth_hz(v) if n == "actuator_bandwidth" else v
        if math.isfinite(value):
            fields[SIM_FIELDS[n]] = value
    print(f"sim reality gap from the calibration: {fields}; not in sim: {sorted(NOT_MAPPED)}")
    return fields


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=int, default=24)
    parser.add_argument("--unpaired", type=int, default=40)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--reuse",
        default="",
        help="folder of an earlier run: its recordings and real episodes, and its calibration "
        "(calibration.json) when that run got as far",
    )
    parser.add_argument(
        "--twin",
        action="append",
        default=[],
        metavar="PARAM=VALUE",
        help=f"change the known gap: one of {', '.join(FLAG_OF)} (bandwidth in Hz, 0: none); "
        "e.g. --twin actuator_gain=0.5 for a servo at half its stiffness",
    )
    args = parser.parse_args()
    for item in args.twin:
        name, _, value = item.partition("=")
        if name not in FLAG_OF or not value:
            parser.error(f"--twin {item!r}: expected PARAM=VALUE with PARAM one of {list(FLAG_OF)}")
        TWIN_FLAGS[FLAG_OF[name]] = TRUTH[name] = float(value)
    print(f"the twin's known gap: {TWIN_FLAGS} (joint damping × 1.3 besides)")
    from sim_suites.variations import RealityGap

    if args.reuse:
        lines = (Path(args.reuse) / "real.jsonl").read_text().splitlines()
        real = [Episode.from_json(line) for line in lines]
        print(f"real side: {len(real)} episodes of {args.reuse}")
    else:
        record_dir = Path(tempfile.mkdtemp(prefix="calibration-gap-"))
        started = time.monotonic()
        real = run_real(args.real, args.steps, record_dir)
        (record_dir / "real.jsonl").write_text("".join(e.to_json() + "\n" for e in real))
        print(f"real side: {len(real)} episodes in {time.monotonic() - started:.0f} s "
              f"(kept in {record_dir})")  # fmt: skip
    aborted = [ep.episode_id for ep in real if ep.status == "aborted"]
    if aborted:  # the harness aborted them before they started: nothing to replay
        print(f"not calibrated from (aborted before they started): {', '.join(aborted)}")
    recs = [read_recorded_episode(ep, {}) for ep in real if ep.artifacts and ep.status != "aborted"]
    print(f"recordings: {sum(r.not_applied for r in recs)} commands the robot never applied "
          f"(left out), {sum(len(r.holds_s) for r in recs)} holds of its own (replayed), over "
          f"{sum(1 for r in recs if r.not_applied or r.holds_s)} of {len(recs)} episodes")  # fmt: skip
    saved = Path(args.reuse) / "calibration.json" if args.reuse else None
    if saved is not None and saved.exists():  # the earlier run's fit (it can take an hour)
        fields = json.loads(saved.read_text())
        print(f"calibration: the earlier run's ({saved}): {fields}")
    else:
        fields = fit_and_report(recs, args.workers)
        folder = Path(args.reuse) if args.reuse else record_dir
        (folder / "calibration.json").write_text(json.dumps(fields, indent=1))
    gap = RealityGap(**fields)
    paired = [spec(i, "sim", "mujoco") for i in range(len(real))]
    unpaired = [spec(i, "sim", "mujoco", offset=1000) for i in range(args.unpaired * len(TASKS))]
    out: dict[str, Any] = {}
    for label, g in (("before", None), ("after", gap)):
        started = time.monotonic()
        sims = run_sim(paired, args.steps, g)
        extra = run_sim(unpaired, args.steps, g)
        rows = agreement_rows(real, sims)
        y = np.array([success(r) for r in real], dtype=float)
        f = np.array([success(s) for s in sims], dtype=float)
        g_un = np.array([success(s) for s in extra], dtype=float)
        ppi = ppi_mean(y, f, g_un)
        out[label] = (rows, ppi, time.monotonic() - started)
    print("\n| family | n | real AR | sim AR before → after | agreement before → after | "
          "S2R before → after |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for family in out["before"][0]:
        b, a = out["before"][0][family], out["after"][0][family]
        print(
            f"| {family} | {b['n']} | {b['real']:.2f} | {b['sim']:.2f} → {a['sim']:.2f} | "
            f"{b['agree']:.2f} → {a['agree']:.2f} | {b['s2r']:.2f} [{b['s2r_low']:.2f}, "
            f"{b['s2r_high']:.2f}] → {a['s2r']:.2f} [{a['s2r_low']:.2f}, {a['s2r_high']:.2f}] |"
        )
    y = [success(r) for r in real]
    low, high = wilson_bounds(sum(y), len(y))
    for label in ("before", "after"):
        ppi = out[label][1]
        print(
            f"PPI++ {label}: λ = {ppi.lam:.3f}, effective n = {ppi.effective_n:.1f} "
            f"(real pairs {ppi.n_pairs}, sim unpaired {ppi.n_sim}); AR_ppi = "
            f"{ppi.estimate.value:.3f} [{ppi.estimate.low:.3f}, {ppi.estimate.high:.3f}]"
        )
        below = ppi_validity(ppi, y)
        if below:  # what the harness reports then: the real episodes alone
            print(
                f"  below PPI's validity floor ({'; '.join(below)}): the harness reports the "
                f"real AR alone, {sum(y)}/{len(y)} Wilson [{low:.3f}, {high:.3f}]"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
