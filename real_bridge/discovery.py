"""DDS discovery isolation: the loopback-only Fast DDS profile and ROS_DOMAIN_ID.

By default Fast DDS discovers over loopback *and* multicasts on the LAN, and `ROS_LOCALHOST_ONLY`
is ignored by current ROS 2 releases. The bridge and the twin therefore load a Fast DDS XML profile
(`real_bridge/config/loopback_fastdds.xml`) through `FASTDDS_DEFAULT_PROFILES_FILE`: UDPv4 bound to
127.0.0.1, no built-in transports (so no shared-memory files), unicast initial peer 127.0.0.1 with
`maxInitialPeersRange` 32. `ROS_DOMAIN_ID` (0–101) separates benches and tests on one host.

Fast DDS reads the profile once per process, when the first participant is created, so the
environment must be set before `rclpy.init` and child processes must inherit it; everything else
in the environment is passed through unchanged (the ROS wheels re-execute Python with
`LD_LIBRARY_PATH` set, and a child that loses it cannot import rclpy).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from pathlib import Path

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import DOMAIN_ID_RANGE

#: The loopback-only Fast DDS profile shipped with the package.
LOOPBACK_PROFILE = Path(__file__).parent / "config" / "loopback_fastdds.xml"
PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
DOMAIN_ENV = "ROS_DOMAIN_ID"


def profile_path(discovery: str) -> Path | None:
    """The Fast DDS XML profile that `discovery` names, or None for "system".

    Args:
        discovery: "loopback", "system" or the path of a Fast DDS XML profile.
    Returns:
        The profile path (checked to exist), or None when the environment is left alone.
    """
    if discovery == "system":
        return None
    path = LOOPBACK_PROFILE if discovery == "loopback" else Path(discovery)
    if not path.is_file():
        raise EvalError(
            f"discovery: Fast DDS profile {str(path)!r} does not exist (use 'loopback', 'system' "
            "or the path of an XML profile)",
            key="discovery",
        )
    return path


def check_domain_id(domain_id: int) -> int:
    """Validate a ROS_DOMAIN_ID (0–101) and return it."""
    low, high = DOMAIN_ID_RANGE
    if (
        isinstance(domain_id, bool)
        or not isinstance(domain_id, int)
        or not low <= domain_id <= high
    ):
        raise EvalError(
            f"domain_id: {domain_id!r} is not in {low}..{high} (higher ids overflow the DDS ports)",
            key="domain_id",
        )
    return domain_id


def ros_environment(
    domain_id: int, discovery: str = "loopback", base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment for a ROS 2 child process: `base` unchanged plus domain id and DDS profile.

    Args:
        domain_id: ROS_DOMAIN_ID, 0–101.
        discovery: "loopback", "system" or an XML profile path (see `profile_path`).
        base: the environment to extend (default: this process's, which must be passed on whole).
    Returns:
        A new dict; `base` is not modified.
    """
    env = dict(os.environ if base is None else base)
    env[DOMAIN_ENV] = str(check_domain_id(domain_id))
    profile = profile_path(discovery)
    if profile is not None:
        env[PROFILE_ENV] = str(profile)
    return env


def configure_process(domain_id: int, discovery: str = "loopback") -> None:
    """Set this process's discovery environment; call before the first `rclpy.init`.

    Fast DDS reads `FASTDDS_DEFAULT_PROFILES_FILE` once, at the first participant, so a later
    change has no effect within the process.
    """
    env = ros_environment(domain_id, discovery, base={})
    os.environ.update(env)


def domain_id_for_test(index: int, pid: int | None = None) -> int:
    """A ROS_DOMAIN_ID in 1..101 for the `index`-th test of process `pid`.

    Consecutive indices give distinct ids (101 of them) and different processes start at different
    offsets (a CRC of the pid), so concurrent test sessions rarely share a domain.
    """
    pid = os.getpid() if pid is None else pid
    offset = zlib.crc32(str(pid).encode("ascii"))
    return 1 + (offset + index) % DOMAIN_ID_RANGE[1]
