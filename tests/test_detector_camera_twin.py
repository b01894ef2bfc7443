"""The camera path of the success detector on the twin's own rendered frames (no ROS): with the
twin profile's declared camera pose and CameraInfo intrinsics, the object located by colour in a
frame is within 1 cm of where it is. Runs in a subprocess that picks EGL for offscreen rendering."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mujoco")
pytest.importorskip("sim_suites.env")

pytestmark = pytest.mark.timeout(300)

SCRIPT = r"""
import json, math
import numpy as np
from embodied_eval.records import EpisodeSpec
from real_bridge.bridge_config import load_bridge_config, profile_path
from real_bridge.detector_camera import CameraModel, locate_in_image
from real_bridge.interface import episode_manifest
from real_bridge.twin.sensors import CAMERA_FOVY_DEG
from real_bridge.twin.settings import TwinSettings
from real_bridge.twin.sim_plant import SimSuitesPlant
from sim_suites.tasks import make_task

config = load_bridge_config(profile_path("twin"))
plant = SimSuitesPlant(TwinSettings())
size = 128
f = (size / 2) / math.tan(math.radians(CAMERA_FOVY_DEG) / 2)  # as the twin's CameraInfo says
camera = CameraModel(
    np.array([[f, 0, size / 2], [0, f, size / 2], [0, 0, 1.0]]),
    np.array(config.camera.position_m),
    np.array(config.camera.look_at_m),
)
out = []
for task in ("pick_place/cube_left", "push/block_diagonal", "peg_insert/peg_far"):
    spec = EpisodeSpec(episode_id="c-real-ros2-a1", pair_id="c", side="real",
                       family=task.split("/")[0], task_id=task, seed=2, drift_name="nominal",
                       drift={}, engine="ros2")
    plant.reset_scene(spec, episode_manifest(spec, None, max_steps=60))
    for _ in range(50):
        plant.step_physics()
    image = np.clip(plant.render(size) * 0.8, 0, 255).astype(np.uint8)  # the gap's exposure
    pos, _ = plant.object_pose()
    t = make_task(task)
    rgb = [b for b in t.bodies() if b.name == t.object_name][0].geoms[0].rgba[:3]
    seen, pixels = locate_in_image(image, rgb, camera, float(pos[2]))
    out.append([task, pixels, None if seen is None else float(np.hypot(*(seen - pos)[:2]))])
plant.close()
print(json.dumps(out))
"""


def test_the_profile_camera_locates_the_twins_objects_within_a_centimetre():
    env = dict(os.environ, MUJOCO_GL="egl")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    for task, pixels, error_m in rows:
        assert pixels >= 8, task
        assert error_m is not None and error_m < 0.01, (task, error_m)
