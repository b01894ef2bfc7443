"""`embodied-eval policy serve module:factory`: serve a harness policy to openpi clients.

Any policy factory the harness can run (e.g. `sim_suites.policies:scripted`) is served over the
openpi websocket protocol, so it can be evaluated from another machine with
`--policy ws://HOST:PORT`, or queried by openpi's own `WebsocketClientPolicy`.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import typer

from embodied_eval.errors import EvalError
from embodied_eval.remote import API_KEY_ENV

policy_app = typer.Typer(
    help="Serve harness policies over the openpi websocket protocol.", no_args_is_help=True
)


@policy_app.command("serve")
def serve_command(
    target: str = typer.Argument(
        ..., help="Policy factory 'module:factory' (called with the task id)."
    ),
    port: int = typer.Option(8000, "--port", help="TCP port (0: any free port, printed)."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Interface to bind; 0.0.0.0 exposes the server to the network."
    ),
    task: str | None = typer.Option(
        None, "--task", help="Task id for clients that do not name one (openpi clients)."
    ),
    certfile: Path | None = typer.Option(
        None, "--certfile", help="PEM certificate (chain): serve TLS, clients use wss://."
    ),
    keyfile: Path | None = typer.Option(None, "--keyfile", help="PEM key of --certfile."),
    log_file: Path | None = typer.Option(
        None, "--log-file", help="Write the server log (with tracebacks) here instead of stderr."
    ),
) -> None:
    """Serve a policy until Ctrl-C. Set $EMBODIED_EVAL_POLICY_API_KEY to require that key."""
    from embodied_eval.remote.server import PolicyServer, tls_context

    if not 0 <= port <= 65535:
        raise EvalError(f"--port {port}: must be 0..65535", key="port")
    handler: logging.Handler = (
        logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[handler],
    )
    context = tls_context(str(certfile), str(keyfile) if keyfile else None) if certfile else None
    server = PolicyServer(
        target,
        host=host,
        port=port,
        api_key=os.environ.get(API_KEY_ENV) or None,
        task=task,
        ssl_context=context,
    )
    scheme = "wss" if context is not None else "ws"

    def ready(bound: int) -> None:
        key = " (API key required)" if server.api_key else ""
        print(f"serving {target} on {scheme}://{host}:{bound}{key}", flush=True)

    try:
        server.run(ready)
    except OSError as exc:
        raise EvalError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", key="port"
        ) from None


def register(app: typer.Typer) -> None:
    """Add the `policy` group to the CLI."""
    app.add_typer(policy_app, name="policy")
