"""The named task instances: five (or more) per family, as the example protocol lists them.

Positions are in the robot base frame (x forward, y left), m. A released instance never changes:
edit by adding a new task id.
"""

from __future__ import annotations

from embodied_eval.errors import EvalError
from sim_suites.tasks.base import Task, TaskSpec
from sim_suites.tasks.families import FAMILY_CLASSES


def _spec(
    task_id: str, start: tuple[float, float], goal: tuple[float, float], **kw: object
) -> TaskSpec:
    defaults = _FAMILY_DEFAULTS[task_id.split("/", 1)[0]]
    merged = {**defaults, **kw}
    return TaskSpec(task_id=task_id, start_xy=start, goal_xy=goal, **merged)  # type: ignore[arg-type]


#: Per-family defaults: scoring tolerance (m) and QC tracking tolerance (m).
_FAMILY_DEFAULTS: dict[str, dict[str, object]] = {
    "pick_place": {"tolerance_m": 0.02, "qc_tolerance_m": 0.02},
    "push": {"tolerance_m": 0.025, "qc_tolerance_m": 0.03},
    "drawer_open": {"tolerance_m": 0.015, "qc_tolerance_m": 0.03},
    "peg_insert": {"tolerance_m": 0.01, "qc_tolerance_m": 0.01},
    "tool_use": {"tolerance_m": 0.03, "qc_tolerance_m": 0.03},
    "mobile_pick_place": {"tolerance_m": 0.04, "qc_tolerance_m": 0.05},
}


def _mobile(name: str, source: int, target: int, **extra: float) -> TaskSpec:
    """A mobile_pick_place instance: from counter `source` to counter `target` of the drawn
    room (`sim_suites.tasks.mobile`); positions come from the floor plan."""
    return _spec(
        f"mobile_pick_place/{name}",
        (0.0, 0.0),
        (0.0, 0.0),
        extra={"source": source, "target": target, **extra},
    )


def _hook(x: float, y: float, **extra: float) -> dict[str, float]:
    """Instance extras of a tool_use task: where the hook's grasp point lies (m), and more."""
    return {"hook_x": x, "hook_y": y, **extra}


#: Harder instances (the example protocol's battery): a 4 cm steel cube (0.5 kg) with polished
#: faces (friction 0.3 against the pads) that a weak grip drops; a rubber block (friction 0.9)
#: that tips when pushed on a grippy table; a drawer on sticky runners (22 N) that pulls out of a
#: weak grip; a rubber-footed block (friction 1.5) that a hook drags badly.
STEEL = {"mass_kg": 0.5, "friction": 0.3}
RUBBER_BLOCK = {"friction": 0.9}
STICKY_N = 22.0
RUBBER_FOOT = 1.5


TASK_SPECS: dict[str, TaskSpec] = {
    s.task_id: s
    for s in (
        _spec("pick_place/cube_center", (0.50, -0.02), (0.50, 0.24)),
        _spec(
            "pick_place/cube_left",
            (0.45, 0.20),
            (0.60, 0.00),
            human_xy=(0.30, 0.78),
            human_reach=(2.0, 0.2, 1.5),
        ),
        _spec("pick_place/cube_right", (0.45, -0.20), (0.60, 0.05)),
        _spec("pick_place/cube_far", (0.65, 0.05), (0.45, -0.15)),
        _spec("pick_place/cube_near", (0.35, -0.05), (0.55, -0.20)),
        _spec("push/block_forward", (0.40, 0.00), (0.56, 0.00)),
        _spec("push/block_left", (0.50, -0.08), (0.50, 0.10)),
        _spec("push/block_right", (0.50, 0.08), (0.50, -0.10), human_xy=(0.35, -0.72)),
        _spec("push/block_long", (0.38, 0.00), (0.64, 0.00)),
        _spec("push/block_diagonal", (0.42, -0.10), (0.56, 0.04)),
        _spec("drawer_open/drawer_center", (0.60, 0.00), (0.60, 0.00), extra={"pull_m": 0.15}),
        _spec(
            "drawer_open/drawer_left",
            (0.60, 0.18),
            (0.60, 0.18),
            extra={"pull_m": 0.15},
            human_xy=(0.45, 0.75),
        ),
        _spec("drawer_open/drawer_right", (0.60, -0.18), (0.60, -0.18), extra={"pull_m": 0.15}),
        _spec("drawer_open/drawer_short_pull", (0.60, 0.05), (0.60, 0.05), extra={"pull_m": 0.08}),
        _spec("drawer_open/drawer_long_pull", (0.65, -0.05), (0.65, -0.05), extra={"pull_m": 0.22}),
        _spec("peg_insert/peg_center", (0.42, -0.15), (0.55, 0.10)),
        _spec("peg_insert/peg_left", (0.40, 0.00), (0.50, 0.25)),
        _spec(
            "peg_insert/peg_right",
            (0.45, 0.05),
            (0.50, -0.22),
            human_xy=(0.30, -0.72),
            human_reach=(1.5, 0.15, 2.0),
        ),
        _spec("peg_insert/peg_far", (0.40, -0.10), (0.66, 0.05)),
        _spec("peg_insert/peg_tight", (0.42, -0.15), (0.55, 0.10), extra={"clearance_m": 0.0015}),
        _spec("tool_use/hook_center", (0.83, 0.00), (0.62, 0.00), extra=_hook(0.45, 0.20)),
        _spec("tool_use/hook_left", (0.82, 0.12), (0.62, 0.12), extra=_hook(0.45, -0.10)),
        _spec("tool_use/hook_right", (0.82, -0.14), (0.62, -0.14), extra=_hook(0.42, 0.15)),
        _spec("tool_use/hook_long_pull", (0.84, 0.03), (0.52, 0.03), extra=_hook(0.40, -0.22)),
        _spec("tool_use/hook_short_pull", (0.83, -0.05), (0.70, -0.05), extra=_hook(0.48, 0.22)),
        _spec("pick_place/steel_center", (0.50, -0.02), (0.50, 0.24), extra=STEEL),
        _spec(
            "pick_place/steel_left",
            (0.45, 0.20),
            (0.60, 0.00),
            human_xy=(0.30, 0.78),
            human_reach=(2.0, 0.2, 1.5),
            extra=STEEL,
        ),
        _spec("pick_place/steel_right", (0.45, -0.20), (0.60, 0.05), extra=STEEL),
        _spec("pick_place/steel_far", (0.65, 0.05), (0.45, -0.15), extra=STEEL),
        _spec("pick_place/steel_near", (0.35, -0.05), (0.55, -0.20), extra=STEEL),
        _spec("push/rubber_forward", (0.40, 0.00), (0.56, 0.00), extra=RUBBER_BLOCK),
        _spec("push/rubber_left", (0.50, -0.08), (0.50, 0.10), extra=RUBBER_BLOCK),
        _spec(
            "push/rubber_right",
            (0.50, 0.08),
            (0.50, -0.10),
            human_xy=(0.35, -0.72),
            extra=RUBBER_BLOCK,
        ),
        _spec("push/rubber_long", (0.38, 0.00), (0.64, 0.00), extra=RUBBER_BLOCK),
        _spec("push/rubber_diagonal", (0.42, -0.10), (0.56, 0.04), extra=RUBBER_BLOCK),
        _spec(
            "drawer_open/sticky_center",
            (0.60, 0.00),
            (0.60, 0.00),
            extra={"pull_m": 0.15, "slide_friction_n": STICKY_N},
        ),
        _spec(
            "drawer_open/sticky_left",
            (0.60, 0.18),
            (0.60, 0.18),
            extra={"pull_m": 0.15, "slide_friction_n": STICKY_N},
            human_xy=(0.45, 0.75),
        ),
        _spec(
            "drawer_open/sticky_right",
            (0.60, -0.18),
            (0.60, -0.18),
            extra={"pull_m": 0.15, "slide_friction_n": STICKY_N},
        ),
        _spec(
            "drawer_open/sticky_short_pull",
            (0.60, 0.05),
            (0.60, 0.05),
            extra={"pull_m": 0.08, "slide_friction_n": STICKY_N},
        ),
        _spec(
            "drawer_open/sticky_long_pull",
            (0.65, -0.05),
            (0.65, -0.05),
            extra={"pull_m": 0.22, "slide_friction_n": STICKY_N},
        ),
        _spec(
            "tool_use/rubber_center",
            (0.83, 0.00),
            (0.62, 0.00),
            extra=_hook(0.45, 0.20, block_friction=RUBBER_FOOT),
        ),
        _spec(
            "tool_use/rubber_left",
            (0.82, 0.12),
            (0.62, 0.12),
            extra=_hook(0.45, -0.10, block_friction=RUBBER_FOOT),
        ),
        _spec(
            "tool_use/rubber_right",
            (0.82, -0.14),
            (0.62, -0.14),
            extra=_hook(0.42, 0.15, block_friction=RUBBER_FOOT),
        ),
        _spec(
            "tool_use/rubber_long_pull",
            (0.84, 0.03),
            (0.52, 0.03),
            extra=_hook(0.40, -0.22, block_friction=RUBBER_FOOT),
        ),
        _spec(
            "tool_use/rubber_short_pull",
            (0.83, -0.05),
            (0.70, -0.05),
            extra=_hook(0.48, 0.22, block_friction=RUBBER_FOOT),
        ),
        _mobile("cube_across", 0, 1, person=1),
        _mobile("cube_across_quiet", 0, 1),
        _mobile("cube_back", 1, 0, person=1),
        _mobile("cube_same_half", 0, 2, person=1),
        _mobile("steel_across", 0, 1, person=1, **STEEL),
        _mobile("deliver_to_person", 0, 1, person=1, deliver=1),
    )
}


def family_of(task_id: str) -> str:
    """The family of a task id ("pick_place/cube_left" → "pick_place")."""
    return task_spec(task_id).family


def task_spec(task_id: str) -> TaskSpec:
    """The instance parameters of a task id (EvalError naming the known ids if unknown)."""
    try:
        return TASK_SPECS[task_id]
    except KeyError:
        raise EvalError(
            f"task_id: unknown task {task_id!r} (known: {', '.join(sorted(TASK_SPECS))})",
            key="task_id",
        ) from None


def make_task(task_id: str) -> Task:
    """The task object (family class bound to its instance) for a task id."""
    spec = task_spec(task_id)
    return FAMILY_CLASSES[spec.family](spec)


def family_task_ids(family: str) -> list[str]:
    """Task ids of one family, in catalog order."""
    return [t for t, s in TASK_SPECS.items() if s.family == family]


def task_catalog() -> dict[str, list[str]]:
    """Every family and its task ids, in catalog order (the engines' task catalog)."""
    out: dict[str, list[str]] = {}
    for task_id, spec in TASK_SPECS.items():
        out.setdefault(spec.family, []).append(task_id)
    return out
