"""`python -m real_bridge.twin [options]`: run the twin robot in the foreground."""

from __future__ import annotations

import os
import sys

# The twin's camera renders offscreen; EGL needs no display (set before MuJoCo is imported).
os.environ.setdefault("MUJOCO_GL", "egl")

from real_bridge.cli import twin_main

if __name__ == "__main__":
    sys.exit(twin_main(sys.argv[1:]))
