"""`embodied-eval console --db DB --protocol P`: a live web console of a window's store.

Beside a run, `embodied-eval run ... --console-port N` starts the same console in the run's own
process, sharing its live state (the real episode in progress, stop and pause).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from embodied_eval.cli.common import DbOption, err_console
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.store.core import default_db_path

#: Default port of the console.
DEFAULT_PORT = 8050

ConsoleHostOption = typer.Option(
    "127.0.0.1", "--host", help="Address to listen on (default: this machine only)."
)
UserOption = typer.Option(
    "",
    "--user",
    help="Name recorded with stops and pauses asked from the console (default: "
    "$EMBODIED_EVAL_USER or the login name).",
)


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
    user: str = UserOption,
) -> None:
    """Serve a live console of a window's store: progress, stopping, incidents, episodes."""
    from embodied_eval.console.app import ConsoleServer
    from embodied_eval.console.window import load_manifest
    from embodied_eval.store.core import Store

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
        user=user,
    )
    url = server.start()
    err_console.print(f"console: {url}  (Ctrl-C to stop)", highlight=False, soft_wrap=True)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    """Add `console` to the CLI."""
    app.command("console")(console_command)
