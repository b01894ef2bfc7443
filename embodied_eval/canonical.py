"""Canonical JSON and SHA-256, the basis of every hash the harness publishes.

Protocol hashes, manifest hashes, the incident chain and certificate signatures all hash the same
canonical form, so one function owns it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any


def _reject_non_finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("canonical JSON cannot hold NaN or infinity")
    if isinstance(value, dict):
        return {str(k): _reject_non_finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_reject_non_finite(v) for v in value]
    return value


#: The C JSON encoder set up as `canonical_json` (sorted keys, no spaces, UTF-8, NaN/inf refused).
CANONICAL_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _text_keys(value: Any) -> bool:
    """True when every dict key inside `value` is a `str` (then the C encoder alone gives the
    canonical text: it sorts keys as they are, and only text keys sort like their JSON)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if type(k) is not str:
                return False
            if isinstance(v, (dict, list, tuple)) and not _text_keys(v):
                return False
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, (dict, list, tuple)) and not _text_keys(v):
                return False
    return True


def canonical_json(value: Any) -> str:
    """Serialize `value` as canonical JSON: sorted keys, no spaces, UTF-8, no NaN/inf.

    Non-text keys are written as their `str()` and sorted as text."""
    if _text_keys(value):
        try:
            return CANONICAL_ENCODER.encode(value)
        except ValueError:
            pass  # NaN/inf: the walk below names it
    return json.dumps(
        _reject_non_finite(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def sha256_hex(data: bytes | str) -> str:
    """SHA-256 hex digest of bytes (str is encoded as UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of `value`."""
    return sha256_hex(canonical_json(value))


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> str:
    """Write `data` to a temp file beside `path`, fsync, rename over `path`; return its sha256.

    A reader sees either the old file or the whole new one, never a partial write.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return sha256_hex(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> str:
    """`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))
