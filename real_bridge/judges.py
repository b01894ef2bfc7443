"""Who says whether a real episode succeeded: an independent, declared judge.

- `technician`: a person. The prompt shows the episode and asks for the outcome; the answer
  (episode id, quality, success, technician, time) is signed with the technician's Ed25519 key —
  the key the incident log already uses — so it can be audited later.
- `detector`: the harness's own success detector (`real_bridge.detector`), judging from the
  camera and tracker messages recorded for the episode — never from the robot's own state. It may
  answer "cannot judge" (the episode is then aborted with the reason, never counted a success).
  On the twin, the oracle's verdict is kept beside it for measuring the detector.
- `oracle`: the twin's ground truth (a `JudgeVerdict` on the verdict topic), labelled as such,
  refused for any robot that is not the twin (`BridgeConfig` refuses the combination before
  anything runs; `check_oracle` here again).

A contradictory answer (quality at or above q* but "did not succeed", or the reverse) is refused
with a message saying what to correct. Signing goes through `sign_verdict` only, one small place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec, utc_now_iso
from real_bridge.detector import (
    AFTER_END_S,
    DetectorVerdict,
    JudgeContext,
    JudgeLog,
    evidence_complete,
    judge_recording,
)
from real_bridge.entry import Prompter, parse_quality, parse_yes_no
from real_bridge.interface import JudgeVerdict, contradiction, parse_judge_verdict

SIGNED_SCHEMA = "embodied-eval/technician-verdict/1"
#: After the detector's evidence window closes, wait at most this long for every stream to have
#: delivered a message logged after it (a stream that went quiet, e.g. a blinded tracker), s.
JUDGE_MARGIN_S = 1.0
#: How long the harness waits for the twin's oracle verdict (kept for measurement only), s.
ORACLE_WAIT_S = 2.0


@dataclass(frozen=True)
class Judgement:
    """A judge's verdict as stored with the episode (`Episode.judge` + quality/success)."""

    quality: float
    success: bool
    record: dict[str, str] = field(default_factory=dict)
    detail: str = ""


def sign_verdict(key_path: str, payload: dict[str, object]) -> dict[str, str]:
    """Sign a verdict payload with the Ed25519 key at `key_path`.

    Returns the `signature` (base64), `public_key` (PEM) and `signed` (the canonical JSON signed)
    entries of `Episode.judge`.
    """
    from embodied_eval.store.signing_keys import load_private_key, public_key_pem, sign_bytes

    key = load_private_key(key_path)
    signed = canonical_json(payload)
    return {
        "signature": sign_bytes(key, signed.encode("utf-8")),
        "public_key": public_key_pem(key.public_key()),
        "signed": signed,
    }


def verify_judge_record(record: dict[str, str]) -> bool:
    """True when a technician's stored verdict carries a valid signature over `signed`."""
    from embodied_eval.store.signing_keys import load_public_key_pem, signature_is_valid

    key = load_public_key_pem(record.get("public_key", ""), where="judge.public_key")
    return signature_is_valid(
        key, record.get("signed", "").encode("utf-8"), record.get("signature", "")
    )


def technician_judgement(
    spec: EpisodeSpec,
    prompter: Prompter,
    *,
    key_path: str,
    technician: str,
    lines: list[str] | None = None,
) -> Judgement:
    """Ask the technician for the outcome (re-asking on a contradiction) and sign the answer."""
    if not key_path:
        raise EvalError(
            "the technician judge needs the technician's Ed25519 key: set loop.technician_key "
            "in the robot profile (the incident log's key works)",
            key="technician_key",
        )
    if not technician:
        raise EvalError("the technician judge needs loop.technician (a name)", key="technician")
    prompter.say(f"episode {spec.episode_id} ended; judge its outcome")
    for line in lines or ():
        prompter.say(f"  {line}")
    q_star = spec.target_quality
    while True:
        quality = prompter.ask(f"Task quality q in [0, 1] (q* = {q_star:g})", parse_quality)
        success = prompter.ask("Did the task succeed? (y/n)", parse_yes_no)
        problem = contradiction(quality, success, q_star)
        if not problem:
            break
        prompter.say(f"  not accepted: {problem} — please answer both again")
    payload: dict[str, object] = {
        "schema": SIGNED_SCHEMA,
        "episode_id": spec.episode_id,
        "quality": quality,
        "success": success,
        "technician": technician,
        "judged_at": utc_now_iso(),
    }
    record = {"kind": "technician", "name": technician, "version": ""}
    record.update(sign_verdict(key_path, payload))
    return Judgement(quality, success, record, "signed by the technician")


def check_oracle(robot_kind: str) -> None:
    """EvalError unless the robot is the twin (the only robot with a ground truth)."""
    if robot_kind != "twin":
        raise EvalError(
            f"the oracle judge is the twin's ground truth and is never accepted for a "
            f"{robot_kind!r} robot; use the technician or a detector",
            key="judge",
        )


def topic_judgement(
    spec: EpisodeSpec,
    kind: str,
    verdicts: Callable[[], list[tuple[str, float]]],
    *,
    after_s: float,
    timeout_s: float,
    detector: str = "",
) -> Judgement:
    """Wait for a detector's (or the oracle's) verdict on the verdict topic.

    Args:
        spec: the episode judged.
        kind: "detector" or "oracle".
        verdicts: returns the verdict messages received for the episode (text, arrival time).
        after_s: only verdicts that arrived after this (monotonic) time count.
        timeout_s: deadline.
        detector: accept only this detector's name ("" any).
    Raises:
        EvalError: no acceptable verdict within the deadline, or a contradictory one.
    """
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while True:
        for text, received_s in verdicts():
            if received_s < after_s:
                continue
            try:
                verdict: JudgeVerdict = parse_judge_verdict(text)
            except EvalError as exc:
                seen.append(str(exc))
                continue
            if verdict.judge != kind or (detector and verdict.name != detector):
                continue
            problem = contradiction(verdict.quality, verdict.success, spec.target_quality)
            if problem:
                raise EvalError(
                    f"{kind} {verdict.name} {verdict.version} sent a contradictory verdict: "
                    f"{problem}",
                    key="verdict",
                )
            record = {"kind": kind, "name": verdict.name, "version": verdict.version}
            return Judgement(verdict.quality, verdict.success, record, verdict.detail)
        if time.monotonic() >= deadline:
            what = f"detector {detector!r}" if detector else kind
            extra = f" (malformed: {seen[-1]})" if seen else ""
            raise EvalError(
                f"no verdict from the {what} for episode {spec.episode_id} within "
                f"{timeout_s:.1f} s{extra}",
                key="verdict",
            )
        time.sleep(0.01)


def detector_judgement(
    spec: EpisodeSpec,
    context: JudgeContext,
    log: JudgeLog,
    ended_s: float,
    oracle_verdicts: Callable[[], list[tuple[str, float]]] | None = None,
) -> tuple[Judgement | None, DetectorVerdict, dict[str, object] | None]:
    """The harness's detector on the messages recorded for the episode (its evidence window
    closes `AFTER_END_S` after the "ended" event, which the caller has just published).

    Args:
        spec: the episode; context / log: the detector's context and recorded messages.
        ended_s: when the loop ended (monotonic s).
        oracle_verdicts: on the twin, the verdict messages received (its oracle's verdict is
            returned beside the detector's for measurement, never to judge).
    Returns:
        (the judgement — None when the detector cannot judge, its verdict saying why —, the
        detector's verdict, the oracle's {kind, name, version, quality, success} or None).
    """
    time.sleep(AFTER_END_S)
    deadline = time.monotonic() + JUDGE_MARGIN_S
    while not evidence_complete(log.messages(), context) and time.monotonic() < deadline:
        time.sleep(0.02)
    verdict = judge_recording(log.messages(), context)
    oracle: dict[str, object] | None = None
    if oracle_verdicts is not None:
        try:
            truth = topic_judgement(
                spec, "oracle", oracle_verdicts, after_s=ended_s, timeout_s=ORACLE_WAIT_S
            )
            oracle = {**truth.record, "quality": truth.quality, "success": truth.success}
        except EvalError:
            oracle = None
    if verdict.success is None or verdict.quality is None:
        return None, verdict, oracle
    record = {"kind": "detector", "name": verdict.name, "version": verdict.version}
    return Judgement(verdict.quality, verdict.success, record, verdict.detail), verdict, oracle
