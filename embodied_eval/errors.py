"""The one error type a user can cause: bad protocol, bad input file, unknown task id, ..."""

from __future__ import annotations


class EvalError(Exception):
    """A problem the user can fix. The message says what to fix, in one line.

    The CLI prints it without a traceback and exits with status 2. Anything else that escapes is a
    bug in embodied-eval and keeps its traceback.
    """

    exit_code = 2

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(message)
