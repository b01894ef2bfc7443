"""`MujocoRobot`: a `real_bridge.robot.Robot` in this process, with no ROS — the twin's physics
(`real_bridge.twin.sim_plant.SimSuitesPlant`: the sim_suites arm the profile's `[robot]
kinematics` names — the Panda, the UR5e — and scenes on MuJoCo with the twin's reality gap) driven directly and stepped on the robot's own clock.

It behaves as the twin robot process does, minus the transport: commands take effect after the
gap's actuator delay plus the episode's command latency; a heartbeat (the harness's deadman)
beats at `loop.heartbeat_hz` while the harness supervises, and without one for
`deadlines.deadman_s` the robot freezes its set-point and ignores commands (`mode = hold`, time
in `held_at_s`); the twin's safety monitors (contact force, TCP speed, the stop drill) raise a
latched protective stop that holds until the scene is reset; the tracker is the twin's (noisy,
late, blind under the hand) at `camera_hz`; the reset station and the oracle's verdict come from
the plant. Joint states are sampled every physics step (2 ms) with the gap's noise.

The clock is simulated: `now_s()` is the physics time and `sleep(s)` steps the physics for `s`.
So an episode runs faster than real time and every timing is exact and repeatable — the tests of
the episode loop, homing and the checks assert on this clock. The harness's own compute takes no
robot time (the robot waits for it); a stall is modelled by sleeping on the robot's clock.

This is also the example for a lab implementing `Robot` for a LeRobot arm or a vendor SDK: the
methods below are all there is to implement (see "Implementing a robot" in docs/developer.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import SafetyEvent
from real_bridge.bridge_config import BridgeConfig, load_bridge_config, profile_path
from real_bridge.interface import (
    HOLD_TIME_FROM_START_S,
    LEVEL_ERROR,
    LEVEL_OK,
    LEVEL_WARN,
    STOP_KINDS,
    JudgeVerdict,
    manifest_sha256,
    parse_episode_event,
    parse_manifest,
    safety_key_values,
    safety_status_name,
)
from real_bridge.robot import (
    AppliedAction,
    JointCommand,
    Observation,
    SafetyState,
    StreamCounts,
    TrackerPose,
    hold_posture,
)
from real_bridge.safety_state import ROBOT_STATE_STATUS, DiagnosticReading
from real_bridge.twin.settings import SAME_INSTANT_S, Monitors, TwinGap, TwinSettings

if TYPE_CHECKING:
    from sim_suites.robot_core import CommandQueue

#: Name and version of the in-process robot's oracle (its ground truth, as the twin's).
ORACLE_NAME, ORACLE_VERSION = "mujoco-robot-oracle", "1"


class MujocoRobot:
    """The twin's physics as an in-process robot (see the module docstring).

    Args:
        config: the robot profile (default: the twin's); its joints must be its arm's.
        settings: the twin's settings (reality gap, monitors, seed, tracker rate); their
            `bridge` is replaced by `config`.
        answers_for_s: the robot stops sending joint states after this much robot time (None:
            it always answers) — a robot that was lost, for tests of the harness's deadlines.
    """

    engine = "mujoco_robot"

    def __init__(
        self,
        config: BridgeConfig | None = None,
        settings: TwinSettings | None = None,
        *,
        answers_for_s: float | None = None,
    ) -> None:
        self.config = config or load_bridge_config(profile_path("twin"))
        self.last_hold_id = ""
        self.settings = (settings or TwinSettings()).replace(bridge=self.config)
        self.answers_for_s = answers_for_s
        self.plant: Any = None
        self.rng = np.random.default_rng(self.settings.seed)
        self._steps = 0
        self._dt = 0.0
        self._connected = False
        self._beating = False
        self.last_heartbeat_s: float | None = None
        self._next_beat_s = 0.0
        #: "follow", "hold" (deadman) or "stopped" (a latched protective stop).
        self.mode = "follow"
        #: Robot time the deadman hold began (None before one).
        self.held_at_s: float | None = None
        self._latched: dict[str, tuple[str, list[tuple[str, str]], str]] = {}
        # (apply at, kind, command id, positions, duration), robot seconds.
        from sim_suites.robot_core import CommandQueue

        self._pending: CommandQueue[tuple[str, str, np.ndarray, float]] = CommandQueue()
        self._applied: dict[str, AppliedAction] = {}
        #: Every command received: (robot time, command id, arm targets or None, duration).
        self.commands: list[tuple[float, str, np.ndarray | None, float]] = []
        self.commands_ignored = 0
        self._arm_command: np.ndarray | None = None
        self._ids = 0
        self._readings: list[DiagnosticReading] = []
        self._verdicts: list[tuple[str, float]] = []
        self.episode_id = ""
        self._episode_started_s: float | None = None
        self._obs: Observation | None = None
        self._obs_step = -1
        self._pose: TrackerPose | None = None
        self._next_pose_s = 0.0
        self._states = 0
        self._peak_force_n = 0.0
        self.tracker: Any = None

    # ------------------------------------------------------------------ connection

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        """Build the plant (once) and start the heartbeat."""
        if self._connected:
            return
        if self.plant is None:
            from real_bridge.twin.sim_plant import SimSuitesPlant
            from real_bridge.twin.tracker import TrackerSensor

            arm = self.config.robot.arm_joints
            self.plant = SimSuitesPlant(self.settings)
            if tuple(arm) != tuple(self.plant.arm_joints):
                raise EvalError(
                    f"the in-process MuJoCo robot is the arm {self.plant.robot!r}: the profile's "
                    f"robot.arm_joints must be {', '.join(self.plant.arm_joints)}",
                    key="robot.arm_joints",
                )
            self._dt = float(self.plant.physics_dt_s)
            self.tracker = TrackerSensor(self.settings.gap)
        self._connected = True
        self.start_heartbeat()

    def disconnect(self) -> None:
        """Stop supervising: the robot holds on its deadman once `deadman_s` passes."""
        self.stop_heartbeat()
        self._connected = False

    def close(self) -> None:
        """Release the simulator."""
        self.disconnect()
        if self.plant is not None:
            self.plant.close()
            self.plant = None

    def __enter__(self) -> MujocoRobot:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def start_heartbeat(self) -> None:
        """The harness supervises: a heartbeat every 1 / `loop.heartbeat_hz` of robot time."""
        if not self._beating:
            self._beating = True
            self._next_beat_s = self.now_s()

    def stop_heartbeat(self) -> None:
        """The harness stops supervising (as when its process dies)."""
        self._beating = False

    # ------------------------------------------------------------------ the clock

    def now_s(self) -> float:
        return self._steps * self._dt

    def sleep(self, seconds: float) -> None:
        """Step the physics for `seconds` (at least one step when positive)."""
        if seconds <= 0 or self.plant is None:
            return
        for _ in range(max(1, round(seconds / self._dt))):
            self._step()

    def _step(self) -> None:
        now = self.now_s()
        self._beat(now)
        self._deadman(now)
        for pending in self._pending.due(now):
            self._apply(*pending)
        self.plant.step_physics()
        self._steps += 1
        now = self.now_s()
        if self.answers_for_s is None or now <= self.answers_for_s:
            self._states += 1
            force = float(np.linalg.norm(self.plant.wrench()[:3]))
            if np.isfinite(force):
                self._peak_force_n = max(self._peak_force_n, force)
        for event in self.plant.take_events():
            self._raise(event)
        if not self._latched:
            from real_bridge.twin.monitors import monitor_event

            event = monitor_event(self.settings.monitors, self.plant, self._episode_started_s, now)
            if event is not None:
                self._raise(event)
        self._track(now)

    def _beat(self, now: float) -> None:
        if self._beating and now + SAME_INSTANT_S >= self._next_beat_s:
            self.last_heartbeat_s = now
            self._next_beat_s = now + 1.0 / self.config.loop.heartbeat_hz
            if self.mode == "hold" and not self._latched:
                self.mode = "follow"
                self._status(LEVEL_OK, "follow")

    def _deadman(self, now: float) -> None:
        last = self.last_heartbeat_s
        lost = last is not None and now - last > self.config.deadlines.deadman_s + SAME_INSTANT_S
        if self.mode == "follow" and lost:
            self.mode = "hold"
            self._pending.clear()
            self.plant.hold_here()
            self.held_at_s = now
            self._status(LEVEL_WARN, "hold: heartbeat lost")

    def _track(self, now: float) -> None:
        hz = self.settings.camera_hz
        if hz <= 0 or not self.config.topics.object_pose:
            return
        tcp, holding = self.plant.hand()
        self.tracker.observe(now, round(now * 1e9), self.plant.object_pose(), tcp, holding)
        if now + SAME_INSTANT_S >= self._next_pose_s:
            self._next_pose_s = now + 1.0 / hz
            reading = self.tracker.reading(now, self.rng)
            if reading is not None:
                self._pose = TrackerPose(now, reading.position, reading.quat)

    # ------------------------------------------------------------------ sensing

    def get_observation(self) -> Observation | None:
        if self.plant is None:
            return None
        answering = self.answers_for_s is None or self.now_s() <= self.answers_for_s
        if self._obs is not None and (self._obs_step == self._steps or not answering):
            return self._obs
        q, qd, tau = self.plant.joint_state()
        noise = self.settings.gap.sensor_noise_std
        if noise > 0:
            q = q + self.rng.normal(0.0, noise, size=q.shape)
        now = self.now_s()
        self._obs = Observation(
            stamp_s=now,
            received_s=now,
            joint_names=tuple(self.plant.joint_names),
            position=q,
            velocity=qd,
            effort=tau,
            wrench=self.plant.wrench() if self.config.topics.wrench else None,
            object_pose=self._pose,
        )
        self._obs_step = self._steps
        return self._obs

    def stream_counts(self) -> StreamCounts:
        return StreamCounts(self._states, 0, self._peak_force_n)

    def reset_peak_force(self) -> None:
        self._peak_force_n = 0.0

    # ------------------------------------------------------------------ acting

    def send_action(self, command: JointCommand) -> str:
        if not self._connected:
            raise EvalError("the MuJoCo robot is not connected (call connect() first)", key="robot")
        self._ids += 1
        command_id = f"cmd/{self._ids}"
        now = self.now_s()
        self.commands.append((now, command_id, command.positions, command.duration_s))
        if command.positions is not None:
            self._arm_command = np.array(command.positions, dtype=float)
        supervised = self.last_heartbeat_s is not None and (
            now - self.last_heartbeat_s <= self.config.deadlines.deadman_s + SAME_INSTANT_S
        )
        if self.mode != "follow" or not supervised:
            self.commands_ignored += 1
            return command_id
        delay = self.settings.gap.actuator_delay_s + self.plant.command_latency_s
        if command.positions is not None:
            arm = np.asarray(command.positions, dtype=float)
            self._pending.push(now + delay, ("arm", command_id, arm, command.duration_s))
        if command.gripper_m is not None and self.config.topics.gripper_command:
            finger = np.array([command.gripper_m])
            self._pending.push(now + delay, ("gripper", command_id, finger, command.duration_s))
        return command_id

    def _apply(self, kind: str, command_id: str, positions: np.ndarray, duration: float) -> None:
        if kind == "arm":
            applied = self.plant.set_arm_target(positions, duration)
            names = tuple(self.plant.arm_joints)
            self._applied[command_id] = AppliedAction(names, applied, self.now_s())
        else:
            self.plant.set_finger_target(float(positions[0]))

    def applied(self, command_id: str) -> AppliedAction | None:
        return self._applied.get(command_id)

    def commanded(self) -> np.ndarray | None:
        return self._arm_command

    def hold(self) -> str:
        """As the ROS 2 robot's hold: the measured posture over HOLD_TIME_FROM_START_S."""
        posture, note = hold_posture(self)
        if posture is None:
            return note
        self.last_hold_id = self.send_action(JointCommand(posture, HOLD_TIME_FROM_START_S))
        return ""

    # ------------------------------------------------------------------ safety

    def _raise(self, event: SafetyEvent) -> None:
        name = safety_status_name(event.kind)
        event_id = uuid.UUID(bytes=self.rng.bytes(16)).hex[:12]
        values = safety_key_values(event, episode_id=self.episode_id, event_id=event_id)
        stop = event.kind in STOP_KINDS
        message = event.detail or event.kind
        self._reading(name, LEVEL_ERROR if stop else LEVEL_WARN, message, values)
        if stop:
            self._latched[name] = (event_id, values, message)
            self.mode = "stopped"
            self._pending.clear()
            self.plant.hold_here()

    def _reading(self, name: str, level: int, message: str, values: list[tuple[str, str]]) -> None:
        self._readings.append(DiagnosticReading(self.now_s(), name, level, message, tuple(values)))

    def _status(self, level: int, message: str) -> None:
        values = [("mode", self.mode), ("episode_id", self.episode_id)]
        if self.held_at_s is not None:
            values.append(("held_at_s", repr(self.held_at_s)))
        if self.last_heartbeat_s is not None:
            values.append(("last_heartbeat_s", repr(self.last_heartbeat_s)))
        self._reading(ROBOT_STATE_STATUS, level, message, values)

    def safety_readings(self, since: int) -> tuple[list[DiagnosticReading], int]:
        return self._readings[since:], len(self._readings)

    def safety_state(self) -> SafetyState:
        return SafetyState(
            enabled=True,
            protective_stop=safety_status_name("protective_stop") in self._latched,
            emergency_stop=safety_status_name("emergency_stop") in self._latched,
            deadman_hold=self.mode == "hold",
            active=tuple(sorted(self._latched)),
        )

    # ------------------------------------------------------------------ the scene station

    def reset_scene(self, manifest: Mapping[str, Any], timeout_s: float) -> tuple[bool, str]:
        """The reset station: the plant sets the scene of the manifest up (at once)."""
        try:
            spec, data = parse_manifest(canonical_json(dict(manifest)))
            self.plant.reset_scene(spec, data)
        except EvalError as exc:
            return False, f"reset failed: {exc}"
        self._pending.clear()
        self._arm_command = None
        self.tracker.reset()
        self._pose = None
        if self._latched:
            for name in self._latched:
                self._reading(name, LEVEL_OK, "cleared by reset", [])
            self._latched.clear()
        if self.mode == "stopped":
            self.mode = "follow"
        self.rng = np.random.default_rng([self.settings.seed, spec.seed & 0xFFFFFFFF])
        self._obs_step = -1
        return True, json.dumps(
            {"episode_id": spec.episode_id, "manifest_sha256": manifest_sha256(data)}
        )

    def announce(self, event: str) -> None:
        parsed = parse_episode_event(event)
        if parsed is None:
            return
        if parsed["phase"] == "started":
            self.episode_id = parsed["episode_id"]
            self._episode_started_s = self.now_s()
            return
        self._episode_started_s = None
        target = float(parsed.get("target_quality", 0.8))
        quality, success, detail = self.plant.oracle(target)
        verdict = JudgeVerdict(
            parsed["episode_id"], "oracle", ORACLE_NAME, ORACLE_VERSION, quality, success,
            f"the in-process robot's ground truth: {detail}",
        )
        self._verdicts.append((verdict.to_json(), self.now_s()))

    def verdicts_for(self, episode_id: str) -> list[tuple[str, float]]:
        return [(t, s) for t, s in self._verdicts if json.loads(t)["episode_id"] == episode_id]


#: Options of the "mujoco" robot backend (besides the robot profile's: see `mujoco_backend`).
TWIN_OPTIONS = ("seed", "gap", "stop_at_s", "force_limit_n")


def mujoco_backend(protocol: Protocol | None = None, **options: Any) -> Any:
    """The "mujoco" robot backend: episodes on an in-process `MujocoRobot`
    (`real_bridge.episodes.EpisodeBackend`).

    Options: `profile` / `config_path` / `config` / `max_steps` / `judge` as for the ros2 backend
    (default profile: twin); `seed` (the robot's own randomness), `gap` ("default" or "none": the
    twin's reality gap or the nominal simulator), `stop_at_s` (a protective-stop drill that long
    into each episode, s) and `force_limit_n` (the contact-force monitor's limit, N).
    """
    from real_bridge.episodes import EpisodeBackend
    from real_bridge.ros2_backend import OPTIONS, bridge_config_from_options, with_protocol_profile

    known = set(OPTIONS) | set(TWIN_OPTIONS)
    unknown = sorted(set(options) - known)
    if unknown:
        raise EvalError(
            f"mujoco backend: unknown option {unknown[0]!r} (known: {', '.join(sorted(known))})",
            key=unknown[0],
        )
    twin = {k: options.pop(k) for k in TWIN_OPTIONS if k in options}
    prompter = options.pop("prompter", None)
    config = bridge_config_from_options(with_protocol_profile(options, protocol))
    gap_name = str(twin.get("gap", "default"))
    if gap_name not in ("default", "none"):
        raise EvalError(f"gap: {gap_name!r} is not 'default' or 'none'", key="gap")
    try:
        monitors = Monitors(
            force_limit_n=float(twin.get("force_limit_n", Monitors.force_limit_n)),
            stop_at_s=float(twin.get("stop_at_s", 0.0)),
        )
        seed = int(twin.get("seed", 0))
    except (TypeError, ValueError):
        raise EvalError("seed / stop_at_s / force_limit_n: expected numbers", key="seed") from None
    settings = TwinSettings(
        gap=TwinGap.none() if gap_name == "none" else TwinGap(),
        monitors=monitors,
        seed=seed,
    )
    return EpisodeBackend(lambda: MujocoRobot(config, settings), protocol, prompter)
