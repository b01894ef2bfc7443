"""What a certificate is computed from: the window's episodes, faults, incidents, exposure,
manifests and the incident log's integrity, gathered from the store in one place.

The incident log is reached through `embodied_eval.plugins.INCIDENT_LOG` (resolved at call
time). Gathering refuses — with the log's own one-line EvalError naming the first bad record —
when the incident log's hash chain does not verify: no certificate is built on a tampered log.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_hash
from embodied_eval.embodiment.calibration_days import window_day_calibrations
from embodied_eval.embodiment.loading import load_window
from embodied_eval.embodiment.window_rates import window_manifests
from embodied_eval.errors import EvalError
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, ExposureEntry, Fault, Incident
from embodied_eval.store import ledger
from embodied_eval.store.checkpoints import check_store_checkpoints
from embodied_eval.store.core import Store, default_db_path
from embodied_eval.store.patches import HumanPatch, window_patches


@dataclass(frozen=True)
class WindowInputs:
    """Everything the certificate's numbers are computed from, for one protocol window.

    Attributes:
        protocol: the validated protocol.
        db_path: the store file.
        episodes: episodes of the window under this protocol hash (every attempt).
        faults: faults of those episodes.
        incidents: the window's incidents (data contract; final severity when reviewed).
        exposure: the window's exposure-ledger entries.
        manifests: escrowed manifests of this protocol and window: {"manifest_hash",
            "created_at", "name", "manifest"} each (`embodiment.window_rates.window_manifests`).
        amendments: amendment payloads of the window's incidents, in chain order.
        reviews: signed review payloads of the window's incidents, in chain order.
        chain: the incident log's integrity when read: head_hash, record_count, verification
            (one line), signatures_checked, key_fingerprints, window_close (signed, or None),
            signer_registration ({"holder", "role"} of the signer's key, or None).
        threshold_tables: (version, hash) of the classification threshold tables used.
        ledger: the trial ledger when read: head_hash, record_count, verification (the
            whole-store verify, one line), seal (the window's signed seal: seq, hash, episode
            and incident heads, counts, exposure hours, signer; or None), amendments_used.
        notes: what the window selection had to say (e.g. episodes imported without a window).
        patches: technician-entered human patches of the window (maintenance closure).
        calibrations: the window's drift-day calibrations (`embodied_eval.embodiment.calibration_days`):
            recorded in the store, and any files passed in after them.
        window_id: the window read (the protocol's unless another was asked for).
    """

    protocol: Protocol
    db_path: Path
    episodes: tuple[Episode, ...]
    faults: tuple[Fault, ...]
    incidents: tuple[Incident, ...]
    exposure: tuple[ExposureEntry, ...]
    manifests: tuple[dict[str, Any], ...]
    amendments: tuple[dict[str, Any], ...]
    reviews: tuple[dict[str, Any], ...]
    chain: dict[str, Any]
    threshold_tables: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()
    patches: tuple[HumanPatch, ...] = ()
    calibrations: tuple[dict[str, Any], ...] = ()
    ledger: dict[str, Any] | None = None
    window_id: str = ""

    def episodes_digest(self) -> str:
        """SHA-256 of the canonical JSON of the episodes (sorted by id): what was certified."""
        return canonical_hash(
            [ep.to_dict() for ep in sorted(self.episodes, key=lambda e: e.episode_id)]
        )


def _registration(log: Any, fingerprint: str | None) -> dict[str, Any] | None:
    """The signer's key registration in the incident log (holder, role), or None."""
    if fingerprint is None:
        return None
    try:
        info = log.key_info(fingerprint)
    except EvalError:
        return None
    return {"holder": info.get("holder"), "role": info.get("role")}


def _incident_log_state(
    db_path: Path, window: str, signer_fingerprint: str | None
) -> tuple[dict[str, Any], list[Any]]:
    """Verify the incident log (its EvalError names the first bad record when it does not) and
    read the window's incident states (amendments and reviews applied), its signed close and
    the signer's registration."""
    open_log = resolve(INCIDENT_LOG["open"])
    with open_log(db_path, create=False, read_only=True) as log:
        report = log.require_verified()
        count, head_hash = log.head()
        states = list(log.states(window))
        close = log.window_close(window)
        registration = _registration(log, signer_fingerprint)
    chain = {
        "head_hash": str(head_hash),
        "record_count": int(count),
        "verification": str(report.summary()),
        "signatures_checked": int(report.signatures_checked),
        "key_fingerprints": [str(fp) for fp in report.key_fingerprints],
        "window_close": None if close is None else dict(close),
        "signer_registration": registration,
    }
    return chain, states


def refuse_undeclared_assistance(protocol: Protocol, episodes: Iterable[Episode]) -> None:
    """EvalError if a sim episode ran with assisted grasping (a weld held the part) while the
    protocol does not declare `[sim] grasp = "assisted"`: such a success is not the robot's."""
    if protocol.sim_grasp == "assisted":
        return
    for ep in episodes:
        if ep.side == "sim" and ep.control.get("grasp_mode") == "assisted":
            raise EvalError(
                f"episode {ep.episode_id!r} ran with assisted grasping (a weld held the part) "
                'but the protocol does not declare it; set [sim] grasp = "assisted" in the '
                "protocol, or re-run the sim side with contact grasping",
                key="sim.grasp",
            )


def gather_inputs(
    protocol: Protocol,
    db: str | os.PathLike[str] | None,
    *,
    signer_fingerprint: str | None = None,
    window: str | None = None,
) -> WindowInputs:
    """Read the protocol window's data from the store and the incident log.

    Args:
        protocol: the protocol certified (its window id and hash select the episodes).
        db: the store file (default: $EMBODIED_EVAL_DB or ./embodied-eval.db); must exist.
        signer_fingerprint: the certificate signer's key; its registration in the incident log
            (holder, role), if any, is read into `chain["signer_registration"]`.
        window: the window id (default: the protocol's; `metrics --window`).

    Returns:
        The window's inputs. Raises EvalError when the store is missing, holds no episode of
        this protocol window, or the incident log does not verify.
    """
    db_path = Path(db) if db is not None else default_db_path()
    window_id = window if window is not None else protocol.window_id
    with Store(db_path, create=False) as store:
        manifests = window_manifests(store, protocol, window_id)
    chain, states = _incident_log_state(db_path, window_id, signer_fingerprint)
    # The same window selection as `embodied-eval metrics` (one place decides which episodes,
    # faults, incidents and exposure belong to a window); the log was verified just above.
    window_data = load_window(db_path, protocol, window_id)
    refuse_undeclared_assistance(protocol, window_data.episodes)
    with Store(db_path, create=False) as store:
        ledger_count, ledger_head = ledger.head(store.conn)
        seal_row = ledger.find(store.conn, "seal", window_id)
        checkpoints, _ = check_store_checkpoints(store.conn)  # the store verified just above
    seal = None
    if seal_row is not None:
        seal = {
            "seq": seal_row.seq,
            "hash": seal_row.hash,
            "signer": seal_row.signer,
            **{
                k: seal_row.data.get(k)
                for k in ("episode_head", "incident_head", "episodes", "incidents", "exposure_h")
            },
            "owner": seal_row.data.get("owner"),
        }
    amendments = [{"incident_id": s.incident_id, **dict(a)} for s in states for a in s.amendments]
    reviews = [{"incident_id": s.incident_id, **dict(r)} for s in states for r in s.reviews]
    tables = sorted(
        {(s.current.threshold_version, s.current.threshold_hash) for s in states} - {("", "")}
    )
    return WindowInputs(
        protocol=protocol,
        db_path=db_path,
        episodes=tuple(window_data.episodes),
        faults=tuple(window_data.faults),
        incidents=tuple(window_data.incidents),
        exposure=tuple(window_data.exposure),
        manifests=tuple(manifests),
        amendments=tuple(amendments),
        reviews=tuple(reviews),
        chain=chain,
        threshold_tables=tuple(tables),
        notes=tuple(window_data.notes),
        patches=tuple(window_patches(db_path, window_id)),
        calibrations=tuple(window_day_calibrations(db_path, window_id)),
        window_id=window_id,
        ledger={
            "head_hash": ledger_head,
            "record_count": ledger_count,
            "verification": window_data.verification,
            "seal": seal,
            "checkpoints": checkpoints,
            "amendments_used": list(window_data.amendments_used),
        },
    )
