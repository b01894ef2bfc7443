"""`embodied-eval certify` and `embodied-eval verify`: signed certificate bundles."""

from __future__ import annotations

from pathlib import Path

import typer

from embodied_eval.cli.common import DbOption, JsonOption, print_json


def certify(
    protocol: Path = typer.Option(..., "--protocol", help="The protocol TOML file certified."),
    key: Path = typer.Option(..., "--key", help="Signer's Ed25519 private key (PEM)."),
    out: Path = typer.Option(..., "--out", help="Bundle folder to write (absent or empty)."),
    db: Path | None = DbOption,
    evidence: Path | None = typer.Option(
        None, "--evidence", help="Evidence JSON for the software-only axes and the resource card."
    ),
    create_key: bool = typer.Option(
        False, "--create-key", help="Create the key file first (refuses to overwrite one)."
    ),
    passphrase_env: str | None = typer.Option(
        None, "--passphrase-env", help="Environment variable holding the key's passphrase."
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        min=0,
        help="Bootstrap RNG seed (default: derived from the protocol's base seed).",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty --out."),
    fail_on_gate: bool = typer.Option(
        False,
        "--fail-on-gate",
        help="Exit with status 1 when the verdict is red (invalid window or a failing check); "
        "by default a written certificate exits 0 whatever it says.",
    ),
    as_json: bool = JsonOption,
) -> None:
    """Compute E and the AAI index for the protocol's window, assign the level, write a signed
    bundle (certificate.json, report.html, plots, signature). Refuses when the incident log's
    hash chain does not verify. Prints the verdict (red / amber / green), what remains, and
    why this level and not the next."""
    from embodied_eval.certificate.issue import issue_certificate
    from embodied_eval.cli.summaries import (
        print_level_explanation,
        print_next_steps,
        print_verdict,
    )
    from embodied_eval.scoring.verdict import RED, level_rows, window_verdict
    from embodied_eval.store.signing_keys import create_private_key, passphrase_from_env

    secret = passphrase_from_env(passphrase_env)
    if create_key:
        fingerprint = create_private_key(key, passphrase=secret)
        typer.echo(f"created key {key} (fingerprint {fingerprint})")
    result = issue_certificate(
        protocol_path=protocol,
        db=db,
        key_path=key,
        out=out,
        evidence_path=evidence,
        passphrase=secret,
        seed=seed,
        overwrite=overwrite,
    )
    cert = result.certificate
    window = cert["window"]
    verdict = window_verdict(
        cert["embodiment"]["gates"], valid=window["valid"], invalid_reason=window["invalid_reason"]
    )
    if as_json:
        print_json(
            {
                "bundle": str(result.path),
                "level": cert["level"],
                "window_valid": window["valid"],
                "verdict": verdict.to_json(),
                "level_checks": level_rows(
                    (cert.get("score") or {}).get("gates", []), int(cert["level"]["level"])
                ),
                "key_fingerprint": result.key_fingerprint,
            }
        )
    else:
        validity = "valid" if window["valid"] else f"INVALID ({window['invalid_reason']})"
        typer.echo(f"level {cert['level']['assigned']}; window {validity}")
        print_verdict(verdict)
        print_level_explanation(cert)
        print_next_steps(verdict, has_evidence=evidence is not None)
        typer.echo(f"bundle {result.path} signed by key {result.key_fingerprint}")
        typer.echo(f"report {result.path / 'report.html'}")
    if fail_on_gate and verdict.colour == RED:
        raise typer.Exit(1)


def verify(
    bundle: Path = typer.Argument(..., help="Certificate bundle folder."),
    db: Path | None = typer.Option(
        None,
        "--db",
        help="Store to recompute the certificate's numbers from (skipped when not given).",
    ),
    fingerprint: str | None = typer.Option(
        None, "--key-fingerprint", help="Require this signer (SHA-256 of the raw public key)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Check a bundle's signature and file hashes and, with --db, that its numbers recompute
    from the store and that no later record voided it ("void since <record>", exit 1: a newer
    firmware, software or policy version, a calibration drift beyond tolerance, the end of its
    validity period). Any failure names the file (or number) and exits 2."""
    from embodied_eval.certificate.verify import verify_bundle

    verified = verify_bundle(bundle, expected_fingerprint=fingerprint)
    signer = verified.certificate.get("signer", {})
    registered = signer.get("registered_in_incident_log") if isinstance(signer, dict) else None
    recomputed = False
    void = None
    if db is not None:
        from embodied_eval.certificate.issue import check_signer_registry, recompute_check
        from embodied_eval.certificate.validity import void_since
        from embodied_eval.store.guard import check_is_store, read_only_stores

        check_is_store(Path(db))  # a foreign file is refused before anything reads it
        with read_only_stores():  # verify never writes, not even schema tables
            registered = check_signer_registry(verified, db) or registered
            recompute_check(verified, db)
            void = void_since(verified.certificate, db)
        recomputed = True
    who = (
        f"{registered.get('holder')} ({registered.get('role')})"
        if isinstance(registered, dict)
        else "a key not in the key registry (pin it with --key-fingerprint)"
    )
    if as_json:
        print_json(
            {
                "bundle": str(bundle),
                "verified": True,
                "key_fingerprint": verified.key_fingerprint,
                "signer": registered,
                "files": len(verified.files),
                "recomputed": recomputed,
                "void_since": void,
            }
        )
        if void is not None:
            raise typer.Exit(1)
        return
    level = verified.certificate.get("level", {})
    level_text = level.get("assigned") if isinstance(level, dict) else None
    typer.echo(
        f"verified {bundle}: signature by key {verified.key_fingerprint} of {who}, "
        f"{len(verified.files)} file hashes match; level {level_text}"
        + ("; numbers recompute from the store" if recomputed else "")
    )
    if void is not None:
        # Authentic and reproducible, but no longer in force: exit 1 (2 is a failed check).
        typer.echo(f"void since {void}")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `certify` and `verify` to the CLI."""
    app.command("certify")(certify)
    app.command("verify")(verify)
