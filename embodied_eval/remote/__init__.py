"""Policies that live elsewhere, over the openpi websocket protocol (both directions).

- `wire`: msgpack with numpy arrays, the encoding openpi policy servers and clients use.
- `client`: `RemotePolicy`, a harness policy (`reset(seed)` / `act(obs)`) whose actions come from a
  policy server at `ws://HOST:PORT` or `wss://HOST:PORT`.
- `server`: `PolicyServer`, serving any harness policy factory to openpi clients.

A policy named `ws://…` or `wss://…` (on the command line or in the protocol) is a remote policy.
"""

from __future__ import annotations

#: URL schemes that name a remote policy.
REMOTE_SCHEMES = ("ws://", "wss://")

#: Environment variable holding the API key (client: sent as `Authorization: Api-Key <key>`;
#: server: required from clients when set).
API_KEY_ENV = "EMBODIED_EVAL_POLICY_API_KEY"


def is_remote_policy(name: object) -> bool:
    """True when `name` is a policy server URL (`ws://…` or `wss://…`)."""
    return isinstance(name, str) and name.startswith(REMOTE_SCHEMES)
