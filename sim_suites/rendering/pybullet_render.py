"""PyBullet rendering with its CPU TinyRenderer: the same two cameras, lights and colours.

The Panda's visual meshes come with the URDF; scene bodies get visual shapes matching their
collision shapes when the backend is built for cameras (`visual_shapes`). Lighting follows
`Appearance.lighting_scale` through TinyRenderer's ambient, diffuse and specular coefficients;
textures of the bank are loaded from PNG files (`sim_suites.rendering.textures.texture_files`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_suites.arena import Body
from sim_suites.engines.quiet import native_output_silenced
from sim_suites.rendering.appearance import TABLE_RGBA, Appearance
from sim_suites.rendering.cameras import (
    CAMERAS,
    offset_pose,
    scene_camera_pose,
    wrist_camera_pose,
)
from sim_suites.rendering.textures import box_mesh_file, texture_files

with native_output_silenced():  # PyBullet prints its build banner on import
    import pybullet

#: TinyRenderer light at lighting_scale 1 (direction toward the light, coefficients).
LIGHT_DIRECTION = (-0.3, 0.4, 1.0)
LIGHT_AMBIENT, LIGHT_DIFFUSE, LIGHT_SPECULAR = 0.45, 0.5, 0.05
#: Half-extents of the visible table top (m) and its thickness below z = 0.
TABLE_HALF_M = (1.0, 1.0, 0.005)
#: A table texture repeats every 1/8 m, as MuJoCo's table material (TABLE_TEXREPEAT).
TABLE_TEXTURE_PER_M = 8.0


def table_visual(client: Any) -> int:
    """A visible table top (the collision plane has no visual in TinyRenderer)."""
    return int(
        client.createVisualShape(
            pybullet.GEOM_MESH,
            fileName=str(box_mesh_file(TABLE_HALF_M, TABLE_TEXTURE_PER_M)),
            visualFramePosition=[0.5, 0.0, -TABLE_HALF_M[2]],
            rgbaColor=list(TABLE_RGBA),
        )
    )


def _rot(quat_xyzw: tuple[float, ...]) -> np.ndarray:
    return np.array(pybullet.getMatrixFromQuaternion(quat_xyzw)).reshape(3, 3)


class PybulletRenderer:
    """Draws the scene and wrist cameras of a `PybulletBackend` built with visual shapes.

    Args:
        client: the backend's BulletClient. robot, hand_link: robot id and its hand link.
        bodies: scene body name → (PyBullet id, link index of its geoms, the Body).
        table: the table's id. size: image (height, width).
    """

    def __init__(
        self,
        client: Any,
        robot: int,
        hand_link: int,
        bodies: dict[str, tuple[int, int, Body]],
        table: int,
        size: tuple[int, int],
    ) -> None:
        self.client, self.robot, self.hand_link = client, robot, hand_link
        self.bodies, self.table = bodies, table
        self.height, self.width = size
        self._scale = 1.0
        self._offsets: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self._textures = [int(client.loadTexture(str(path))) for path in texture_files()]
        # A white texture stands for "no texture": TinyRenderer keeps a texture once set.
        self._plain = int(client.loadTexture(str(texture_files(plain=True)[0])))
        cams = {c.name: c for c in CAMERAS}
        self._projection = {
            name: client.computeProjectionMatrixFOV(
                c.fovy_deg, self.width / self.height, c.near_m, c.far_m
            )
            for name, c in cams.items()
        }
        self._clip = {name: (c.near_m, c.far_m) for name, c in cams.items()}

    def apply(self, appearance: Appearance) -> None:
        """Set the light scale, body colours and textures, and camera poses for this episode."""
        self._scale = appearance.lighting_scale
        self._offsets = {cam.name: appearance.camera_offset(cam.name) for cam in CAMERAS}
        self._paint(self.table, -1, -1, "table", TABLE_RGBA, appearance)
        for name, (bid, link, body) in self.bodies.items():
            for k, geom in enumerate(body.geoms):
                self._paint(bid, link, k, name, geom.rgba, appearance)

    def _paint(
        self,
        bid: int,
        link: int,
        shape: int,
        name: str,
        rgba: tuple[float, ...],
        appearance: Appearance,
    ) -> None:
        """Colour one visual shape, textured (white × texture) or flat (white texture)."""
        k = appearance.texture(name)
        colour = appearance.colour(name, (1.0, 1.0, 1.0, 1.0) if k else rgba)
        texture = self._textures[k - 1] if k else self._plain
        self.client.changeVisualShape(
            bid, link, shapeIndex=shape, rgbaColor=list(colour), textureUniqueId=texture
        )

    def camera_pose(self, camera: str) -> tuple[np.ndarray, np.ndarray]:
        """World position and rotation of a camera, its episode's pose offset applied."""
        if camera == "scene":
            pos, rot = scene_camera_pose()
        else:
            state = self.client.getLinkState(
                self.robot, self.hand_link, computeForwardKinematics=True
            )
            pos, rot = wrist_camera_pose(_rot(state[5]), np.array(state[4]))
        offset, tilt = self._offsets.get(camera, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
        return offset_pose(pos, rot, offset, tilt)

    def render(self, camera: str, depth: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """RGB (h, w, 3) uint8 and, if asked, metric depth (h, w, 1) float32; fresh arrays."""
        pos, rot = self.camera_pose(camera)
        view = self.client.computeViewMatrix(
            cameraEyePosition=list(pos),
            cameraTargetPosition=list(pos - rot[:, 2]),
            cameraUpVector=list(rot[:, 1]),
        )
        s = self._scale
        _, _, rgba, zbuf, _ = self.client.getCameraImage(
            self.width,
            self.height,
            view,
            self._projection[camera],
            renderer=pybullet.ER_TINY_RENDERER,
            lightDirection=list(LIGHT_DIRECTION),
            lightColor=[1.0, 1.0, 1.0],
            lightAmbientCoeff=LIGHT_AMBIENT * s,
            lightDiffuseCoeff=LIGHT_DIFFUSE * s,
            lightSpecularCoeff=LIGHT_SPECULAR * s,
            shadow=0,
            flags=pybullet.ER_NO_SEGMENTATION_MASK,
        )
        image = np.array(rgba, dtype=np.uint8).reshape(self.height, self.width, 4)[..., :3].copy()
        if not depth:
            return image, None
        near, far = self._clip[camera]
        b = np.asarray(zbuf, dtype=np.float64).reshape(self.height, self.width)
        z = near * far / (far - b * (far - near))
        return image, np.minimum(z, far).astype(np.float32)[..., None]
