"""CLI start-up benchmark: wall time of `embodied-eval --version` and `--help` in fresh processes.

Target: under 0.5 s on an idle machine (commands are registered lazily; numpy, pandas, the
simulators and ROS 2 load only when a command runs). Prints the median and the spread of
REPEAT runs of each, a heavy command's `--help` for comparison, and the load average before and
after.

Run: .venv/bin/python benchmarks/cli_bench.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("embodied-eval")


def timed(args: list[str], repeat: int) -> list[float]:
    """Wall seconds of `repeat` fresh runs of the console script with `args`."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([str(SCRIPT), *args], capture_output=True, check=True)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    for label, argv in (
        ("--version", ["--version"]),
        ("--help", ["--help"]),
        ("metrics --help (imports the command)", ["metrics", "--help"]),
    ):
        times = timed(argv, args.repeat)
        print(
            f"{label:40s} median {statistics.median(times) * 1000:7.1f} ms   "
            f"min {min(times) * 1000:7.1f} ms   max {max(times) * 1000:7.1f} ms   n={len(times)}"
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
