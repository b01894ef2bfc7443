"""Residuals between a recorded episode and its replay, and the replays of many episodes.

The residual of one episode stacks, in this order:

- joint tracking: (replayed − measured) arm joint positions after every controller update from
  the first command on (until the robot's safety controller stopped it, if it did), divided by `JOINT_SCALE_RAD`;
- object track: (replayed − measured) object position at every tracker reading from the first
  command on (the replay interpolated between controller updates), divided by `OBJECT_SCALE_M`,
  when the recording has a tracker.

The scales only weigh the two kinds against each other: the intervals use the residuals' own
spread. The arm's parameters are fitted to the joint tracking alone (`stacked(JOINT)`): the
object's track changes by steps with the contacts (a part that slides or sticks), which would
make the least-squares steps fail; the object's parameters are fitted to both.

`blocks` numbers the residual's entries by stretch of `BLOCK_S` of one episode, for the
intervals' correction for residuals that are correlated in time
(`real_bridge.calibration.intervals`). The same stretches are what a fit sets aside where the
replay does not follow the robot (`stretches_not_followed`: a contact that went another way);
the `Replayer` leaves them out of every residual it returns from then on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from real_bridge.calibration.recorded import RecordedEpisode
from real_bridge.calibration.replay import EpisodeReplay, ReplayTrace

#: Joint-position error that weighs as much as OBJECT_SCALE_M of object error, rad.
JOINT_SCALE_RAD = 1e-3
#: Object-position error that weighs as much as JOINT_SCALE_RAD of joint error, m.
OBJECT_SCALE_M = 2e-3
#: The residual's parts: everything, or the joint tracking alone.
ALL, JOINT = "all", "joint"
#: Length of the stretches residuals are grouped in for the intervals, s.
BLOCK_S = 0.5
#: An episode (or a stretch of one) whose RMS residual exceeds this many times the median one's is
#: one the replay does not follow (`stretches_not_followed`, `fit.episodes_not_followed`).
NOT_FOLLOWED_FACTOR = 4.0


@dataclass(frozen=True)
class EpisodeResidual:
    """One episode's residual parts (unscaled: rad and m) and its replay."""

    joint: np.ndarray  # (K, 7), rad
    object: np.ndarray  # (M, 3), m
    trace: ReplayTrace
    joint_t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (K,), s
    object_t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (M,), s

    def stacked(self, part: str = ALL) -> np.ndarray:
        """The weighted residual vector (see the module docstring): `ALL` or `JOINT`."""
        joint = self.joint.ravel() / JOINT_SCALE_RAD
        if part == JOINT:
            return joint
        return np.concatenate([joint, self.object.ravel() / OBJECT_SCALE_M])

    def without(self, stretches: Sequence[tuple[float, float]]) -> EpisodeResidual:
        """This residual without the moments in `stretches` ([from, to) s, robot clock)."""
        if not stretches:
            return self
        keep_joint = np.ones(self.joint_t.size, dtype=bool)
        keep_object = np.ones(self.object_t.size, dtype=bool)
        for start, end in stretches:
            keep_joint &= (self.joint_t < start) | (self.joint_t >= end)
            keep_object &= (self.object_t < start) | (self.object_t >= end)
        return EpisodeResidual(
            joint=self.joint[keep_joint], object=self.object[keep_object], trace=self.trace,
            joint_t=self.joint_t[keep_joint], object_t=self.object_t[keep_object],
        )  # fmt: skip

    def stretches(self, part: str = ALL, block_s: float = BLOCK_S) -> list[tuple[float, float]]:
        """The [from, to) times (s) of the stretches `blocks` numbers, by block number."""
        if not len(self.joint_t):
            return []
        t0 = float(self.joint_t[0])
        last = int(self.blocks(part, block_s).max())
        return [(t0 + k * block_s, t0 + (k + 1) * block_s) for k in range(last + 1)]

    def blocks(self, part: str = ALL, block_s: float = BLOCK_S) -> np.ndarray:
        """For each entry of `stacked(part)`, the number of its `block_s` stretch counted from
        the episode's first compared moment."""
        if not len(self.joint_t):
            return np.zeros(self.stacked(part).size, dtype=np.int64)
        t0 = float(self.joint_t[0])
        joint = np.repeat(np.floor((self.joint_t - t0) / block_s).astype(np.int64), 7)
        if part == JOINT:
            return joint
        obj = np.repeat(np.floor((self.object_t - t0) / block_s).astype(np.int64), 3)
        return np.concatenate([joint, obj])


def episode_residual(recorded: RecordedEpisode, trace: ReplayTrace) -> EpisodeResidual:
    """Compare a replay with the recording (see the module docstring)."""
    start = recorded.commands[0].arrival_s
    keep = (trace.t >= start) & (trace.t < recorded.stopped_s)
    times = trace.t[keep]
    idx = np.clip(np.searchsorted(recorded.state_t, times), 0, len(recorded.state_t) - 1)
    before = np.clip(idx - 1, 0, None)
    nearer = np.abs(recorded.state_t[before] - times) < np.abs(recorded.state_t[idx] - times)
    idx = np.where(nearer, before, idx)
    joint = trace.q[keep, :7] - recorded.state_q[idx, :7]
    obj = np.zeros((0, 3))
    seen_t = np.zeros(0)
    if recorded.has_object_track:
        inside = (
            (recorded.object_t >= start)
            & (recorded.object_t <= trace.t[-1])
            & (recorded.object_t < recorded.stopped_s)
        )
        seen_t = recorded.object_t[inside]
        replayed = np.column_stack(
            [np.interp(seen_t, trace.t, trace.object_pos[:, i]) for i in range(3)]
        )
        obj = replayed - recorded.object_pos[inside]
    return EpisodeResidual(joint=joint, object=obj, trace=trace, joint_t=times, object_t=seen_t)


def stretches_not_followed(
    residuals: Sequence[EpisodeResidual], factor: float
) -> list[list[tuple[float, float]]]:
    """For each episode, the stretches (`EpisodeResidual.blocks` of the joint tracking) the
    replay does not follow: their RMS is more than `factor` × the median stretch's of all the
    episodes (a contact that went another way in the replay, a command whose echo was lost).
    None when they would be half of all stretches or more (then nothing stands out)."""
    rms: list[tuple[int, tuple[float, float], float]] = []
    for e, r in enumerate(residuals):
        joint, blocks = r.stacked(JOINT), r.blocks(JOINT)
        for k, stretch in enumerate(r.stretches(JOINT)):
            inside = joint[blocks == k]
            if inside.size:
                rms.append((e, stretch, float(np.sqrt(np.mean(inside**2)))))
    out: list[list[tuple[float, float]]] = [[] for _ in residuals]
    if len(rms) < 3:
        return out
    limit = factor * float(np.median([v for _, _, v in rms]))
    far = [(e, stretch) for e, stretch, v in rms if v > limit]
    if len(far) >= len(rms) / 2:
        return out
    for e, stretch in far:
        out[e].append(stretch)
    return out


def stacked_residual(
    replayer: Replayer, subset: Sequence[int], values: Mapping[str, float], part: str = ALL
) -> np.ndarray:
    """The weighted residual vector of the episodes at `subset`, in their order."""
    return np.concatenate([r.stacked(part) for r in replayer.run(values, subset)])


def stacked_residuals(
    replayer: Replayer,
    subset: Sequence[int],
    candidates: Sequence[Mapping[str, float]],
    part: str = ALL,
) -> list[np.ndarray]:
    """`stacked_residual` of each candidate set of values, replayed in one batch."""
    return [
        np.concatenate([r.stacked(part) for r in found])
        for found in replayer.run_many(candidates, subset)
    ]


def stacked_blocks(residuals: Sequence[EpisodeResidual], part: str = ALL) -> np.ndarray:
    """Block numbers of the stacked residual of several episodes (`EpisodeResidual.blocks`),
    distinct across episodes."""
    out, offset = [], 0
    for r in residuals:
        b = r.blocks(part)
        out.append(b + offset)
        offset += int(b.max()) + 1 if b.size else 0
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------- replays in workers

_EPISODES: list[RecordedEpisode] = []
_REPLAYS: dict[str, EpisodeReplay] = {}


def _init_worker(episodes: list[RecordedEpisode]) -> None:
    global _EPISODES
    _EPISODES = episodes
    _REPLAYS.clear()


def _replay(recorded: RecordedEpisode, values: Mapping[str, float]) -> EpisodeResidual:
    replay = _REPLAYS.get(recorded.task_id)
    if replay is None:
        replay = _REPLAYS[recorded.task_id] = EpisodeReplay(recorded.task_id)
    return episode_residual(recorded, replay.run(recorded, values))


def _worker_run(
    jobs: Sequence[tuple[int, int]], candidates: Sequence[Mapping[str, float]]
) -> list[tuple[tuple[int, int], EpisodeResidual]]:
    return [((k, i), _replay(_EPISODES[i], candidates[k])) for k, i in jobs]


def deal(jobs: Sequence[tuple[int, int]], cost: Sequence[float], workers: int) -> list[list[int]]:
    """Positions in `jobs` for each worker: the longest job first to the least loaded worker
    (`cost[i]`: how long episode i takes to replay, in any unit)."""
    load = [0.0] * workers
    out: list[list[int]] = [[] for _ in range(workers)]
    for pos in sorted(range(len(jobs)), key=lambda p: -cost[jobs[p][1]]):
        w = min(range(workers), key=lambda k: load[k])
        out[w].append(pos)
        load[w] += cost[jobs[pos][1]]
    return out


class Replayer:
    """Replays a fixed set of recorded episodes under parameter values, on `workers` processes.

    Args:
        episodes: the recordings.
        workers: processes to replay in (1: in this process).
    """

    def __init__(self, episodes: Sequence[RecordedEpisode], workers: int = 1) -> None:
        self.episodes = list(episodes)
        self.workers = max(1, min(int(workers), len(self.episodes)))
        self.evaluations = 0
        self.episode_replays = 0
        # What an episode's replay costs: the stretch it covers (until a stop, if any).
        self._lengths = [
            max(0.0, min(float(e.state_t[-1]), e.stopped_s) - float(e.state_t[0]))
            if len(e.state_t) else 0.0
            for e in self.episodes
        ]  # fmt: skip
        self.left_out: dict[int, list[tuple[float, float]]] = {}
        self._pool: Any = None
        if self.workers > 1:
            import multiprocessing

            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("fork" if os.name == "posix" else "spawn"),
                initializer=_init_worker,
                initargs=(self.episodes,),
            )
        else:
            _init_worker(self.episodes)

    def leave_out(self, episode: int, stretches: Sequence[tuple[float, float]]) -> None:
        """Leave `stretches` ([from, to) s) of episode `episode` out of every residual from now
        on (the replay does not follow the robot there); a stretch already left out is kept once."""
        found = self.left_out.setdefault(episode, [])
        found.extend(s for s in dict.fromkeys(stretches) if s not in found)

    def run(
        self, values: Mapping[str, float], subset: Sequence[int] | None = None
    ) -> list[EpisodeResidual]:
        """The residuals of the episodes (all, or those at `subset`), in their order."""
        return self.run_many([values], subset)[0]

    def run_many(
        self, candidates: Sequence[Mapping[str, float]], subset: Sequence[int] | None = None
    ) -> list[list[EpisodeResidual]]:
        """The residuals of the episodes under each candidate set of values, replayed in one
        batch: every (candidate, episode) replay is one job, and the jobs are dealt to the
        workers by the episodes' lengths, so the processes finish together (the columns of a
        finite-difference Jacobian, a scan's grid)."""
        order = list(range(len(self.episodes))) if subset is None else list(subset)
        self.evaluations += len(candidates)
        self.episode_replays += len(candidates) * len(order)
        jobs = [(k, i) for k in range(len(candidates)) for i in order]
        if self._pool is None:
            if _EPISODES is not self.episodes:
                _init_worker(self.episodes)
            found = dict(_worker_run(jobs, candidates))
        else:
            plain = [dict(c) for c in candidates]
            shares = deal(jobs, self._lengths, self.workers)
            futures = [
                self._pool.submit(_worker_run, [jobs[p] for p in share], plain)
                for share in shares
                if share
            ]
            found = dict(pair for f in futures for pair in f.result())
        return [
            [found[(k, i)].without(self.left_out.get(i, ())) for i in order]
            for k in range(len(candidates))
        ]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        for replay in _REPLAYS.values():
            replay.close()
        _REPLAYS.clear()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
