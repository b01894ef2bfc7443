"""The whole-store verification report (`embodied_eval.store.verify_store`): what was checked, the
first problem, the signers and the seals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from embodied_eval.store import hashchain
from embodied_eval.store.hashchain import Problem


@dataclass
class StoreReport:
    """Result of `verify_store`.

    Attributes:
        ok: everything checked out.
        section: where the first problem is ("trial ledger", "episodes table", "artifacts",
            "incident log", "seal", "checkpoint", "triggers"), None when ok.
        problem: the first problem, None when ok.
        ledger_records, ledger_head: records walked and the last good hash of the trial ledger.
        incident_records, incident_head, incident_summary: the same for the incident log.
        counts: rows checked per table, and artifacts re-hashed.
        signers: each key that signed something in either chain: fingerprint, holder, role,
            revoked_at (or None), signatures.
        seals: window, seq, hash, episode and incident heads of each seal.
        checkpoints: each checkpoint (id, time, heads named, who countersigned it).
        anchoring: the records after the last countersigned checkpoint, per chain
            (`embodied_eval.store.checkpoints.not_yet_anchored`).
        notes: what the verify has to say besides problems (imported artifacts not on this disk).
    """

    ok: bool = True
    section: str | None = None
    problem: Problem | None = None
    ledger_records: int = 0
    ledger_head: str = hashchain.GENESIS_HASH
    incident_records: int = 0
    incident_head: str = hashchain.GENESIS_HASH
    incident_summary: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    signers: list[dict[str, Any]] = field(default_factory=list)
    seals: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    anchoring: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def fail(self, section: str, problem: Problem) -> StoreReport:
        self.ok, self.section, self.problem = False, section, problem
        return self

    def summary(self) -> str:
        """One line: what verified, or the first problem with the record it names."""
        if self.ok:
            return (
                f"verified trial ledger ({self.ledger_records} records, head "
                f"{self.ledger_head[:16]}…) and incident log ({self.incident_records} records, "
                f"head {self.incident_head[:16]}…); {self.counts.get('episodes', 0)} episode(s), "
                f"{self.counts.get('artifacts', 0)} artifact file(s) re-hashed"
                + (f"; {self.anchoring_line()}" if self.anchoring else "")
            )
        assert self.problem is not None
        where = (
            f"record seq {self.problem.seq} ({self.problem.record_id or '?'})"
            if self.problem.seq is not None
            else (self.problem.record_id or "store")
        )
        return f"{self.section}: {where}: {self.problem.message}"

    def anchoring_line(self) -> str:
        """How far the countersigned checkpoints reach, and what is not yet anchored."""
        from embodied_eval.store.checkpoints import anchoring_line

        countersigned = sum(1 for c in self.checkpoints if c.get("countersigned_by"))
        return anchoring_line(self.anchoring, countersigned)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "section": self.section,
            "problem": None if self.problem is None else self.problem.to_json(),
            "summary": self.summary(),
            "trial_ledger": {"records": self.ledger_records, "head_hash": self.ledger_head},
            "incident_log": {
                "records": self.incident_records,
                "head_hash": self.incident_head,
                "verification": self.incident_summary,
            },
            "counts": dict(self.counts),
            "signers": list(self.signers),
            "seals": list(self.seals),
            "checkpoints": list(self.checkpoints),
            "not_yet_anchored": dict(self.anchoring),
            "notes": list(self.notes),
        }
