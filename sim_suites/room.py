"""The room a mobile manipulator works in: a floor plan generated from the pair's scene seed,
and shortest paths through it.

Floor plan (m, world frame, z up; `draw_floor_plan`): a ROOM_X × ROOM_Y room (walls 1 m high)
split at x = PARTITION_X by a partition with a DOORWAY_M-wide doorway at a drawn y; three
counters at drawn places along the long walls (counter 0 and counter 2 in the first half,
counter 1 in the second), two or three clutter boxes on the floor at drawn places clear of the
counters, the doorway and the robot's start, and the robot's start pose in the first half. Every
draw comes from one generator — the pair's scene stream (`sim_suites.scenes`) — so both halves
of a pair, and both engines, get the same room. Body sizes are fixed; only positions are drawn,
so each engine builds its room once and a reset moves the bodies.

Shortest paths (`shortest_path`) run on a visibility graph among the obstacles' footprints grown
by the robot's radius r — each footprint's Minkowski sum with a disc of radius r, taken as the
octagon circumscribing it (the box grown by r, its corners cut at r from the footprint's
corners): straight segments between the octagons' vertices. The octagon overestimates the
rounded corners by at most r·(1/cos 22.5° − 1) ≈ 0.08·r, so the paths are the shortest ones up
to that. The same planner gives the reference policy its route and the task its shortest path
length for SPL (`sim_suites.mobile_metrics`).
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_suites.arena import Body, Geom

ROOM_X, ROOM_Y = 9.0, 5.0
WALL_HALF_T, WALL_HALF_H = 0.05, 0.5
PARTITION_X = 4.5
DOORWAY_M = 1.3
#: Where the doorway's centre may be drawn (y, m).
DOORWAY_Y_RANGE = (-1.2, 1.2)
#: Counters: half-extents in x and y (m) and the top height of each (m).
COUNTER_HALF_XY = (0.45, 0.3)
COUNTER_TOPS_M = (0.62, 0.70, 0.66)
#: Where each counter's centre x may be drawn (m).
COUNTER_X_RANGES = ((1.8, 3.6), (5.6, 7.0), (1.6, 3.6))
#: How far in from a counter's free edge an object stands or is placed (m).
COUNTER_INSET_M = 0.15
#: Half-extent along the counter of where an object may stand (m).
COUNTER_SPREAD_M = 0.25
CLUTTER_HALF = (0.15, 0.15, 0.1)
MAX_CLUTTER = 3
#: The robot's footprint radius with the arm tucked (m), and the clearance kept beyond it.
ROBOT_RADIUS_M = 0.45
CLEARANCE_M = 0.02
#: How far from a hand-over point the base's centre stands (m): as far as from a part on a
#: counter (ROBOT_RADIUS_M + CLEARANCE_M to the counter's edge, then COUNTER_INSET_M).
HANDOVER_REACH_M = 0.62
#: Where things are parked when a plan does not use them (far outside the room).
PARKING = (20.0, 20.0, 0.1)
#: The lane a person paces in (x, y range, m): along the far wall of the second half.
PERSON_LANE_X = 8.55
PERSON_LANE_Y = (-1.5, 1.5)

_WALL = (0.85, 0.85, 0.82, 1.0)
_WOOD = (0.55, 0.42, 0.3, 1.0)
_BOX = (0.45, 0.5, 0.55, 1.0)

Rect = tuple[float, float, float, float]  # centre x, centre y, half-extent x, half-extent y


@dataclass(frozen=True)
class FloorPlan:
    """One drawn room (see the module docstring).

    Attributes:
        doorway_y: centre of the doorway, m. counters: (x, y) centre of each counter, m.
        clutter: (x, y) of each clutter box in use, m. start: robot start (x, y, yaw).
        doorway_blocked: a panel closes the doorway.
    """

    doorway_y: float
    counters: tuple[tuple[float, float], ...]
    clutter: tuple[tuple[float, float], ...]
    start: tuple[float, float, float]
    doorway_blocked: bool = False

    def record(self) -> dict[str, Any]:
        """The plan as the episode's scene record keeps it (m, rad; rounded to µm)."""
        return {
            "base_start": [round(float(v), 6) for v in self.start],
            "doorway_y_m": round(self.doorway_y, 6),
            "counters_xy": [[round(float(v), 6) for v in c] for c in self.counters],
            "clutter_xy": [[round(float(v), 6) for v in c] for c in self.clutter],
        }

    def counter_rect(self, k: int) -> Rect:
        x, y = self.counters[k]
        return (x, y, *COUNTER_HALF_XY)

    def counter_top(self, k: int) -> float:
        return COUNTER_TOPS_M[k]

    def obstacles(self) -> list[Rect]:
        """Footprints of everything the base must keep clear of (walls, partition, counters,
        clutter, a blocked doorway), m."""
        return [r for _, r in self.named_footprints()]

    def named_footprints(self) -> list[tuple[str, Rect]]:
        t = WALL_HALF_T
        out: list[tuple[str, Rect]] = [
            ("wall", (ROOM_X / 2, -ROOM_Y / 2, ROOM_X / 2 + t, t)),
            ("wall", (ROOM_X / 2, ROOM_Y / 2, ROOM_X / 2 + t, t)),
            ("wall", (0.0, 0.0, t, ROOM_Y / 2 + t)),
            ("wall", (ROOM_X, 0.0, t, ROOM_Y / 2 + t)),
        ]
        for name, (x, y) in partition_positions(self.doorway_y).items():
            out.append((name, (x, y, t, ROOM_Y / 2)))
        if self.doorway_blocked:
            out.append(("door_block", (PARTITION_X, self.doorway_y, t, DOORWAY_M / 2)))
        out.extend((f"counter_{k}", self.counter_rect(k)) for k in range(len(self.counters)))
        out.extend(
            (f"clutter_{k}", (x, y, CLUTTER_HALF[0], CLUTTER_HALF[1]))
            for k, (x, y) in enumerate(self.clutter)
        )
        return out

    def body_positions(self) -> dict[str, np.ndarray]:
        """Where each room body stands this episode (m), parked ones included."""
        pos = {
            name: np.array([x, y, WALL_HALF_H])
            for name, (x, y) in partition_positions(self.doorway_y).items()
        }
        pos["door_block"] = (
            np.array([PARTITION_X, self.doorway_y, WALL_HALF_H])
            if self.doorway_blocked
            else np.array(PARKING)
        )
        for k, (x, y) in enumerate(self.counters):
            pos[f"counter_{k}"] = np.array([x, y, COUNTER_TOPS_M[k] / 2])
        for k in range(MAX_CLUTTER):
            xy = self.clutter[k] if k < len(self.clutter) else (PARKING[0] + k, PARKING[1])
            pos[f"clutter_{k}"] = np.array([xy[0], xy[1], CLUTTER_HALF[2]])
        return pos


def partition_positions(doorway_y: float) -> dict[str, tuple[float, float]]:
    """Centres of the two partition panels (each ROOM_Y long, reaching past the outer walls)
    leaving the doorway open at `doorway_y`."""
    half = DOORWAY_M / 2 + ROOM_Y / 2
    return {
        "partition_south": (PARTITION_X, doorway_y - half),
        "partition_north": (PARTITION_X, doorway_y + half),
    }


def room_bodies() -> tuple[Body, ...]:
    """The room's bodies (fixed, role "fixture"), built once per engine at their parking
    places; `FloorPlan.body_positions` moves them for an episode."""
    t, h = WALL_HALF_T, WALL_HALF_H
    walls = Body(
        name="wall",
        role="fixture",
        geoms=(
            Geom("box", (ROOM_X / 2 + t, t, h), pos=(0.0, -ROOM_Y / 2, 0.0), rgba=_WALL),
            Geom("box", (ROOM_X / 2 + t, t, h), pos=(0.0, ROOM_Y / 2, 0.0), rgba=_WALL),
            Geom("box", (t, ROOM_Y / 2 + t, h), pos=(-ROOM_X / 2, 0.0, 0.0), rgba=_WALL),
            Geom("box", (t, ROOM_Y / 2 + t, h), pos=(ROOM_X / 2, 0.0, 0.0), rgba=_WALL),
        ),
        pos=(ROOM_X / 2, 0.0, h),
    )
    out = [walls]
    for k, name in enumerate(("partition_south", "partition_north", "door_block")):
        half_y = DOORWAY_M / 2 if name == "door_block" else ROOM_Y / 2
        geom = Geom("box", (t, half_y, h), rgba=_WALL)
        out.append(Body(name, "fixture", (geom,), pos=(PARKING[0], PARKING[1] + 6 * k, h)))
    for k, top in enumerate(COUNTER_TOPS_M):
        geom = Geom("box", (*COUNTER_HALF_XY, top / 2), rgba=_WOOD)
        out.append(Body(f"counter_{k}", "fixture", (geom,), pos=(PARKING[0] + 2 * k, -20, top / 2)))
    for k in range(MAX_CLUTTER):
        geom = Geom("box", CLUTTER_HALF, rgba=_BOX)
        out.append(Body(f"clutter_{k}", "fixture", (geom,), pos=(PARKING[0] + k, -25, 0.1)))
    return tuple(out)


def _counter_y(side: float) -> float:
    """Centre y of a counter standing against the south (side −1) or north (+1) wall."""
    return side * (ROOM_Y / 2 - WALL_HALF_T - COUNTER_HALF_XY[1])


def draw_floor_plan(rng: np.random.Generator, doorway_blocked: bool = False) -> FloorPlan:
    """A room from the scene stream (see the module docstring).

    The draws, in order: the doorway's y; counter 0's side and x, counter 1's side and x,
    counter 2's x (it stands on the wall opposite counter 0); the start x, y, yaw; the number of
    clutter boxes (2 or 3) and each one's place, redrawn while it comes within 0.9 m of a
    counter's free side or the start, within 1.3 m of the partition, or cuts the start off from
    a counter (every counter stays reachable in an open room).
    """
    lo, hi = DOORWAY_Y_RANGE
    doorway_y = float(rng.uniform(lo, hi))
    side0 = 1.0 if rng.uniform() < 0.5 else -1.0
    x0 = float(rng.uniform(*COUNTER_X_RANGES[0]))
    side1 = 1.0 if rng.uniform() < 0.5 else -1.0
    x1 = float(rng.uniform(*COUNTER_X_RANGES[1]))
    x2 = float(rng.uniform(*COUNTER_X_RANGES[2]))
    counters = ((x0, _counter_y(side0)), (x1, _counter_y(side1)), (x2, _counter_y(-side0)))
    start = (
        float(rng.uniform(0.8, 1.2)),
        float(rng.uniform(-0.6, 0.6)),
        float(rng.uniform(-math.pi, math.pi)),
    )
    keep_clear = [
        *((x, y - math.copysign(COUNTER_HALF_XY[1] + 0.3, y)) for x, y in counters),
        (PARTITION_X, doorway_y),
        start[:2],
    ]
    clutter: list[tuple[float, float]] = []
    for _ in range(int(rng.integers(2, MAX_CLUTTER + 1))):
        for _attempt in range(100):
            xy = (float(rng.uniform(0.6, ROOM_X - 1.2)), float(rng.uniform(-1.9, 1.9)))
            clear = all(math.dist(xy, c) >= 0.9 for c in [*keep_clear, *clutter])
            if not clear or abs(xy[0] - PARTITION_X) < 1.3:
                continue
            trial = FloorPlan(doorway_y, counters, (*clutter, xy), start)
            if all_counters_reachable(trial):
                clutter.append(xy)
                break
    return FloorPlan(doorway_y, counters, tuple(clutter), start, doorway_blocked)


def all_counters_reachable(plan: FloorPlan) -> bool:
    """Whether the base can drive from the start to a stand-off at the middle of every
    counter (with the doorway open)."""
    rects = plan.obstacles()
    start = np.array(plan.start[:2])
    for k in range(len(plan.counters)):
        stand = stand_pose(plan.counter_rect(k), counter_point(plan, k, 0.0), rects)
        if stand is None or shortest_path(start, stand[:2], rects) is None:
            return False
    return True


def counter_point(plan: FloorPlan, k: int, along_m: float) -> np.ndarray:
    """The point on counter k where a part stands: `along_m` from its centre along the wall,
    COUNTER_INSET_M in from its free edge, on its top (x, y, z of the top surface)."""
    x, y = plan.counters[k]
    edge = y - math.copysign(COUNTER_HALF_XY[1], y)
    inward = math.copysign(COUNTER_INSET_M, y)
    return np.array([x + along_m, edge + inward, plan.counter_top(k)])


# --------------------------------------------------------------------------- planning


#: The octagon's outward normals: ±x, ±y and the four diagonals.
_NORMALS = np.array(
    [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [1, -1], [-1, 1], [-1, -1]], dtype=float
)
_NORMALS[4:] /= math.sqrt(2.0)
_TAN_22_5 = math.tan(math.pi / 8)


def _octagons(rects: list[Rect], radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Each footprint grown by `radius` as 8 half-planes n·p ≤ d: normals (8, 2) and the
    offsets (R, 8), m (see the module docstring)."""
    g = np.array(rects, dtype=float).reshape(-1, 4)
    cx, cy, hx, hy = g.T
    axis = np.stack([cx + hx, -(cx - hx), cy + hy, -(cy - hy)], axis=1) + radius
    diag = (
        np.stack(
            [sx * cx + sy * cy + hx + hy for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1))], axis=1
        )
        / math.sqrt(2.0)
        + radius
    )
    return _NORMALS, np.concatenate([axis, diag], axis=1)


def _vertices(rects: list[Rect], radius: float, pad: float) -> list[tuple[float, float]]:
    """The octagons' vertices, pushed `pad` outward."""
    out = []
    r, c = radius + pad, (radius + pad) * _TAN_22_5
    for x, y, hx, hy in rects:
        for sx in (-1, 1):
            for sy in (-1, 1):
                out.append((x + sx * (hx + r), y + sy * (hy + c)))
                out.append((x + sx * (hx + c), y + sy * (hy + r)))
    return out


def blocked(point: np.ndarray, rects: list[Rect], radius: float) -> bool:
    """Whether a robot of `radius` centred at `point` (2,) overlaps an obstacle footprint
    (its octagon, see the module docstring)."""
    normals, offsets = _octagons(rects, radius)
    return bool(_inside_any(np.asarray(point[:2], dtype=float)[None, :], normals, offsets)[0])


def _inside_any(points: np.ndarray, normals: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """For points (n, 2): whether each lies inside some octagon (all 8 half-planes strictly)."""
    inside = (points @ normals.T)[:, None, :] < offsets[None, :, :]
    return np.asarray(inside.all(axis=2).any(axis=1))


def _segments_clear(
    a: np.ndarray, b: np.ndarray, normals: np.ndarray, offsets: np.ndarray
) -> np.ndarray:
    """For segments a[i] → b[i] ((n, 2) each), whether each misses every octagon's interior
    (Cyrus–Beck clipping against the 8 half-planes; touching a boundary is allowed)."""
    na = a @ normals.T  # (n, 8)
    nd = (b - a) @ normals.T  # (n, 8)
    room = offsets[None, :, :] - na[:, None, :]  # (n, R, 8): d − n·a
    step = np.broadcast_to(nd[:, None, :], room.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = room / step
    enter = np.where(step < 0, t, -np.inf).max(axis=2)
    leave = np.where(step > 0, t, np.inf).min(axis=2)
    parallel_out = ((step == 0) & (room <= 0)).any(axis=2)
    enter, leave = np.maximum(enter, 0.0), np.minimum(leave, 1.0)
    hits = (leave - enter > 1e-9) & ~parallel_out
    return np.asarray(~hits.any(axis=1))


def shortest_path(
    start: np.ndarray, goal: np.ndarray, rects: list[Rect], radius: float = ROBOT_RADIUS_M
) -> list[np.ndarray] | None:
    """The shortest collision-free path for a robot of `radius` from `start` to `goal` ((2,)
    each, m): its waypoints, start and goal included; None when there is none (or either end
    overlaps an obstacle)."""
    start, goal = np.asarray(start[:2], float), np.asarray(goal[:2], float)
    normals, offsets = _octagons(rects, radius)
    if _inside_any(np.stack([start, goal]), normals, offsets).any():
        return None
    corners = np.array(_vertices(rects, radius, 1e-3), dtype=float).reshape(-1, 2)
    in_room = (corners[:, 0] > 0) & (corners[:, 0] < ROOM_X) & (np.abs(corners[:, 1]) < ROOM_Y / 2)
    corners = corners[in_room]
    corners = corners[~_inside_any(corners, normals, offsets)]
    pts = np.concatenate([start[None, :], goal[None, :], corners])
    n = len(pts)
    ii, jj = np.triu_indices(n, 1)
    clear = _segments_clear(pts[ii], pts[jj], normals, offsets)
    ii, jj = ii[clear], jj[clear]
    lengths = np.sqrt(((pts[ii] - pts[jj]) ** 2).sum(axis=1))
    edges: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    for i, j, w in zip(ii.tolist(), jj.tolist(), lengths.tolist(), strict=True):
        edges[i].append((w, j))
        edges[j].append((w, i))
    dist = [math.inf] * n
    prev = [-1] * n
    dist[0] = 0.0
    queue = [(0.0, 0)]
    while queue:
        d, u = heapq.heappop(queue)
        if u == 1:
            break
        if d > dist[u]:
            continue
        for w, v in edges[u]:
            if d + w < dist[v]:
                dist[v], prev[v] = d + w, u
                heapq.heappush(queue, (d + w, v))
    if math.isinf(dist[1]):
        return None
    path, k = [], 1
    while k != -1:
        path.append(pts[k].copy())
        k = prev[k]
    return path[::-1]


def path_length(path: list[np.ndarray]) -> float:
    """Length of a polyline of (2,) points, m."""
    return float(sum(np.linalg.norm(b - a) for a, b in itertools.pairwise(path)))


def stand_pose(
    rect: Rect, point: np.ndarray, rects: list[Rect], radius: float = ROBOT_RADIUS_M
) -> np.ndarray | None:
    """Where the base stands to work at `point` on the counter `rect`: facing the counter from
    its nearest free side, `radius` + CLEARANCE_M off it (x, y, yaw), or None when no side is
    free."""
    x, y, hx, hy = rect
    px, py = float(point[0]), float(point[1])
    off = radius + CLEARANCE_M
    best: tuple[float, np.ndarray] | None = None
    for normal in ((1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0)):
        if normal[0]:
            sx, sy = x + normal[0] * (hx + off), py
        else:
            sx, sy = px, y + normal[1] * (hy + off)
        spot = np.array([sx, sy])
        if blocked(spot, rects, radius):
            continue
        reach = math.hypot(px - sx, py - sy)
        yaw = math.atan2(py - sy, px - sx)
        if best is None or reach < best[0]:
            best = (reach, np.array([sx, sy, yaw]))
    return None if best is None else best[1]


def handover_stand(
    point: np.ndarray, rects: list[Rect], radius: float = ROBOT_RADIUS_M
) -> np.ndarray | None:
    """Where the base stands to hold a part out at the hand-over point `point` (x, y, ...):
    the person receiving it stands beyond the point from the room's centre line (y = 0), so the
    base stands HANDOVER_REACH_M on the centre line's side, facing the person (x, y, yaw); None
    when that spot is blocked."""
    side = 1.0 if float(point[1]) >= 0.0 else -1.0
    spot = np.array([float(point[0]), float(point[1]) - side * HANDOVER_REACH_M])
    if blocked(spot, rects, radius):
        return None
    return np.array([spot[0], spot[1], side * math.pi / 2])


def task_shortest_path(
    plan: FloorPlan,
    source: int,
    start: np.ndarray,
    target: int | None,
    goal: np.ndarray,
) -> float | None:
    """The l_i of SPL for a pick-and-place: the shortest base path from the start to the
    stand-off serving `start` on counter `source`, then to the one serving `goal` on counter
    `target` (None: the hand-over stand of `goal`, `handover_stand`), m (None when a stand-off
    or a leg cannot be reached)."""
    rects = plan.obstacles()
    pick = stand_pose(plan.counter_rect(source), start, rects)
    place = (
        handover_stand(goal, rects)
        if target is None
        else stand_pose(plan.counter_rect(target), goal, rects)
    )
    if pick is None or place is None:
        return None
    first = shortest_path(np.array(plan.start[:2]), pick[:2], rects)
    second = shortest_path(pick[:2], place[:2], rects)
    if first is None or second is None:
        return None
    return path_length(first) + path_length(second)
