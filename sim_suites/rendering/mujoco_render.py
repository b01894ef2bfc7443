"""MuJoCo offscreen rendering: visual meshes, lights and the two cameras, drawn with EGL.

`add_visuals(spec)` runs before the model is compiled (only for environments that render, so
state-only environments pay nothing): it adds the Panda's visual meshes from the URDF (MuJoCo's
URDF import drops them; simplified to MESH_DETAIL_M by `simplified_mesh`) as non-colliding
geoms, hides the collision meshes from the cameras,
adds two lights, the scene and wrist cameras of `sim_suites.rendering.cameras` and the texture
bank of `sim_suites.rendering.textures` (as materials).
`MujocoRenderer` then draws RGB (and metric depth) images of the current state.
"""

from __future__ import annotations

import functools
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from sim_suites.panda_description import pybullet_panda_urdf_path
from sim_suites.rendering.appearance import TABLE_RGBA, Appearance
from sim_suites.rendering.cameras import (
    CAMERAS,
    FAR_M,
    NEAR_M,
    WRIST_POS_IN_HAND,
    WRIST_ROT_IN_HAND,
    offset_pose,
    scene_camera_pose,
)
from sim_suites.rendering.gl import offscreen_context
from sim_suites.rendering.textures import TEXTURE_PX, TEXTURES, texture_image
from sim_suites.robot import SerialArm

#: Geom group of the visual meshes (drawn) and of the robot's collision meshes (hidden).
VISUAL_GROUP, HIDDEN_GROUP = 1, 3
#: Robot colours: white links, dark grey wrist flange and fingers (as the real arm).
_WHITE = (0.93, 0.93, 0.92, 1.0)
_DARK = (0.25, 0.25, 0.27, 1.0)
#: Lights at lighting_scale 1: a key light from above the robot, a fill light from the side
#: as (position, direction, diffuse, ambient, specular intensity per channel).
LIGHTS: tuple[
    tuple[tuple[float, float, float], tuple[float, float, float], float, float, float], ...
] = (
    ((0.3, -0.4, 1.8), (0.15, 0.25, -1.0), 0.6, 0.25, 0.2),
    ((1.4, 0.8, 1.2), (-0.8, -0.5, -0.6), 0.3, 0.05, 0.05),
)


def _quat_from_matrix(rot: np.ndarray) -> list[float]:
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rot, dtype=float).reshape(9))
    return [float(v) for v in quat]


def _rpy_matrix(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (
        math.cos(r),
        math.sin(r),
        math.cos(p),
        math.sin(p),
        math.cos(y),
        math.sin(y),
    )
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def urdf_visuals(path: Path | None = None) -> list[tuple[str, Path, np.ndarray]]:
    """(link, mesh file, 4×4 pose in the link frame) of every visual mesh of a URDF (default:
    the Panda's as shipped)."""
    path = path or pybullet_panda_urdf_path()
    out = []
    for link in ET.parse(path).getroot().findall("link"):
        for visual in link.findall("visual"):
            mesh = visual.find("geometry/mesh")
            if mesh is None:
                continue
            origin = visual.find("origin")
            xyz = [
                float(v)
                for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()
            ]
            rpy = [
                float(v)
                for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()
            ]
            pose = np.eye(4)
            pose[:3, :3] = _rpy_matrix(*rpy)
            pose[:3, 3] = xyz
            file = path.parent / mesh.attrib["filename"].replace("package://", "")
            out.append((link.attrib["name"], file, pose))
    return out


#: Detail kept in the visual meshes (m): vertices closer than this are merged. A pixel of a
#: 128-row scene image covers ~7 mm at the table, so the robot looks the same, while the triangle
#: count drops from ~78k to ~21k and the software rasterizer's frame time by about half.
MESH_DETAIL_M = 0.008


@functools.lru_cache(maxsize=16)
def simplified_mesh(file: Path, cell_m: float = MESH_DETAIL_M) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (n, 3) and triangles (m, 3) of an OBJ file, simplified by vertex clustering.

    Every vertex moves to the mean of the vertices in its cubic grid cell of side `cell_m`;
    triangles that collapse (two corners in one cell) and duplicates are dropped.
    """
    verts: list[list[float]] = []
    faces: list[list[int]] = []
    for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("v "):
            verts.append([float(v) for v in line.split()[1:4]])
        elif line.startswith("f "):
            idx = [int(tok.split("/")[0]) - 1 for tok in line.split()[1:]]
            faces.extend([idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1))
    v = np.array(verts)
    f = np.array(faces, dtype=np.int64)
    cells, label = np.unique(np.floor(v / cell_m).astype(np.int64), axis=0, return_inverse=True)
    label = label.reshape(-1)
    merged = np.zeros((len(cells), 3))
    np.add.at(merged, label, v)
    merged /= np.bincount(label, minlength=len(cells))[:, None]
    tri = label[f]
    keep = (tri[:, 0] != tri[:, 1]) & (tri[:, 1] != tri[:, 2]) & (tri[:, 0] != tri[:, 2])
    tri = np.unique(tri[keep], axis=0)
    return merged, tri


def add_visuals(spec: mujoco.MjSpec, kin: SerialArm, width: int, height: int) -> None:
    """Visual meshes, lights and cameras (see the module docstring), before compiling `spec`."""
    # The URDF import discards geoms that collide with nothing; these are meant to be seen.
    spec.compiler.discardvisual = False
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            geom.group = HIDDEN_GROUP
    hand = kin.link7_to_hand
    meshes: dict[str, str] = {}
    dark = (kin.last_link, *kin.finger_links)
    for link, file, pose in urdf_visuals(kin.layout.description_file(False)):
        # The importer fuses the hand into the last arm link and the base link into the world.
        if link in kin.fused_into_last:
            body, pose = spec.body(kin.last_link), hand @ pose
        else:
            body = spec.body(link) or spec.worldbody
        name = f"visual_{file.stem}"
        if name not in meshes:
            vertices, triangles = simplified_mesh(file)
            mesh = spec.add_mesh()
            mesh.name = name
            mesh.uservert = vertices.ravel().tolist()
            mesh.userface = triangles.ravel().tolist()
            meshes[name] = name
        geom = body.add_geom()
        geom.type = mujoco.mjtGeom.mjGEOM_MESH
        geom.meshname = name
        geom.pos = [float(v) for v in pose[:3, 3]]
        geom.quat = _quat_from_matrix(pose[:3, :3])
        geom.contype = geom.conaffinity = 0
        geom.group = VISUAL_GROUP
        geom.mass = 0.0
        geom.rgba = list(_DARK if link in dark else _WHITE)
    spec.visual.headlight.active = 0
    # Software OpenGL is the common case on servers: no multisampling and no shadows (a
    # shadow pass draws every mesh again and would dominate the frame time).
    spec.visual.quality.offsamples = 0
    spec.visual.quality.shadowsize = 512
    spec.visual.global_.offwidth = max(width, 640)
    spec.visual.global_.offheight = max(height, 480)
    for i, (where, direction, diffuse, ambient, specular) in enumerate(LIGHTS):
        light = spec.worldbody.add_light()
        light.name = f"light_{i}"
        light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
        light.pos = list(where)
        light.dir = list(direction)
        light.diffuse = [diffuse] * 3
        light.ambient = [ambient] * 3
        light.specular = [specular] * 3
        light.castshadow = False
    for camera in CAMERAS:
        if camera.name == "scene":
            pos, rot = scene_camera_pose()
            cam = spec.worldbody.add_camera()
        else:
            pos = hand[:3, :3] @ WRIST_POS_IN_HAND + hand[:3, 3]
            rot = hand[:3, :3] @ WRIST_ROT_IN_HAND
            cam = spec.body(kin.last_link).add_camera()
        cam.name = camera.name
        cam.pos = [float(v) for v in pos]
        cam.quat = _quat_from_matrix(rot)
        cam.fovy = camera.fovy_deg
    add_texture_bank(spec)


#: How often a texture repeats per metre of the table (per axis) and across a part's face.
TABLE_TEXREPEAT = (8.0, 8.0)
PART_TEXREPEAT = (1.0, 1.0)


def add_texture_bank(spec: mujoco.MjSpec) -> None:
    """One 2-D texture and two materials (table, part) per texture of the bank; `apply` points
    geoms at them per episode (`geom_matid`)."""
    for k, recipe in enumerate(TEXTURES, start=1):
        texture = spec.add_texture()
        texture.name = f"texture_{k}"
        texture.type = mujoco.mjtTexture.mjTEXTURE_2D
        texture.width = texture.height = TEXTURE_PX
        texture.nchannel = 3
        texture.data = texture_image(recipe).tobytes()
        for use, repeat in (("table", TABLE_TEXREPEAT), ("part", PART_TEXREPEAT)):
            material = spec.add_material()
            material.name = f"{use}_texture_{k}"
            material.textures = ["", f"texture_{k}"] + [""] * 8
            material.texrepeat = list(repeat)
            material.texuniform = use == "table"
            material.rgba = [1.0, 1.0, 1.0, 1.0]


class MujocoRenderer:
    """Draws the scene and wrist cameras of a `MujocoBackend` built with visuals."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, size: tuple[int, int]) -> None:
        self.model, self.data = model, data
        self.height, self.width = size
        self._ctx: Any = offscreen_context(model.vis.global_.offwidth, model.vis.global_.offheight)
        extent = float(model.stat.extent)
        model.vis.map.znear = NEAR_M / extent
        model.vis.map.zfar = FAR_M / extent
        self._scene = mujoco.MjvScene(model, maxgeom=500)
        self._option = mujoco.MjvOption()
        self._perturb = mujoco.MjvPerturb()
        self._mjr = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_50)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._mjr)
        self._rect = mujoco.MjrRect(0, 0, self.width, self.height)
        self._cameras: dict[str, mujoco.MjvCamera] = {}
        for spec in CAMERAS:
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
            cam.fixedcamid = model.camera(spec.name).id
            self._cameras[spec.name] = cam
        self._nominal_light = (
            model.light_diffuse.copy(),
            model.light_ambient.copy(),
            model.light_specular.copy(),
        )
        self._nominal_rgba = model.geom_rgba.copy()
        self._nominal_cameras = {
            spec.name: (
                model.cam_pos[model.camera(spec.name).id].copy(),
                model.cam_quat[model.camera(spec.name).id].copy(),
            )
            for spec in CAMERAS
        }
        self._materials = {
            use: [model.material(f"{use}_texture_{k}").id for k in range(1, len(TEXTURES) + 1)]
            for use in ("table", "part")
        }
        table = model.geom("table").id
        self._nominal_rgba[table] = TABLE_RGBA
        model.geom_rgba[table] = TABLE_RGBA
        # Geoms per scene body name (the table is geom "table" of the world).
        self._body_geoms: dict[str, list[int]] = {"table": [table]}
        for g in range(model.ngeom):
            body = model.body(int(model.geom_bodyid[g])).name
            if body and not body.startswith("panda_") and body != "world":
                self._body_geoms.setdefault(body, []).append(g)

    def apply(self, appearance: Appearance) -> None:
        """Set light intensities, body colours and textures, and camera poses for this episode."""
        m, s = self.model, appearance.lighting_scale
        diffuse, ambient, specular = self._nominal_light
        m.light_diffuse[:] = diffuse * s
        m.light_ambient[:] = ambient * s
        m.light_specular[:] = specular * s
        for body, geoms in self._body_geoms.items():
            k = appearance.texture(body)
            materials = self._materials["table" if body == "table" else "part"]
            for g in geoms:
                m.geom_matid[g] = materials[k - 1] if k else -1
                # A textured geom shows the texture's own colours (white × texture).
                rgba = (1.0, 1.0, 1.0, 1.0) if k else self._nominal_rgba[g]
                m.geom_rgba[g] = appearance.colour(body, rgba)
        for camera, (pos, quat) in self._nominal_cameras.items():
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, quat)
            offset, tilt = appearance.camera_offset(camera)
            new_pos, new_rot = offset_pose(pos, rot.reshape(3, 3), offset, tilt)
            cid = m.camera(camera).id
            m.cam_pos[cid] = new_pos
            m.cam_quat[cid] = _quat_from_matrix(new_rot)
        # The cameras' world poses (`cam_xpos`, `cam_xmat`) follow the model's at once, not
        # only at the next physics step.
        mujoco.mj_camlight(m, self.data)

    def render(self, camera: str, depth: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """RGB (h, w, 3) uint8 and, if asked, metric depth (h, w, 1) float32; fresh arrays."""
        self._ctx.make_current()
        mujoco.mjv_updateScene(
            self.model,
            self.data,
            self._option,
            self._perturb,
            self._cameras[camera],
            mujoco.mjtCatBit.mjCAT_ALL,
            self._scene,
        )
        mujoco.mjr_render(self._rect, self._scene, self._mjr)
        rgb = np.empty((self.height, self.width, 3), dtype=np.uint8)
        z = np.empty((self.height, self.width), dtype=np.float32) if depth else None
        mujoco.mjr_readPixels(rgb, z, self._rect, self._mjr)
        image = np.ascontiguousarray(rgb[::-1])
        if z is None:
            return image, None
        zero_far = self._mjr.readDepthMap == mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        return image, metric_depth(z[::-1], self.model, zero_far)[..., None]

    def close(self) -> None:
        if self._ctx is not None:
            self._mjr.free()
            self._ctx.free()
            self._ctx = None


def metric_depth(buffer: np.ndarray, model: mujoco.MjModel, zero_far: bool) -> np.ndarray:
    """Distance along the optical axis (m, float32) from an OpenGL depth buffer in [0, 1].

    With near n and far f (m), a perspective buffer value b maps to z = n·f / (f − b·(f − n))
    (b = 0 at the near plane), or z = n·f / (n + b·(f − n)) for a reversed map (b = 1 at the
    near plane, `zero_far`); the result is clipped to f.
    """
    extent = float(model.stat.extent)
    near = float(model.vis.map.znear) * extent
    far = float(model.vis.map.zfar) * extent
    b = buffer.astype(np.float64)
    out = (
        near * far / (near + b * (far - near))
        if zero_far
        else near * far / (far - b * (far - near))
    )
    return np.minimum(out, far).astype(np.float32)
