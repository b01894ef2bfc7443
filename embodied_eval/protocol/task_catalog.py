"""The task catalog: which task ids each sim engine can run, and the protocol check against it.

A protocol names its instances by task id (`pick_place/cube_near`). An engine that runs named
tasks registers its catalog in `embodied_eval.plugins.TASK_CATALOGS` (keyed by the engine's
import target, so an engine replaced by another target is checked against that target's catalog,
or not at all when it has none). `check_instances` refuses an instance the catalog does not hold,
naming the valid ids of its family; Gymnasium-mapped instances (`env_id`) are checked when the
environment is made, not here.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.plugins import SIM_ENGINES, TASK_CATALOGS, resolve
from embodied_eval.protocol.reader import Protocol

#: A catalog: family → its task ids, in catalog order.
Catalog = Mapping[str, Sequence[str]]


def engine_catalog(engine: str) -> Catalog | None:
    """The catalog of a registered sim engine (None when the engine registers none)."""
    target = SIM_ENGINES.get(engine)
    if target is None or target not in TASK_CATALOGS:
        return None
    catalog = resolve(TASK_CATALOGS[target])
    return dict(catalog() if callable(catalog) else catalog)


def catalog_listing(engines: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """One entry per family: its instances and the engines whose catalog holds them.

    Args:
        engines: the engines to list (default: every registered sim engine).
    """
    families: dict[str, dict[str, Any]] = {}
    for engine in engines if engines is not None else sorted(SIM_ENGINES):
        catalog = engine_catalog(engine)
        if catalog is None:
            continue
        for family, task_ids in catalog.items():
            entry = families.setdefault(family, {"family": family, "instances": [], "engines": []})
            for task_id in task_ids:
                if task_id not in entry["instances"]:
                    entry["instances"].append(task_id)
            entry["engines"].append(engine)
    return [families[f] for f in sorted(families)]


def _unknown_instance_message(
    where: str, task_id: str, family: str, engine: str, catalog: Catalog
) -> str:
    own = list(catalog.get(family, ()))
    valid = own or sorted(t for ids in catalog.values() for t in ids)
    close = difflib.get_close_matches(task_id, valid, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    scope = f"valid {family} ids" if own else f"no family {family!r}; valid ids"
    return (
        f"{where}: task id {task_id!r} is not in the {engine} task catalog ({hint}{scope}: "
        f"{', '.join(valid)}; `embodied-eval protocol tasks` lists every family)"
    )


def check_instances(protocol: Protocol, engines: Iterable[str] | None = None) -> None:
    """Refuse an instance that an engine's catalog does not hold (EvalError naming valid ids).

    Args:
        protocol: the validated protocol.
        engines: the engines that will run it (default: the protocol's `[sim] engines`).
    """
    for engine in engines if engines is not None else protocol.engines:
        catalog = engine_catalog(engine)
        if catalog is None:
            continue
        known = {t for ids in catalog.values() for t in ids}
        for family, instances in protocol.families.items():
            for index, inst in enumerate(instances):
                if inst.env_id or inst.task_id in known:
                    continue
                where = f"battery.{family}.instances[{index}]"
                raise EvalError(
                    _unknown_instance_message(where, inst.task_id, family, engine, catalog),
                    key=f"{where}.task_id",
                )
