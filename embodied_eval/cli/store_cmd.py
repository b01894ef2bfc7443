"""`embodied-eval store verify | amend` and `embodied-eval trial audit`: the trial ledger."""

from __future__ import annotations

from pathlib import Path

import typer

from embodied_eval.cli.common import DbOption, JsonOption, console, err_console, print_json
from embodied_eval.errors import EvalError

store_app = typer.Typer(
    help="The store's integrity: verify the trial ledger, the incident log and artifacts; "
    "correct an episode by a chained amendment.",
    no_args_is_help=True,
)

KeyOption = typer.Option(None, "--key", help="Your private key (PEM) to sign with.")
PassOption = typer.Option(
    None,
    "--passphrase-env",
    help="Environment variable holding the key's passphrase (else asked on the terminal).",
)


@store_app.command("verify")
def store_verify(
    checkpoint: list[Path] = typer.Option(
        [],
        "--checkpoint",
        help="A countersigned checkpoint file kept outside the store, checked too (repeat).",
    ),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Verify the whole store: the trial ledger and the incident log (hash chains, signatures,
    seals, countersigned checkpoints), the episodes/faults/manifests rows and artifact files
    against their chained hashes. Lists who signed and which records are not yet anchored by a
    countersigned checkpoint; names the first bad record and exits 1 when anything fails (exit 2
    is a usage error, e.g. no store at --db)."""
    from embodied_eval.store.checkpoints import load_checkpoint_file
    from embodied_eval.store.verify_store import verify_store

    files = [load_checkpoint_file(path) for path in checkpoint]
    report = verify_store(db, files)
    if as_json:
        print_json(report.to_json())
    elif report.ok:
        console.print(report.summary(), markup=False, highlight=False)
    if not as_json:
        for signer in report.signers:
            revoked = f", REVOKED at {signer['revoked_at']}" if signer["revoked_at"] else ""
            where = ", ".join(
                f"{n} in the {chain}"
                for chain, n in (
                    ("trial ledger", signer["trial_ledger_signatures"]),
                    ("incident log", signer["incident_log_signatures"]),
                )
                if n
            )
            console.print(
                f"  signer {signer['fingerprint'][:16]}… {signer['holder']} ({signer['role']})"
                f"{revoked}: {signer['signatures']} signature(s) ({where})",
                markup=False,
                highlight=False,
            )
        for seal in report.seals:
            console.print(
                f"  window {seal['window']!r} sealed at ledger record {seal['seq']}: episode "
                f"head {seal['episode_head']['head_hash'][:16]}… "
                f"({seal['episode_head']['record_count']}), incident head "
                f"{seal['incident_head']['head_hash'][:16]}… "
                f"({seal['incident_head']['record_count']}), {seal['exposure_h']:g} h",
                markup=False,
                highlight=False,
            )
        for cp in report.checkpoints:
            who = ", ".join(str(c["holder"]) for c in cp["countersigned_by"]) or "NOT countersigned"
            console.print(
                f"  checkpoint {cp['checkpoint_id']} ({cp['at']}"
                + (
                    ", from a file"
                    if cp.get("from_file")
                    else f", ledger record {cp['ledger_seq']}"
                )
                + f"): trial ledger {cp['trial_ledger']['seq']}, incident log "
                f"{cp['incident_log']['seq']}; countersigned by {who}",
                markup=False,
                highlight=False,
            )
        for note in report.notes[:10]:
            console.print(f"  note: {note}", markup=False, highlight=False)
    if not report.ok:
        # One message, like `incidents verify`: a store that does not verify exits 1.
        err_console.print(
            f"FAILED: store does not verify — {report.summary()}", markup=False, highlight=False
        )
        raise typer.Exit(1)


@store_app.command("version")
def store_version(
    component: str = typer.Argument(
        ..., help="What changed: robot_firmware, robot_software or policy."
    ),
    version: str = typer.Argument(..., help="The version now installed."),
    robot: str = typer.Option(..., "--robot", help="The robot id (the protocol's robot_id)."),
    author: str = typer.Option(..., "--author", help="Who installed or recorded it."),
    name: str = typer.Option("", "--name", help="The policy's or package's name."),
    db: Path | None = DbOption,
) -> None:
    """Record a firmware, software or policy version change in the trial ledger: a certificate
    earned with another version is void from this record on (`verify --db` says so)."""
    from embodied_eval.certificate.validity import record_version
    from embodied_eval.store.core import default_db_path

    record_id = record_version(
        db if db is not None else default_db_path(),
        component=component,
        version=version,
        robot_id=robot,
        author=author,
        name=name,
    )
    console.print(f"version record {record_id}: {component} {version} on {robot}")


@store_app.command("amend")
def store_amend(
    episode_id: str = typer.Argument(..., help="The stored episode to correct."),
    changes: list[str] = typer.Option(
        ..., "--set", help="FIELD=VALUE (JSON value, e.g. quality=0.4, status='\"aborted\"')."
    ),
    reason: str = typer.Option(..., "--reason", help="Why the correction is made."),
    author: str = typer.Option("", "--author", help="Who corrects (the key's holder if --key)."),
    role: str = typer.Option("technician", "--role", help="In which role."),
    key: Path | None = KeyOption,
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Correct a stored episode by a chained amendment (the stored row never changes; the scored
    view applies it and lists it)."""
    import json

    from embodied_eval.store.signing_keys import load_key_option
    from embodied_eval.store.trial_audit import amend_episode

    parsed = {}
    for item in changes:
        name, sep, text = item.partition("=")
        if not sep:
            raise EvalError(f"--set {item!r}: expected FIELD=VALUE", key="field")
        try:
            parsed[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            parsed[name.strip()] = text
    payload = amend_episode(
        db,
        episode_id,
        parsed,
        reason=reason,
        author=author,
        role=role,
        key=load_key_option(key, passphrase_env),
    )
    if as_json:
        print_json(payload)
        return
    console.print(f"amendment {payload['record_id']} of {episode_id} chained at {payload['seq']}")


def trial_audit(
    episode_id: str = typer.Argument(..., help="The stored episode audited."),
    key: Path = typer.Option(..., "--key", help="The technician's private key (PEM)."),
    succeeded: str = typer.Option(
        ..., "--succeeded", help="Did the task truly succeed, in your judgment (yes/no)."
    ),
    quality: float | None = typer.Option(
        None, "--quality", help="The task quality you measured, in [0, 1] (optional)."
    ),
    note: str = typer.Option("", "--note", help="What you checked."),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Append a technician-signed human audit of a stored episode to the trial ledger (no
    re-import); the success-detector correction uses it. Contradictory answers are refused."""
    from embodied_eval.store.signing_keys import load_key_option
    from embodied_eval.store.trial_audit import audit_episode

    answer = succeeded.strip().lower()
    if answer not in ("yes", "no", "y", "n", "true", "false"):
        raise EvalError(f"--succeeded {succeeded!r}: answer yes or no", key="succeeded")
    private = load_key_option(key, passphrase_env)
    assert private is not None
    payload = audit_episode(
        db,
        episode_id,
        private,
        succeeded=answer in ("yes", "y", "true"),
        quality=quality,
        note=note,
    )
    if as_json:
        print_json(payload)
        return
    console.print(
        f"audit {payload['record_id']} of {episode_id} by {payload['auditor']} chained at "
        f"{payload['seq']} (signed by {str(payload['signer'])[:16]}…)"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")


@store_app.command("checkpoint")
def store_checkpoint(
    key: Path = typer.Option(..., "--key", help="Your private key (PEM), registered in the store."),
    out: Path | None = typer.Option(
        None, "--out", help="Write the checkpoint file here (give it to the second party)."
    ),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Chain a signed checkpoint of the trial ledger's and the incident log's heads (sequence,
    hash, time) for a second party to countersign (`store countersign`)."""
    from embodied_eval.store.checkpoints import write_checkpoint
    from embodied_eval.store.signing_keys import load_key_option

    signing = load_key_option(key, passphrase_env)
    assert signing is not None
    content = write_checkpoint(db, signing, out)
    if as_json:
        print_json(content)
        return
    console.print(
        f"checkpoint {content['checkpoint_id']} chained at ledger record {content['ledger_seq']}: "
        f"trial ledger {content['trial_ledger']['seq']} ({content['trial_ledger']['hash'][:16]}…), "
        f"incident log {content['incident_log']['seq']} "
        f"({content['incident_log']['hash'][:16]}…); digest {content['digest']}"
        + (f"; written to {out}" if out else ""),
        markup=False,
        highlight=False,
    )


@store_app.command("countersign")
def store_countersign(
    checkpoint_id: str = typer.Argument(..., help="The checkpoint's id (CP-…)."),
    key: Path | None = typer.Option(
        None, "--key", help="The second party's own Ed25519 private key (PEM)."
    ),
    holder: str = typer.Option("", "--holder", help="Who countersigns (e.g. safety officer)."),
    tsa_token: Path | None = typer.Option(
        None, "--tsa-token", help="An RFC 3161 timestamp token (DER) of the checkpoint's digest."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Write the countersigned checkpoint file here (the second party's copy).",
    ),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Countersign a checkpoint with a second party's key (or an RFC 3161 token of its digest):
    a history rewritten before it no longer verifies, whoever re-signs it."""
    from embodied_eval.store.checkpoints import countersign
    from embodied_eval.store.signing_keys import load_key_option

    signing = load_key_option(key, passphrase_env) if key is not None else None
    data = countersign(db, checkpoint_id, key=signing, holder=holder, tsa_token=tsa_token, out=out)
    if as_json:
        print_json(data)
        return
    what = (
        f"key {data['fingerprint'][:16]}…"
        if data["method"] == "ed25519"
        else f"RFC 3161 token sha256 {data['token_sha256'][:16]}… (time {data['gen_time']}; "
        "imprint matches the digest; the TSA's signature is not verified offline)"
    )
    console.print(
        f"countersigned {checkpoint_id} by {data['holder']} ({what}) at ledger record "
        f"{data['seq']}" + (f"; written to {out}" if out else ""),
        markup=False,
        highlight=False,
    )
