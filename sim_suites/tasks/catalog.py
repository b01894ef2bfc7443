"""The family registry: each task family registers itself with one call, and everything that
needs to know the families reads them from here.

A family is one module (`sim_suites.families.<name>`: its task class, its named instances, the
scripted and camera reference policies' parts, its defaults) that ends with
`register_family(Family(...))`. Registering a family

- adds its instances to the task catalog (`TASK_SPECS`, `task_catalog`, what `embodied-eval
  protocol tasks` lists and `protocol check` checks a battery against),
- registers its Gymnasium IDs, one per engine (`embodied/<Family>-<Engine>-v0`, made by its
  environment class with `family=` and `engine=`),
- makes its reference policies available (`sim_suites.policies:scripted`, `:vision`, and the
  policies built on the script: `degraded`, `one_shot`, `tracking_off`),
- names it in protocol messages (`family_names`).

`sim_suites` imports every module of `sim_suites.families` when it is imported; a family defined
elsewhere (a lab's own, a test's toy family) registers the same way, in the process that imports
its module. Positions are in the robot base frame (x forward, y left), m. A released instance
never changes: edit by adding a new task id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import gymnasium as gym

from embodied_eval.errors import EvalError
from sim_suites.tasks.base import Task, TaskSpec

if TYPE_CHECKING:
    from sim_suites.policies.part_finder import PartModel
    from sim_suites.policies.script_base import ScriptedPolicy

#: Gymnasium IDs: `embodied/<Family>-<Engine>-v0`. A released ID never changes behaviour; a change
#: to a family's task, scoring or dynamics gets a new version.
NAMESPACE = "embodied"
VERSION = 0
ENGINE_NAMES = {"mujoco": "MuJoCo", "pybullet": "PyBullet"}
#: The environment of a family whose robot is the fixed Panda at a table.
TABLE_ENV = "sim_suites.env:PandaTaskEnv"
#: Control steps an episode gets when neither the protocol nor the caller says (8 s at 50 Hz).
DEFAULT_MAX_STEPS = 400


@dataclass(frozen=True)
class Family:
    """Everything the harness knows about one task family.

    Attributes:
        task: the task class (`Task` subclass); its `family` attribute is the family's name and
            the prefix of its task ids ("pick_place" → "pick_place/cube_center").
        instances: the named instances, in catalog order (the first is the Gymnasium ID's
            default); each carries its success geometry (goal, tolerance) and QC tolerance.
        script: the scripted reference policy (`ScriptedPolicy` subclass), which reads only the
            observation.
        vision: what the camera reference policy needs to find the family's part (its colour
            and geometry, and a tool locator for a family with a tool); None when the family has
            no camera reference.
        env: "module:Class" of the family's Gymnasium environment.
        max_steps: control steps an episode gets without a protocol's `[sim] max_steps`.
    """

    task: type[Task]
    instances: tuple[TaskSpec, ...]
    script: type[ScriptedPolicy]
    vision: PartModel | None = None
    env: str = TABLE_ENV
    max_steps: int = DEFAULT_MAX_STEPS

    @property
    def name(self) -> str:
        return self.task.family

    @property
    def gym_name(self) -> str:
        """The family's part of its Gymnasium IDs: "pick_place" → "PickPlace"."""
        return "".join(word.capitalize() for word in self.name.split("_"))


#: The registered families, in registration order (the built-in ones by module name).
FAMILIES: dict[str, Family] = {}
#: Every registered instance by task id, in registration order.
TASK_SPECS: dict[str, TaskSpec] = {}


def env_id(family: str, engine: str) -> str:
    """The Gymnasium ID of a (family, engine) pair."""
    name = registered_family(family).gym_name
    return f"{NAMESPACE}/{name}-{ENGINE_NAMES[engine]}-v{VERSION}"


def register_family(family: Family) -> Family:
    """Register a task family: its instances join the catalog, its Gymnasium IDs the registry,
    its reference policies the policy factories (EvalError if it clashes with one registered).

    Returns:
        the family, so a module can write `FAMILY = register_family(Family(...))`.
    """
    name = family.name
    if not name or name != name.strip() or "/" in name:
        raise EvalError(f"family: {name!r} is not a family name", key="family")
    if name in FAMILIES:
        raise EvalError(f"family: {name!r} is already registered", key="family")
    if not family.instances:
        raise EvalError(f"family {name!r}: needs at least one instance", key="family")
    seen: set[str] = set()
    for spec in family.instances:
        if spec.family != name or spec.task_id == f"{name}/":
            raise EvalError(
                f"family {name!r}: task id {spec.task_id!r} must read '{name}/<instance>'",
                key="family",
            )
        if spec.task_id in TASK_SPECS or spec.task_id in seen:
            raise EvalError(f"family {name!r}: task id {spec.task_id!r} is taken", key="family")
        seen.add(spec.task_id)
    FAMILIES[name] = family
    TASK_SPECS.update((spec.task_id, spec) for spec in family.instances)
    register_family_envs(family)
    return family


def register_family_envs(family: Family) -> None:
    """Register a family's Gymnasium IDs, one per engine (idempotent)."""
    for engine in ENGINE_NAMES:
        name = env_id(family.name, engine)
        if name not in gym.registry:
            gym.register(
                id=name, entry_point=family.env, kwargs={"family": family.name, "engine": engine}
            )


def unregister_family(name: str) -> None:
    """Remove a registered family: its instances, its Gymnasium IDs and its policies."""
    family = registered_family(name)
    for engine in ENGINE_NAMES:
        gym.registry.pop(env_id(name, engine), None)
    for spec in family.instances:
        TASK_SPECS.pop(spec.task_id, None)
    del FAMILIES[name]


def registered_family(name: str) -> Family:
    """The registration of a family (EvalError naming the registered ones if unknown)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise EvalError(
            f"family: unknown family {name!r} (known: {family_names()})", key="family"
        ) from None


def task_family(task_id: str) -> Family:
    """The registration of a task id's family ("pick_place/cube_left" → pick_place's)."""
    return registered_family(family_of(task_id))


def family_names() -> str:
    """The registered families' names, comma-separated (for messages)."""
    return ", ".join(FAMILIES)


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
    return registered_family(spec.family).task(spec)


def family_task_ids(family: str) -> list[str]:
    """Task ids of one family, in catalog order."""
    return [t for t, s in TASK_SPECS.items() if s.family == family]


def task_catalog() -> dict[str, list[str]]:
    """Every family and its task ids, in catalog order (the engines' task catalog)."""
    out: dict[str, list[str]] = {}
    for task_id, spec in TASK_SPECS.items():
        out.setdefault(spec.family, []).append(task_id)
    return out
