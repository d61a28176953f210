"""When a web server compresses a response, and how: nginx's ``gzip`` rules as pure functions.

A stock nginx with ``gzip on`` (and Apache with ``mod_deflate``) compresses a response when the
client's ``Accept-Encoding`` allows the coding, the type is textual (nginx's ``gzip_types``; HTML
always), the body is at least ``gzip_min_length`` (20) bytes, the request is HTTP/1.1 or later
(``gzip_http_version 1.1``), it is not a HEAD, the response has a body (not 204 or 304) and is
not content-encoded already. ``pipeline.demo.server`` applies these rules so the test servers
send what real ones send; tests use :func:`encode_body` to recompute the bytes on the wire.

Both codings are deterministic here: gzip with ``mtime=0`` and HTTP ``deflate``, which is the
zlib format (RFC 9110, section 8.4.1.2), not a raw deflate stream.
"""

from __future__ import annotations

import gzip
import zlib

CODINGS = ("gzip", "deflate")
MIN_LENGTH = 20  # nginx's gzip_min_length default, in bytes
COMPRESSIBLE_TYPES = frozenset({
    "application/atom+xml", "application/javascript", "application/json", "application/rss+xml",
    "application/xhtml+xml", "application/xml", "image/svg+xml",
})
_ALIASES = {"x-gzip": "gzip"}  # RFC 9110, section 8.4.1.3: x-gzip is gzip
_EMPTY_BODY_STATUSES = frozenset({204, 304})


def compressible(content_type: str) -> bool:
    """Whether ``content_type`` (parameters allowed) is a textual type a server compresses.

    ``text/*`` and the types of :data:`COMPRESSIBLE_TYPES`; never images other than SVG, never
    archives (``application/gzip``): compressing them again gains nothing.
    """
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in COMPRESSIBLE_TYPES


def accepts(accept_encoding: str | None, coding: str) -> bool:
    """Whether an ``Accept-Encoding`` value allows ``coding`` (RFC 9110, section 12.5.3).

    A coding listed with ``q=0`` is refused; one not listed is allowed by ``*`` with a non-zero
    q. No header allows nothing: servers answer identity then, as nginx does. A q-value that is
    not a number counts as ``q=0``.
    """
    if not accept_encoding:
        return False
    wanted = _ALIASES.get(coding.lower(), coding.lower())
    weights: dict[str, float] = {}
    for item in accept_encoding.split(","):
        name, *params = (part.strip() for part in item.split(";"))
        if not name:
            continue
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights[_ALIASES.get(name.lower(), name.lower())] = weight
    if wanted in weights:
        return weights[wanted] > 0
    return weights.get("*", 0.0) > 0


def encode_body(body: bytes, coding: str) -> bytes:
    """``body`` as a server sends it with ``Content-Encoding: coding`` ("" is identity).

    Raises:
        ValueError: ``coding`` is not one of :data:`CODINGS`.
    """
    if not coding:
        return body
    if coding == "gzip":
        return gzip.compress(body, mtime=0)
    if coding == "deflate":
        return zlib.compress(body)
    raise ValueError(f"unknown content coding {coding!r}; known: {CODINGS}")


def has_body(method: str, status: int) -> bool:
    """Whether a response to ``method`` with ``status`` carries a body (RFC 9110, 6.4.1)."""
    return method != "HEAD" and status >= 200 and status not in _EMPTY_BODY_STATUSES


def eligible(method: str, status: int, content_type: str, body: bytes,
             content_encoding: str | None, compress: bool | None) -> bool:
    """Whether a response may be compressed at all, whatever the client accepts.

    Args:
        method: the request method (a HEAD response carries no body).
        status: the response status (204 and 304 carry no body).
        content_type: the response's Content-Type.
        body: the body before any coding.
        content_encoding: the response's Content-Encoding, if the application set one (an
            encoded body is never encoded again).
        compress: None applies the type and length rules; True skips them; False refuses.
    """
    if compress is False or not has_body(method, status):
        return False
    if (content_encoding or "identity").lower() != "identity":
        return False
    return compress is True or (compressible(content_type) and len(body) >= MIN_LENGTH)


def choose_coding(server_coding: str | None, accept_encoding: str | None, http11: bool,
                  eligible_response: bool) -> tuple[str, bool]:
    """The coding to send ("" for identity) and whether to add ``Vary: Accept-Encoding``.

    ``Vary`` goes on every response that would be compressed for some client (nginx's
    ``gzip_vary on``), so a cache does not hand a compressed copy to a client that refused it.

    Args:
        server_coding: the coding the server is configured with, None for compression off.
        accept_encoding: the request's ``Accept-Encoding``, None when absent.
        http11: the request is HTTP/1.1 or later (nginx's ``gzip_http_version 1.1``).
        eligible_response: what :func:`eligible` says of the response.
    """
    if server_coding is None or not eligible_response:
        return "", False
    if http11 and accepts(accept_encoding, server_coding):
        return server_coding, True
    return "", True
