"""Settings of the twin robot: its reality gap, its safety monitors and its ROS timing.

The twin is the stand-in for a physical robot in tests and the demo. Its *reality gap* makes it
deliberately different from the simulator the sim side uses: scaled friction and link masses, an
unmodelled payload, actuator delay and joint-sensor noise, all applied on top of whatever drift
the manifest asks for. Its monitors raise protective stops the way a robot's safety controller
would. Nothing here imports rclpy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import BridgeConfig


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    if not (value >= 0.0 if allow_zero else value > 0.0) or value != value:
        bound = "≥ 0" if allow_zero else "> 0"
        raise EvalError(f"{name}: {value!r} must be {bound}", key=name)


@dataclass(frozen=True)
class RealityGap:
    """How the twin differs from the nominal simulator (fixed for the twin's lifetime).

    Attributes:
        friction_scale: multiplies object and drawer friction (on top of the manifest's drift).
        link_mass_scale: multiplies the arm's link masses (a mass offset the controller's
            gravity model does not know about).
        object_mass_scale: multiplies the manipulated objects' masses.
        payload_kg: unmodelled mass at the hand, kg (added to the drift's payload).
        actuator_delay_s: delay between a command and its effect at the joints, s (the policy's
            actions are delayed by this rounded to whole control steps of 20 ms).
        sensor_noise_std: standard deviation of joint-position noise, rad (published states
            and what the twin's policy observes).
    """

    friction_scale: float = 0.85
    link_mass_scale: float = 1.05
    object_mass_scale: float = 1.10
    payload_kg: float = 0.05
    actuator_delay_s: float = 0.02
    sensor_noise_std: float = 0.0005

    def __post_init__(self) -> None:
        for name in ("friction_scale", "link_mass_scale", "object_mass_scale"):
            _positive(name, getattr(self, name))
        for name in ("payload_kg", "actuator_delay_s", "sensor_noise_std"):
            _positive(name, getattr(self, name), allow_zero=True)
        if self.actuator_delay_s > 1.0:
            raise EvalError("actuator_delay_s: must be at most 1 s", key="actuator_delay_s")

    @classmethod
    def none(cls) -> RealityGap:
        """No gap at all: the twin behaves like the nominal simulator."""
        return cls(1.0, 1.0, 1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Monitors:
    """The twin's own safety monitors (its "safety controller").

    Attributes:
        force_limit_n: contact force at the robot above this raises a protective stop, N.
        speed_limit_mps: TCP speed above this raises a protective stop, m/s (0 disables).
        stop_at_s: raise a protective stop this long after start, s (0 disables; for drills
            and tests of the stop path).
    """

    force_limit_n: float = 150.0
    speed_limit_mps: float = 0.0
    stop_at_s: float = 0.0

    def __post_init__(self) -> None:
        _positive("force_limit_n", self.force_limit_n)
        _positive("speed_limit_mps", self.speed_limit_mps, allow_zero=True)
        _positive("stop_at_s", self.stop_at_s, allow_zero=True)


@dataclass(frozen=True)
class TwinSettings:
    """Everything the twin process needs.

    Attributes:
        bridge: names, QoS and domain of the interface it serves (the bridge's own config, so the
            two always agree).
        gap / monitors: see RealityGap and Monitors.
        state_rate_hz: joint-state (and wrench) publishing rate, Hz.
        time_scale: sim seconds per wall second (1 = real time; >1 runs faster, for tests).
        seed: the twin's own randomness (sensor noise), combined with each episode's seed.
        engine: physics engine of the twin's simulator.
        hang_after_s: stop answering (no state, no services) this long after an episode starts,
            without exiting — simulates a robot that freezes (0 disables).
        faults: fault kinds from the suite's taxonomy to inject in every episode where the task
            family has them (the "real" robot's own faults).
    """

    bridge: BridgeConfig = field(default_factory=BridgeConfig)
    gap: RealityGap = field(default_factory=RealityGap)
    monitors: Monitors = field(default_factory=Monitors)
    state_rate_hz: float = 500.0
    time_scale: float = 1.0
    seed: int = 0
    engine: str = "mujoco"
    hang_after_s: float = 0.0
    faults: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1.0 <= self.state_rate_hz <= 2000.0:
            raise EvalError(
                f"state_rate_hz: {self.state_rate_hz!r} is not in 1..2000", key="state_rate_hz"
            )
        if not 0.05 <= self.time_scale <= 100.0:
            raise EvalError(
                f"time_scale: {self.time_scale!r} is not in 0.05..100", key="time_scale"
            )
        _positive("hang_after_s", self.hang_after_s, allow_zero=True)
        from sim_suites.faults import FAULT_KINDS

        for kind in self.faults:
            if kind not in FAULT_KINDS:
                raise EvalError(
                    f"faults: {kind!r} is not in the fault taxonomy ({', '.join(FAULT_KINDS)})",
                    key="faults",
                )
        if self.engine not in ("mujoco", "pybullet"):
            raise EvalError(f"engine: {self.engine!r} is not mujoco or pybullet", key="engine")

    def replace(self, **changes: Any) -> TwinSettings:
        return dataclasses.replace(self, **changes)
