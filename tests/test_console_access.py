"""Who may use the console: operators and their tokens, the token file, log redaction, and which
addresses count as this machine only (`embodied_eval.console.access`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from embodied_eval.console.access import (
    REDACTED,
    Operators,
    check_bind,
    is_loopback,
    redacted_logs,
    remove_token_file,
    token_in_request,
    write_token_file,
)
from embodied_eval.errors import EvalError


def test_each_operator_has_a_token_of_their_own_and_only_it_names_them(tmp_path: Path):
    operators = Operators.issue(["ana", "bo"])
    ana, bo = operators.tokens["ana"], operators.tokens["bo"]
    assert ana != bo and len(ana) == len(bo) == 32  # 24 random bytes in URL-safe base64
    assert (operators.user_for(ana), operators.user_for(bo)) == ("ana", "bo")
    for wrong in ("", None, ana[:-1], ana + "x", ana.upper() if ana.upper() != ana else "x", "é"):
        assert operators.user_for(wrong) is None
    # A fresh session, fresh tokens.
    assert Operators.issue(["ana"]).tokens["ana"] != ana


def test_the_operators_file_and_its_mistakes(tmp_path: Path):
    listed = tmp_path / "operators.txt"
    listed.write_text("# lab 3\nana\n\n  Bo Li  # night shift\n", encoding="utf-8")
    assert Operators.from_file(listed).names == ["ana", "Bo Li"]
    twice = tmp_path / "twice.txt"
    twice.write_text("ana\nANA\n", encoding="utf-8")
    with pytest.raises(EvalError, match="operator 'ANA' is named twice"):
        Operators.from_file(twice)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nobody\n", encoding="utf-8")
    with pytest.raises(EvalError, match="name at least one operator"):
        Operators.from_file(empty)
    with pytest.raises(EvalError, match="cannot read it"):
        Operators.from_file(tmp_path / "missing.txt")
    with pytest.raises(EvalError, match="1-64 printable characters"):
        Operators.issue(["x" * 65])


def test_where_a_request_carries_its_token():
    assert token_in_request("token=abc&x=1", {}) == "abc"
    assert token_in_request("", {"authorization": "Bearer abc"}) == "abc"
    assert token_in_request("", {"authorization": "Basic abc"}) is None
    assert token_in_request("", {}, ["foxglove.sdk.v1", "token.abc"]) == "abc"
    assert token_in_request("", {}, ["foxglove.sdk.v1"]) is None


def test_the_token_file_is_its_owners_only_and_goes_with_its_session(tmp_path: Path):
    path = tmp_path / "run" / "tokens.json"
    write_token_file(path, {"pid": 7, "operators": {"ana": "t"}})
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temporary left
    remove_token_file(path, 8)  # another session's: kept
    assert path.exists()
    remove_token_file(path, 7)
    assert not path.exists()


def test_tokens_are_redacted_in_the_servers_logs(tmp_path: Path):
    operators = Operators.issue(["ana"])
    token = operators.tokens["ana"]
    log_file = tmp_path / "console.log"
    handler = logging.FileHandler(log_file)
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        with redacted_logs(operators):
            logger.warning("GET /api/state?token=%s from %s", token, "10.0.0.2")
            try:
                raise ValueError(f"bad request /?token={token}")
            except ValueError:
                logger.exception("request failed")
        logger.warning("after the session: %s", "kept as is")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = log_file.read_text()
    assert token not in text
    assert f"GET /api/state?token={REDACTED} from 10.0.0.2" in text
    assert f"ValueError: bad request /?token={REDACTED}" in text
    assert "after the session: kept as is" in text


def test_which_addresses_are_this_machine_only():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.1.2.3")
    check_bind("127.0.0.1", tls=False, insecure_remote=False, what="console", option="--host")
    check_bind("0.0.0.0", tls=True, insecure_remote=False, what="console", option="--host")
    check_bind("0.0.0.0", tls=False, insecure_remote=True, what="console", option="--host")
    with pytest.raises(EvalError, match=r"console: --host :: can be reached from other machines"):
        check_bind("::", tls=False, insecure_remote=False, what="console", option="--host")
