"""The logged test server (pipeline.demo.server) against real clients on loopback: content
negotiation as nginx does it (gzip, deflate, q-values, identity-only clients), chunked versus
Content-Length framing, Vary, HEAD and 304, the request log and its timing, keep-alive, raw
handlers, and stop."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import http.client
import socket
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from urllib.parse import urlsplit

import aiohttp
import pytest

from pipeline.demo.coding import encode_body
from pipeline.demo.exchange import Reply, RequestView
from pipeline.demo.server import LoggedServers, Wire

TEXT = b"<!doctype html><p>" + b"compressible text " * 40 + b"</p>"
ROUTES = {
    "/page": Reply(body=TEXT),
    "/robots.txt": Reply(body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain"),
    "/short": Reply(body=b"x" * 19),
    "/twenty": Reply(body=b"x" * 20),
    "/logo.png": Reply(body=b"\x89PNG" + bytes(400), content_type="image/png"),
    "/data.gz": Reply(body=gzip.compress(TEXT, mtime=0), content_type="application/gzip"),
    "/forced.png": Reply(body=b"\x89PNG" + bytes(400), content_type="image/png", compress=True),
    "/never": Reply(body=TEXT, compress=False),
    "/encoded": Reply(body=gzip.compress(TEXT, mtime=0), headers=(("Content-Encoding", "gzip"),)),
    "/not-modified": Reply(304, headers=(("ETag", '"e1"'),)),
    "/slow": Reply(body=TEXT, delay=0.3),
}
NOT_FOUND = Reply(404, b"<h1>Nothing lives here</h1>")  # a 404 page is compressed like any
BOTH = "gzip, deflate"


def _respond(request: RequestView) -> Reply:
    return ROUTES.get(request.target.split("?", 1)[0], NOT_FOUND)


@pytest.fixture
def servers() -> Iterator[LoggedServers]:
    with LoggedServers() as running:
        yield running


@pytest.fixture
def base(servers: LoggedServers) -> str:
    """A gzip site (the default)."""
    return servers.serve("127.0.0.1", _respond, server="alpha/1.0")


def _connect(base: str) -> http.client.HTTPConnection:
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)


def _get(base: str, path: str, accept: str | None = BOTH, method: str = "GET"
         ) -> tuple[http.client.HTTPResponse, bytes]:
    """One request on a fresh connection (http.client sends ``identity`` unless told)."""
    connection = _connect(base)
    headers = {} if accept is None else {"Accept-Encoding": accept}
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response, body


# --- content negotiation and framing -----------------------------------------------------------


def test_gzip_goes_out_chunked_without_content_length_with_vary(servers, base):
    response, raw = _get(base, "/page")
    assert response.status == 200 and response.chunked
    assert response.getheader("Content-Encoding") == "gzip"
    assert response.getheader("Content-Length") is None
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert response.getheader("Vary") == "Accept-Encoding"
    assert response.getheader("Server") == "alpha/1.0" and response.getheader("Date")
    assert raw == encode_body(TEXT, "gzip") and gzip.decompress(raw) == TEXT
    (hit,) = servers.hits(base)
    assert (hit.content_encoding, hit.sent, hit.sent_sha1) == (
        "gzip", len(raw), hashlib.sha1(raw).hexdigest())


def test_a_deflate_site_sends_the_zlib_format(servers):
    base = servers.serve("127.0.0.2", _respond, coding="deflate")
    response, raw = _get(base, "/robots.txt")
    assert response.getheader("Content-Encoding") == "deflate" and response.chunked
    assert zlib.decompress(raw) == ROUTES["/robots.txt"].body  # RFC 9110 deflate is zlib
    assert servers.hits(base)[0].content_encoding == "deflate"


@pytest.mark.parametrize(("accept", "coding"), [
    ("gzip;q=0, deflate", ""),  # refused outright
    ("deflate", ""),  # the site only does gzip
    ("*;q=0.5", "gzip"),
    ("gzip;q=0.1", "gzip"),
    ("identity", ""),
    (None, ""),  # http.client's default: identity
])
def test_accept_encoding_q_values_decide(servers, base, accept, coding):
    response, raw = _get(base, "/page", accept)
    assert (response.getheader("Content-Encoding") or "") == coding
    assert response.getheader("Vary") == "Accept-Encoding"  # compressible, whoever asks
    if coding:
        assert response.chunked and gzip.decompress(raw) == TEXT
    else:
        assert not response.chunked and raw == TEXT
        assert response.getheader("Content-Length") == str(len(TEXT))
    assert servers.hits(base)[0].content_encoding == coding


def test_urllib_gets_identity_with_content_length(servers, base):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(base + "/page", timeout=5) as response:
        body = response.read()
        assert response.headers["Content-Length"] == str(len(TEXT))
        assert "Content-Encoding" not in response.headers
    assert body == TEXT
    (hit,) = servers.hits(base)
    assert hit.headers["accept-encoding"] == "identity" and hit.content_encoding == ""


def test_aiohttp_decodes_what_it_asked_for_and_raw_bytes_are_the_sent_ones(servers, base):
    async def fetch(decompress: bool) -> tuple[str | None, bytes]:
        async with aiohttp.ClientSession(auto_decompress=decompress) as session, \
                session.get(base + "/page") as response:
            return response.headers.get("Content-Encoding"), await response.read()

    assert asyncio.run(fetch(True)) == ("gzip", TEXT)
    coding, raw = asyncio.run(fetch(False))
    assert coding == "gzip" and hashlib.sha1(raw).hexdigest() == servers.hits(base)[-1].sent_sha1


@pytest.mark.parametrize(("path", "coding", "vary"), [
    ("/short", "", False),  # below nginx's gzip_min_length of 20
    ("/twenty", "gzip", True),
    ("/logo.png", "", False),
    ("/data.gz", "", False),  # already compressed
    ("/forced.png", "gzip", True),
    ("/never", "", False),
    ("/encoded", "gzip", False),  # the application's own coding, sent as is
    ("/missing", "gzip", True),
])
def test_what_gets_compressed(servers, base, path, coding, vary):
    response, raw = _get(base, path)
    expected = ROUTES.get(path, NOT_FOUND)
    assert (response.getheader("Content-Encoding") or "") == coding
    assert (response.getheader("Vary") is not None) is vary
    assert response.chunked is (coding != "" and path != "/encoded")
    sent = encode_body(expected.body, coding) if path != "/encoded" else expected.body
    assert raw == sent and servers.hits(base)[0].sent_sha1 == hashlib.sha1(sent).hexdigest()


def test_head_and_304_carry_no_body_and_no_coding(servers, base):
    response, raw = _get(base, "/page", method="HEAD")
    assert raw == b"" and response.getheader("Content-Encoding") is None
    assert response.getheader("Content-Length") == str(len(TEXT))
    response, raw = _get(base, "/not-modified")
    assert (response.status, raw, response.getheader("ETag")) == (304, b"", '"e1"')
    assert response.getheader("Content-Encoding") is None
    head, not_modified = servers.hits(base)
    assert (head.method, head.sent, head.content_encoding) == ("HEAD", 0, "")
    assert (not_modified.status, not_modified.sent) == (304, 0)


def test_http_1_0_is_answered_identity(servers, base):
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(b"GET /page HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"Content-Encoding" not in head and body == TEXT
    assert servers.hits(base)[0].content_encoding == ""


def test_a_site_without_coding_never_compresses(servers):
    base = servers.serve("127.0.0.3", _respond, coding=None)
    response, raw = _get(base, "/page")
    assert raw == TEXT and response.getheader("Vary") is None
    assert response.getheader("Content-Length") == str(len(TEXT))


# --- the log -----------------------------------------------------------------------------------


def test_a_response_the_client_has_is_already_logged_with_its_delay(servers, base):
    before = time.time()
    response, _ = _get(base, "/slow?x=1;y", accept=None)
    received = time.time()
    assert response.status == 200
    (hit,) = servers.hits(base, "/slow?x=1;y")  # no waiting: logged before it was written
    assert (hit.host, hit.method, hit.status) == (urlsplit(base).netloc, "GET", 200)
    assert before <= hit.start and hit.start + 0.3 <= hit.end <= received
    assert hit.headers["host"] == urlsplit(base).netloc and not hit.aborted


def test_the_log_is_ordered_by_start_and_filters_by_site_and_path(servers, base):
    other = servers.serve("127.0.0.4", _respond)
    threads = [threading.Thread(target=_get, args=(base, "/slow")) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    _get(other, "/page")
    for thread in threads:
        thread.join()
    hits = servers.hits()
    assert [h.start for h in hits] == sorted(h.start for h in hits)
    assert [h.path for h in hits] == ["/slow", "/slow", "/page"]
    first, second = servers.hits(base)
    assert second.start < first.end  # answered concurrently: the delay never blocks the loop
    assert [h.path for h in servers.hits(urlsplit(other).netloc)] == ["/page"]
    assert len(servers.hits(path="/slow")) == 2
    servers.clear()
    assert servers.hits() == []


def test_keep_alive_serves_two_requests_on_one_connection(servers, base):
    connection = _connect(base)
    for path in ("/page", "/robots.txt"):
        connection.request("GET", path, headers={"Accept-Encoding": BOTH})
        response = connection.getresponse()
        response.read()
        assert response.getheader("Connection") is None  # HTTP/1.1: kept alive
    connection.close()
    first, second = servers.hits(base)
    assert first.client_port == second.client_port > 0


# --- raw handlers ------------------------------------------------------------------------------


async def _trickle(wire: Wire) -> None:
    await wire.start(200, [("Content-Type", "image/png")], length=10_000_000)
    while True:
        await wire.write(bytes(65536))
        await asyncio.sleep(0.01)


async def _hang_up(wire: Wire) -> None:
    wire.hang_up()


def test_raw_handlers_log_what_they_wrote_and_a_client_that_left(servers):
    raw = {"/trickle": _trickle, "/hang-up": _hang_up}
    base = servers.serve("127.0.0.5", lambda request: raw[request.target])
    connection = _connect(base)
    connection.request("GET", "/trickle")
    response = connection.getresponse()
    assert response.getheader("Content-Length") == "10000000"
    response.read(65536)
    connection.close()
    with pytest.raises(http.client.RemoteDisconnected):
        _get(base, "/hang-up")
    assert servers.settle(2.0)
    trickled, hung_up = servers.hits(base)
    assert trickled.aborted and 65536 <= trickled.sent < 10_000_000 and trickled.status == 200
    assert (hung_up.status, hung_up.sent, hung_up.aborted) == (0, 0, False)


# --- stop --------------------------------------------------------------------------------------


def test_stop_cuts_kept_alive_connections_and_is_idempotent(servers, base):
    connection = _connect(base)
    connection.request("GET", "/page")
    connection.getresponse().read()
    servers.stop()
    servers.stop()
    with pytest.raises((OSError, http.client.HTTPException)):
        connection.request("GET", "/page")
        connection.getresponse()
    parts = urlsplit(base)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((parts.hostname, parts.port), timeout=2)
    assert [h.path for h in servers.hits()] == ["/page"]  # the log stays
    with pytest.raises(RuntimeError, match="stopped"):
        servers.serve("127.0.0.1", _respond)


def test_stop_cancels_a_request_still_waiting_and_logs_it_aborted(servers):
    base = servers.serve("127.0.0.6", lambda request: Reply(body=b"late", delay=30.0))
    failures: list[BaseException] = []

    def wait_for_an_answer() -> None:
        try:
            _get(base, "/")
        except (OSError, http.client.HTTPException) as error:
            failures.append(error)

    thread = threading.Thread(target=wait_for_an_answer)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    servers.stop()
    thread.join(5)
    assert time.monotonic() - started < 2.0 and not thread.is_alive() and failures
    (hit,) = servers.hits()
    assert hit.aborted and hit.status == 0
