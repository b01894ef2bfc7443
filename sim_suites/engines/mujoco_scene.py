"""The scene's bodies in a MuJoCo model spec (`MjSpec`): what `MujocoBackend` builds the arena
from, as `sim_suites.engines.pybullet_scene` does for PyBullet."""

from __future__ import annotations

import mujoco
import numpy as np

from sim_suites.arena import PART_ROLES, Body

#: Everything collides with everything in the world (the robot's own flags are the backend's).
WORLD_CONTYPE, WORLD_CONAFFINITY = 1, 1
GEOM_TYPES = {
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
}


def add_scene_body(spec: mujoco.MjSpec, body: Body) -> None:
    """Add one scene body (`sim_suites.arena.Body`) to the model spec: its joint (free, slide
    with damping and Coulomb friction, or a mocap body when fixed), its geoms with the mass split
    over the boxes by volume, and the parts' friction."""
    mj_body = spec.worldbody.add_body()
    mj_body.name = body.name
    mj_body.pos = list(body.pos)
    if body.joint == "free":
        mj_body.add_freejoint()
    elif body.joint == "slide":
        joint = mj_body.add_joint()
        joint.name = f"{body.name}_slide"
        joint.type = mujoco.mjtJoint.mjJNT_SLIDE
        joint.axis = list(body.slide_axis)
        joint.range = list(body.slide_range)
        joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.damping = [body.slide_damping, 0.0, 0.0]
        joint.frictionloss = body.slide_friction_n
    else:
        # Fixed bodies are mocap bodies: the compiler would otherwise fuse them into the
        # world (URDF import fuses static bodies), and mocap lets the obstacle be moved.
        mj_body.mocap = True
    volume = sum(float(np.prod(g.size)) * 8.0 for g in body.geoms if g.shape == "box")
    for geom in body.geoms:
        mj_geom = mj_body.add_geom()
        mj_geom.type = GEOM_TYPES[geom.shape]
        mj_geom.size = list(geom.size) + [0.0] * (3 - len(geom.size))
        mj_geom.pos = list(geom.pos)
        mj_geom.rgba = list(geom.rgba)
        mj_geom.contype, mj_geom.conaffinity = WORLD_CONTYPE, WORLD_CONAFFINITY
        if body.joint != "fixed":
            # Mass split over the boxes by volume; the compiler derives the inertia.
            share = float(np.prod(geom.size)) * 8.0 / volume if volume else 1.0
            mj_geom.mass = body.mass * share
        if body.role in PART_ROLES:
            mj_geom.priority = 1
            mj_geom.friction = [body.friction, 0.005, 0.0001]
        else:
            mj_geom.friction = [1.0, 0.005, 0.0001]
