"""The built-in task families, one module each: `drawer_open`, `peg_insert`, `pick_place`, `push`
and `tool_use` at a table, `mobile_pick_place` on a mobile base in a room.

A family module holds everything about its family — the task class (bodies, goal, goal error),
its named instances with their tolerances, the scripted reference policy, what the camera
reference policy looks for — and ends with one `register_family(Family(...))` call
(`sim_suites.tasks.catalog`). Importing this package imports every module in it, in name order,
so a new module here is a new family: nothing else in the package needs to change.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
