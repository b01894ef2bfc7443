"""Silence what native libraries print on the process's standard output and error.

PyBullet's C code prints a build banner when imported ("pybullet build time: …", on stderr) and
"argv[0]=" when a client connects (on stdout), straight to the file descriptors, which no
Python-level redirect catches; the latter would corrupt `--json` output. `native_output_silenced`
points descriptors 1 and 2 at the null device around such calls and flushes the C library's
buffers before putting them back. Python exceptions raised inside the block are not affected
(they are printed, if at all, after it).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator

_lock = threading.Lock()


def _flush_c_stdio() -> None:
    with contextlib.suppress(OSError, AttributeError):  # no C library handle: nothing buffered
        ctypes.CDLL(None).fflush(None)


def _descriptors() -> list[int]:
    fds = []
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fds.append(stream.fileno())  # type: ignore[union-attr]
    return fds


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """Discard what native code writes to descriptors 1 and 2 inside the block (Python's own
    buffered output is flushed first, so nothing printed before the block is lost)."""
    fds = _descriptors()
    with _lock:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        _flush_c_stdio()
        saved = [os.dup(fd) for fd in fds]
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            for fd in fds:
                os.dup2(devnull, fd)
            yield
        finally:
            _flush_c_stdio()
            for fd, copy in zip(fds, saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            os.close(devnull)
