"""An offscreen OpenGL context for MuJoCo's renderer, without a display.

MuJoCo picks its OpenGL platform from `MUJOCO_GL` when it is first imported; this module instead
opens the platform it needs directly, so rendering works whatever was imported before: EGL
(`libEGL.so.1`, Debian packages `libegl1`, `libegl-mesa0`, `libgl1-mesa-dri`; GPU or Mesa software
rasterizer) by default, OSMesa (`libOSMesa.so.8`, Debian `libosmesa6`) when `MUJOCO_GL=osmesa`
or when EGL cannot start. When neither works, the error names the missing system library.
"""

from __future__ import annotations

import ctypes.util
import os
from typing import Any

from embodied_eval.errors import EvalError

#: Platform → (shared library MuJoCo needs, the Debian packages that provide it).
PLATFORM_LIBRARIES = {
    "egl": (
        "EGL",
        "libEGL.so.1 (Debian: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri)",
    ),
    "osmesa": ("OSMesa", "libOSMesa.so (Debian: apt-get install libosmesa6)"),
}


def platforms() -> list[str]:
    """Platforms to try, in order: `MUJOCO_GL` first when it names egl or osmesa, else EGL."""
    wanted = os.environ.get("MUJOCO_GL", "").strip().lower()
    if wanted == "osmesa":
        return ["osmesa"]
    return ["egl", "osmesa"]


def _context_class(platform: str) -> Any:
    if platform == "egl":
        from mujoco.egl import GLContext

        return GLContext
    from mujoco.osmesa import GLContext as OsmesaContext

    return OsmesaContext


def offscreen_context(width: int, height: int) -> Any:
    """A current offscreen GL context (`free()` it when done).

    Raises:
        EvalError naming the missing system library when no platform can start.
    """
    failures: list[str] = []
    for platform in platforms():
        library, hint = PLATFORM_LIBRARIES[platform]
        if ctypes.util.find_library(library) is None:
            failures.append(f"{platform}: {hint} is not installed")
            continue
        try:
            ctx = _context_class(platform)(width, height)
            ctx.make_current()
        except Exception as exc:
            failures.append(f"{platform}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        return ctx
    raise EvalError(
        "rendering: MuJoCo found no offscreen OpenGL — " + "; ".join(failures), key="rendering"
    )
