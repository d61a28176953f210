"""Content-Encoding decoding with a cap."""

import gzip
import zlib

from transforms.content import decode_content, header


def test_identity_and_unknown():
    assert decode_content(b"abc", None, 10) == (b"abc", False)
    assert decode_content(b"abcdef", "identity", 3) == (b"abc", True)
    assert decode_content(b"abc", "br-unknown", 10) == (b"", False)


def test_gzip_and_both_deflate_flavours():
    body = b"<html>" + b"x" * 1000
    assert decode_content(gzip.compress(body), "gzip", 10_000) == (body, False)
    assert decode_content(zlib.compress(body), "deflate", 10_000) == (body, False)
    raw = zlib.compressobj(wbits=-15)
    assert decode_content(raw.compress(body) + raw.flush(), "deflate", 10_000) == (body, False)


def test_gzip_bomb_is_cut_at_the_cap():
    bomb = gzip.compress(b"\0" * 5_000_000)
    out, truncated = decode_content(bomb, "gzip", 1000)
    assert len(out) == 1000 and truncated


def test_corrupt_stream_never_raises():
    assert decode_content(b"not gzip at all", "gzip", 100) == (b"", False)


def test_header_lookup_is_case_insensitive():
    assert header((("Content-Type", "text/html"), ("X", "1")), "content-type") == "text/html"
    assert header((), "x") is None
