"""The clients file: who may submit batches, with which bearer token, and the secret their
webhooks are signed with (pure; no I/O).

JSON::

    {"clients": {"acme":   {"token": "s3cr3t-api-token", "secret": "webhook-signing-secret"},
                 "globex": {"token": "...", "secret": "..."}}}

``crawler api --clients FILE`` checks bearer tokens against it; the pipeline
(``--clients_file``, local path or ``gs://``) signs each client's webhook POSTs with its
``secret``. A client without a secret gets unsigned webhooks (the header is left out).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass

from transforms.core.batches import CLIENT_PATTERN


class ClientsError(ValueError):
    """A clients file that cannot be used."""


@dataclass(frozen=True)
class ClientConfig:
    name: str
    token: str = ""
    secret: str = ""


def parse_clients(text: str) -> dict[str, ClientConfig]:
    """Reads a clients file (see the module docstring).

    Raises:
        ClientsError: not JSON, no ``clients`` object, a bad name or a non-string value.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientsError(f"clients file is not JSON: {exc}") from exc
    clients = doc.get("clients") if isinstance(doc, dict) else None
    if not isinstance(clients, dict):
        raise ClientsError('clients file needs a "clients" object')
    out = {}
    for name, entry in clients.items():
        if not CLIENT_PATTERN.match(name):
            raise ClientsError(f"client name {name!r}: use lower-case letters, digits, '_', '-'")
        if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k, ""), str) for k in ("token", "secret")):
            raise ClientsError(f"client {name!r}: token and secret must be strings")
        out[name] = ClientConfig(name, entry.get("token", ""), entry.get("secret", ""))
    return out


def client_for_token(clients: Mapping[str, ClientConfig], token: str) -> ClientConfig | None:
    """The client whose bearer token is ``token`` (compared in constant time), or None."""
    found = None
    for client in clients.values():
        if client.token and hmac.compare_digest(client.token.encode(), token.encode()):
            found = client
    return found
