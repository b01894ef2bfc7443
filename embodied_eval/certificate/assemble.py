"""Assemble the certificate: the computed numbers plus everything a reader needs to audit them
(trials run vs planned, the incident list with margins, amendments, hashes, the resource card).

Every value is plain JSON. The numbers themselves come from the embodiment report and the scoring
core (`compute`); this module only arranges them and adds the bookkeeping. Estimates are
`{"value", "low", "high", "level", "method", "n"}` (+ "sided", "note") as everywhere else.

certificate.json (format "embodied-eval-certificate/1"):

    format, issued_at   format tag; UTC time of issue
    software            {"name", "version", "python", "numpy"}
    signer              {"key_fingerprint", "public_key_pem", "registered_in_incident_log":
                        {"holder", "role"} or null}
    protocol            {"name", "version", "hash", "file", "file_sha256", "robot_id",
                        "confidence", "bootstrap_resamples", "majors_allowed",
                        "ar_estimator" ("classical", or "ppi": AR_ppi in E and the AR
                        gate; the embodiment notes say so), "window": {"id", "start", "end"}}
    rng                 {"seed", "streams"}: every bootstrap derives from this seed
    manifests           [{"manifest_hash", "created_at", "episodes", "sim_calibration_sha256"
                        (calibrated sim side only)}] escrowed for the window
    window              {"id", "valid", "invalid_reason", "exposure_hours", "exposure_source",
                        "blind_hours", "exposure_entries", "exposure_how_measured", "closed",
                        "close" (the protocol owner's signed close, or null)}
    episodes            {"count", "digest" (SHA-256 of the episodes' canonical JSON), "by_status"}
    trials              {"by_side": {sim|real: {"planned", "run", "episodes", "scored",
                        "aborted", "error", "retries"}}, "by_family": [{"family",
                        "real_planned", "real_run", "sim", "real", "s2r"}], "sim_by_engine",
                        "evaluated_policy", "success_method", "remaining": [{"gate", "check",
                        "verdict", "trials", "hours"}]}
    embodiment          the embodiment report (`EmbodimentReport.to_json()`, see
                        `embodied_eval.cli.metrics`)
    score               the scoring core's report, robotics profile (`ScoreReport.to_json()`):
                        axes raw and normalized with intervals, index, uniformity,
                        index_jagged (AAI*), level and every level gate with its checks
    level               {"level", "assigned" ("AAI-n"), "procedure_level", "procedure_name",
                        "capped", "reason"}: capped at AAI-0 on an invalid window
    closures            {"maintenance", "expansion"}: each {"source": "computed" | "external" |
                        null, ...}: computed ones carry the per-day index with interval and
                        bound, α·C₀, patches (maintenance) or the conditions' rates and the DiD
                        and ablation intervals (expansion), and the closure's checks; external
                        ones the auditor, date and the audit as supplied
    incidents           {"counts", "counted", "total", "excluded", "zero_event_bounds",
                        "unreviewed_serious", "list" (with rules fired: measured, limit,
                        margin), "amendments", "reviews", "threshold_tables", "reliability"
                        (cumulative exposure hours at each counted incident), "chain"
                        (head_hash, record_count, verification, signatures_checked,
                        key_fingerprints, window_close, signer_registration)}
    ledger              the trial ledger: {"head_hash", "record_count" (when certified),
                        "verification" (whole-store verify, one line), "seal" (the window's
                        signed seal: "seq", "hash", "episode_head" and "incident_head" {"head_hash",
                        "record_count"}, "episodes", "incidents", "exposure_h", "signer", "owner";
                        null when the window is not sealed), "checkpoints" (every checkpoint
                        of both heads: "checkpoint_id", "at", "trial_ledger" and "incident_log"
                        {"seq", "hash"}, "countersigned_by"), "amendments_used" (chained audits
                        and corrections applied to the episodes)}
    artifacts           {"count", "digest", "rehashed_at_certification",
                        "not_on_disk_at_certification", "checksums": [{"episode_id", "path",
                        "sha256", "kind", "size_bytes"}]}
    evidence            {"file", "sha256"} of the evidence file, or null
    resource_card       {"declared_priors", "training", "evaluated_policy", "price_card",
                        "source", "notes"}
    frontier            {"quality": [{"tau", "F"}], "source"} (eq. 37) or null
    leaderboard         with two or more policies scored in the window: `rank --json`'s
                        leaderboard (`certificate.leaderboard`), {"not_ranked": why} when they
                        cannot be ranked; null with one policy
"""

from __future__ import annotations

import platform
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval import __version__
from embodied_eval.canonical import canonical_hash, file_sha256
from embodied_eval.certificate.compute import Results
from embodied_eval.certificate.incidents import incidents_section
from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.certificate.leaderboard import leaderboard_section
from embodied_eval.certificate.trials import trials_section
from embodied_eval.embodiment.selection import select_episodes
from embodied_eval.errors import EvalError
from embodied_eval.records import (
    Episode,
    utc_now_iso,
)
from embodied_eval.scoring.frontier import quality_frontier
from embodied_eval.store.artifacts import artifact_file

CERTIFICATE_FORMAT = "embodied-eval-certificate/1"
#: Quality thresholds τ at which the quality frontier F(τ) is reported.
FRONTIER_TAUS = tuple(round(0.05 * i, 2) for i in range(21))
RESOURCE_CARD_KEYS = ("declared_priors", "training", "notes")
TRAINING_KEYS = ("sim_steps", "demonstrations", "real_hours", "sim_hours", "episodes")


# --------------------------------------------------------------------------- escrow


def artifacts_section(episodes: Sequence[Episode], store_path: Path | None) -> dict[str, Any]:
    """Checksums of the window's episode artifacts; files present on disk (found from the store
    the episodes were read from, see `artifact_files`) are re-hashed and a changed one refuses
    certification (the escrow is broken)."""
    rows = []
    present = absent = 0
    for ep in sorted(episodes, key=lambda e: e.episode_id):
        for art in ep.artifacts:
            rows.append(
                {
                    "episode_id": ep.episode_id,
                    "path": art.path,
                    "sha256": art.sha256,
                    "kind": art.kind,
                    "size_bytes": art.size_bytes,
                }
            )
            path = artifact_file(art.path, store_path)
            if path is not None:
                actual = file_sha256(path)
                if actual != art.sha256:
                    raise EvalError(
                        f"artifact {art.path!r} of episode {ep.episode_id!r} changed since it was "
                        f"recorded (sha256 {actual[:12]}…, recorded {art.sha256[:12]}…); the "
                        "escrow is broken",
                        key="artifacts",
                    )
                present += 1
            else:
                absent += 1
    return {
        "count": len(rows),
        "digest": canonical_hash(rows),
        "rehashed_at_certification": present,
        "not_on_disk_at_certification": absent,
        "checksums": rows,
    }


def resource_card(
    evidence: Mapping[str, Any] | None, inputs: WindowInputs, results: Results
) -> dict[str, Any]:
    """Priors and experience: what the evaluated system was given before the window.

    Declared priors are the protocol's policies (a scripted policy or an IK controller is a
    prior) plus `subject.resource_card.declared_priors` of the evidence; training experience
    (sim steps, demonstrations, real hours, ...) comes from `subject.resource_card.training`.
    """
    protocol = inputs.protocol
    subject = (evidence or {}).get("subject") or {}
    card = subject.get("resource_card") if isinstance(subject, Mapping) else None
    card = card if isinstance(card, Mapping) else {}
    unknown = sorted(set(card) - set(RESOURCE_CARD_KEYS))
    if unknown:
        raise EvalError(
            f"evidence subject.resource_card: unknown key {unknown[0]!r} (known: "
            f"{', '.join(RESOURCE_CARD_KEYS)})",
            key="subject.resource_card",
        )
    priors = [
        f"sim policy {protocol.sim_policy}",
        f"real policy {protocol.real_policy}",
    ]
    declared = card.get("declared_priors", [])
    if not isinstance(declared, list) or not all(isinstance(p, str) for p in declared):
        raise EvalError(
            "evidence subject.resource_card.declared_priors: expected a list of text",
            key="subject.resource_card.declared_priors",
        )
    priors.extend(declared)
    training = card.get("training", {})
    if not isinstance(training, Mapping):
        raise EvalError(
            "evidence subject.resource_card.training: expected an object",
            key="subject.resource_card.training",
        )
    for key, value in training.items():
        if key not in TRAINING_KEYS:
            raise EvalError(
                f"evidence subject.resource_card.training: unknown key {key!r} (known: "
                f"{', '.join(TRAINING_KEYS)})",
                key="subject.resource_card.training",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise EvalError(
                f"evidence subject.resource_card.training.{key}: expected a number ≥ 0",
                key=f"subject.resource_card.training.{key}",
            )
    return {
        "declared_priors": priors,
        "training": dict(training),
        "evaluated_policy": results.embodiment.get("policy"),
        "price_card": dict(protocol.raw.get("price_card", {})),
        "source": "evidence subject.resource_card" if card else "protocol only",
        "notes": str(card.get("notes", "")),
    }


def frontier_section(inputs: WindowInputs) -> dict[str, Any] | None:
    """The quality frontier F(τ) (eq. 37) of the evaluated policy's real first scored attempts;
    None without any (the report then says "no frontier evidence")."""
    sets = select_episodes(list(inputs.episodes), inputs.protocol)
    if not sets.real:
        return None
    q = np.array([e.quality for e in sets.real])
    tasks = np.array([e.task_id for e in sets.real])
    f = quality_frontier(q, tasks, np.array(FRONTIER_TAUS))
    return {
        "quality": [
            {"tau": tau, "F": float(v)}
            for tau, v in zip(FRONTIER_TAUS, np.atleast_1d(f), strict=True)
        ],
        "source": "real first scored attempts of the evaluated policy, tasks weighted equally",
    }


# --------------------------------------------------------------------------- certificate


def build_certificate(
    inputs: WindowInputs,
    results: Results,
    *,
    protocol_file_sha256: str,
    evidence: Mapping[str, Any] | None,
    evidence_sha256: str | None,
    signer: Mapping[str, Any],
) -> dict[str, Any]:
    """The certificate as plain JSON (every key is listed in the module docstring).

    Args:
        inputs: the window's data. results: the computed numbers.
        protocol_file_sha256: SHA-256 of the protocol file's bytes (copied into the bundle).
        evidence: the evidence mapping, or None. evidence_sha256: its file's SHA-256.
        signer: {"key_fingerprint", "public_key_pem", "registered_in_incident_log"} of the
            signing key (the registration: {"holder", "role"} or None).
    """
    protocol = inputs.protocol
    emb = results.embodiment
    statuses = Counter(e.status for e in inputs.episodes)
    close = inputs.chain.get("window_close")
    return {
        "format": CERTIFICATE_FORMAT,
        "issued_at": utc_now_iso(),
        "software": {
            "name": "embodied-eval",
            "version": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "signer": dict(signer),
        "protocol": {
            "name": protocol.name,
            "version": protocol.version,
            "hash": protocol.protocol_hash,
            "file": "protocol.toml",
            "file_sha256": protocol_file_sha256,
            "robot_id": protocol.robot_id,
            "confidence": protocol.confidence,
            "bootstrap_resamples": protocol.bootstrap_resamples,
            "majors_allowed": protocol.majors_allowed,
            "ar_estimator": protocol.ar_estimator,
            "judge_correction": protocol.judge_correction,
            "window": {
                "id": protocol.window_id,
                "start": protocol.window_start.isoformat(),
                "end": protocol.window_end.isoformat(),
            },
        },
        "rng": {
            "seed": results.seed,
            "streams": "numpy.random.default_rng(seed).spawn(4) → [embodiment report, scoring, "
            "closures, leaderboard]",
        },
        "manifests": [
            {
                "manifest_hash": m["manifest_hash"],
                "created_at": m["created_at"],
                "episodes": len((m.get("manifest") or {}).get("episodes", [])),
                # The calibration the sim side ran with (absent: the nominal simulator).
                **{
                    k: v
                    for k, v in (m.get("manifest") or {}).items()
                    if k == "sim_calibration_sha256"
                },
            }
            for m in inputs.manifests
        ],
        "window": {
            "id": protocol.window_id,
            "valid": bool(emb.get("valid")),
            "invalid_reason": emb.get("invalid_reason"),
            "exposure_hours": emb.get("exposure_hours"),
            "exposure_source": emb.get("exposure_source"),
            "blind_hours": emb.get("incidents", {}).get("blind_hours", 0.0),
            "exposure_entries": len(inputs.exposure),
            "exposure_how_measured": sorted({e.how_measured for e in inputs.exposure}),
            "closed": close is not None,
            "close": close,
        },
        "episodes": {
            "count": len(inputs.episodes),
            "digest": inputs.episodes_digest(),
            "by_status": dict(sorted(statuses.items())),
        },
        "trials": trials_section(inputs, results),
        "embodiment": emb,
        "score": results.score,
        "level": results.level,
        "closures": results.closures,
        "incidents": incidents_section(inputs, results),
        "ledger": dict(inputs.ledger or {}),
        "artifacts": artifacts_section(inputs.episodes, inputs.db_path),
        "evidence": (
            None if evidence is None else {"file": "evidence.json", "sha256": evidence_sha256}
        ),
        "resource_card": resource_card(evidence, inputs, results),
        "frontier": frontier_section(inputs),
        "leaderboard": leaderboard_section(inputs.episodes, results.seed, protocol.window_id),
    }
