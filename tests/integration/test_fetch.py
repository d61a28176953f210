"""The aiohttp fetcher against real HTTP servers on 127.0.0.1: what one fetch records.

Bodies, statuses and headers as sent, media not read, truncation, redirects, timeouts and error
kinds, each run as a lease through ``FetchService`` (the path the frontier uses). Politeness,
deadlines, robots leases and the service's polling are in ``test_fetch_leases``.

The servers are ``pipeline.demo.server`` sites, which compress text as nginx does; ``serve``
starts one whose routes map a path (without query) to a ``Reply`` or, for what no well-behaved
server does (trickling, hanging up, a short body), to a raw handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import aiohttp
import pytest

from pipeline.demo.coding import encode_body
from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.server import LoggedServers, RawHandler, Wire
from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FETCHED,
    OUTCOME_NOT_STORED,
    OUTCOME_REDIRECT,
    CrawlRequest,
    FetchResult,
)
from transforms.core.url_keys import politeness_key
from transforms.core.urls import InvalidUrl, canonicalize_url
from transforms.fetchers.http import FetchConfig, Lease, LeaseOutcome, classify_error
from transforms.fetchers.service import shared_fetch_service

# Short timeouts keep the failure tests fast; every test that needs other settings replaces some.
# The servers are on loopback, so the SSRF guard is opened for them (its own tests are below).
CONFIG = FetchConfig(user_agent="fetch-test/1", connect_timeout=2.0, read_timeout=5.0,
                     total_timeout=5.0, min_request_window=0.1, allow_private_networks=True)

Route = Reply | RawHandler
NOT_FOUND = Reply(404, b"<h1>not found</h1>", "text/html")


@dataclass
class RoutedSite:
    """One site of a test's ``LoggedServers``, serving ``routes`` by path (query ignored)."""

    servers: LoggedServers
    routes: Mapping[str, Route]
    base: str = ""

    def respond(self, request: RequestView) -> Route:
        return self.routes.get(request.target.split("?", 1)[0], NOT_FOUND)

    @property
    def hits(self) -> list[Hit]:
        """Requests by arrival, once all have been answered (a raw handler may still be writing
        when the client has given up) or after 2 s."""
        self.servers.settle(2.0)
        return self.servers.hits(self.base)

    @property
    def address(self) -> str:
        return self.netloc.rsplit(":", 1)[0]

    @property
    def netloc(self) -> str:
        return self.base.split("//", 1)[1]

    def url(self, path: str) -> str:
        return canonicalize_url(f"{self.base}{path}")


# Routes.

def page(body: bytes, ctype: str = "text/html; charset=utf-8", status: int = 200,
         headers: Sequence[tuple[str, str]] = (), delay: float = 0.0,
         compress: bool | None = None) -> Reply:
    return Reply(status, body, ctype, tuple(headers), delay, compress)


def redirect(location: str, status: int = 302) -> Reply:
    return page(b"moved", status=status, headers=[("Location", location)])


def trickle(ctype: str, total: int, chunk: int, interval: float) -> RawHandler:
    """Announces ``total`` bytes and sends them ``chunk`` at a time every ``interval`` s."""
    async def route(wire: Wire) -> None:
        await wire.start(200, [("Content-Type", ctype)], length=total)
        while wire.sent < total:
            await wire.write(b"x" * min(chunk, total - wire.sent))
            await asyncio.sleep(interval)
    return route


async def hang_up(wire: Wire) -> None:
    """Closes the connection without a response."""
    wire.hang_up()


async def short_body(wire: Wire) -> None:
    """Announces 1000 bytes, sends 100 and closes."""
    await wire.start(200, [("Content-Type", "text/html")], length=1000)
    await wire.write(b"x" * 100)
    wire.hang_up()


@contextlib.contextmanager
def serving() -> Iterator[Callable[..., RoutedSite]]:
    """Yields ``start(routes, address="127.0.0.1", coding="gzip")``, which starts a site; all
    stop at the end."""
    with LoggedServers() as servers:
        def start(routes: Mapping[str, Route], address: str = "127.0.0.1",
                  coding: str | None = "gzip") -> RoutedSite:
            site = RoutedSite(servers, routes)
            site.base = servers.serve(address, site.respond, coding=coding)
            return site
        yield start


@pytest.fixture
def serve() -> Iterator[Callable[..., RoutedSite]]:
    """Starts ``RoutedSite``s on demand (see ``serving``); all are stopped after the test."""
    with serving() as start:
        yield start


def refused_url() -> str:
    """A URL on a port nothing listens on (bound then released, so connecting is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def make_lease(urls: Sequence[str], delay: float = 0.0, deadline_in: float = 10.0,
               start_in: float = 0.0, robots_url: str | None = None) -> Lease:
    now = time.time()
    return Lease(Lease.new_id(), politeness_key(robots_url or urls[0]),
                 tuple(CrawlRequest(u) for u in urls), now + start_in, delay, now + deadline_in,
                 robots_url)


def run_leases(leases: Sequence[Lease], config: FetchConfig = CONFIG,
               timeout: float = 10.0) -> list[LeaseOutcome]:
    """Submits ``leases`` to the process's service for ``config`` and polls until all are done."""
    service = shared_fetch_service(config)
    for lease in leases:
        service.submit(lease)
    outcomes: dict[str, LeaseOutcome] = {}
    limit = time.monotonic() + timeout
    while len(outcomes) < len(leases):
        assert time.monotonic() < limit, "leases not done in time"
        for lease in leases:
            if lease.lease_id not in outcomes:
                status, outcome = service.poll(lease.lease_id)
                if status == "done":
                    assert outcome is not None
                    outcomes[lease.lease_id] = outcome
        time.sleep(0.005)
    return [outcomes[lease.lease_id] for lease in leases]


def fetch_one(url: str, config: FetchConfig = CONFIG) -> FetchResult:
    (outcome,) = run_leases([make_lease([url])], config)
    assert outcome.unfinished == ()
    (result,) = outcome.results
    return result


def test_html_page_is_stored_as_sent(serve):
    html = "<html><title>Été</title><body>ok</body></html>".encode()
    server = serve({"/": page(html, headers=[("X-Test", "yes")])}, coding=None)
    result = fetch_one(server.url("/"))
    assert result.outcome == OUTCOME_FETCHED
    assert (result.status, result.reason, result.http_version) == (200, "OK", "1.1")
    assert result.body == html and result.content_length == len(html)
    assert result.content_type == "text/html; charset=utf-8"
    assert not result.truncated and result.error is None and result.redirects == ()
    assert result.final_url == server.url("/") and result.host == server.netloc
    assert ("Content-Type", "text/html; charset=utf-8") in result.headers
    assert ("X-Test", "yes") in result.headers
    assert ("Content-Length", str(len(html))) in result.headers
    assert server.hits[0].headers["user-agent"] == CONFIG.user_agent


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_body_is_stored_as_sent(serve, coding):
    html = b"<html><body>" + b"compress me " * 500 + b"</body></html>"
    server = serve({"/z": page(html)}, coding=coding)
    result = fetch_one(server.url("/z"))
    (hit,) = server.hits
    assert "gzip" in hit.headers["accept-encoding"] and hit.content_encoding == coding
    assert result.outcome == OUTCOME_FETCHED
    assert result.body == encode_body(html, coding) and len(result.body) < len(html) // 10
    assert hashlib.sha1(result.body).hexdigest() == hit.sent_sha1
    assert result.content_length == len(result.body)
    assert ("Content-Encoding", coding) in result.headers
    assert ("Transfer-Encoding", "chunked") in result.headers
    assert not any(name == "Content-Length" for name, _ in result.headers)


@pytest.mark.parametrize("ctype", ["image/png", "application/pdf"])
def test_media_is_not_stored(serve, ctype):
    server = serve({"/m": page(b"\x89" * 2000, ctype=ctype)})
    result = fetch_one(server.url("/m"))
    assert (result.outcome, result.status, result.content_type) == (OUTCOME_NOT_STORED, 200, ctype)
    assert result.body is None and result.content_length == 2000


def test_large_media_body_is_not_read(serve):
    # 5 MB at 64 KiB every 50 ms would take 4 s to read; the fetch must not wait for it.
    total = 5 * 1024 * 1024
    server = serve({"/big.png": trickle("image/png", total, 65536, 0.05)})
    result = fetch_one(server.url("/big.png"))
    assert result.outcome == OUTCOME_NOT_STORED and result.content_length == total
    assert result.body is None and result.elapsed < 0.5
    (hit,) = server.hits
    assert hit.aborted and hit.sent < total // 4
    assert hit.end - hit.start < 1.0


@pytest.mark.parametrize("status", [404, 500])
def test_error_status_html_is_not_stored(serve, status):
    server = serve({"/e": page(b"<h1>nope</h1>", status=status)})
    result = fetch_one(server.url("/e"))
    assert (result.outcome, result.status, result.body) == (OUTCOME_NOT_STORED, status, None)
    assert result.content_length == len(b"<h1>nope</h1>") and result.error is None


@pytest.mark.parametrize(("size", "truncated"), [(999, False), (1000, False), (1001, True),
                                                 (300_000, True)])
def test_body_is_capped_at_max_body_bytes(serve, size, truncated):
    body = bytes(i % 251 for i in range(size))
    server = serve({"/p": page(body, compress=False)})  # the cap counts bytes on the wire
    result = fetch_one(server.url("/p"), dataclasses.replace(CONFIG, max_body_bytes=1000))
    assert result.outcome == OUTCOME_FETCHED and result.truncated is truncated
    assert result.body == body[:1000] and result.content_length == min(size, 1000)


def test_same_host_redirects_are_followed(serve):
    server = serve({"/a": redirect("/b", 301), "/b": redirect("/c?x=1", 307),
                    "/c": page(b"<p>target</p>")})
    result = fetch_one(server.url("/a"))
    assert result.outcome == OUTCOME_FETCHED and result.body == b"<p>target</p>"
    assert result.redirects == (server.url("/a"), server.url("/b"))
    assert result.final_url == server.url("/c?x=1") and result.request.url == server.url("/a")
    assert [h.path for h in server.hits] == ["/a", "/b", "/c?x=1"]


def test_redirect_chain_up_to_max_redirects_is_followed(serve):
    server = serve({"/r0": redirect("/r1"), "/r1": redirect("/r2"), "/r2": page(b"end")})
    result = fetch_one(server.url("/r0"), dataclasses.replace(CONFIG, max_redirects=2))
    assert result.outcome == OUTCOME_FETCHED and len(result.redirects) == 2


def test_redirect_chain_longer_than_max_redirects_fails(serve):
    server = serve({f"/r{i}": redirect(f"/r{i + 1}") for i in range(10)})
    result = fetch_one(server.url("/r0"), dataclasses.replace(CONFIG, max_redirects=2))
    assert (result.outcome, result.error) == (OUTCOME_ERROR, "too_many_redirects")
    assert [h.path for h in server.hits] == ["/r0", "/r1", "/r2"]


def test_redirect_loop_fails(serve):
    server = serve({"/a": redirect("/b"), "/b": redirect("/a")})
    result = fetch_one(server.url("/a"))
    assert (result.outcome, result.error) == (OUTCOME_ERROR, "too_many_redirects")
    assert len(server.hits) == CONFIG.max_redirects + 1


@pytest.mark.parametrize("other", ["address", "port"])
def test_cross_host_redirect_is_not_followed(serve, other):
    target = serve({}, "127.0.0.2" if other == "address" else "127.0.0.1")
    server = serve({"/go": redirect(target.url("/there"), 301)})
    result = fetch_one(server.url("/go"))
    assert result.outcome == OUTCOME_REDIRECT and result.status == 301
    assert result.redirect_to == target.url("/there") and result.body is None
    assert result.final_url == server.url("/go")
    time.sleep(0.1)
    assert target.hits == [] and len(server.hits) == 1


def test_no_answer_within_total_timeout_is_a_timeout(serve):
    server = serve({"/slow": page(b"late", delay=3.0)})
    result = fetch_one(server.url("/slow"), dataclasses.replace(CONFIG, total_timeout=0.5))
    assert (result.outcome, result.error, result.status) == (OUTCOME_ERROR, "timeout", None)
    assert 0.45 <= result.elapsed < 0.9


def test_body_slower_than_total_timeout_is_a_timeout(serve):
    # Bytes keep coming (no read timeout), but the whole response takes longer than allowed.
    server = serve({"/drip": trickle("text/html", 10_000, 10, 0.05)})
    result = fetch_one(server.url("/drip"), dataclasses.replace(CONFIG, total_timeout=0.5))
    assert (result.outcome, result.error) == (OUTCOME_ERROR, "timeout")
    assert 0.45 <= result.elapsed < 0.9


def test_refused_connection_is_a_connection_error():
    result = fetch_one(refused_url())
    assert (result.outcome, result.error, result.status) == (OUTCOME_ERROR, "connection", None)
    assert result.error_detail and result.elapsed < 0.5


def test_hang_up_and_short_body_are_classified(serve):
    server = serve({"/hangup": hang_up, "/short": short_body})
    assert fetch_one(server.url("/hangup")).error == "disconnected"
    assert fetch_one(server.url("/short")).error == "payload"


@pytest.mark.parametrize(("exc", "kind"), [
    (TimeoutError(), "timeout"),
    (aiohttp.ServerTimeoutError(), "timeout"),
    (ConnectionRefusedError(), "connection"),
    (ConnectionResetError(), "connection"),
    (aiohttp.ServerDisconnectedError(), "disconnected"),
    (aiohttp.ClientPayloadError("cut"), "payload"),
    (aiohttp.InvalidURL("http://"), "invalid_url"),
    (InvalidUrl("no host"), "invalid_url"),
    (aiohttp.ClientResponseError(None, ()), "protocol"),  # type: ignore[arg-type]
    (aiohttp.ClientError(), "client"),
    (OSError("disk"), "client"),
    (RuntimeError("bug"), "internal"),
    (ValueError("bad"), "internal"),
])
def test_classify_error(exc, kind):
    assert classify_error(exc) == kind


def test_classify_error_of_a_real_refused_connection():
    async def connect() -> BaseException:
        async with aiohttp.ClientSession() as session:
            try:
                await session.get(refused_url())
            except aiohttp.ClientError as exc:
                return exc
        raise AssertionError("the connection was not refused")

    exc = asyncio.run(connect())
    assert isinstance(exc, aiohttp.ClientConnectorError)
    assert classify_error(exc) == "connection"


def test_result_records_every_field_a_row_needs(serve):
    server = serve({"/": page(b"<p>x</p>")})
    before = time.time()
    result = fetch_one(server.url("/"))
    assert before <= result.fetched_at <= server.hits[0].start + 0.05
    assert result.request == CrawlRequest(server.url("/")) and 0 < result.elapsed < 1.0
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.headers)



def test_the_ssrf_guard_is_on_by_default_for_urls_and_redirect_hops(serve):
    """Loopback is refused before any request (the server sees nothing); with the guard open,
    a redirect hop to a forbidden address is still checked before it is followed."""
    server = serve({"/p": page(b"<html>p</html>"),
                    "/to-metadata": redirect("http://169.254.169.254/latest/meta-data/")})
    guarded = dataclasses.replace(CONFIG, allow_private_networks=False)
    result = fetch_one(server.url("/p"), guarded)
    assert (result.error, result.outcome, result.status) == ("ssrf_blocked", "error", None)
    assert result.error_detail.startswith("loopback")
    assert server.hits == []
    hop = fetch_one(server.url("/to-metadata"))  # loopback allowed, the target is another host
    assert hop.outcome == "redirect" and hop.redirect_to.startswith("http://169.254.169.254/")
