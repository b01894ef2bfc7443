"""Distractor objects: things standing on the table that the task never uses.

`distractor_count` (a scene knob: a technician puts the same objects on the real table) stands up
to MAX_DISTRACTORS objects — a red mug, a blue box, a green cube: colours a camera policy may take
for the task's parts — on the table, outside the task's working region. Every scene holds the
distractors as fixed bodies parked far off the table (`sim_suites.arena.distractor_bodies`), so
environments are built once
and a reset only moves them; parked or standing, nothing the task moves ever meets them.

Where they stand: the candidates are the points of a GRID_M grid over the visible table area
(`TABLE_AREA`) at least `clearance` from the task's working region (`Task.work_region_xy`: every
task body where it starts and where the task takes it, inflated by the placement range); a random
permutation of the candidates from the pair's scene stream is taken in order, skipping any closer
than SPACING_M to one already placed. Fewer fit than asked → fewer stand (the scene record lists
where each one stands).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim_suites.arena import DISTRACTORS
from sim_suites.tasks import Task

#: The table area distractors may stand in (x range, y range), m: what the scene camera sees.
TABLE_AREA = ((0.30, 0.85), (-0.40, 0.40))
#: Candidate spacing (m), least distance between two distractors' centres (m).
GRID_M = 0.02
SPACING_M = 0.10
#: Least distance (m) from a distractor's edge to the working region: an open hand is ~0.2 m
#: across, so half of it and a margin.
CLEARANCE_M = 0.10


def _hull(points: np.ndarray) -> np.ndarray:
    """Convex hull (counter-clockwise, (m, 2)) of planar points (Andrew's monotone chain)."""
    pts = sorted({(float(x), float(y)) for x, y in points})
    if len(pts) < 3:
        return np.array(pts)

    def half(seq: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for p in seq:
            while len(out) >= 2:
                (ax, ay), (bx, by) = out[-2], out[-1]
                if (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax) > 0:
                    break
                out.pop()
            out.append(p)
        return out

    lower, upper = half(pts), half(pts[::-1])
    return np.array(lower[:-1] + upper[:-1])


def distance_to_region(points: np.ndarray, hull: np.ndarray) -> np.ndarray:
    """Distance (m) of each planar point (n, 2) from a convex polygon (m, 2); 0 inside it."""
    p = np.atleast_2d(points)[:, None, :]
    a = hull[None, :, :]
    b = np.roll(hull, -1, axis=0)[None, :, :]
    ab = b - a
    t = np.clip(np.sum((p - a) * ab, axis=-1) / np.maximum(np.sum(ab * ab, axis=-1), 1e-12), 0, 1)
    nearest = a + t[..., None] * ab
    edge = np.min(np.linalg.norm(p - nearest, axis=-1), axis=1)
    cross = ab[..., 0] * (p[..., 1] - a[..., 1]) - ab[..., 1] * (p[..., 0] - a[..., 0])
    inside = np.all(cross >= 0, axis=1) if len(hull) >= 3 else np.zeros(len(edge), dtype=bool)
    return np.where(inside, 0.0, edge)


def free_spots(task: Task, placement_m: float) -> np.ndarray:
    """Grid points (n, 2) of TABLE_AREA where a distractor clears the task's working region.

    Args:
        task: the task instance. placement_m: the largest placement offset of the protocol's
            `object_xy_offset_m` range (the working region moves by up to this much).
    """
    (x0, x1), (y0, y1) = TABLE_AREA
    xs = np.arange(x0, x1 + 1e-9, GRID_M)
    ys = np.arange(y0, y1 + 1e-9, GRID_M)
    grid = np.round(np.array([(x, y) for x in xs for y in ys]), 6)
    hull = _hull(task.work_region_xy())
    widest = max(d.radius_m for d in DISTRACTORS)
    keep = distance_to_region(grid, hull) >= CLEARANCE_M + placement_m + widest
    return grid[keep]


def place_distractors(
    task: Task, count: int, placement_m: float, rng: np.random.Generator
) -> list[tuple[float, float]]:
    """Where the first `count` distractors stand (x, y), m (see the module docstring).

    Draws one permutation of the free spots from `rng` (the pair's scene stream), whatever
    `count` is, so the twin robot's scene reset and the sim place them alike.
    """
    spots = free_spots(task, placement_m)
    order = rng.permutation(len(spots))
    placed: list[tuple[float, float]] = []
    for i in order:
        if len(placed) >= count:
            break
        x, y = (float(v) for v in spots[i])
        if all(np.hypot(x - px, y - py) >= SPACING_M for px, py in placed):
            placed.append((x, y))
    return placed


def distractor_positions(placed: Sequence[tuple[float, float]]) -> dict[str, np.ndarray]:
    """Body positions of the distractors standing at `placed`, resting on the table."""
    return {
        f"distractor_{k}": np.array([x, y, DISTRACTORS[k].half_height_m])
        for k, (x, y) in enumerate(placed)
    }
