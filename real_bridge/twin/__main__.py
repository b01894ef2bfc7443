"""`python -m real_bridge.twin [options]`: run the twin robot in the foreground."""

from __future__ import annotations

import sys

from real_bridge.cli import twin_main

if __name__ == "__main__":
    sys.exit(twin_main(sys.argv[1:]))
