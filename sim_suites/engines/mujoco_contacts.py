"""Contact and distance bookkeeping of the MuJoCo backend: who touches whom, and how far apart.

Every geom gets an owner code (−1 none, 0 the robot, 1 the table, 2+ the scene bodies); a table
of owner pairs says which contacts are reported (the robot against anything, task objects against
anything but the table — see `PhysicsBackend.contact_forces`), precomputed per geom pair.
Separation queries use MuJoCo's exact convex distance (`mj_geomDistance`) between the robot's
collision geoms and a body's geoms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mujoco
import numpy as np

from sim_suites.arena import PART_ROLES, Scene
from sim_suites.engines.base import ROBOT, TABLE, pair_key


def force_on_robot(frame: np.ndarray, force: np.ndarray, robot_is_geom2: bool) -> np.ndarray:
    """The force (3,) N, world frame, that one MuJoCo contact exerts on the robot.

    `mj_contactForce` gives the force in the contact frame (normal, then the two tangents; the
    frame's rows are those axes, the normal pointing from geom1 to geom2); it acts on geom2 as
    given and on geom1 opposite.

    Args:
        frame: (9,) or (3, 3) the contact frame (rows: normal, tangent 1, tangent 2).
        force: (3,) normal and tangential force in that frame, N.
        robot_is_geom2: whether the robot's geom is the contact's geom2.
    """
    world = np.asarray(frame, dtype=float).reshape(3, 3).T @ np.asarray(force, dtype=float)
    return world if robot_is_geom2 else -world


def net_force_on_robot(
    frames: np.ndarray, forces: np.ndarray, robot_is_geom2: Sequence[bool]
) -> np.ndarray:
    """The sum (3,) N, world frame, of `force_on_robot` over several contacts: frames (n, 9),
    forces (n, 3), and for each contact whether the robot's geom is its geom2."""
    world = np.einsum("nij,ni->nj", frames.reshape(-1, 3, 3), forces)
    sign = np.where(np.asarray(robot_is_geom2, dtype=bool), 1.0, -1.0)
    return np.asarray(sign @ world, dtype=float)


class MujocoContacts:
    """Reported contact forces and geometric separations for one compiled scene.

    Args:
        model: the compiled model. scene: its scene. body_id: scene body name → body id.
        robot_bodies: body ids of the arm and fingers.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        scene: Scene,
        body_id: Mapping[str, int],
        robot_bodies: set[int],
    ) -> None:
        m = model
        names = [ROBOT, TABLE, *[b.name for b in scene.bodies]]
        code_by_body = {body_id[b.name]: 2 + k for k, b in enumerate(scene.bodies)}
        codes = np.full(m.ngeom, -1, dtype=int)
        for g in range(m.ngeom):
            bid = int(m.geom_bodyid[g])
            if bid in robot_bodies:
                codes[g] = 0
            elif bid == 0:
                codes[g] = 1 if m.geom(g).name == TABLE else -1
            else:
                codes[g] = code_by_body.get(bid, -1)
        n = len(names)
        objects = {2 + k for k, b in enumerate(scene.bodies) if b.role in PART_ROLES}
        relevant = np.zeros((n + 1, n + 1), dtype=bool)  # index −1 (none) maps to the last row
        for a in range(n):
            for b in range(n):
                if a == b:
                    continue
                robot_pair = 0 in (a, b)
                object_on_fixture = (a in objects or b in objects) and 1 not in (a, b)
                relevant[a, b] = robot_pair or object_on_fixture
        owner = codes.tolist()
        # Per geom pair: the reported key, or None for a pair not reported.
        self.pair_keys: list[list[tuple[str, str] | None]] = [
            [pair_key(names[a], names[b]) if relevant[a, b] else None for b in owner] for a in owner
        ]
        self._buf = np.zeros(6)
        # Per geom: 1 on the robot, 0 elsewhere (the external wrench sums robot ↔ non-robot).
        self._robot_geom = (codes == 0).astype(np.int8).tolist()
        # Separation: the robot's collision geoms and each scene body's geoms.
        self.robot_geoms = np.flatnonzero(codes == 0)
        self.geoms_of = {
            b.name: np.flatnonzero(m.geom_bodyid == body_id[b.name]) for b in scene.bodies
        }

    def forces(
        self, model: mujoco.MjModel, data: mujoco.MjData
    ) -> tuple[dict[tuple[str, str], float], np.ndarray]:
        """At the current physics step: the total normal force (N) per reported body pair, and
        the net external force on the robot (3,) N, world frame — the vector sum of every
        contact force a non-robot geom exerts on a robot geom (what a wrist F/T sensor or the
        robot's external-wrench estimate reads: a grip's opposing finger forces cancel)."""
        out: dict[tuple[str, str], float] = {}
        ncon = data.ncon
        if ncon == 0:
            return out, np.zeros(3)
        keys = self.pair_keys
        on_robot = self._robot_geom
        buf = self._buf
        contacts = data.contact
        # A handful of contacts per step: a plain loop over Python ints beats numpy indexing;
        # the robot's contacts are turned into world forces together afterwards.
        external: list[int] = []
        robot_second: list[bool] = []
        local: list[list[float]] = []
        for i, (g1, g2) in enumerate(contacts.geom[:ncon].tolist()):
            key = keys[g1][g2]
            r1, r2 = on_robot[g1], on_robot[g2]
            if key is None and r1 == r2:
                continue
            mujoco.mj_contactForce(model, data, i, buf)
            if key is not None:
                out[key] = out.get(key, 0.0) + abs(float(buf[0]))
            if r1 != r2:
                external.append(i)
                robot_second.append(bool(r2))
                local.append(buf[:3].tolist())
        if not external:
            return out, np.zeros(3)
        return out, net_force_on_robot(contacts.frame[external], np.array(local), robot_second)

    def separation(
        self, model: mujoco.MjModel, data: mujoco.MjData, bodies: Sequence[str], max_m: float
    ) -> dict[str, float]:
        """Smallest distance (m) between the robot's collision geometry and each named body.

        Exact convex distances from `mj_geomDistance`, queried in order of a bounding-sphere
        lower bound (centre distance − both radii) and only while that bound is below the best
        distance so far; 0 when touching or penetrating, `max_m` when farther than that.
        """
        return {
            name: self._least_distance(model, data, self.geoms_of[name], max_m) for name in bodies
        }

    def nearest(
        self, model: mujoco.MjModel, data: mujoco.MjData, bodies: Sequence[str], max_m: float
    ) -> float:
        """Smallest distance (m) between the robot's collision geometry and any of the named
        bodies (the minimum of `separation` over them, 0 when touching, `max_m` when all are
        farther): one bounding-sphere lower bound over every robot geom × every body geom,
        exact distances queried in its order while it is below the best so far."""
        geoms = np.concatenate([self.geoms_of[name] for name in bodies])
        return self._least_distance(model, data, geoms, max_m)

    def _least_distance(
        self, model: mujoco.MjModel, data: mujoco.MjData, geoms: np.ndarray, max_m: float
    ) -> float:
        """Smallest distance (m) between the robot's geoms and `geoms` (ids), at most `max_m`,
        0 when touching: exact distances queried in order of the bounding-sphere lower bound,
        only while that bound is below the best so far."""
        robot = self.robot_geoms
        xpos, rbound = data.geom_xpos, model.geom_rbound
        gap = xpos[robot][:, None, :] - xpos[geoms][None, :, :]
        flat = (np.sqrt((gap * gap).sum(axis=2)) - rbound[robot][:, None] - rbound[geoms]).ravel()
        best = max_m
        for k in np.argsort(flat, kind="stable").tolist():
            if flat[k] >= best:
                break
            i, j = divmod(k, len(geoms))
            dist = mujoco.mj_geomDistance(model, data, int(robot[i]), int(geoms[j]), best, None)
            best = min(best, dist)
        return max(0.0, float(best))
