"""Content-Encoding decoding with a cap on the decoded size."""

import gzip
import zlib

import pytest

from transforms.core.content import Decoded, codings, decode_body, header

BODY = b"<html>" + b"x" * 1000


def _raw_deflate(data: bytes) -> bytes:
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return raw.compress(data) + raw.flush()


def test_identity_passes_through_with_the_cap():
    assert decode_body(b"abc", None, 10) == Decoded(b"abc")
    assert decode_body(b"abcdef", "identity", 3) == Decoded(b"abc", truncated=True)


@pytest.mark.parametrize("encoding, encode", [
    ("gzip", gzip.compress), ("x-gzip", gzip.compress), ("GZIP", gzip.compress),
    ("deflate", zlib.compress),  # RFC 9110 deflate: the zlib format
    ("deflate", _raw_deflate),  # what some servers send instead
])
def test_gzip_and_both_deflate_flavours(encoding, encode):
    assert decode_body(encode(BODY), encoding, 10_000) == Decoded(BODY)


def test_codings_are_undone_last_applied_first():
    assert codings(" gzip , Identity") == ["gzip", "identity"]
    twice = gzip.compress(zlib.compress(BODY))
    assert decode_body(twice, "deflate, gzip", 10_000) == Decoded(BODY)


def test_a_gzip_bomb_is_cut_at_the_cap_on_the_decoded_size():
    bomb = gzip.compress(b"\0" * 5_000_000)
    assert len(bomb) < 10_000
    decoded = decode_body(bomb, "gzip", 1000)
    assert decoded.ok and decoded.truncated and len(decoded.data) == 1000


def test_a_stream_cut_at_the_fetch_limit_is_truncated_not_corrupt():
    content = bytes(range(256)) * 400
    half = gzip.compress(content)[: len(gzip.compress(content)) // 2]
    decoded = decode_body(half, "gzip", 1_000_000, cut=True)
    assert decoded.ok and decoded.truncated and decoded.data
    assert content.startswith(decoded.data)
    # The same bytes as a whole response: the server sent a broken stream.
    whole = decode_body(half, "gzip", 1_000_000)
    assert whole.error == "corrupt gzip: the stream ends early" and content.startswith(whole.data)


def test_concatenated_gzip_members_are_one_body():
    assert decode_body(gzip.compress(b"one ") + gzip.compress(b"two"), "gzip", 100) == Decoded(
        b"one two")


@pytest.mark.parametrize("body, encoding, error", [
    (b"not gzip at all", "gzip", "corrupt gzip: no gzip header"),
    (gzip.compress(BODY)[:10] + b"\xff" * 40, "gzip", "corrupt gzip"),
    (b"\x00\xff garbage", "deflate", "corrupt deflate"),
    (gzip.compress(BODY) + b"trailing junk", "gzip", "corrupt gzip: trailing garbage"),
    (BODY, "br", "unknown content-encoding 'br'"),
    (gzip.compress(BODY), "gzip, compress", "unknown content-encoding 'compress'"),
])
def test_unusable_bodies_say_why_and_never_raise(body, encoding, error):
    decoded = decode_body(body, encoding, 10_000)
    assert not decoded.ok and decoded.error.startswith(error), decoded


def test_an_empty_body_needs_no_decoding():
    assert decode_body(b"", "gzip", 10) == Decoded(b"")


def test_header_lookup_is_case_insensitive():
    assert header((("Content-Type", "text/html"), ("X", "1")), "content-type") == "text/html"
    assert header((), "x") is None


def test_an_identity_body_cut_on_the_wire_is_truncated():
    assert decode_body(b"abc", None, 3, cut=True) == Decoded(b"abc", truncated=True)
