"""`embodied-eval trial rejudge` on hand-built MCAP recordings (no ROS): the replay reproduces the
verdict judged from the same messages, and a recording stripped of the camera and tracker
streams cannot be judged (a null verdict, exit 3), never a success."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rosbags")
pytest.importorskip("mcap")
pytest.importorskip("sim_suites.tasks")

from embodied_eval.cli.main import main
from embodied_eval.store.core import Store
from real_bridge.detector import CONTEXT_KEY, DETECTOR_NAME, judge_recording
from real_bridge.recording import McapRecorder
from real_bridge.rejudge import (
    EXIT_CANNOT_JUDGE,
    EXIT_DIFFERS,
    EXIT_REPRODUCED,
    recorded_messages,
    rejudge_recording,
)
from tests import recording_builder as rb
from tests.conftest import make_episode
from tests.test_detector import PICK_GOAL, _image_with_object_at

pytestmark = pytest.mark.timeout(60)

TYPES = {
    rb.POSE_TOPIC: "geometry_msgs/msg/PoseStamped",
    rb.CAMERA_TOPIC: "sensor_msgs/msg/CompressedImage",
    rb.INFO_TOPIC: "sensor_msgs/msg/CameraInfo",
    rb.EPISODE_TOPIC: "std_msgs/msg/String",
}


def write_mcap(path, messages, context, *, drop=()):
    recorder = McapRecorder(path, {"episode_id": context.episode_id, CONTEXT_KEY: context.to_json()})
    for topic, msgtype in TYPES.items():
        if topic not in drop:
            recorder.add_stream(topic, msgtype)
    for topic, log_ns, data in messages:
        if topic not in drop:
            recorder.write(topic, data, log_ns)
    return recorder.close()


def episode_messages():
    # The cube 8 mm from the goal by the tracker (noisy), and seen by the camera as well.
    points = [(0.50 + 0.002 * (i % 3 - 1), 0.248, 0.02) for i in range(8)]
    images = [_image_with_object_at((0.50, 0.245, 0.02))] * 4
    return rb.recording(points, images=images)


@pytest.fixture
def stored(tmp_path):
    """A store with the episode as the live run stored it, and its recording."""
    ctx = rb.context("pick_place/cube_center", PICK_GOAL)
    messages = episode_messages()
    verdict = judge_recording(messages, ctx)
    artifact = write_mcap(tmp_path / "ep.mcap", messages, ctx)
    episode = make_episode(
        episode_id=ctx.episode_id,
        pair_id="p1",
        quality=verdict.quality,
        judge={"kind": "detector", "name": verdict.name, "version": verdict.version},
        control={"detector": verdict.to_json()},
        artifacts=(artifact,),
    )
    db = tmp_path / "store.db"
    with Store(db) as store:
        store.write_episode(episode)
    return db, ctx, messages, verdict


def test_the_recording_replays_to_the_same_messages_and_verdict(stored, tmp_path):
    _, ctx, messages, verdict = stored
    read, meta = recorded_messages(tmp_path / "ep.mcap")
    assert [(t, n, bytes(d)) for t, n, d in messages] == read
    assert json.loads(meta[CONTEXT_KEY])["episode_id"] == ctx.episode_id
    assert rejudge_recording(tmp_path / "ep.mcap") == verdict
    assert verdict.success is True and verdict.source == "tracker"


def test_rejudge_reproduces_the_stored_verdict(stored, capsys):
    db, ctx, _, verdict = stored
    code = main(["trial", "rejudge", ctx.episode_id, "--db", str(db), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_REPRODUCED == 0
    assert out["reproduced"] is True and out["verdict"]["name"] == DETECTOR_NAME
    assert out["verdict"]["quality"] == verdict.quality == out["stored"]["quality"]


def test_a_stripped_recording_cannot_be_judged(stored, tmp_path, capsys):
    db, ctx, messages, _ = stored
    stripped = write_mcap(
        tmp_path / "stripped.mcap", messages, ctx, drop=(rb.POSE_TOPIC, rb.CAMERA_TOPIC)
    )
    verdict = rejudge_recording(stripped.path)
    assert verdict.success is None and verdict.quality is None
    assert verdict.detail.startswith("cannot judge")
    code = main(
        ["trial", "rejudge", ctx.episode_id, "--db", str(db), "--recording", stripped.path,
         "--json"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_CANNOT_JUDGE == 3
    assert out["verdict"]["success"] is None and out["reproduced"] is False
    # Only the tracker stripped: the camera still judges.
    no_tracker = write_mcap(tmp_path / "cam.mcap", messages, ctx, drop=(rb.POSE_TOPIC,))
    assert rejudge_recording(no_tracker.path).source == "camera"


def test_a_recording_without_judge_context_cannot_be_judged(tmp_path):
    recorder = McapRecorder(tmp_path / "bare.mcap", {"episode_id": "x"})
    recorder.add_stream(rb.POSE_TOPIC, TYPES[rb.POSE_TOPIC])
    recorder.write(rb.POSE_TOPIC, rb.pose(0, PICK_GOAL), 1)
    verdict = rejudge_recording(recorder.close().path)
    assert verdict.success is None and "no judge context" in verdict.detail


def test_a_different_stored_verdict_is_reported(stored, tmp_path, capsys):
    db, ctx, _, _ = stored
    far = [(0.40, 0.10, 0.02)] * 8  # the recording now says the cube is 17 cm off
    other = write_mcap(tmp_path / "other.mcap", rb.recording(far), ctx)
    code = main(
        ["trial", "rejudge", ctx.episode_id, "--db", str(db), "--recording", other.path]
    )
    text = capsys.readouterr().out
    assert code == EXIT_DIFFERS == 1 and "DIFFERS" in text and "failure" in text


def test_rejudge_input_errors_exit_2(stored, tmp_path, capsys):
    db, ctx, _, _ = stored
    assert main(["trial", "rejudge", "nope", "--db", str(db)]) == 2
    assert "not in the store" in capsys.readouterr().err
    missing = tmp_path / "missing.mcap"
    assert main(["trial", "rejudge", ctx.episode_id, "--db", str(db), "--recording",
                 str(missing)]) == 2  # fmt: skip
    assert "not found" in capsys.readouterr().err
