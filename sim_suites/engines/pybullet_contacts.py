"""Contact bookkeeping of the PyBullet backend: who touches whom, and the net external force on
the robot (what `sim_suites.engines.mujoco_contacts` does for MuJoCo)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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


def separations(client: Any, robot: int, bodies: Sequence[int], max_m: float) -> list[float]:
    """Smallest distance (m) between the robot and each body (`getClosestPoints`), in order: 0
    when touching or penetrating, `max_m` when farther than that."""
    out = []
    for bid in bodies:
        points = client.getClosestPoints(bodyA=robot, bodyB=bid, distance=max_m)
        best = min((float(p[8]) for p in points), default=max_m)
        out.append(max(0.0, min(best, max_m)))
    return out


def nearest(client: Any, robot: int, bodies: Sequence[int], max_m: float) -> float:
    """Smallest distance (m) from the robot to any of the bodies (`getClosestPoints`, each query
    bounded by the best so far): 0 when touching, `max_m` when all are farther."""
    best = max_m
    for bid in bodies:
        points = client.getClosestPoints(bodyA=robot, bodyB=bid, distance=best)
        best = min(best, min((float(p[8]) for p in points), default=best))
    return max(0.0, best)
