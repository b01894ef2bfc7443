"""Technician entry of a real episode: the questions, their parsers, and the prompt loop.

Every answer is parsed by one function that raises `EvalError` with a one-line explanation; the
prompt loop shows that line and asks again, so a bad answer is never stored. The same parsers
check command-line flags, where a bad value is an error (exit 2, nothing stored).

Flag formats (also accepted at the prompts):

- duration: `95`, `95s`, `1.5min`, `2m30s`, `1h` (a bare number is seconds).
- fault: `KIND:RECOVERED[:REPAIR_MIN][:DETAIL]`, e.g. `grasp_slip:yes:0`,
  `actuator_stall:no:12.5:cable caught on the fixture` (RECOVERED = recovered autonomously).
- incident: `KIND[,field=value...]` with SafetyEvent fields, e.g.
  `contact,contact_force_n=60,body_region=hands,contact_with=person,detail=brushed a hand`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, get_type_hints

from embodied_eval.errors import EvalError
from embodied_eval.records import SAFETY_EVENT_KINDS, Fault, SafetyEvent, iso_utc
from real_bridge.interface import contradiction
from real_bridge.start_time import parse_start_time

T = TypeVar("T")

#: Outcomes a technician can report for a real episode.
MANUAL_STATUSES = ("ok", "safety_stop", "out_of_bounds", "aborted")
_YES = ("y", "yes", "true", "1")
_NO = ("n", "no", "false", "0")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|hr|hours?|min|mins|minutes?|m|s|sec|seconds?)?")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


# --------------------------------------------------------------------------- parsers


def parse_quality(text: str) -> float:
    """Task quality q ∈ [0, 1] (a percentage like `85%` is accepted)."""
    raw = text.strip()
    scale = 100.0 if raw.endswith("%") else 1.0
    try:
        value = float(raw.rstrip("%")) / scale
    except ValueError:
        raise EvalError(f"quality: {text!r} is not a number between 0 and 1") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise EvalError(f"quality: {text!r} is not between 0 and 1 (or 0%–100%)")
    return value


def parse_status(text: str) -> str:
    """Episode outcome: ok, safety_stop, out_of_bounds or aborted."""
    value = text.strip().lower().replace("-", "_").replace(" ", "_")
    if value not in MANUAL_STATUSES:
        raise EvalError(f"status: {text!r} is not one of {', '.join(MANUAL_STATUSES)}")
    return value


def parse_count(text: str) -> int:
    """A whole number ≥ 0 (interventions, actions)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise EvalError(f"{text!r} is not a whole number ≥ 0") from None
    if not value.is_integer() or value < 0:
        raise EvalError(f"{text!r} is not a whole number ≥ 0")
    return int(value)


def parse_yes_no(text: str) -> bool:
    value = text.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise EvalError(f"{text!r}: answer yes or no")


def parse_duration(text: str) -> float:
    """A duration in seconds from `95`, `95s`, `1.5min`, `2m30s`, `1h` (bare number: seconds)."""
    raw = text.strip().lower().replace(" ", "")
    if not raw:
        raise EvalError("duration: empty (e.g. 95s or 1.5min)")
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != pos:
            break
        number, unit = float(match.group(1)), (match.group(2) or "s")
        factor = 3600.0 if unit.startswith("h") else 60.0 if unit.startswith("m") else 1.0
        total += number * factor
        pos = match.end()
    if pos != len(raw):
        raise EvalError(f"duration: {text!r} is not like 95s, 1.5min, 2m30s or 1h")
    if total <= 0 or total > 24 * 3600:
        raise EvalError(f"duration: {text!r} must be more than 0 and at most 24 h")
    return total


def parse_kind(text: str) -> str:
    value = text.strip().lower().replace("-", "_").replace(" ", "_")
    if not _SNAKE.match(value):
        raise EvalError(f"fault kind: {text!r} must be a snake_case name like grasp_slip")
    return value


def parse_fault(text: str) -> Fault:
    """`KIND:RECOVERED[:REPAIR_MIN][:DETAIL]` → Fault (repair time given in minutes)."""
    parts = text.split(":", 3)
    if len(parts) < 2:
        raise EvalError(
            f"fault: {text!r} is not KIND:RECOVERED[:REPAIR_MIN][:DETAIL] (e.g. grasp_slip:yes:0)"
        )
    kind = parse_kind(parts[0])
    recovered = parse_yes_no(parts[1])
    repair_min = parse_minutes(parts[2]) if len(parts) > 2 and parts[2].strip() else 0.0
    detail = parts[3].strip() if len(parts) > 3 else ""
    return Fault(
        kind=kind, recovered_autonomously=recovered, repair_s=repair_min * 60.0, detail=detail
    )


def parse_minutes(text: str) -> float:
    """Minutes ≥ 0 (repair time)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise EvalError(f"repair minutes: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise EvalError(f"repair minutes: {text!r} must be a number ≥ 0")
    return value


_EVENT_HINTS = get_type_hints(SafetyEvent)


def _event_value(name: str, text: str) -> Any:
    hint = str(_EVENT_HINTS[name])
    if "bool" in hint:
        return parse_yes_no(text)
    if "int" in hint:
        return parse_count(text)
    if "float" in hint:
        try:
            value = float(text)
        except ValueError:
            raise EvalError(f"incident {name}: {text!r} is not a number") from None
        return value
    return text.strip()


def parse_incident(text: str) -> SafetyEvent:
    """`KIND[,field=value...]` → SafetyEvent (fields as in `embodied_eval.records.SafetyEvent`)."""
    head, *rest = [p for p in text.split(",")]
    kind = head.strip().lower()
    if kind not in SAFETY_EVENT_KINDS:
        raise EvalError(f"incident: {head!r} is not one of {', '.join(SAFETY_EVENT_KINDS)}")
    values: dict[str, Any] = {"kind": kind}
    for item in rest:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in _EVENT_HINTS or name == "kind":
            known = ", ".join(f for f in _EVENT_HINTS if f != "kind")
            raise EvalError(f"incident: {item.strip()!r} is not field=value (fields: {known})")
        values[name] = _event_value(name, value)
    return SafetyEvent(**values)


# --------------------------------------------------------------------------- prompting


class AnswersEnded(EvalError):
    """Input ended before every question was answered (nothing is stored)."""


class Prompter:
    """Asks questions on a text console and re-asks until the answer parses.

    Args:
        read: returns one line of input (default `input`); EOFError ends the session.
        write: prints one line (default `print`).
    """

    def __init__(
        self,
        read: Callable[[str], str] | None = None,
        write: Callable[[str], None] | None = None,
    ) -> None:
        self.read = read or input
        self.write = write or print

    def ask(self, question: str, parse: Callable[[str], T], default: str | None = None) -> T:
        """Ask until `parse` accepts the answer; an empty answer takes `default` when given."""
        suffix = f" [{default}]" if default else ""
        while True:
            try:
                answer = self.read(f"{question}{suffix}: ")
            except EOFError:
                raise AnswersEnded(f"input ended at {question!r}; nothing was stored") from None
            if not answer.strip() and default is not None:
                answer = default
            try:
                return parse(answer)
            except EvalError as exc:
                self.write(f"  not accepted: {exc} — please answer again")

    def say(self, line: str) -> None:
        self.write(line)


class NoQuestions(Prompter):
    """A session that never reads input: every question takes its default answer, and a
    question without one is an error (used when every required answer came from flags)."""

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        super().__init__(read=self._refuse, write=write)

    @staticmethod
    def _refuse(prompt: str) -> str:
        raise EOFError

    def ask(self, question: str, parse: Callable[[str], T], default: str | None = None) -> T:
        if default is None:
            raise AnswersEnded(f"{question!r} needs an answer and no input is read")
        return parse(default)


def scripted_reader(answers: list[str]) -> Callable[[str], str]:
    """A `read` function answering from a list in order (EOFError when it runs out)."""
    it: Iterator[str] = iter(answers)

    def read(prompt: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return read


# --------------------------------------------------------------------------- the answers


@dataclass(frozen=True)
class ManualAnswers:
    """What a technician reported about one real episode.

    Units: duration_s seconds; fault repair times in seconds (entered in minutes).
    """

    status: str
    quality: float
    audited_success: bool
    interventions: int
    faults: tuple[Fault, ...]
    incidents: tuple[SafetyEvent, ...]
    duration_s: float
    technician: str
    notes: str = ""
    started_at: str = ""
    actions: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["faults"] = [f.to_dict() for f in self.faults]
        data["incidents"] = [e.to_dict() for e in self.incidents]
        return data


def _repeated(prompter: Prompter, noun: str, ask_one: Callable[[], T]) -> tuple[T, ...]:
    count = prompter.ask(f"How many {noun}?", parse_count, "0")
    return tuple(ask_one() for _ in range(count))


def _ask_fault(prompter: Prompter) -> Fault:
    kind = prompter.ask("  fault kind (e.g. grasp_slip, actuator_stall)", parse_kind)
    recovered = prompter.ask("  recovered autonomously? (y/n)", parse_yes_no)
    minutes = prompter.ask("  repair time, minutes", parse_minutes, "0")
    detail = prompter.ask("  what happened (optional)", str, "")
    return Fault(
        kind=kind, recovered_autonomously=recovered, repair_s=minutes * 60.0, detail=detail
    )


def _ask_incident(prompter: Prompter, duration_s: float | None) -> SafetyEvent:
    def kind(text: str) -> str:
        value = text.strip().lower()
        if value not in SAFETY_EVENT_KINDS:
            raise EvalError(f"{text!r} is not one of {', '.join(SAFETY_EVENT_KINDS)}")
        return value

    def seconds_into(text: str) -> float:
        value = _event_value("t_s", text)
        if value < 0 or (duration_s is not None and value > duration_s):
            raise EvalError(f"{text!r} must be between 0 and the episode duration")
        return float(value)

    def optional(parser: Callable[[str], Any]) -> Callable[[str], Any]:
        return lambda text: None if not text.strip() else parser(text)

    values: dict[str, Any] = {
        "kind": prompter.ask(f"  incident kind ({', '.join(SAFETY_EVENT_KINDS)})", kind)
    }
    values["t_s"] = prompter.ask("  seconds into the episode", seconds_into, "0")
    k = values["kind"]
    if k in ("protective_stop", "emergency_stop"):
        values["stop_category"] = prompter.ask(
            "  stop category (0, 1 or 2; empty if unknown)", optional(parse_count), ""
        )
    if k == "contact":
        values["contact_force_n"] = prompter.ask(
            "  peak contact force, N (empty if not measured)",
            optional(lambda t: _event_value("contact_force_n", t)),
            "",
        )
        values["contact_with"] = prompter.ask("  contact with (person/object)", str, "person")
        values["body_region"] = prompter.ask("  body region (if a person)", optional(str), "")
        values["permitted"] = prompter.ask("  permitted contact? (y/n)", parse_yes_no, "n")
    if k == "separation":
        values["separation_m"] = prompter.ask(
            "  minimum separation, m", lambda t: _event_value("separation_m", t)
        )
    if k in ("injury", "contact"):
        values["injury_level"] = prompter.ask(
            "  injury level (none, first_aid, medical_treatment, ...)", optional(str), "none"
        )
    if k == "damage":
        values["damage_cost"] = prompter.ask(
            "  damage cost", lambda t: _event_value("damage_cost", t)
        )
    values["detail"] = prompter.ask("  what happened", str, "")
    values = {name: v for name, v in values.items() if v is not None}
    if values.get("injury_level") == "none":
        values.pop("injury_level")
    try:
        return SafetyEvent(**values)
    except EvalError as exc:
        prompter.say(f"  not accepted: {exc} — please enter this incident again")
        return _ask_incident(prompter, duration_s)


#: The `trial record` flag that answers each question (named when input ends before it).
ANSWER_FLAGS = {
    "technician": "--technician",
    "started_at": "--started-at",
    "status": "--status",
    "quality": "--quality",
    "audited_success": "--succeeded",
    "duration_s": "--duration",
    "interventions": "--interventions",
    "faults": "--fault or --no-faults",
    "incidents": "--incident or --no-incidents",
    "notes": "--notes",
}


def collect_answers(
    prompter: Prompter,
    given: Mapping[str, Any],
    *,
    target_quality: float,
    measured_duration_s: float | None = None,
) -> ManualAnswers:
    """Ask for every answer not already `given` (from flags, already parsed).

    Args:
        prompter: the console session.
        given: answers from flags, keyed like ManualAnswers fields (missing = ask).
        target_quality: q* of the episode (shown so the technician sees what success means).
        measured_duration_s: a duration measured by the caller, offered as the default.
    Returns:
        The complete, validated answers.
    """

    def pick(name: str, ask: Callable[[], T]) -> T:
        value = given.get(name)
        if value is not None:
            return value  # type: ignore[no-any-return]
        try:
            return ask()
        except AnswersEnded as exc:
            flag = ANSWER_FLAGS.get(name, "")
            raise AnswersEnded(
                f"{exc} (answer every question"
                + (f", or give {flag} to answer this one without a prompt)" if flag else ")")
            ) from None

    technician = pick("technician", lambda: prompter.ask("Technician", _non_empty))
    now = iso_utc(datetime.now(UTC))
    started_at = pick(
        "started_at",
        lambda: prompter.ask(
            "Start time, ISO 8601 with timezone (Enter = now)", parse_start_time, now
        ),
    )
    status = pick(
        "status",
        lambda: prompter.ask(f"Outcome ({', '.join(MANUAL_STATUSES)})", parse_status, "ok"),
    )
    while True:
        quality = pick(
            "quality",
            lambda: prompter.ask(
                f"Task quality q in [0, 1] (target q* = {target_quality:g})", parse_quality
            ),
        )
        suggested = "y" if status == "ok" and quality >= target_quality else "n"
        audited = pick(
            "audited_success",
            lambda default=suggested: prompter.ask(  # type: ignore[misc]
                "Did the task succeed, in your judgment? (y/n)", parse_yes_no, default
            ),
        )
        # Success means q ≥ q*: a success below q* contradicts whatever the outcome; a "did not
        # succeed" at or above q* only when the episode ended normally (a stop explains it).
        problem = (
            contradiction(quality, audited, target_quality) if status == "ok" or audited else ""
        )
        if not problem:
            break
        if given.get("quality") is not None or given.get("audited_success") is not None:
            raise EvalError(f"contradictory answers: {problem}", key="succeeded")
        prompter.say(f"  not accepted: {problem} — please answer both again")
    default_duration = f"{measured_duration_s:.3f}s" if measured_duration_s else None
    duration = pick(
        "duration_s",
        lambda: prompter.ask("Duration (e.g. 95s, 1.5min)", parse_duration, default_duration),
    )
    interventions = pick(
        "interventions",
        lambda: prompter.ask("Human interventions during the episode", parse_count, "0"),
    )
    faults: tuple[Fault, ...] = pick(
        "faults", lambda: _repeated(prompter, "faults", lambda: _ask_fault(prompter))
    )
    incidents: tuple[SafetyEvent, ...] = pick(
        "incidents",
        lambda: _repeated(prompter, "safety incidents", lambda: _ask_incident(prompter, duration)),
    )
    notes = pick("notes", lambda: prompter.ask("Notes (optional)", str, ""))
    # A hand-entered incident names who reported it, so the incident log can tell it apart from
    # a detector's.
    incidents = tuple(
        e if e.source_rule else e.replace(source_rule=f"manual:{technician}") for e in incidents
    )
    for event in incidents:
        if event.t_s > duration:
            raise EvalError(
                f"incident {event.kind}: t_s = {event.t_s:g} s is after the episode ended "
                f"({duration:g} s)",
                key="incident",
            )
    return ManualAnswers(
        status=status,
        quality=quality,
        audited_success=audited,
        interventions=interventions,
        faults=tuple(faults),
        incidents=tuple(incidents),
        duration_s=duration,
        technician=technician,
        notes=notes,
        started_at=started_at,
        actions=int(given.get("actions") or 0),
    )


def _non_empty(text: str) -> str:
    if not text.strip():
        raise EvalError("must not be empty")
    return text.strip()
