"""Content-Encoding decoding with a cap on the decoded size (pure).

The fetcher keeps bodies exactly as the server sent them (``auto_decompress=False``), because
the WARC record must hold the bytes on the wire. Everything that *parses* a body (robots.txt,
HTML pages, sitemaps) decodes it here first, with the cap of that kind of body applied to the
*decoded* size, so a decompression bomb stays bounded whatever its compressed size.

A decode never raises. It says what it got and, when the body is unusable, why:

* ``truncated``: the decoded body was cut at the cap, or the raw body was cut at the fetch
  limit (the caller says so) and the encoded stream ends early; what was decoded is usable;
* ``error``: a coding we do not know (we only advertise ``gzip, deflate``), or a corrupt
  stream; ``data`` then holds what was decoded before the problem (possibly nothing), and a
  caller that needs the whole body (robots.txt) must not act on it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

# What the crawler advertises: exactly the codings it can undo.
ACCEPT_ENCODING = "gzip, deflate"
IDENTITY_CODINGS = frozenset({"", "identity"})
GZIP_CODINGS = frozenset({"gzip", "x-gzip"})
DEFLATE_CODINGS = frozenset({"deflate"})
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Decoded:
    """A body with its content-coding undone.

    Attributes:
        data: the decoded bytes, at most the cap.
        truncated: cut at the cap, or the encoded stream ended before its end.
        error: why the body could not be decoded (``""`` when it could).
    """

    data: bytes
    truncated: bool = False
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def codings(content_encoding: str | None) -> list[str]:
    """The codings of a ``Content-Encoding`` value, in the order they were applied."""
    if not content_encoding:
        return []
    return [c.strip().lower() for c in content_encoding.split(",") if c.strip()]


def decode_body(body: bytes, content_encoding: str | None, max_bytes: int,
                cut: bool = False) -> Decoded:
    """Undoes the content-codings of ``body`` (gzip, x-gzip, deflate; identity passes through).

    Codings listed together (``gzip, identity``) are undone last-applied first. ``max_bytes``
    caps the decoded size; the encoded input is never expanded beyond ``max_bytes + 1`` bytes.

    Args:
        body: the body as sent.
        content_encoding: the response's ``Content-Encoding`` header, or None.
        max_bytes: the largest decoded size the caller accepts.
        cut: the fetch stopped reading the body at its limit. A compressed stream that ends
            early is then a truncated body; in a body read whole, it is a corrupt one.

    Returns:
        The decoded body; see :class:`Decoded` for ``truncated`` and ``error``.
    """
    steps = [c for c in codings(content_encoding) if c not in IDENTITY_CODINGS]
    if not body:
        return Decoded(b"")  # nothing to decode (a 304, a HEAD, an empty answer)
    unknown = [c for c in steps if c not in GZIP_CODINGS | DEFLATE_CODINGS]
    if unknown:
        return Decoded(b"", False, f"unknown content-encoding {unknown[0]!r}")
    if not steps:
        return Decoded(body[:max_bytes], cut or len(body) > max_bytes)
    data, truncated = body, False
    for i, coding in enumerate(reversed(steps)):
        # Intermediate layers may be larger than the final cap only by their own compression,
        # so they get the same cap: a bomb cannot grow through a second layer either.
        step = _inflate(data, coding, max_bytes, cut)
        if step.error:
            where = f" (layer {len(steps) - i} of {len(steps)})" if len(steps) > 1 else ""
            return Decoded(step.data, step.truncated, step.error + where)
        data, truncated = step.data, truncated or step.truncated
    return Decoded(data, truncated)


def _inflate(body: bytes, coding: str, max_bytes: int, cut: bool) -> Decoded:
    """One layer of gzip (members concatenated, as gzip(1) allows) or deflate."""
    if coding in GZIP_CODINGS:
        if body[:2] != b"\x1f\x8b":
            return Decoded(b"", False, "corrupt gzip: no gzip header")
        wbits = _GZIP_WBITS
    else:
        # RFC 9110 deflate is the zlib format; some servers send raw deflate. A zlib header is
        # CMF (method 8) and FLG with (CMF * 256 + FLG) % 31 == 0.
        wbits = zlib.MAX_WBITS if _is_zlib_header(body[:2]) else -zlib.MAX_WBITS
    out = bytearray()
    pending = body
    inflater = zlib.decompressobj(wbits)
    try:
        while True:
            room = max_bytes + 1 - len(out)
            out += inflater.decompress(pending, room)
            if len(out) > max_bytes:
                return Decoded(bytes(out[:max_bytes]), True)
            if inflater.unconsumed_tail:
                pending = inflater.unconsumed_tail
                continue
            if not inflater.eof:
                if cut:  # the fetch stopped reading: what we have is a prefix of the body
                    return Decoded(bytes(out), True)
                return Decoded(bytes(out), False, f"corrupt {_kind(wbits)}: the stream ends "
                                                  "early")
            rest = inflater.unused_data
            if wbits != _GZIP_WBITS or not rest.strip(b"\0"):
                return Decoded(bytes(out))
            if rest[:2] != b"\x1f\x8b":
                return Decoded(bytes(out), False, "corrupt gzip: trailing garbage")
            inflater, pending = zlib.decompressobj(wbits), rest
    except zlib.error as exc:
        return Decoded(bytes(out[:max_bytes]), False, f"corrupt {_kind(wbits)}: {exc}")


def _kind(wbits: int) -> str:
    return "gzip" if wbits == _GZIP_WBITS else "deflate"


def _is_zlib_header(head: bytes) -> bool:
    return len(head) == 2 and head[0] & 0x0F == 8 and (head[0] * 256 + head[1]) % 31 == 0


def header(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    """The first value of a header (case-insensitive), or None."""
    lname = name.lower()
    for key, value in headers:
        if key.lower() == lname:
            return value
    return None
