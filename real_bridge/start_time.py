"""The start time of a hand-entered episode: parsed, checked and stored as ISO-8601 UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from embodied_eval.errors import EvalError
from embodied_eval.records import iso_utc, parse_utc

#: Hand-entered start times before this are refused as typos (a wrong year, a zero date).
EARLIEST_START = datetime(2000, 1, 1, tzinfo=UTC)
#: Clock difference tolerated between the technician's watch and this machine, seconds.
FUTURE_SLACK_S = 60.0


def parse_start_time(text: str, *, now: datetime | None = None) -> str:
    """The episode's start time: ISO-8601 with a timezone (`Z` or an offset such as `+01:00`).

    Returns it in UTC with a `Z` suffix (seconds resolution). Refuses a time without a timezone
    (ambiguous), one more than `FUTURE_SLACK_S` after `now` (default: the current time), and one
    before `EARLIEST_START`.
    """
    raw = text.strip()
    try:
        moment = parse_utc(raw, key="started_at")
    except EvalError as exc:
        raise EvalError(str(exc).removeprefix("started_at: "), key="started_at") from None
    if datetime.fromisoformat(raw.replace("Z", "+00:00")).tzinfo is None:
        raise EvalError(
            f"{raw!r} has no timezone; add Z for UTC or an offset like +01:00 "
            "(e.g. 2026-11-03T09:00:00Z)",
            key="started_at",
        )
    current = now or datetime.now(UTC)
    if moment > current + timedelta(seconds=FUTURE_SLACK_S):
        raise EvalError(f"{raw!r} is in the future (now is {iso_utc(current)})", key="started_at")
    if moment < EARLIEST_START:
        raise EvalError(
            f"{raw!r} is before {EARLIEST_START.year}; check the date", key="started_at"
        )
    return iso_utc(moment)
