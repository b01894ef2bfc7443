"""Rules across episodes: what a pair is (seed §3), checked when episodes are imported.

A pair is a sim and a real episode on the same (task t, seed s, drift δ) with the same policy;
every episode of one `pair_id` must therefore name the same family, task and seed, and a manifest
entry (pair, side, engine, attempt) has exactly one episode. A file that breaks either rule —
within itself or against the episodes already stored — is refused naming the episode and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from embodied_eval.errors import EvalError
from embodied_eval.records import Episode

if TYPE_CHECKING:
    from embodied_eval.store.core import Store

#: Fields every episode of one pair shares.
PAIR_FIELDS = ("family", "task_id", "seed")


def check_pairs(episodes: Sequence[Episode], *, where: str, stored: Iterable[Episode] = ()) -> None:
    """Refuse episodes that break the pair rules, within `episodes` or against `stored`.

    Args:
        episodes: the episodes about to be written (in file order).
        where: the file they come from (named in the error).
        stored: episodes already in the store that share a pair_id with `episodes`.

    Raises:
        EvalError: naming the episode, the field and the partner it disagrees with.
    """
    first: dict[str, Episode] = {}
    entry: dict[tuple[str, str, str, int], Episode] = {}
    for source, items in (("stored", list(stored)), (where, list(episodes))):
        for ep in items:
            partner = first.setdefault(ep.pair_id, ep)
            for name in PAIR_FIELDS:
                if getattr(ep, name) != getattr(partner, name):
                    raise EvalError(
                        f"{where}: episode {ep.episode_id!r} has {name} "
                        f"{getattr(ep, name)!r} but its pair partner {partner.episode_id!r} "
                        f"has {getattr(partner, name)!r} (pair {ep.pair_id!r}; a pair shares "
                        "family, task and seed)",
                        key=name,
                    )
            key = (ep.pair_id, ep.side, ep.engine, ep.attempt)
            other = entry.setdefault(key, ep)
            if other.episode_id != ep.episode_id:
                raise EvalError(
                    f"{where}: episode {ep.episode_id!r} is a second {ep.side} episode on "
                    f"{ep.engine} in pair {ep.pair_id!r} at attempt {ep.attempt} (also "
                    f"{other.episode_id!r}{' in the store' if source == 'stored' else ''}); "
                    "a retry needs a new attempt number",
                    key="attempt",
                )


def stored_partners(store: Store, episodes: Iterable[Episode]) -> list[Episode]:
    """The stored episodes sharing a pair_id with `episodes` (not those with the same id)."""
    ids = {ep.episode_id for ep in episodes}
    pairs = sorted({ep.pair_id for ep in episodes})
    out: list[Episode] = []
    for start in range(0, len(pairs), 500):
        chunk = pairs[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = store.conn.execute(
            f"SELECT episode_id FROM episodes WHERE pair_id IN ({marks}) ORDER BY episode_id",
            chunk,
        ).fetchall()
        for (episode_id,) in rows:
            if episode_id not in ids:
                found = store.get_episode(episode_id)
                if found is not None:
                    out.append(found)
    return out
