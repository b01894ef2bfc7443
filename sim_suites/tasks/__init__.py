"""Task families and their named instances (see `catalog`)."""

from sim_suites.tasks.base import Task, TaskSpec, TaskState, graded_quality
from sim_suites.tasks.catalog import TASK_SPECS, family_of, family_task_ids, make_task, task_spec

__all__ = [
    "TASK_SPECS",
    "Task",
    "TaskSpec",
    "TaskState",
    "family_of",
    "family_task_ids",
    "graded_quality",
    "make_task",
    "task_spec",
]
