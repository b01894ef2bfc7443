"""Registries that let `embodied_eval` reach simulators, robots and the incident log.

`embodied_eval` never imports `sim_suites`, `real_bridge` or `incident_logging` at module top
level (they depend on it, not the other way round). It names what it needs as "module:attribute"
strings here and resolves them when called, so a lab can register its own robot backend or sim
engine without touching the harness.
"""

from __future__ import annotations

import importlib
from typing import Any

from embodied_eval.errors import EvalError

#: Sim engines by name: a callable running one episode (see `sim_suites.episode.run_episode`),
#: called as `engine(spec, protocol, max_steps=..., record_dir=..., started_at=ISO time)`.
SIM_ENGINES: dict[str, str] = {
    "mujoco": "sim_suites.episode:run_episode",
    "pybullet": "sim_suites.episode:run_episode",
    "metaworld": "sim_suites.suites.meta_world:run_episode",
    "libero": "sim_suites.suites.libero_suite:run_episode",
}

#: Sim engines that are standard benchmark suites run through their own packages: their tasks
#: exist only in simulation, so a protocol using one has no real side.
SUITE_ENGINES: frozenset[str] = frozenset({"metaworld", "libero"})

#: Checks that a suite's package is installed and imports, run before anything runs: `check() ->
#: version`, raising an EvalError that names the install command otherwise.
SUITE_CHECKS: dict[str, str] = {
    "metaworld": "sim_suites.suites.meta_world:suite_version",
    "libero": "sim_suites.suites.libero_suite:suite_version",
}

#: Policies a suite bundles, by the name a protocol gives them: "module:factory" of a Gymnasium
#: policy, `factory(env, seed) -> act(observation) -> action`.
SUITE_POLICIES: dict[str, str] = {
    "metaworld:expert": "sim_suites.suites.meta_world:expert_policy",
}

#: Task catalogs of sim engines, by the engine's import target: `catalog() -> {family: [task_id,
#: ...]}`; `protocol check` and `run` refuse instances an engine's catalog does not hold.
TASK_CATALOGS: dict[str, str] = {
    "sim_suites.episode:run_episode": "sim_suites.tasks.catalog:task_catalog",
    "sim_suites.suites.meta_world:run_episode": "sim_suites.suites.meta_world:task_catalog",
    "sim_suites.suites.libero_suite:run_episode": "sim_suites.suites.libero_suite:task_catalog",
}

#: The camera reference policy of each sim engine, by the engine's import target: what the
#: sensitivity sweep runs the knobs that change only camera images with (`CAMERA_KNOBS`).
CAMERA_POLICIES: dict[str, str] = {
    "sim_suites.episode:run_episode": "sim_suites.policies:vision",
}

#: Builds a policy from its name and a task id: `load(name, task_id) -> Policy` (import paths with
#: `?key=value` options, policy server URLs); used by `embodied-eval policy serve`.
POLICY_LOADER = "sim_suites.policies:load_policy"

#: Readers of per-step frames (LeRobot export) from an episode artifact, by artifact kind:
#: `read(episode, path) -> {"time", "action", "obs.<key>": arrays}` (as a sim trajectory `.npz`).
STEP_READERS: dict[str, str] = {
    "mcap": "real_bridge.recording_steps:recorded_steps",
}

#: The measured accuracy of a success detector: `lookup(name, version) -> {counts...} | None`
#: (confusion counts against the twin's oracle, shipped with the detector).
JUDGE_ACCURACY = "real_bridge.judge_accuracy:stored_accuracy"
#: The code hash of a success detector: `code_hash(name, version) -> str` (SHA-256 of its source;
#: "" for a detector the harness does not ship), named in the window's audit records.
DETECTOR_CODE_HASH = "real_bridge.detector:code_hash"
#: Fits a calibration from a window's recorded real episodes (`embodied-eval calibrate`).
CALIBRATE = "real_bridge.calibration.window:calibrate_window"

#: Robot backends for the real side, by name: "ros2" (a ros2_control robot over ROS 2), "mujoco"
#: (the twin's physics in process, no ROS: `real_bridge.mujoco_robot`) and "manual" (a technician
#: enters each episode).
ROBOT_BACKENDS: dict[str, str] = {
    "ros2": "real_bridge.ros2_backend:Ros2Backend",
    "mujoco": "real_bridge.mujoco_robot:mujoco_backend",
    "manual": "real_bridge.manual:ManualBackend",
}
#: The engine recorded on the real episodes of a backend, where it differs from the backend's
#: name ("mujoco" names a simulator; the in-process robot's episodes are real-side episodes).
ROBOT_ENGINES: dict[str, str] = {"mujoco": "mujoco_robot"}

#: Arms by name, for a protocol's `[sim] robot` and a robot profile's `[robot] kinematics`:
#: `factory() -> sim_suites.robot.SerialArm` (kinematics, gravity model, gripper, servo gains).
#: A protocol or profile may also name its own "package.module:factory".
ARMS: dict[str, str] = {
    "panda": "sim_suites.panda_kinematics:panda_kinematics",
    "ur5e": "sim_suites.ur5e_kinematics:ur5e_kinematics",
}

#: Services provided by the incident log.
INCIDENT_LOG: dict[str, str] = {
    "open": "incident_logging.store:IncidentStore",
    "import": "incident_logging.interchange:import_incidents_file",
    "export": "incident_logging.interchange:export_incidents_file",
    "window_incidents": "incident_logging.store:window_incidents",
    "window_exposure": "incident_logging.store:window_exposure",
    "ingest_safety_events": "incident_logging.ingest:ingest_safety_events",
    "check_safety_events": "incident_logging.ingest:check_safety_events",
    "chain_rows": "incident_logging.chain:rows",
    "integrity_state": "incident_logging.store:integrity_state",
    "threshold_table": "incident_logging.thresholds:threshold_table",
}

#: Readers of camera frames in episode recordings, by artifact kind: `read(path, count) ->
#: [(seconds, encoded image bytes)]` (the report's thumbnail strips).
RECORDING_FRAMES: dict[str, str] = {
    "mcap": "real_bridge.recording_frames:camera_frames",
}

#: Extra CLI command groups, by name: a `typer.Typer` each.
CLI_GROUPS: dict[str, str] = {
    "incidents": "incident_logging.cli:incidents_app",
    "keys": "incident_logging.cli:keys_app",
    "twin": "real_bridge.cli:twin_app",
    "trial": "real_bridge.cli:trial_app",
    "robot": "real_bridge.cli:robot_app",
}


def resolve(target: str) -> Any:
    """Import "package.module:attribute" and return the attribute (EvalError if missing).

    Anything after a "?" (keyword options of a policy factory) is ignored here.
    """
    module_name, _, attr = target.partition("?")[0].partition(":")
    if not module_name or not attr:
        raise EvalError(f"{target!r}: expected 'package.module:attribute'", key="import_path")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise EvalError(
            f"{target!r}: module {exc.name!r} is not installed or does not exist", key="import_path"
        ) from None
    try:
        value = module
        for part in attr.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise EvalError(
            f"{target!r}: {module_name} has no attribute {attr!r}", key="import_path"
        ) from None
    return value


def lookup(registry: dict[str, str], name: str, what: str) -> Any:
    """Resolve `name` in `registry`, with an error listing the known names."""
    if name not in registry:
        raise EvalError(f"unknown {what} {name!r} (known: {', '.join(sorted(registry))})", key=what)
    return resolve(registry[name])
