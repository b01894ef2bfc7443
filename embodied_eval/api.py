"""The Python API for notebooks: `import embodied_eval as ee`.

    store = ee.open_store("embodied-eval.db")
    episodes = store.episodes(window="w1")      # pandas.DataFrame, typed
    incidents = store.incidents(window="w1")    # pandas.DataFrame
    report = ee.metrics(store, "protocol.toml")  # EmbodimentReport: .to_frame(), .to_json()
    issued = ee.certify(store, "protocol.toml", key="signer.pem", out="bundle")

Episode frames are typed for analysis: `success` is bool, `started_at` a timezone-aware
datetime (UTC), dict columns (`drift`, `randomization`, `control`, `cost`) hold Python dicts and
`artifacts` a list of dicts. Episodes are read as scored (chained audits and corrections applied).

Every read verifies the store first (`embodied-eval store verify`) and raises EvalError naming
the first bad record when it does not verify; `episodes(..., unverified=True)` and
`faults(..., unverified=True)` read the rows anyway, for looking into a damaged store.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embodied_eval.errors import EvalError

if TYPE_CHECKING:
    import pandas as pd

    from embodied_eval.certificate.issue import IssuedCertificate
    from embodied_eval.embodiment.report import EmbodimentReport
    from embodied_eval.protocol.reader import Protocol

#: Episode fields held as Python objects (dicts, or a list of dicts for `artifacts`).
OBJECT_COLUMNS = ("drift", "randomization", "control", "cost", "artifacts")


def episodes_frame(episodes: Any) -> pd.DataFrame:
    """Typed DataFrame of episodes: one row per episode, the record's fields as columns plus
    `success` (bool); `started_at` as UTC datetimes; dict fields as Python objects."""
    import pandas as pd

    from embodied_eval.interchange.tables import EPISODE_COLUMNS, EPISODE_OPTIONAL_COLUMNS

    rows = []
    for ep in episodes:
        row: dict[str, Any] = {
            c: getattr(ep, c) for c in (*EPISODE_COLUMNS, *EPISODE_OPTIONAL_COLUMNS)
        }
        for c in OBJECT_COLUMNS:
            value = getattr(ep, c)
            row[c] = [a.to_dict() for a in value] if c == "artifacts" else dict(value)
        row["faults"] = len(ep.faults)
        row["success"] = bool(ep.success)
        rows.append(row)
    columns = [*EPISODE_COLUMNS, *EPISODE_OPTIONAL_COLUMNS, "faults", "success"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    frame["success"] = frame["success"].astype(bool)
    frame["audited_success"] = frame["audited_success"].astype("boolean")
    for c in ("quality", "target_quality", "duration_s", "energy_wh", "qc"):
        frame[c] = frame[c].astype(float)
    for c in ("seed", "interventions", "attempt", "actions", "plan_depth", "faults"):
        frame[c] = frame[c].astype("int64")
    return frame


class NotebookStore:
    """A store opened for reading from a notebook (episodes, faults and incidents as frames)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise EvalError(f"store {str(self.path)!r} does not exist", key="db")

    def __repr__(self) -> str:
        return f"NotebookStore({str(self.path)!r})"

    def _verified(self, what: str, unverified: bool) -> None:
        """Refuse (EvalError naming the first bad record) unless the store verifies or the caller
        asked for unverified rows."""
        if unverified:
            return
        from embodied_eval.store.verify_store import require_store_verified

        require_store_verified(
            self.path, what=f"reading {what} (pass unverified=True to read them anyway)"
        )

    def episodes(
        self,
        window: str | None = None,
        *,
        side: str | None = None,
        family: str | None = None,
        unverified: bool = False,
    ) -> pd.DataFrame:
        """Episodes (scored view: chained audits and corrections applied) as a typed frame.

        Args:
            window: a window id (default: every window). side: "sim" or "real".
            family: a task family.
            unverified: read the rows even when the store does not verify (default: EvalError).
        """
        from embodied_eval.store.core import Store

        self._verified("episodes", unverified)
        with Store(self.path, create=False) as store:
            view = store.scored_episodes(window=window, side=side, family=family)
        return episodes_frame(view.episodes)

    def faults(self, window: str | None = None, *, unverified: bool = False) -> pd.DataFrame:
        """Faults (episode_id, kind, recovered, repair_s); `unverified` as for `episodes`."""
        from embodied_eval.interchange.tables import faults_to_frame
        from embodied_eval.store.core import Store

        self._verified("faults", unverified)
        with Store(self.path, create=False) as store:
            frame = faults_to_frame(store.faults(window=window))
        frame["recovered"] = frame["recovered"].astype(bool)
        return frame

    def incidents(self, window: str | None = None) -> pd.DataFrame:
        """Incidents from the incident log (final severity if reviewed), `occurred_at` as UTC
        datetimes, `measurements` as dicts. Empty when the incident log is not installed."""
        import pandas as pd

        from embodied_eval.plugins import INCIDENT_LOG, resolve
        from embodied_eval.records import Incident

        columns = [f for f in Incident.__dataclass_fields__]
        try:
            log_class = resolve(INCIDENT_LOG["open"])
        except EvalError:
            return pd.DataFrame(columns=columns)
        with log_class(self.path, read_only=True) as log:
            log.require_verified()
            records = log.incidents(window)
        rows = [{c: getattr(r, c) for c in columns} for r in records]
        for row in rows:
            row["measurements"] = dict(row["measurements"])
        frame = pd.DataFrame(rows, columns=columns)
        frame["occurred_at"] = pd.to_datetime(frame["occurred_at"], utc=True)
        for c in ("counts_toward_window", "reviewed"):
            frame[c] = frame[c].astype(bool)
        return frame


def open_store(path: str | os.PathLike[str]) -> NotebookStore:
    """Open an existing store for reading (EvalError when it does not exist)."""
    return NotebookStore(path)


def _store_path(store: NotebookStore | str | os.PathLike[str]) -> Path:
    return store.path if isinstance(store, NotebookStore) else Path(store)


def _protocol(protocol: Protocol | str | os.PathLike[str]) -> Protocol:
    from embodied_eval.protocol.reader import Protocol, load_protocol

    return protocol if isinstance(protocol, Protocol) else load_protocol(Path(protocol))


def metrics(
    store: NotebookStore | str | os.PathLike[str],
    protocol: Protocol | str | os.PathLike[str],
    *,
    window: str | None = None,
    policy: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> EmbodimentReport:
    """The embodiment metrics and robotics gates of one window: the same evaluation (closures
    from the store, seed rule, gates) as `embodied-eval metrics`, `certify` and `verify --db`.

    Args:
        store: an opened store or its path. protocol: a Protocol or its TOML file.
        window: the window id (default: the protocol's). policy: the evaluated policy.
        evidence: closures, P, W, delivery attestation (see `embodied-eval metrics --help`).
        seed: bootstrap seed (default: the certificate's, derived from the protocol's base
            seed and the window).

    Returns:
        EmbodimentReport with `.to_frame()` (one row per estimate) and `.to_json()`.
    """
    from embodied_eval.certificate.compute import evaluate_window

    _, results = evaluate_window(
        _protocol(protocol),
        _store_path(store),
        window=window,
        gate_overrides=dict(evidence) if evidence is not None else None,
        seed=seed,
        policy=policy,
    )
    return results.report


def certify(
    store: NotebookStore | str | os.PathLike[str],
    protocol: str | os.PathLike[str],
    *,
    key: str | os.PathLike[str],
    out: str | os.PathLike[str],
    evidence: str | os.PathLike[str] | None = None,
    passphrase: bytes | None = None,
    seed: int | None = None,
    overwrite: bool = False,
) -> IssuedCertificate:
    """Issue a signed certificate bundle (as `embodied-eval certify`); returns the issued
    certificate (`.certificate` dict, `.path`, `.key_fingerprint`)."""
    from embodied_eval.certificate.issue import issue_certificate

    return issue_certificate(
        protocol_path=protocol,
        db=_store_path(store),
        key_path=key,
        out=out,
        evidence_path=evidence,
        passphrase=passphrase,
        seed=seed,
        overwrite=overwrite,
    )
