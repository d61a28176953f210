"""What the logged test servers exchange with a site and record of each request: the request a
``respond`` callback sees, the :class:`Reply` it returns, and the :class:`Hit` logged for it
(``pipeline.demo.server`` serves them)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

HTML_TYPE = "text/html; charset=utf-8"


@dataclass(frozen=True)
class RequestView:
    """What a ``respond`` callback sees of a request.

    Attributes:
        target: the request-target as sent (path, path parameters and ``?query``).
        method: ``GET``, ``HEAD``, ...
        headers: request header fields, names lower-cased (repeated fields joined by ``, ``).
    """

    target: str
    method: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Reply:
    """A response: status, body (before any content-coding), headers, and how long to wait.

    Attributes:
        status: the status code.
        body: the content; the server compresses it per its rules (see ``compress``).
        content_type: the Content-Type header.
        headers: further header fields, in order.
        delay: seconds to wait before answering (the loop keeps serving meanwhile).
        compress: None applies the server's rules (textual type, at least 20 bytes); True
            compresses whatever the type and size; False never compresses. Either way only
            when the server has a coding and the client accepts it.
    """

    status: int = 200
    body: bytes = b""
    content_type: str = HTML_TYPE
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    compress: bool | None = None


@dataclass(frozen=True)
class Hit:
    """One request a server answered (matches ``pipeline.demo.log.Request``).

    Attributes:
        host: the server's netloc, ``127.0.0.2:PORT``.
        path: the request-target as sent (path plus ``?query``).
        method: ``GET``, ``HEAD``, ...
        start: ``time.time()`` once the request had been read.
        end: ``time.time()`` just before the response is written, after any delay (logged then,
            so a client that has read a response always finds it here); for a raw handler,
            when the handler returned.
        status: the status sent (0 when no response was started).
        client_port: the client's source port (equal ports mean one kept-alive connection).
        headers: the request's header fields, names lower-cased.
        content_encoding: the Content-Encoding the server applied ("" for identity).
        sent: body bytes put on the wire, after content-coding (0 for HEAD, 204 and 304).
        sent_sha1: hex SHA-1 of those bytes: a stored body can be matched to what was sent.
        aborted: the response could not be written whole: the client had hung up when a
            reply was due, a raw handler's write failed, or the server stopped meanwhile.
    """

    host: str
    path: str
    method: str
    start: float
    end: float
    status: int
    client_port: int
    headers: dict[str, str] = field(default_factory=dict, hash=False)
    content_encoding: str = ""
    sent: int = 0
    sent_sha1: str = hashlib.sha1(b"").hexdigest()
    aborted: bool = False
