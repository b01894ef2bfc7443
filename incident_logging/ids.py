"""Record ids: random for reports, derived for detector events (so re-ingesting is idempotent)."""

from __future__ import annotations

import uuid

from embodied_eval.canonical import sha256_hex


def new_id(prefix: str) -> str:
    """A fresh record id, e.g. "INC-3f9a2c1b7d4e" (random; ids need not be reproducible)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def auto_incident_id(episode_id: str, ordinal: int) -> str:
    """The id of the incident a detector event gives: the same event always gives the same id."""
    return "INC-" + sha256_hex(f"{episode_id}#{ordinal}")[:12]
