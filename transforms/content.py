"""Content-Encoding decoding with a size cap (pure).

The fetcher stores bodies exactly as sent; extraction decodes them here. The cap defends against
decompression bombs: output beyond ``max_bytes`` is cut and reported as truncated.
"""

from __future__ import annotations

import zlib


def decode_content(body: bytes, content_encoding: str | None, max_bytes: int
                   ) -> tuple[bytes, bool]:
    """Undoes gzip/deflate content-coding (identity passes through).

    Returns:
        (decoded bytes, truncated). Unknown codings and corrupt streams return what could be
        decoded so far (possibly nothing); they never raise.
    """
    coding = (content_encoding or "").strip().lower()
    if coding in ("", "identity"):
        return body[:max_bytes], len(body) > max_bytes
    if coding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif coding == "deflate":
        # Servers send either zlib-wrapped or raw deflate; the zlib header tells which.
        wbits = zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS
        decoder = zlib.decompressobj(wbits)
    else:
        return b"", False
    try:
        out = decoder.decompress(body, max_bytes + 1)
    except zlib.error:
        return b"", False
    return out[:max_bytes], len(out) > max_bytes or bool(decoder.unconsumed_tail)


def header(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    """The first value of a header (case-insensitive), or None."""
    lname = name.lower()
    for key, value in headers:
        if key.lower() == lname:
            return value
    return None
