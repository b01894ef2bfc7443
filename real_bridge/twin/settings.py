"""Settings of the twin robot: its reality gap, its safety monitors and its ROS timing.

The twin is the stand-in for a physical robot in tests and the demo: a plain ros2_control-like
robot that follows trajectories and streams state, wrench, an object tracker and a camera from
its own physics. Its *reality gap* (`TwinGap`) makes that physics deliberately different from
the simulator the sim side uses — contact model and friction, masses and payload, servo gains,
actuator delay and bandwidth, sensor, tracker and camera noise — on top of whatever drift the
manifest asks for. Its monitors raise protective stops the way a robot's safety controller would.
Nothing here imports rclpy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import BridgeConfig

#: Robot-clock times closer than this are the same instant (float rounding), s: a command is due
#: at a physics step when its due time (an arrival plus a delay) is that step's up to this, the
#: step's time being a sum of steps (exact equality is luck).
SAME_INSTANT_S = 1e-9


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    if not (value >= 0.0 if allow_zero else value > 0.0) or value != value:
        bound = "≥ 0" if allow_zero else "> 0"
        raise EvalError(f"{name}: {value!r} must be {bound}", key=name)


@dataclass(frozen=True)
class TwinGap:
    """How the twin's physics differs from the nominal simulator (fixed for its lifetime).

    Every item is physical, so the sim-to-real gap the metrics see comes out of the data:

    Attributes:
        friction_scale: multiplies object and drawer friction (on top of the manifest's drift).
        contact_timeconst_s: contact softness of the manipulated objects as a solref time
            constant, s: larger is softer. The nominal simulator uses MuJoCo's default 0.02 s;
            the twin's 0.04 s is a 4× softer contact spring. On a PyBullet twin it becomes the
            objects' contact stiffness and damping (`sim_suites.engines.contact_softness`).
            0 keeps each engine's own contacts.
        link_mass_scale: multiplies the arm's link masses (the gravity model does not know).
        object_mass_scale: multiplies the manipulated objects' masses.
        payload_kg: unmodelled mass at the hand, kg.
        actuator_gain_scale / joint_damping_scale: servo stiffness and joint damping offsets.
        actuator_delay_s: delay between a command's arrival and its effect at the joints, s;
            a drift's `latency_steps` and a firmware profile's latency add to it (in control
            periods of the episode's command rate).
        actuator_bandwidth_hz: the joint targets pass a first-order low-pass of this cut-off
            frequency, Hz (0: no filter).
        sensor_noise_std: standard deviation of published joint-position noise, rad.
        object_pose_noise_m: standard deviation of the object-pose "tracker" noise, m.
        tracker_latency_s: the tracker publishes the pose that was true this long ago, stamped
            with the time it was true (a tag tracker's capture-to-publish delay), s.
        tracker_occlusion_radius_m / tracker_occlusion_height_m: the tracker loses the object
            (publishes nothing) while the hand is over it: within this horizontal distance of it
            and from 3 cm up to this high above it, m (radius 0: the hand never hides it from
            above; `real_bridge.twin.tracker`).
        tracker_hidden_when_held: the tracker also loses the object while the hand holds it.
        camera_exposure: gain on the camera's pixel values (1 = as rendered).
        camera_noise_std: standard deviation of per-pixel camera noise, in 0–255 units.
    """

    friction_scale: float = 0.85
    contact_timeconst_s: float = 0.04
    link_mass_scale: float = 1.05
    object_mass_scale: float = 1.10
    payload_kg: float = 0.05
    actuator_gain_scale: float = 0.9
    joint_damping_scale: float = 1.3
    actuator_delay_s: float = 0.02
    actuator_bandwidth_hz: float = 8.0
    sensor_noise_std: float = 0.0005
    object_pose_noise_m: float = 0.002
    tracker_latency_s: float = 0.05
    tracker_occlusion_radius_m: float = 0.04
    tracker_occlusion_height_m: float = 0.10
    tracker_hidden_when_held: bool = True
    camera_exposure: float = 0.8
    camera_noise_std: float = 4.0

    def __post_init__(self) -> None:
        for name in (
            "friction_scale",
            "link_mass_scale",
            "object_mass_scale",
            "actuator_gain_scale",
            "joint_damping_scale",
            "camera_exposure",
        ):
            _positive(name, getattr(self, name))
        for name in (
            "contact_timeconst_s",
            "payload_kg",
            "actuator_delay_s",
            "actuator_bandwidth_hz",
            "sensor_noise_std",
            "object_pose_noise_m",
            "tracker_latency_s",
            "tracker_occlusion_radius_m",
            "tracker_occlusion_height_m",
            "camera_noise_std",
        ):
            _positive(name, getattr(self, name), allow_zero=True)
        if self.actuator_delay_s > 1.0:
            raise EvalError("actuator_delay_s: must be at most 1 s", key="actuator_delay_s")
        if self.tracker_latency_s > 1.0:
            raise EvalError("tracker_latency_s: must be at most 1 s", key="tracker_latency_s")

    @classmethod
    def none(cls) -> TwinGap:
        """No gap at all: the twin behaves like the nominal simulator."""
        return cls(
            friction_scale=1.0,
            contact_timeconst_s=0.0,
            link_mass_scale=1.0,
            object_mass_scale=1.0,
            payload_kg=0.0,
            actuator_gain_scale=1.0,
            joint_damping_scale=1.0,
            actuator_delay_s=0.0,
            actuator_bandwidth_hz=0.0,
            sensor_noise_std=0.0,
            object_pose_noise_m=0.0,
            tracker_latency_s=0.0,
            tracker_occlusion_radius_m=0.0,
            tracker_occlusion_height_m=0.0,
            tracker_hidden_when_held=False,
            camera_exposure=1.0,
            camera_noise_std=0.0,
        )


@dataclass(frozen=True)
class Monitors:
    """The twin's safety controller: the limits of the scene's safety monitor (the sim episode's
    own, `sim_suites.safety_monitors`) and the stop drill.

    Attributes:
        force_limit_n: the net external force on the robot above this raises a protective
            stop, N (the sim's fixture-contact limit).
        speed_limit_mps: TCP speed above this raises a protective stop, m/s (0: the sim's
            limit, `SafetyLimits.tcp_speed_stop_mps`).
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
        gap / monitors: see TwinGap and Monitors.
        state_rate_hz: joint-state (and wrench) publishing rate, Hz.
        time_scale: sim seconds per wall second (1 = real time, what the harness's loop expects).
        seed: the twin's own randomness (sensor noise), combined with each episode's seed.
        engine: physics engine of the twin's simulator.
        faults: fault kinds from the suite's taxonomy to inject in every episode where the task
            family has them (the "real" robot's own faults).
        camera_hz / camera_size: the camera's frame rate (0: no camera) and square image size;
            the object tracker publishes at the camera's rate.
        sim_time: simulated-time mode (`real_bridge.twin.node`): the twin publishes its clock
            on `topics.clock` and, once a harness supervises, advances only as far as the
            harness's heartbeat allows and once the commands it announced are in, so machine
            load cannot move an outcome. `time_scale` then paces only the free-running stretches.
        sim_grace_s: in simulated-time mode, with no heartbeat for this long on the wall clock
            the harness is gone and simulated time runs on (so the deadman trips in simulated
            time), s. Long enough that a loaded machine's live harness is never taken for a gone
            one: with 2 s, a make-test run at load 9 plus two CPU burners once let the twin run
            on while the harness lived, and the same seeds then ended 1e-16 apart.
    """

    bridge: BridgeConfig = field(default_factory=BridgeConfig)
    gap: TwinGap = field(default_factory=TwinGap)
    monitors: Monitors = field(default_factory=Monitors)
    state_rate_hz: float = 500.0
    time_scale: float = 1.0
    seed: int = 0
    engine: str = "mujoco"
    faults: tuple[str, ...] = ()
    camera_hz: float = 30.0
    camera_size: int = 128
    sim_time: bool = False
    sim_grace_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0.1 <= self.sim_grace_s <= 60.0:
            raise EvalError(
                f"sim_grace_s: {self.sim_grace_s!r} is not in 0.1..60", key="sim_grace_s"
            )
        if not 1.0 <= self.state_rate_hz <= 2000.0:
            raise EvalError(
                f"state_rate_hz: {self.state_rate_hz!r} is not in 1..2000", key="state_rate_hz"
            )
        if not 0.05 <= self.time_scale <= 100.0:
            raise EvalError(
                f"time_scale: {self.time_scale!r} is not in 0.05..100", key="time_scale"
            )
        if not 0.0 <= self.camera_hz <= 120.0:
            raise EvalError(f"camera_hz: {self.camera_hz!r} is not in 0..120", key="camera_hz")
        if not 16 <= self.camera_size <= 1024:
            raise EvalError(
                f"camera_size: {self.camera_size!r} is not in 16..1024", key="camera_size"
            )
        from sim_suites.robot_core import FAULT_KINDS

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
