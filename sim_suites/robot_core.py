"""The simulated-robot core: everything the real side (`real_bridge`) takes from the simulation,
in one declared place.

The real side runs the sim half's command path and safety monitor (`command_path`,
`safety_monitors`), the twin robot's plant is the sim's task environment (`env`, `tasks`,
`variations`, the engines' contact settings), the policy loop's observations are built as the
sim's are (the arm's model, `robot.arm_model`, and `controller`'s gripper rule), and the technician's setup prompt
and the scene detector read the task geometry. `real_bridge` imports `sim_suites` through this
module only (an import-linter contract in `pyproject.toml` holds it to that); the seed split both
halves share is not here but in `embodied_eval.seeds`.
"""

from __future__ import annotations

from sim_suites.command_path import LIMIT_MARGIN, ArmCommandPath, CommandQueue, JointLimits
from sim_suites.controller import grasp_closes, grasp_releases
from sim_suites.engines.base import PHYSICS_DT
from sim_suites.engines.contact_softness import set_contact_softness
from sim_suites.env import PandaTaskEnv
from sim_suites.faults import FAULT_KINDS
from sim_suites.policies import load_policy
from sim_suites.robot import IMPORT_PATH, SerialArm, arm_model, arm_target
from sim_suites.safety_monitors import SafetyLimits
from sim_suites.scenes import scene_ranges, scene_record
from sim_suites.tasks import graded_quality, make_task, task_spec
from sim_suites.variations import DEFAULT_RANDOMIZATION, NOMINAL_CONTROL_RATE_HZ, RealityGap

__all__ = [
    "DEFAULT_RANDOMIZATION",
    "FAULT_KINDS",
    "IMPORT_PATH",
    "LIMIT_MARGIN",
    "NOMINAL_CONTROL_RATE_HZ",
    "PHYSICS_DT",
    "ArmCommandPath",
    "CommandQueue",
    "JointLimits",
    "PandaTaskEnv",
    "RealityGap",
    "SafetyLimits",
    "SerialArm",
    "arm_model",
    "arm_target",
    "graded_quality",
    "grasp_closes",
    "grasp_releases",
    "load_policy",
    "make_task",
    "scene_ranges",
    "scene_record",
    "set_contact_softness",
    "task_spec",
]
