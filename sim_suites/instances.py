"""Drawing one task instance: domain randomization, placement, and no free successes.

An instance whose task is already satisfied at reset (q ≥ q* before the robot moved, e.g. a
placement offset that drops the block on its goal) would be a free success. It is recorded as an
invalid draw (its sampled values are kept) and its scene is drawn again from the scene stream, so the
episode stays reproducible and the invalid draw is never counted.

Knobs that act on the free task part (`object_yaw_rad`, `object_size_scale`) have nothing to act
on in a family whose object is articulated (on a joint, as drawer_open's): they are recorded as
not applied, with the reason (`Draw.not_applied`), rather than silently ignored. A resized part starts resting on
the table: its origin (the box centre) is raised or lowered with its half-height.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.protocol.model import MOBILE_KNOBS
from sim_suites.arena import Scene
from sim_suites.distractors import distractor_positions, place_distractors
from sim_suites.engines.base import InitialState, PhysicsBackend
from sim_suites.env_config import EnvConfig
from sim_suites.scenes import SCENE_KNOBS
from sim_suites.tasks import Task, TaskState
from sim_suites.variations import (
    EpisodeParams,
    episode_params,
    sample_randomization,
    variations_from_ranges,
)

#: Knobs that move or reshape the free task part, and why they do nothing without one.
PART_KNOBS = ("object_yaw_rad", "object_size_scale")
_NO_FREE_PART = "the task object is articulated (on a joint), not a free part"
_FIXED_BASE = "the robot stands on a fixed base (no wheels, no floor to drive on)"

#: Draws of an instance already done at reset tolerated before the ranges count as a user error.
MAX_INVALID_DRAWS = 50


@dataclass(frozen=True)
class Draw:
    """The instance an episode runs: sampled DR values, parameters, and the invalid draws."""

    sampled: dict[str, Any]
    params: EpisodeParams
    invalid: list[dict[str, Any]]
    not_applied: dict[str, str] = field(default_factory=dict)
    #: Where the distractors stand (x, y), m (`sim_suites.distractors`).
    distractors: list[tuple[float, float]] = field(default_factory=list)


def draw_instance(
    backend: PhysicsBackend,
    task: Task,
    scene: Scene,
    config: EnvConfig,
    rng: np.random.Generator,
    scene_rng: np.random.Generator,
) -> Draw:
    """Sample DR values and reset the scene to them; redraw the scene while the task is done.

    The scene knobs (`sim_suites.scenes.SCENE_KNOBS`: placement, yaw, size, distractors) and
    where the distractors stand come from
    `scene_rng`, the rest from `rng`, so an environment given only the scene knobs (the twin
    robot, the technician's setup) draws the same scene from the same scene stream.

    Args:
        backend: the physics, reset to the drawn instance on return.
        task, scene: the task instance and its scene. config: ranges, drift, gap, q*.
        rng: the episode's sim-only domain-randomization stream.
        scene_rng: the pair's scene stream.
    """
    variations = variations_from_ranges(config.randomization)
    scene_variations = [v for v in variations if v.knob in SCENE_KNOBS]
    physics_draw = sample_randomization([v for v in variations if v.knob not in SCENE_KNOBS], rng)
    order = [v.knob for v in variations]
    invalid: list[dict[str, Any]] = []
    object_joint = scene.body(task.object_name).joint
    free_part = object_joint == "free"
    not_applied = (
        {} if free_part else {k: _NO_FREE_PART for k in PART_KNOBS if k in config.randomization}
    )
    not_applied.update({k: _FIXED_BASE for k in MOBILE_KNOBS if k in config.randomization})
    for _ in range(MAX_INVALID_DRAWS + 1):
        drawn = {**physics_draw, **sample_randomization(scene_variations, scene_rng)}
        sampled = {k: drawn[k] for k in order}
        params = episode_params(sampled, config.drift, config.reality_gap)
        offset = np.array(params.object_xy_offset)
        positions = {
            name: np.array(scene.body(name).pos) + np.array([offset[0], offset[1], 0.0])
            for name in task.placement_bodies()
        }
        # Distractors stand clear of the task's region moved by up to the placement range.
        placement_m = float(config.randomization.get("object_xy_offset_m", (0.0, 0.0))[1])
        placed = place_distractors(task, params.distractor_count, placement_m, scene_rng)
        positions.update(distractor_positions(placed))
        yaw = {}
        if free_part:
            yaw[task.object_name] = params.object_yaw_rad
            # The part's origin is its centre: a resized part rests on the table.
            positions[task.object_name][2] *= params.physics.object_size_scale
        backend.reset(
            InitialState(
                arm_q=backend.kin.home_q.copy(),
                finger_q=backend.kin.finger_max_m,
                body_pos=positions,
                body_yaw=yaw,
            ),
            params.physics,
        )
        pos, _ = backend.body_pose(task.object_name)
        slide = backend.slide_q(task.object_name) if object_joint == "slide" else 0.0
        at_rest = TaskState(task.tracked_point(pos), 0.0, slide, False)
        if task.quality(at_rest, task.goal_pos(offset)) < config.target_quality:
            return Draw(sampled, params, invalid, not_applied, placed)
        invalid.append(dict(sampled))
    raise EvalError(
        f"randomization: {task.task_id} was already done at reset in {len(invalid)} draws in a "
        "row; narrow the placement range (object_xy_offset_m)",
        key="randomization",
    )
