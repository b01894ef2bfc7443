"""The embedded store and what vouches for it.

- `core`: the SQLite store (`Store`) — episodes, faults, manifests, safety events;
- `sqlite`, `guard`: opening the file (WAL, refusing files that are not ours, read-only opens);
- `ledger`, `hashchain`, `ledger_checks`: the trial ledger, the hash chain it shares with the
  incident log, and what the chain promises checked against the tables;
- `verify_store`, `verify_report`: one verify of the whole store;
- `artifacts`: where an episode's files live (paths relative to the store, so it travels);
- `signing_keys`: Ed25519 keys and signatures (ledger seals, incident reviews, certificates);
- `trial_audit`, `patches`: human audits, corrections and patches appended to the ledger.

`from embodied_eval.store import Store` is the public way in.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embodied_eval.store.core import UNASSIGNED_WINDOW as UNASSIGNED_WINDOW
    from embodied_eval.store.core import Store as Store
    from embodied_eval.store.guard import DB_ENV_VAR as DB_ENV_VAR
    from embodied_eval.store.guard import DEFAULT_DB as DEFAULT_DB
    from embodied_eval.store.guard import default_db_path as default_db_path
    from embodied_eval.store.sqlite import apply_migrations as apply_migrations
    from embodied_eval.store.sqlite import transaction as transaction

#: Public names, resolved from their module on first use (so `embodied-eval --help` and the
#: light submodules do not load the store and pandas).
_PUBLIC = {
    "DB_ENV_VAR": "guard",
    "DEFAULT_DB": "guard",
    "UNASSIGNED_WINDOW": "core",
    "Store": "core",
    "apply_migrations": "sqlite",
    "default_db_path": "guard",
    "transaction": "sqlite",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(f"embodied_eval.store.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module 'embodied_eval.store' has no attribute {name!r}")
