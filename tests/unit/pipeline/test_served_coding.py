"""nginx's gzip rules as the test servers apply them (pipeline.demo.coding): negotiation,
eligible types and sizes, and the deterministic encodings tests recompute."""

from __future__ import annotations

import gzip
import zlib

import pytest

from pipeline.demo.coding import (
    MIN_LENGTH,
    accepts,
    choose_coding,
    compressible,
    eligible,
    encode_body,
    has_body,
)

TEXT = b"<p>" + b"x" * 40 + b"</p>"


@pytest.mark.parametrize(("header", "coding", "expected"), [
    ("gzip, deflate", "gzip", True),
    ("gzip, deflate", "deflate", True),
    ("deflate", "gzip", False),
    ("gzip;q=0", "gzip", False),
    ("gzip; q=0.000, deflate", "gzip", False),
    ("GZIP;Q=0.5", "gzip", True),
    ("x-gzip", "gzip", True),
    ("*", "deflate", True),
    ("*;q=0", "gzip", False),
    ("gzip;q=0, *", "gzip", False),  # a listed coding wins over the wildcard
    ("deflate;q=0, *;q=0.1", "gzip", True),
    ("identity", "gzip", False),  # urllib and http.client send this
    ("", "gzip", False),
    (None, "gzip", False),  # no header: nginx answers identity
    ("gzip;q=high", "gzip", False),  # an unreadable weight refuses
    ("br, , gzip", "gzip", True),
])
def test_accept_encoding_negotiation(header, coding, expected):
    assert accepts(header, coding) is expected


@pytest.mark.parametrize(("content_type", "expected"), [
    ("text/html; charset=utf-8", True), ("text/plain", True), ("TEXT/CSS", True),
    ("application/xml", True), ("application/xhtml+xml", True), ("application/json", True),
    ("application/javascript", True), ("application/rss+xml", True),
    ("application/atom+xml", True), ("image/svg+xml", True),
    ("image/png", False), ("application/gzip", False), ("application/pdf", False),
    ("application/octet-stream", False), ("", False),
])
def test_only_textual_types_are_compressible(content_type, expected):
    assert compressible(content_type) is expected


def test_encodings_are_deterministic_and_standard():
    gz = encode_body(TEXT, "gzip")
    assert gz == encode_body(TEXT, "gzip") and gz[:2] == b"\x1f\x8b"
    assert gz[4:8] == b"\0\0\0\0"  # MTIME 0: tests recompute the bytes on the wire
    assert gzip.decompress(gz) == TEXT
    deflated = encode_body(TEXT, "deflate")
    assert (deflated[0] * 256 + deflated[1]) % 31 == 0 and deflated[0] & 0x0F == 8  # zlib
    assert zlib.decompress(deflated) == TEXT
    assert encode_body(TEXT, "") is TEXT
    with pytest.raises(ValueError, match="br"):
        encode_body(TEXT, "br")


def test_which_responses_may_be_compressed():
    def ok(method="GET", status=200, ctype="text/html", body=TEXT, encoding=None, compress=None):
        return eligible(method, status, ctype, body, encoding, compress)

    assert ok() and ok(status=404) and ok(status=503) and ok(status=301)
    assert not ok(method="HEAD") and not ok(status=304) and not ok(status=204)
    assert not ok(status=101)
    assert ok(body=b"x" * MIN_LENGTH) and not ok(body=b"x" * (MIN_LENGTH - 1))
    assert not ok(ctype="image/png") and ok(ctype="image/png", compress=True)
    assert ok(body=b"tiny", compress=True) and not ok(compress=False)
    assert not ok(encoding="gzip") and ok(encoding="identity")  # never encoded twice
    assert has_body("GET", 200) and not has_body("HEAD", 200) and not has_body("GET", 304)


@pytest.mark.parametrize(("server", "accept", "http11", "may", "expected"), [
    ("gzip", "gzip, deflate", True, True, ("gzip", True)),
    ("deflate", "gzip, deflate", True, True, ("deflate", True)),
    ("gzip", "deflate", True, True, ("", True)),  # Vary all the same: another client gets gzip
    ("gzip", "gzip", False, True, ("", True)),  # HTTP/1.0: nginx's gzip_http_version 1.1
    ("gzip", "gzip", True, False, ("", False)),
    (None, "gzip", True, True, ("", False)),
])
def test_choose_coding_and_vary(server, accept, http11, may, expected):
    assert choose_coding(server, accept, http11, may) == expected
