"""`embodied-eval calibrate`'s work: a window's recorded real episodes to a calibration file.

Reached from the CLI through `embodied_eval.plugins.CALIBRATE`.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.protocol.model import Protocol
from embodied_eval.records import Episode
from embodied_eval.store.artifacts import artifact_file
from embodied_eval.store.core import Store
from real_bridge.calibration.fit import FitResult, calibrate_episodes
from real_bridge.calibration.params import parse_params
from real_bridge.calibration.recorded import RecordedEpisode, read_recorded_episode


def _recording_file(episode: Episode, store_path: Path) -> Path | None:
    """The episode's MCAP recording on this disk (paths are relative to the store's folder)."""
    for art in episode.artifacts:
        if art.kind == "mcap":
            found = artifact_file(art.path, store_path)
            if found is not None:
                return found
    return None


def never_started(episode: Episode) -> bool:
    """The harness aborted the episode before its control loop ran (e.g. a protective stop while
    homing, a failed scene reset): its recording holds no policy commands to replay."""
    return episode.status == "aborted" and int(episode.control.get("loop_steps", -1)) == 0


def window_recordings(
    store: Store, protocol: Protocol, window: str, family: str | None
) -> tuple[list[RecordedEpisode], list[dict[str, str]]]:
    """The window's real episodes with an MCAP recording, read for calibration, and the ones left
    out because they never started (each with the harness's reason).

    Raises:
        EvalError: no real episode of the window (and family) has a recording on disk, or none
            of those started.
    """
    episodes = []
    for scope in store.window_scope(window):
        episodes += store.episodes(window=scope, side="real", family=family)
    recordings = {e.episode_id: _recording_file(e, store.path) for e in episodes}
    recorded = [e for e in episodes if recordings[e.episode_id] is not None]
    what = f"window {window!r}" + (f", family {family!r}" if family else "")
    if not recorded:
        raise EvalError(
            f"calibrate: {what} has no real episodes with an MCAP recording on disk; run real "
            "episodes with recording on (the robot profile's `record = true`) first"
        )
    skipped = [
        {"episode_id": e.episode_id, "reason": f"aborted before it started: {e.status_reason}"}
        for e in recorded
        if never_started(e)
    ]
    started = [e for e in recorded if not never_started(e)]
    if not started:
        raise EvalError(
            f"calibrate: every recorded real episode of {what} was aborted before it started "
            f"({len(recorded)}); record real episodes that run to their end first"
        )
    read = [
        read_recorded_episode(e, protocol.randomization, recordings[e.episode_id])
        for e in started
    ]
    return read, skipped


def calibrate_window(
    store: Store,
    protocol: Protocol,
    *,
    window: str,
    family: str | None,
    params: str | None,
    out: Path,
    report: Path | None,
    workers: int = 2,
    episodes: list[RecordedEpisode] | None = None,
    by_drift: bool = False,
) -> dict[str, Any]:
    """Fit, write the calibration file (and the report); returns the summary the CLI prints.

    With `by_drift`, each drift setting's episodes are calibrated separately (the drift calendar
    as measured numbers): one file per drift, `<out stem>-<drift>.toml`, each also recorded in
    the store's trial ledger for the maintenance closure's report
    (`embodied_eval.embodiment.calibration_days`), and the summary lists them by drift day. Nothing is written when any input is wrong (the errors come before the
    first write).
    """
    from embodied_eval.protocol.calibration_file import write_calibration
    from real_bridge.calibration.report import calibration_content, write_report

    names = parse_params(params)
    skipped: list[dict[str, str]] = []
    if episodes is None:
        recorded, skipped = window_recordings(store, protocol, window, family)
    else:
        recorded = episodes
    robots = sorted({r.robot_id for r in recorded})
    if len(robots) > 1:
        raise EvalError(
            f"calibrate: the recordings come from {len(robots)} robots ({', '.join(robots)}); "
            "calibrate one robot at a time"
        )
    robot_id = robots[0] or protocol.robot_id
    if not out.parent.is_dir():
        raise EvalError(f"--out: directory {out.parent} does not exist", key="out")
    if by_drift:
        days = _by_drift(
            recorded, protocol, names, window=window, out=out, robot_id=robot_id, workers=workers,
            store=store if episodes is None else None,
        )  # fmt: skip
        return {**days, "not_calibrated_from": skipped}
    result = calibrate_episodes(recorded, names, workers=workers)
    created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    content = calibration_content(
        result, robot_id=robot_id, protocol_hash=protocol.protocol_hash, window=window,
        created_at=created,
    )  # fmt: skip
    # Written beside the destination and renamed, so a failed write leaves nothing behind.
    with tempfile.NamedTemporaryFile("w", dir=out.parent, suffix=".partial", delete=False) as tmp:
        partial = Path(tmp.name)
    try:
        digest = write_calibration(partial, content)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    report_path = None
    if report is not None:
        validation = [r for r in recorded if r.episode_id in set(result.validation)]
        report_path = write_report(report, content, result, validation, digest)
    return {**summary(content, result, digest, out, report_path), "not_calibrated_from": skipped}


def drift_setting(drift: dict[str, Any], protocol: Protocol) -> tuple[str, int | None]:
    """The protocol's drift setting (name, day) an episode ran under: by the recorded name, else
    by its parameters; ("", None) when it matches none."""
    name = str(drift.get("name", ""))
    params = {k: v for k, v in drift.items() if k != "name"}
    for d in protocol.drifts:
        if (name and d.name == name) or (not name and dict(d.params) == params):
            return d.name, d.day
    return name, None


def _day_order(drift: str, day: int | None) -> tuple[bool, int, str]:
    return (day is None, day or 0, drift)


def _by_drift(
    recorded: list[RecordedEpisode],
    protocol: Protocol,
    names: tuple[str, ...],
    *,
    window: str,
    out: Path,
    robot_id: str,
    workers: int,
    store: Store | None,
) -> dict[str, Any]:
    from embodied_eval.embodiment.calibration_days import record_day_calibration
    from embodied_eval.protocol.calibration_file import write_calibration
    from embodied_eval.store.core import transaction
    from real_bridge.calibration.report import calibration_content

    groups: dict[tuple[str, int | None], list[RecordedEpisode]] = {}
    for rec in recorded:
        groups.setdefault(drift_setting(dict(rec.drift), protocol), []).append(rec)
    small = [f"{n or 'unnamed'} ({len(g)})" for (n, _), g in groups.items() if len(g) < 2]
    if small:
        raise EvalError(
            f"calibrate --by-drift: each drift needs at least 2 recorded episodes; too few for "
            f"{', '.join(small)}"
        )
    created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    fits = {
        key: calibrate_episodes(group, names, workers=workers) for key, group in groups.items()
    }  # every fit before the first write: a failing one leaves nothing behind
    rows = []
    for (drift, day), result in sorted(fits.items(), key=lambda kv: _day_order(*kv[0])):
        content = calibration_content(
            result, robot_id=robot_id, protocol_hash=protocol.protocol_hash, window=window,
            created_at=created,
        )  # fmt: skip
        content["drift"] = {"name": drift, **({"day": day} if day is not None else {})}
        path = out.with_name(f"{out.stem}-{drift or 'unnamed'}.toml")
        digest = write_calibration(path, content)
        if store is not None and drift:
            with transaction(store.conn):
                record_day_calibration(store.conn, window, content, digest)
        rows.append(
            {
                "drift": drift,
                "day": day,
                "out": str(path),
                "content_sha256": digest,
                "episodes": len(result.fitting) + len(result.validation),
                "parameters": content["parameters"],
                "validation": content["validation"],
            }
        )
    return {
        "robot_id": robot_id, "window": window, "by_drift": rows,
        "recorded_in_store": store is not None,
    }  # fmt: skip


def summary(
    content: dict[str, Any], result: FitResult, digest: str, out: Path, report: Path | None
) -> dict[str, Any]:
    """The CLI's JSON: the file's content plus where it went and how much work the fit took."""
    return {
        **content,
        "content_sha256": digest,
        "out": str(out),
        "report": str(report) if report else None,
        "evaluations": result.evaluations,
    }
