"""Who may use the live console and its Foxglove streams, and where they may listen.

- `Operators`: the named people allowed in, each with a token of their own issued when the
  console starts (`--user NAME`, repeatable, or `--operators FILE`: one name a line). A request
  is theirs when it carries their token (`?token=`, `Authorization: Bearer`, or for a WebSocket
  the subprotocol `token.<TOKEN>` beside `foxglove.sdk.v1`); tokens are compared in constant
  time. The ledger's "who" on a stop, pause or resume is the user whose token made the request.
- `check_bind`: a listening address other than this machine's loopback needs TLS
  (`--tls-cert`/`--tls-key`) or an explicit `--insecure-remote`.
- Tokens reach people on the terminal only (`show_on_terminal`: the controlling terminal, not
  stdout/stderr, so a captured run log holds none) and scripts through a file only its owner can
  read (`write_token_file`, mode 0600); `TokenRedaction` blanks them in log records.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import ssl
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from embodied_eval.errors import EvalError

#: Bytes of randomness in each token (URL-safe base64: 32 characters).
TOKEN_BYTES = 24
#: Longest operator name, characters.
NAME_MAX = 64
#: What a redacted token reads as in logs.
REDACTED = "[token redacted]"
#: The WebSocket subprotocol prefix that carries a token (browsers cannot set headers there).
TOKEN_SUBPROTOCOL = "token."
#: Loggers the console's servers write through (their records are redacted).
SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "websockets",
                  "websockets.server", "websockets.client", "embodied_eval.console")  # fmt: skip


def _valid_name(name: str, where: str) -> str:
    name = name.strip()
    if not name or len(name) > NAME_MAX or not name.isprintable():
        raise EvalError(
            f"{where}: operator name {name!r} must be 1-{NAME_MAX} printable characters",
            key="user",
        )
    return name


@dataclass(frozen=True)
class Operators:
    """The people allowed into one console session and their tokens.

    Attributes:
        tokens: user name -> token (URL-safe text), in the order the names were given.
    """

    tokens: Mapping[str, str]

    @classmethod
    def issue(cls, names: Iterable[str], where: str = "--user") -> Operators:
        """A fresh token for each name (names are unique, case-insensitively)."""
        tokens: dict[str, str] = {}
        seen: set[str] = set()
        for raw in names:
            name = _valid_name(raw, where)
            if name.casefold() in seen:
                raise EvalError(f"{where}: operator {name!r} is named twice", key="user")
            seen.add(name.casefold())
            tokens[name] = secrets.token_urlsafe(TOKEN_BYTES)
        if not tokens:
            raise EvalError(f"{where}: name at least one operator", key="user")
        return cls(tokens)

    @classmethod
    def from_file(cls, path: Path) -> Operators:
        """Operators named in a text file, one a line (blank lines and `#` comments skipped)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalError(
                f"--operators {path}: cannot read it ({exc})", key="operators"
            ) from None
        names = [line.split("#", 1)[0].strip() for line in text.splitlines()]
        return cls.issue([n for n in names if n], where=f"--operators {path}")

    @property
    def names(self) -> list[str]:
        return list(self.tokens)

    @property
    def first(self) -> str:
        return next(iter(self.tokens))

    def user_for(self, token: str | None) -> str | None:
        """The user whose token this is, or None. Every token is compared (in constant time),
        so the time taken does not tell which, or how much of one, matched."""
        if not token:
            return None
        given = token.encode("utf-8", "surrogateescape")
        found = None
        for name, known in self.tokens.items():
            if hmac.compare_digest(given, known.encode("ascii")):
                found = name
        return found

    def redact(self, text: str) -> str:
        for token in self.tokens.values():
            text = text.replace(token, REDACTED)
        return text


def token_in_request(
    query: str, headers: Mapping[str, str], subprotocols: Iterable[str] = ()
) -> str | None:
    """The token a request carries: `?token=`, `Authorization: Bearer <token>`, or a WebSocket
    subprotocol `token.<TOKEN>` (the first found), or None."""
    values = parse_qs(query).get("token")
    if values:
        return values[0]
    authorization = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    for offered in subprotocols:
        if offered.startswith(TOKEN_SUBPROTOCOL):
            return offered[len(TOKEN_SUBPROTOCOL) :]
    return None


# ---------------------------------------------------------------------- where to listen


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) means this machine only."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(f[4][0]).is_loopback for f in found)


def listening_socket(host: str, port: int, *, what: str, option: str, key: str) -> socket.socket:
    """A socket listening on (host, port) (port 0: a free one); EvalError naming the option to
    change when the address cannot be taken.

    Args:
        what: the server, for the message ("console", "the Foxglove server").
        option: the command-line option that sets the port. key: the error's key.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise EvalError(
            f"{what}: cannot listen on {host}:{port} ({exc.strerror}); pass another {option} "
            "(0 picks a free one)",
            key=key,
        ) from None
    sock.listen(64)
    return sock


def check_bind(host: str, *, tls: bool, insecure_remote: bool, what: str, option: str) -> None:
    """Refuse a listening address other machines can reach without TLS, unless the operator
    said `--insecure-remote` (EvalError naming the option to change)."""
    if tls or insecure_remote or is_loopback(host):
        return
    raise EvalError(
        f"{what}: {option} {host} can be reached from other machines, and its tokens would "
        "cross the network in clear text: serve it over TLS (--tls-cert CERT.pem --tls-key "
        "KEY.pem), listen on 127.0.0.1, or pass --insecure-remote to accept that",
        key="host",
    )


@dataclass(frozen=True)
class TLSFiles:
    """A PEM certificate (chain) and its private key, served by the console and Foxglove."""

    cert: Path
    key: Path

    @classmethod
    def of(cls, cert: Path | None, key: Path | None) -> TLSFiles | None:
        if cert is None and key is None:
            return None
        if cert is None or key is None:
            raise EvalError("TLS needs both --tls-cert and --tls-key", key="tls")
        return cls(Path(cert), Path(key))

    def context(self) -> ssl.SSLContext:
        """A server TLS context (EvalError when the files do not load)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise EvalError(
                f"--tls-cert {self.cert} / --tls-key {self.key}: cannot load them ({exc})",
                key="tls",
            ) from None
        return context


# ---------------------------------------------------------------------- showing the tokens


def show_on_terminal(text: str) -> bool:
    """Write `text` to the controlling terminal (never to stdout/stderr, which may be captured
    to a log); False when there is none (a service, a test, a CI job)."""
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(text)
            tty.flush()
    except OSError:
        return False
    return True


def default_token_file(db_path: Path) -> Path:
    """Where the tokens are written for scripts when `--token-file` is not given: beside the
    store, `console-tokens.json`."""
    return Path(db_path).resolve().parent / "console-tokens.json"


def write_token_file(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as JSON to `path`, readable by its owner only (mode 0600), atomically."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(dict(data), out, indent=2)
            out.write("\n")
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise EvalError(
            f"--token-file {path}: cannot write it ({exc.strerror or exc})", key="token_file"
        ) from None


def remove_token_file(path: Path, pid: int) -> None:
    """Remove the token file at the session's end if it is still this process's."""
    with contextlib.suppress(OSError, ValueError):
        if json.loads(Path(path).read_text(encoding="utf-8")).get("pid") == pid:
            Path(path).unlink()


class TokenRedaction(logging.Filter):
    """Blanks the session's tokens in every record of the loggers it is attached to."""

    def __init__(self, operators: Operators) -> None:
        super().__init__()
        self.operators = operators

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.operators.redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_text is None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.operators.redact(record.exc_text)
        return True


@contextlib.contextmanager
def redacted_logs(operators: Operators, loggers: Iterable[str] = SERVER_LOGGERS) -> Iterator[None]:
    """Redact the session's tokens in the console's and its servers' loggers while it runs."""
    redaction = TokenRedaction(operators)
    attached = [logging.getLogger(name) for name in loggers]
    for logger in attached:
        logger.addFilter(redaction)
    try:
        yield
    finally:
        for logger in attached:
            logger.removeFilter(redaction)


__all__ = [
    "Operators",
    "TLSFiles",
    "check_bind",
    "default_token_file",
    "is_loopback",
    "redacted_logs",
    "remove_token_file",
    "show_on_terminal",
    "token_in_request",
    "write_token_file",
]
