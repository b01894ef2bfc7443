"""The twin's physics: the sim_suites Panda and tasks (`PandaTaskEnv`) with the twin's reality gap.

During an episode the plant runs the manifest's policy on its own environment, one control step
(`env.step`) per control period. The twin publishes at the physics rate, so the environment's
physics backend is wrapped: every physics sub-step of a control step is recorded (joint state,
efforts, contact force), and the twin's ticks then play those samples out one per physics step at
their own simulation times. The policy still decides at the start of each control period from the
state at that time, so nothing is seen before it happens on the twin's clock.

Outside episodes the plant holds a posture (or follows streamed position commands) by stepping the
same backend one physics step per tick, with a gravity feed-forward from the nominal model.

Wrench: the twin has no 6-axis force sensor model. It reports the total normal contact force on
the robot (what its force monitor watches) as `force.z` of the wrench, N; torques are 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec, Fault, SafetyEvent
from real_bridge.twin.plant import PlantResult
from real_bridge.twin.settings import TwinSettings

#: The task the twin shows before the first manifest arrives.
IDLE_TASK = "pick_place/cube_center"


@dataclass
class Sample:
    """The robot's state after one physics step (what one state message carries)."""

    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    contact_n: float
    tcp_speed_mps: float = 0.0
    events: list[SafetyEvent] = field(default_factory=list)
    final: bool = False


class _RecordingBackend:
    """Wraps a sim_suites physics backend: runs `step(..., substeps)` one physics step at a time
    and records a `Sample` after each."""

    def __init__(self, inner: Any, sink: deque[Sample]) -> None:
        self._inner = inner
        self._sink = sink

    def step(self, arm_cmd: np.ndarray, finger_cmd: float, substeps: int) -> None:
        for _ in range(substeps):
            self._inner.step(arm_cmd, finger_cmd, 1)
            self._sink.append(sample_of(self._inner))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def sample_of(backend: Any) -> Sample:
    """The current state of a physics backend as a Sample."""
    q, qd = backend.joint_state()
    contacts = backend.contact_forces()
    robot_n = sum(force for (a, _), force in contacts.items() if a == "robot")
    return Sample(q=q, qd=qd, tau=backend.applied_torque(), contact_n=float(robot_n))


def sim_reality_gap(settings: TwinSettings, control_dt_s: float) -> Any:
    """The sim_suites RealityGap of the twin (actuator delay rounded to whole control steps)."""
    from sim_suites.variations import RealityGap

    gap = settings.gap
    return RealityGap(
        friction_scale=gap.friction_scale,
        object_mass_scale=gap.object_mass_scale,
        link_mass_scale=gap.link_mass_scale,
        payload_kg=gap.payload_kg,
        sensor_noise_std=gap.sensor_noise_std,
        actuator_delay_steps=round(gap.actuator_delay_s / control_dt_s),
    )


class SimSuitesPlant:
    """A `Plant` on `sim_suites.env.PandaTaskEnv` (see the module docstring).

    Args:
        settings: the twin's settings (engine, reality gap, injected faults).
    """

    def __init__(self, settings: TwinSettings) -> None:
        from sim_suites.engines.base import PHYSICS_DT
        from sim_suites.robot import ARM_JOINTS, ARM_KP, FINGER_JOINTS, FINGER_MAX_M

        self.settings = settings
        self.physics_dt_s = float(PHYSICS_DT)
        self.joint_names = tuple(ARM_JOINTS) + tuple(FINGER_JOINTS)
        self._arm_kp = np.asarray(ARM_KP, dtype=float)
        self._finger_max = float(FINGER_MAX_M)
        self.env: Any = None
        self._envs: dict[str, Any] = {}
        self._inner_backends: dict[str, Any] = {}
        self._spec: EpisodeSpec | None = None
        self._policy: Any = None
        self._obs: Any = None
        self._buffer: deque[Sample] = deque()
        self._events: list[SafetyEvent] = []
        self._running = False
        self._result: PlantResult | None = None
        self._hold_q = np.zeros(7)
        self._hold_cmd = np.zeros(7)
        self._hold_finger = self._finger_max
        env = self._build(IDLE_TASK, {"max_steps": 1, "randomization": {}}, None)
        env.reset(seed=settings.seed)
        self._current = sample_of(self._inner_backend)
        self._hold_here()

    # ------------------------------------------------------------------ episode setup

    def _build(self, task_id: str, manifest: Mapping[str, Any], spec: EpisodeSpec | None) -> Any:
        from sim_suites.env import PandaTaskEnv
        from sim_suites.variations import NOMINAL_CONTROL_RATE_HZ

        faults = []
        if spec is not None:
            from sim_suites.tasks import make_task

            applicable = make_task(task_id).faults
            faults = [f for f in self.settings.faults if f in applicable]
        kwargs: dict[str, Any] = {
            "randomization": {k: tuple(v) for k, v in manifest.get("randomization", {}).items()},
            "drift": dict(spec.drift) if spec is not None else {},
            "reality_gap": sim_reality_gap(self.settings, 1.0 / NOMINAL_CONTROL_RATE_HZ),
            "faults": faults,
            "max_steps": int(manifest.get("max_steps", 400)),
            "target_quality": spec.target_quality if spec is not None else None,
        }
        tol = manifest.get("qc_tolerance")
        if tol:
            kwargs["qc_tolerance_m"] = float(tol)
        env = self._envs.get(task_id)
        if env is None:  # one simulator per task, kept: switching tasks must not stall the twin
            env = PandaTaskEnv(task_id, self.settings.engine, **kwargs)
            self._inner_backends[task_id] = env.backend
            env.backend = _RecordingBackend(env.backend, self._buffer)
            self._envs[task_id] = env
        else:
            env.configure(**kwargs)
        self.env = env
        self._inner_backend = self._inner_backends[task_id]
        return env

    def reset(self, spec: EpisodeSpec, manifest: Mapping[str, Any]) -> None:
        from sim_suites.policies import load_policy

        self._running = False
        self._result = None
        self._buffer.clear()
        self._events.clear()
        self._build(spec.task_id, manifest, spec)
        self._obs, _ = self.env.reset(seed=spec.seed)
        self._buffer.clear()
        self._policy = load_policy(spec.policy, spec.task_id)
        self._policy.reset(spec.seed)
        self._spec = spec
        self._current = sample_of(self._inner_backend)
        self._hold_here()

    def start(self) -> None:
        if self._spec is None:
            raise EvalError("start: no episode was reset")
        self._running = True

    # ------------------------------------------------------------------ stepping

    def step_physics(self) -> None:
        if self._running:
            if not self._buffer:
                self._control_step()
            sample = self._buffer.popleft()
            self._current = sample
            self._events.extend(sample.events)
            if sample.final:
                self._finish()
        else:
            self._inner_backend.step(self._hold_command(), self._hold_finger, 1)
            self._current = sample_of(self._inner_backend)

    def _control_step(self) -> None:
        action = self._policy.act(self._obs)
        self._obs, _, terminated, truncated, info = self.env.step(action)
        if not self._buffer:  # a zero-substep step cannot happen, but never pop an empty queue
            self._buffer.append(sample_of(self._inner_backend))
        speed = float(info.get("tcp_speed_mps", 0.0))
        for sample in self._buffer:  # the env measures speed once per control step
            sample.tcp_speed_mps = speed
        last = self._buffer[-1]
        last.events = list(info.get("safety_events", ()))
        last.final = bool(terminated or truncated)

    def _finish(self) -> None:
        self._running = False
        self._result = self._summary()
        self._buffer.clear()
        self._hold_here()

    def _summary(self, status: str | None = None, reason: str = "") -> PlantResult:
        summary = self.env.episode_summary()
        spec = self._spec
        assert spec is not None
        final_status = status or summary["status"]
        quality = float(summary["quality"])
        faults = tuple(
            f if isinstance(f, Fault) else Fault.from_dict(f) for f in summary.get("faults", ())
        )
        return PlantResult(
            status=final_status,
            quality=min(1.0, max(0.0, quality)),
            success=final_status == "ok" and quality >= spec.target_quality,
            faults=faults,
            actions=int(summary["steps"]),
            steps=int(summary["steps"]),
            energy_wh=float(summary.get("energy_wh", 0.0)),
            qc=summary.get("qc"),
            control=dict(summary.get("control", {})),
            randomization=dict(getattr(self.env, "sampled", {})),
            reason=reason or str(summary.get("status_reason", "")),
        )

    # ------------------------------------------------------------------ holding / following

    def _hold_here(self) -> None:
        q = self._current.q
        self._set_hold(np.array(q[:7], dtype=float))
        self._hold_finger = float(np.clip(q[7], 0.0, self._finger_max))

    def _set_hold(self, q_target: np.ndarray) -> None:
        # Position servos plus the nominal gravity feed-forward at the target, as the env's
        # controller does; computed once per new target (the model's FK is not cheap).
        self._hold_q = q_target
        tau_ff = self.env.kin.gravity_torque(q_target)
        self._hold_cmd = q_target + tau_ff / self._arm_kp

    def _hold_command(self) -> np.ndarray:
        return self._hold_cmd

    def hold(self, positions: np.ndarray) -> np.ndarray:
        kin = self.env.kin
        n = min(positions.size, 9)
        applied = np.array(positions[:n], dtype=float)
        arm = min(n, 7)
        applied[:arm] = np.clip(applied[:arm], kin.lower[:arm], kin.upper[:arm])
        target = self._hold_q.copy()
        target[:arm] = applied[:arm]
        self._set_hold(target)
        if n > 7:
            applied[7:n] = np.clip(applied[7:n], 0.0, self._finger_max)
            self._hold_finger = float(applied[7])
        return applied

    def stop(self, reason: str) -> None:
        if self._running:
            self._running = False
            self._result = self._summary("safety_stop", reason)
            self._buffer.clear()
        self._hold_here()

    @property
    def running(self) -> bool:
        return self._running

    # ------------------------------------------------------------------ readings

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self._current
        return s.q.copy(), s.qd.copy(), s.tau.copy()

    def wrench(self) -> np.ndarray:
        return np.array([0.0, 0.0, self._current.contact_n, 0.0, 0.0, 0.0])

    def tcp_speed_mps(self) -> float:
        return self._current.tcp_speed_mps

    def take_events(self) -> list[SafetyEvent]:
        events, self._events = self._events, []
        return events

    def result(self) -> PlantResult | None:
        return self._result

    def close(self) -> None:
        for task_id, env in self._envs.items():
            env.backend = self._inner_backends[task_id]
            env.close()
        self._envs.clear()
        self.env = None
