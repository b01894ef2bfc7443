"""What the trial ledger promises, checked against the store: the ledger walk's per-record checks
(signatures against the key registry, revocations, seals) and the record tables and artifact
files against the hashes chained for them. Used by `embodied_eval.store.verify_store`."""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from pathlib import Path
from typing import Any

from embodied_eval.canonical import file_sha256
from embodied_eval.store import hashchain, ledger
from embodied_eval.store.artifacts import artifact_file
from embodied_eval.store.hashchain import Problem
from embodied_eval.store.signing_keys import verify_signature
from embodied_eval.store.verify_report import StoreReport

#: A plain episode record's text split at its quotes: (the pieces with the values blanked, where
#: the values are, where the episode id, the record hash and the events hash are — 0: none).
_Layout = tuple[list[str], tuple[int, ...], int, int, int]


def _plain_layout(events: bool) -> _Layout:
    """The layout of a plain episode record, taken from one built as the ledger builds them."""
    data: dict[str, Any] = {
        "artifacts": [],
        "episode_id": "<id>",
        "faults": [],
        "import": None,
        "record_sha256": "<record>",
        "safety_events_sha256": "<events>" if events else None,
    }
    x = hashchain.build_body(7, "episode", "<id>", data, window="<window>", at="<at>").split('"')
    values = tuple(i for i, t in enumerate(x) if t.startswith("<") or t == ":7,")
    where = (x.index("<id>"), x.index("<record>"), x.index("<events>") if events else 0)
    for i in values:
        x[i] = ""
    return (x, values, *where)


#: The layouts of a plain episode record (with and without safety events), by the number of
#: pieces its text splits into at its quotes (`LedgerWalk.skim`).
_PLAIN: dict[int, _Layout] = {len(lay[0]): lay for lay in map(_plain_layout, (True, False))}

#: Roles that must sign each kind of ledger record.
SIGNER_ROLES = {"audit": ("technician",), "seal": ("protocol_owner",)}


class LedgerWalk:
    """What the ledger's records promise, collected while walking it."""

    def __init__(self, registry: dict[str, dict[str, Any]]) -> None:
        self.registry = registry
        self.episodes: dict[str, tuple[int, dict[str, Any]]] = {}
        self.late_faults: dict[tuple[str, int], tuple[int, str]] = {}
        self.manifests: dict[str, tuple[int, str]] = {}
        self.imports: set[str] = set()
        self.seals: list[dict[str, Any]] = []
        self.signatures: dict[str, int] = {}
        self.revoked: dict[str, int] = {}

    def check(
        self, seq: int, env: dict[str, Any], digest: str, sig: str | None, prev: str
    ) -> Problem | None:
        kind, rid, data = env["kind"], env.get("record_id"), env["data"]
        try:
            found = self._signed(seq, env, digest, sig)
            if found is not None:
                return found
            if kind == "episode":
                if data["episode_id"] in self.episodes:
                    return self._duplicate(seq, data["episode_id"])
                self.episodes[data["episode_id"]] = (seq, data)
            elif kind == "faults":
                for f in data["faults"]:
                    self.late_faults[(f["episode_id"], int(f["ordinal"]))] = (seq, f["sha256"])
            elif kind == "manifest":
                self.manifests[data["manifest_hash"]] = (seq, data["json_sha256"])
            elif kind == "import":
                self.imports.add(str(rid))
            elif (
                kind in ("audit", "amendment", "audit_label")
                and env.get("subject") not in self.episodes
            ):
                return Problem(seq, rid, "content", f"{kind} of an episode not chained before it")
            elif kind == "revocation":
                self.revoked[str(data["fingerprint"])] = seq
            elif kind == "seal":
                head = data["episode_head"]
                if head.get("head_hash") != prev or head.get("record_count") != seq - 1:
                    return Problem(
                        seq,
                        rid,
                        "seal",
                        "seal names an episode-chain head that is not the record before it",
                    )
                self.seals.append({**data, "seq": seq, "hash": digest})
            elif kind == "checkpoint":
                head = data["trial_ledger"]
                if head.get("hash") != prev or head.get("seq") != seq - 1:
                    return Problem(
                        seq,
                        rid,
                        "checkpoint",
                        f"checkpoint {rid} names trial-ledger record {head.get('seq')} "
                        f"({str(head.get('hash'))[:16]}…), which is not the record before it: "
                        "the history before the checkpoint was rewritten",
                    )
        except (KeyError, TypeError, ValueError) as exc:
            return Problem(seq, rid, "content", f"unreadable {kind} record ({exc})")
        return None

    def _duplicate(self, seq: int, eid: str) -> Problem:
        return Problem(
            seq,
            eid,
            "duplicate",
            f"episode {eid} is chained a second time (first at record {self.episodes[eid][0]})",
        )

    def skim(self, seq: int, body: str) -> bool:
        """Read a plain unsigned episode record (no faults, artifacts or import) from its
        canonical text without parsing it; False for anything else (then it is parsed).

        Without a backslash in the text every `"` delimits a JSON string, so splitting at the
        quotes gives the text between strings and the strings themselves, alternately. With
        the values (time, episode id, hashes, record id, seq, window) set aside, the pieces must
        be exactly those of a plain episode record (`_PLAIN`) — so what is read is what a JSON
        parser would read (the walk has checked the seq)."""
        if "\\" in body:
            return False
        x = body.split('"')
        plain = _PLAIN.get(len(x))
        if plain is None:
            return False
        skeleton, values, eid_at, record_at, events_at = plain
        eid, record = x[eid_at], x[record_at]
        events = x[events_at] if events_at else None
        for i in values:
            x[i] = ""
        if x != skeleton or eid in self.episodes:
            return False  # a duplicate is parsed again, and named by `check`
        self.episodes[eid] = (
            seq,
            {"record_sha256": record, "faults": [], "safety_events_sha256": events},
        )
        return True

    def _signed(
        self, seq: int, env: dict[str, Any], digest: str, sig: str | None
    ) -> Problem | None:
        kind, rid, signer, data = env["kind"], env.get("record_id"), env.get("signer"), env["data"]
        if kind in ledger.SIGNED_KINDS and not signer:
            return Problem(seq, rid, "unsigned", f"{kind} record carries no signer")
        if not signer:
            return None
        if not sig:
            return Problem(seq, rid, "signature", f"signature of {kind} record is missing")
        info = self.registry.get(signer)
        if info is None:
            return Problem(
                seq, rid, "signature", f"signed by key {signer[:16]}…, which is not registered"
            )
        who = f"key {signer[:16]}… ({info.get('holder', '?')}, {info.get('role', '?')})"
        if not verify_signature(info["public_key"], digest, sig):
            return Problem(
                seq, rid, "signature", f"signature does not verify with {who}: forged or altered"
            )
        if signer in self.revoked:
            return Problem(
                seq,
                rid,
                "revoked",
                f"signed by {who}, which was revoked at ledger record {self.revoked[signer]}: "
                "a revoked key's signatures do not count",
            )
        if kind != "revocation" and data.get("role") and data["role"] != info.get("role"):
            return Problem(
                seq,
                rid,
                "signature",
                f"record claims role {data['role']} but {who} is registered as {info.get('role')}",
            )
        allowed = SIGNER_ROLES.get(kind)
        if allowed and info.get("role") not in allowed:
            return Problem(
                seq, rid, "signature", f"a {kind} is signed by a {' or '.join(allowed)}, not {who}"
            )
        self.signatures[signer] = self.signatures.get(signer, 0) + 1
        return None


def _check_events(
    conn: sqlite3.Connection, episodes: dict[str, tuple[int, dict[str, Any]]]
) -> tuple[int, list[tuple[int, str]], list[str]]:
    """Each episode's stored safety events against the digest chained for it, read in one pass
    grouped by episode: (events read, (seq, id) of episodes whose events differ — changed,
    added or gone —, ids of episodes with events that were never chained)."""
    n_events = seen_chained = 0
    bad: list[tuple[int, str]] = []
    outside: list[str] = []
    current: str | None = None
    bodies: list[str] = []
    rows = conn.execute(
        "SELECT episode_id, event_json FROM safety_events ORDER BY episode_id, ordinal"
    )
    for eid, body in itertools.chain(rows, ((None, ""),)):
        if eid == current:
            bodies.append(body)
            n_events += 1
            continue
        if current is not None:
            entry = episodes.get(current)
            if entry is None:
                outside.append(current)
            else:
                chained = entry[1].get("safety_events_sha256")
                seen_chained += chained is not None
                if ledger.events_digest(bodies) != chained:
                    bad.append((entry[0], current))
        current, bodies = eid, [body]
        n_events += eid is not None
    with_events = [e for e, (_, d) in episodes.items() if d.get("safety_events_sha256")]
    if seen_chained < len(with_events):  # some episode's chained events are all gone
        have = {r[0] for r in conn.execute("SELECT DISTINCT episode_id FROM safety_events")}
        bad += [(episodes[e][0], e) for e in with_events if e not in have]
    return n_events, bad, outside


def check_tables(conn: sqlite3.Connection, walk: LedgerWalk, report: StoreReport, db: Path) -> bool:
    """Record tables against what the ledger chained; False (report failed) at the first problem."""
    table = "episodes table"
    seen: set[str] = set()
    sha256 = hashlib.sha256
    for eid, body in conn.execute("SELECT episode_id, record_json FROM episodes"):
        seen.add(eid)
        entry = walk.episodes.get(eid)
        if entry is None:
            report.fail(
                table,
                Problem(
                    None,
                    eid,
                    "unchained",
                    f"episode {eid} is in the episodes "
                    "table but was never chained: added outside the ledger",
                ),
            )
            return False
        if sha256(body.encode("utf-8")).hexdigest() != entry[1]["record_sha256"]:
            report.fail(
                table,
                Problem(
                    entry[0],
                    eid,
                    "edited",
                    f"episodes.record_json of {eid} no "
                    "longer matches the hash chained for it: it was edited",
                ),
            )
            return False
    # Every stored id was found chained above, so equal counts mean nothing chained is gone.
    gone = () if len(seen) == len(walk.episodes) else set(walk.episodes) - seen
    for eid in sorted(gone, key=lambda e: walk.episodes[e][0]):
        report.fail(
            table,
            Problem(
                walk.episodes[eid][0],
                eid,
                "deleted",
                f"episode {eid} was chained but its row is gone from the episodes table: deleted",
            ),
        )
        return False
    expected: dict[tuple[str, int], tuple[int, str]] = dict(walk.late_faults)
    for eid, (seq, data) in walk.episodes.items():
        for i, sha in enumerate(data.get("faults", [])):
            expected[(eid, i)] = (seq, sha)
    faults = 0
    for eid, ordinal, text in conn.execute("SELECT episode_id, ordinal, fault_json FROM faults"):
        faults += 1
        want = expected.pop((eid, int(ordinal)), None)
        if want is None or ledger.sha256_text(text) != want[1]:
            what = "was never chained" if want is None else "no longer matches its chained hash"
            report.fail(
                "faults table",
                Problem(
                    None if want is None else want[0],
                    eid,
                    "edited",
                    f"fault #{ordinal + 1} of {eid} {what}",
                ),
            )
            return False
    if expected:
        (eid, ordinal), (seq, _) = min(expected.items(), key=lambda kv: kv[1][0])
        report.fail(
            "faults table",
            Problem(
                seq,
                eid,
                "deleted",
                f"fault #{ordinal + 1} of {eid} was chained but is gone: deleted",
            ),
        )
        return False
    n_events, bad, outside = _check_events(conn, walk.episodes)
    if bad:
        seq, eid = min(bad)
        report.fail(
            "safety_events table",
            Problem(
                seq, eid, "edited", f"safety events of {eid} no longer match their chained hash"
            ),
        )
        return False
    if outside:
        eid = min(outside)
        report.fail(
            "safety_events table",
            Problem(
                None, eid, "unchained", f"safety events of {eid} were added outside the ledger"
            ),
        )
        return False
    manifests = 0
    for mhash, text in conn.execute("SELECT manifest_hash, manifest_json FROM manifests"):
        manifests += 1
        want_m = walk.manifests.pop(mhash, None)
        if want_m is None or ledger.sha256_text(text) != want_m[1]:
            report.fail(
                "manifests table",
                Problem(
                    None if want_m is None else want_m[0],
                    mhash,
                    "edited",
                    "manifest JSON does not match the hash chained for it (or was never chained)",
                ),
            )
            return False
    if walk.manifests:
        mhash, (seq, _) = next(iter(walk.manifests.items()))
        report.fail("manifests table", Problem(seq, mhash, "deleted", "chained manifest is gone"))
        return False
    artifacts = 0
    for eid, (seq, data) in walk.episodes.items():  # in chain order (the walk's)
        for art in data.get("artifacts", ()):
            found = artifact_file(art["path"], db)
            if found is None:
                if data.get("import"):
                    report.notes.append(
                        f"artifact {art['path']} of imported {eid} not on this disk"
                    )
                    continue
                report.fail(
                    "artifacts",
                    Problem(
                        seq,
                        eid,
                        "artifact missing",
                        f"artifact file {art['path']!r} of {eid} is missing",
                    ),
                )
                return False
            actual = file_sha256(found)
            artifacts += 1
            if actual != art["sha256"]:
                report.fail(
                    "artifacts",
                    Problem(
                        seq,
                        eid,
                        "artifact changed",
                        f"artifact file "
                        f"{art['path']!r} of {eid} changed (sha256 "
                        f"{actual[:12]}…, chained {art['sha256'][:12]}…)",
                    ),
                )
                return False
    report.counts.update(
        episodes=len(seen),
        faults=faults,
        safety_events=n_events,
        manifests=manifests,
        artifacts=artifacts,
    )
    return True
