"""Contact bookkeeping of the PyBullet backend: who touches whom, and the net external force on
the robot (what `sim_suites.engines.mujoco_contacts` does for MuJoCo)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from sim_suites.engines.base import pair_key


def contacts_now(
    client: object,
    robot: int,
    object_ids: Iterable[int],
    skip: set[int],
    names: Mapping[int, str],
) -> tuple[dict[tuple[str, str], float], np.ndarray]:
    """Total normal force per reported body pair at the current physics step, and the net
    external force on the robot (3,) N.

    Reported pairs: the robot against anything; objects against anything but `skip` (the
    table and the robot, whose contacts are already in the robot's query). The net force sums,
    per robot contact with another body, the normal force along `contactNormalOnB` (from B to
    A, A the robot) and the two friction forces along their directions, as vectors.

    Args:
        client: the PyBullet client. robot: the robot's body id. object_ids: the task parts'.
        skip: body ids left out of the parts' queries. names: body id → scene name.
    """
    query = client.getContactPoints  # type: ignore[attr-defined]
    out: dict[tuple[str, str], float] = {}
    robot_points = query(bodyA=robot)
    points = list(robot_points)
    for bid in object_ids:
        points.extend(p for p in query(bodyA=bid) if p[1] not in skip and p[2] not in skip)
    # A handful of points per step: plain floats beat small numpy arrays.
    nx = ny = nz = 0.0
    for point in robot_points:
        if point[2] != robot:
            fn, n = point[9], point[7]
            f1, d1 = point[10], point[11]
            f2, d2 = point[12], point[13]
            nx += fn * n[0] + f1 * d1[0] + f2 * d2[0]
            ny += fn * n[1] + f1 * d1[1] + f2 * d2[1]
            nz += fn * n[2] + f1 * d1[2] + f2 * d2[2]
    net = np.array([nx, ny, nz])
    for point in points:
        a, b = names.get(point[1]), names.get(point[2])
        if a is None or b is None or a == b:
            continue
        key = pair_key(a, b)
        out[key] = out.get(key, 0.0) + abs(float(point[9]))
    return out, net
