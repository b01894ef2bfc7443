"""Scene bodies in PyBullet: collision (and, for cameras, visual) shapes from the arena's geoms,
and the hand's coupled, force-limited finger drive."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from sim_suites.arena import PART_ROLES, Body, Geom
from sim_suites.engines.quiet import native_output_silenced
from sim_suites.rendering.appearance import TEXTURED_ROLES
from sim_suites.rendering.textures import box_mesh_file

with native_output_silenced():  # PyBullet prints its build banner on import
    import pybullet


def shape_arrays(body: Body) -> dict[str, list[Any]]:
    """The body's geoms as PyBullet shape-array arguments (types, half extents, radii, lengths)."""
    shapes, extents, radii, lengths, positions = [], [], [], [], []
    for geom in body.geoms:
        if geom.shape == "box":
            shapes.append(pybullet.GEOM_BOX)
            extents.append(list(geom.size))
            radii.append(0.0)
            lengths.append(0.0)
        elif geom.shape in ("capsule", "cylinder"):
            shapes.append(
                pybullet.GEOM_CAPSULE if geom.shape == "capsule" else pybullet.GEOM_CYLINDER
            )
            extents.append([0.0, 0.0, 0.0])
            radii.append(geom.size[0])
            lengths.append(2.0 * geom.size[1])
        else:
            shapes.append(pybullet.GEOM_SPHERE)
            extents.append([0.0, 0.0, 0.0])
            radii.append(geom.size[0])
            lengths.append(0.0)
        positions.append(list(geom.pos))
    return {
        "shapeTypes": shapes,
        "halfExtents": extents,
        "radii": radii,
        "lengths": lengths,
        "positions": positions,
    }


def visual_shapes(client: Any, body: Body) -> int:
    """A visual shape array matching the body's collision geoms (−1 when it has none).

    Boxes of the bodies `object_texture` retextures are meshes with texture coordinates
    (`sim_suites.rendering.textures.box_mesh_file`): TinyRenderer's own boxes have none.
    """
    if not body.geoms:
        return -1
    args = shape_arrays(body)
    positions = args.pop("positions")
    if body.role in TEXTURED_ROLES and all(g.shape == "box" for g in body.geoms):
        args = {
            "shapeTypes": [pybullet.GEOM_MESH] * len(body.geoms),
            "fileNames": [str(box_mesh_file(tuple(g.size))) for g in body.geoms],
        }
    return int(client.createVisualShapeArray(**args, visualFramePositions=positions))


def scaled_body(body: Body, s: float) -> Body:
    """The body with every geom's size and offset × `s` (mass kept; see `PhysicsParams`)."""
    geoms = tuple(
        Geom(
            g.shape,
            tuple(v * s for v in g.size),
            (g.pos[0] * s, g.pos[1] * s, g.pos[2] * s),
            g.rgba,
        )
        for g in body.geoms
    )
    return dataclasses.replace(body, geoms=geoms)


def add_body(client: Any, body: Body, visual: bool) -> int:
    """Create one scene body (fixed, free or on a prismatic joint); returns its PyBullet id.

    Args:
        client: the BulletClient. body: the arena body. visual: also give it visual shapes
            (only environments with cameras need them).
    """
    c = client
    args = shape_arrays(body)
    positions = args.pop("positions")
    shape = c.createCollisionShapeArray(**args, collisionFramePositions=positions)
    seen = visual_shapes(c, body) if visual else -1
    if body.joint == "slide":
        bid = c.createMultiBody(
            baseMass=0.0,
            baseCollisionShapeIndex=-1,
            basePosition=list(body.pos),
            linkMasses=[body.mass],
            linkCollisionShapeIndices=[shape],
            linkVisualShapeIndices=[seen],
            linkPositions=[[0.0, 0.0, 0.0]],
            linkOrientations=[[0.0, 0.0, 0.0, 1.0]],
            linkInertialFramePositions=[[0.0, 0.0, 0.0]],
            linkInertialFrameOrientations=[[0.0, 0.0, 0.0, 1.0]],
            linkParentIndices=[0],
            linkJointTypes=[pybullet.JOINT_PRISMATIC],
            linkJointAxis=[list(body.slide_axis)],
        )
        c.changeDynamics(
            bid,
            0,
            jointLowerLimit=body.slide_range[0],
            jointUpperLimit=body.slide_range[1],
            jointDamping=body.slide_damping,
            linearDamping=0.0,
            angularDamping=0.0,
            lateralFriction=1.0,
        )
    else:
        mass = body.mass if body.joint == "free" else 0.0
        bid = c.createMultiBody(
            baseMass=mass,
            baseCollisionShapeIndex=shape,
            baseVisualShapeIndex=seen,
            basePosition=list(body.pos),
        )
        c.changeDynamics(
            bid,
            -1,
            linearDamping=0.0,
            angularDamping=0.0,
            lateralFriction=body.friction if body.role in PART_ROLES else 1.0,
        )
    return int(bid)


def coupled_finger_force(
    q: np.ndarray, qd: np.ndarray, cmd: float, kp: float, kv: float, limit: float
) -> np.ndarray:
    """Forces (2,) N on the two fingers of a single-drive gripper, force-limited to `limit`.

    The drive servoes the mean opening q̄ to `cmd` (F = clip(kp·(cmd − q̄) − kv·q̄̇, ±limit)); a
    stiff coupling term kp·(q̄ − q_i) − kv·(q̇_i − q̄̇) keeps the fingers together, as the
    hand's mechanism does, and each finger's total stays within ±limit.

    Args:
        q, qd: (2,) finger positions (m) and velocities (m/s). cmd: set-point per finger, m.
    """
    mean, mean_v = 0.5 * float(q[0] + q[1]), 0.5 * float(qd[0] + qd[1])
    drive = min(limit, max(-limit, kp * (cmd - mean) - kv * mean_v))
    out = drive + kp * (mean - q) - kv * (qd - mean_v)
    return np.minimum(np.maximum(out, -limit), limit)


def wxyz(q_xyzw: tuple[float, ...]) -> np.ndarray:
    """A PyBullet quaternion (x, y, z, w) in the project's order (w, x, y, z)."""
    return np.array([q_xyzw[3], q_xyzw[0], q_xyzw[1], q_xyzw[2]])


def xyzw(q_wxyz: np.ndarray) -> list[float]:
    """A quaternion (w, x, y, z) in PyBullet's order (x, y, z, w)."""
    return [float(q_wxyz[1]), float(q_wxyz[2]), float(q_wxyz[3]), float(q_wxyz[0])]
