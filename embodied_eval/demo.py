"""`make demo`: the main job on the embedded defaults.

Runs what exists end to end on the example protocol and prints only real results.
"""

from __future__ import annotations

import sys

from embodied_eval.protocol import example_protocol_path, load_protocol


def main() -> int:
    proto = load_protocol(example_protocol_path())
    print(
        f"protocol {proto.name} v{proto.version}: {len(proto.instances)} task instances in "
        f"{len(proto.families)} families; protocol_hash {proto.protocol_hash}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
