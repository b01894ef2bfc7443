"""`embodied-eval console --db DB --protocol P`: a live web console of a window's store.

Beside a run, `embodied-eval run ... --console-port N` starts the same console in the run's own
process, sharing its live state (the real episode in progress, stop and pause).

Both name their operators (`--user`, repeatable, or `--operators FILE`); each gets a token of
their own, shown on the terminal only, and written for scripts to the token file (mode 0600,
removed when the console stops). See `embodied_eval.console.access`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from embodied_eval.cli.common import DbOption, err_console
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.store.core import default_db_path

if TYPE_CHECKING:
    from embodied_eval.console.access import Operators

#: Default port of the console.
DEFAULT_PORT = 8050

ConsoleHostOption = typer.Option(
    "127.0.0.1", "--host", help="Address to listen on (default: this machine only)."
)
UserOption = typer.Option(
    None,
    "--user",
    help="An operator allowed in (repeatable): each gets a token of their own, and the stops "
    "and pauses they ask for are recorded under their name (default: $EMBODIED_EVAL_USER or "
    "the login name).",
)
OperatorsOption = typer.Option(
    None, "--operators", help="A text file naming the operators, one a line (instead of --user)."
)
TokenFileOption = typer.Option(
    None,
    "--token-file",
    help="Where the operators' tokens are written for scripts, readable by you only (default: "
    "console-tokens.json beside the store); removed when the console stops.",
)
TlsCertOption = typer.Option(None, "--tls-cert", help="PEM certificate: serve HTTPS / wss.")
TlsKeyOption = typer.Option(None, "--tls-key", help="PEM private key of --tls-cert.")
InsecureRemoteOption = typer.Option(
    False,
    "--insecure-remote",
    help="Allow listening on an address other machines can reach without TLS.",
)


def operators_from(users: list[str] | None, operators_file: Path | None) -> Operators:
    """The session's operators: `--operators FILE`, else `--user` names, else the login name."""
    from embodied_eval.console.access import Operators
    from embodied_eval.errors import EvalError
    from embodied_eval.live_channel import default_user

    if operators_file is not None:
        if users:
            raise EvalError("name the operators with --user or --operators, not both", key="user")
        return Operators.from_file(operators_file)
    return Operators.issue(users or [default_user()])


def announce(
    operators: Operators, token_file: Path, *, console: Any = None, foxglove: Any = None
) -> None:
    """Tell people where the console and Foxglove listen. The tokens go to the terminal (never
    stdout/stderr, which may be a log) and to `token_file` (mode 0600) for scripts."""
    from embodied_eval.console.access import show_on_terminal, write_token_file

    write_token_file(
        token_file,
        {
            "pid": os.getpid(),
            "console": console.base_url if console is not None else None,
            "foxglove": foxglove.url if foxglove is not None else None,
            "operators": dict(operators.tokens),
        },
    )
    lines = ["sign-in links (each holds its operator's token: keep it to them):"]
    for name, token in operators.tokens.items():
        if console is not None:
            lines.append(f"  {name}: {console.base_url}?token={token}")
        if foxglove is not None:
            lines.append(f"  {name} in Foxglove: {foxglove.url}?token={token}")
    shown = show_on_terminal("\n".join(lines) + "\n")
    if console is not None:
        err_console.print(f"console: {console.base_url}", highlight=False, soft_wrap=True)
    if foxglove is not None:
        err_console.print(f"foxglove: {foxglove.url}", highlight=False, soft_wrap=True)
    where = "on the terminal; tokens" if shown else "(no terminal to show them on): tokens"
    err_console.print(
        f"operators {', '.join(operators.names)}: sign-in links {where} for scripts in "
        f"{token_file} (mode 0600, removed at the end)",
        highlight=False,
        soft_wrap=True,
    )


@contextlib.contextmanager
def token_file_kept(path: Path) -> Iterator[None]:
    """Remove the token file when the session ends (if it is still this process's)."""
    from embodied_eval.console.access import remove_token_file

    try:
        yield
    finally:
        remove_token_file(path, os.getpid())


def console_command(
    db: Path | None = DbOption,
    protocol_file: Path = typer.Option(..., "--protocol", help="The window's protocol TOML."),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="Port to listen on (0: a free one)."),
    host: str = ConsoleHostOption,
    manifest: str | None = typer.Option(
        None, "--manifest", help="Manifest hash to show (default: the newest of the protocol)."
    ),
    max_retries: int = typer.Option(
        1, "--max-retries", help="The run's --max-retries (when a row counts as settled)."
    ),
    user: list[str] | None = UserOption,
    operators_file: Path | None = OperatorsOption,
    token_file: Path | None = TokenFileOption,
    tls_cert: Path | None = TlsCertOption,
    tls_key: Path | None = TlsKeyOption,
    insecure_remote: bool = InsecureRemoteOption,
) -> None:
    """Serve a live console of a window's store: progress, stopping, incidents, episodes."""
    from embodied_eval.console.access import TLSFiles, check_bind, default_token_file, redacted_logs
    from embodied_eval.console.app import ConsoleServer
    from embodied_eval.console.window import load_manifest
    from embodied_eval.store.core import Store

    tls = TLSFiles.of(tls_cert, tls_key)
    check_bind(host, tls=tls is not None, insecure_remote=insecure_remote, what="console",
               option="--host")  # fmt: skip
    operators = operators_from(user, operators_file)
    protocol = load_protocol(protocol_file)
    path = db if db is not None else default_db_path()
    with Store(path, read_only=True) as store:  # refuse a missing store or manifest up front
        load_manifest(store, protocol, manifest)
    server = ConsoleServer(
        path,
        protocol,
        host=host,
        port=port,
        manifest_hash=manifest,
        max_retries=max_retries,
        operators=operators,
        tls=tls,
        insecure_remote=insecure_remote,
    )
    tokens = token_file if token_file is not None else default_token_file(path)
    with redacted_logs(operators), token_file_kept(tokens):
        server.start()
        try:
            announce(operators, tokens, console=server)
            err_console.print("Ctrl-C to stop", highlight=False)
            while True:
                time.sleep(1.0)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()


def register(app: typer.Typer) -> None:
    """Add `console` to the CLI."""
    app.command("console")(console_command)
