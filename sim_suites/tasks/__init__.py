"""Tasks and the family registry: the task base (`base`) and every family's instances
(`catalog`); the families themselves are in `sim_suites.families`."""

from sim_suites.tasks.base import Task, TaskSpec, TaskState, graded_quality
from sim_suites.tasks.catalog import (
    FAMILIES,
    TASK_SPECS,
    Family,
    family_of,
    family_task_ids,
    make_task,
    register_family,
    registered_family,
    task_family,
    task_spec,
    unregister_family,
)

__all__ = [
    "FAMILIES",
    "TASK_SPECS",
    "Family",
    "Task",
    "TaskSpec",
    "TaskState",
    "family_of",
    "family_task_ids",
    "graded_quality",
    "make_task",
    "register_family",
    "registered_family",
    "task_family",
    "task_spec",
    "unregister_family",
]
