"""HTTP(S) fetching of a lease's requests with aiohttp (run by ``transforms.fetchers.service``).

A *lease* is a short, strictly sequential run of requests to one host
(``transforms.core.schedule``). This module holds the lease records, the ``RequestGate`` every
protocol's fetcher takes its request slots from, and the HTTP fetcher and robots.txt fetcher.

Politeness is enforced here too, as a second line behind the frontier's lease arithmetic: a
lease's requests are sequential (including same-host redirect hops), each starts at least
``lease.delay`` after the previous one ended, no request starts within ``min_request_window`` of
the lease deadline, and every request's timeout is clamped to the deadline.

Bodies are read raw (``auto_decompress=False``): the WARC record holds exactly the bytes the server
sent. Whatever parses a body decodes it first (``transforms.core.content.decode_body``, with that
body's cap on the *decoded* size): robots.txt in ``transforms.core.robots``, pages and sitemaps in
``transforms.extract``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import aiohttp

from transforms.core.links import is_html
from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FETCHED,
    OUTCOME_NOT_MODIFIED,
    OUTCOME_NOT_STORED,
    OUTCOME_REDIRECT,
    SITEMAP_KINDS,
    CrawlRequest,
    FetchResult,
)
from transforms.core.sharding import host_of_key
from transforms.core.sitemaps import MAX_SITEMAP_BYTES
from transforms.core.url_keys import politeness_key
from transforms.core.urls import InvalidUrl, canonicalize_url
from transforms.fetchers.ssrf import (
    SSRF_ERROR_KIND,
    check_url_target,
    is_ssrf_error,
)
from transforms.frontier.leases import FetchConfig as FetchConfig  # re-exported, as are the next
from transforms.frontier.leases import Lease as Lease
from transforms.frontier.leases import LeaseOutcome as LeaseOutcome
from transforms.frontier.leases import RobotsResponse as RobotsResponse

_LOG = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DISCARD_LIMIT = 64 * 1024  # unstored bodies up to this size are drained to keep the connection


class LeaseExpired(Exception):
    """Raised inside a lease when the next request could not finish before the deadline."""


@dataclass
class RequestGate:
    """Hands out request slots of one lease: sequential, before the deadline, and each at least
    ``delay`` after the previous request *ended*.

    Counting the delay from the end rather than from our start time makes the gap hold as the
    server sees it: a request we timestamp at t may reach the server later (a busy event loop, a
    new connection), but the next one is sent no earlier than the previous response's end + d.
    """

    lease: Lease
    min_window: float
    starts: list[float] = field(default_factory=list)
    last_end: float | None = None

    async def acquire(self) -> float:
        """Waits for the next slot; returns the time left before the deadline."""
        earliest = (self.lease.start_at if self.last_end is None
                    else self.last_end + self.lease.delay)
        wait = earliest - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        now = time.time()
        left = self.lease.deadline - now
        if left < self.min_window:
            raise LeaseExpired
        self.starts.append(now)
        return left

    def headers(self) -> dict[str, str] | None:
        """Per-request headers: the lease's own User-Agent when the host policy sets one."""
        return {"User-Agent": self.lease.user_agent} if self.lease.user_agent else None

    def release(self) -> None:
        """Marks the current request as finished (response read, or failed)."""
        self.last_end = time.time()


@contextlib.asynccontextmanager
async def released(gate: RequestGate) -> AsyncIterator[None]:
    """Releases the gate when the request's response is closed, whatever happened."""
    try:
        yield
    finally:
        gate.release()


def _timeout(config: FetchConfig, left: float) -> aiohttp.ClientTimeout:
    """Per-request timeouts; the total is clamped to the time left before the lease deadline."""
    return aiohttp.ClientTimeout(total=min(config.total_timeout, left),
                                 sock_connect=config.connect_timeout,
                                 sock_read=config.read_timeout)


def classify_error(exc: BaseException) -> str:
    """A short, stable error kind for counters and the webtable."""
    if is_ssrf_error(exc):
        return SSRF_ERROR_KIND
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionError):
        return "connection"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "disconnected"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "payload"
    if isinstance(exc, aiohttp.InvalidURL | InvalidUrl):
        return "invalid_url"
    if isinstance(exc, aiohttp.ClientResponseError):
        return "protocol"
    if isinstance(exc, aiohttp.ClientError | OSError):
        return "client"
    return "internal"


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """Reads at most ``limit`` bytes of the raw body; returns (bytes, truncated)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await resp.content.read(min(65536, limit + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit], True


def _raw_headers(resp: aiohttp.ClientResponse) -> tuple[tuple[str, str], ...]:
    return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers)


def _http_version(resp: aiohttp.ClientResponse) -> str:
    """The response's HTTP version as ``"major.minor"``.

    aiohttp types ``version`` as optional because it is unset until the status line is parsed;
    a response handed out by ``session.get`` always has it, so the fallback is never expected.
    """
    version = resp.version
    if version is None:
        return FetchResult.http_version
    return f"{version.major}.{version.minor}"


async def fetch_request(session: aiohttp.ClientSession, request: CrawlRequest, gate: RequestGate,
                        config: FetchConfig) -> FetchResult:
    """Fetches one URL, following same-host redirects through the lease's gate.

    A chain that runs into the lease deadline after at least one hop ends as a ``redirect``
    outcome whose target goes back through the frontier, exactly like a cross-host redirect, so a
    slow host cannot replay the same first hops lease after lease.

    Raises:
        LeaseExpired: when the first request cannot start before the deadline; the URL goes back
            to the queue untouched.
    """
    host = gate.lease.host
    url = request.url
    hops: list[str] = []
    followed: FetchResult | None = None  # the last same-host redirect followed
    started: float | None = None  # the first request's start: the politeness wait is not counted
    while True:
        blocked = check_url_target(url, allow_private_networks=config.allow_private_networks)
        if blocked is not None:  # refused before using a request slot, never retried
            return FetchResult(request=request, host=host, fetched_at=time.time(), final_url=url,
                               redirects=tuple(hops), error=SSRF_ERROR_KIND,
                               error_detail=f"{blocked}: {url}", outcome=OUTCOME_ERROR)
        try:
            timeout = _timeout(config, await gate.acquire())
        except LeaseExpired:
            if followed is None:
                raise
            return followed
        fetched_at = time.time()
        if started is None:
            started = fetched_at
        headers = gate.headers()
        if request.conditional and not hops:  # validators belong to the URL, not its targets
            headers = {**(headers or {}), **dict(request.conditional)}
        try:
            async with released(gate), session.get(url, allow_redirects=False,
                                                    timeout=timeout,
                                                    headers=headers) as resp:
                status = resp.status
                ctype = resp.headers.get("Content-Type")
                # The fields every response outcome shares; each return below fills in the rest.
                base = FetchResult(request=request, host=host, fetched_at=fetched_at,
                                   final_url=url, status=status, content_type=ctype,
                                   http_version=_http_version(resp), reason=resp.reason or "",
                                   headers=_raw_headers(resp), redirects=tuple(hops))
                declared = int(resp.headers.get("Content-Length", "0") or 0) if (
                    resp.headers.get("Content-Length", "").isdigit()) else 0
                if status in REDIRECT_STATUSES and "Location" in resp.headers:
                    await _read_limited(resp, _DISCARD_LIMIT)
                    try:
                        target = canonicalize_url(resp.headers["Location"], base=url)
                    except InvalidUrl as exc:
                        return replace(base, error="bad_redirect", error_detail=str(exc),
                                       elapsed=time.time() - started, outcome=OUTCOME_ERROR)
                    hops.append(url)
                    if politeness_key(target) != host_of_key(host):
                        return replace(base, redirect_to=target, content_length=declared,
                                       elapsed=time.time() - started, outcome=OUTCOME_REDIRECT)
                    if len(hops) > config.max_redirects:
                        return replace(base, error="too_many_redirects",
                                       error_detail=" -> ".join(hops),
                                       elapsed=time.time() - started, outcome=OUTCOME_ERROR)
                    followed = replace(base, redirects=tuple(hops[:-1]), redirect_to=target,
                                       content_length=declared, elapsed=time.time() - started,
                                       outcome=OUTCOME_REDIRECT)
                    url = target
                    continue
                if 200 <= status < 300 and request.kind in SITEMAP_KINDS:
                    # Parsed by ExtractLinks, never stored; the protocol allows 50 MB.
                    body, truncated = await _read_limited(resp, MAX_SITEMAP_BYTES)
                    return replace(base, body=body, content_length=len(body),
                                   truncated=truncated, elapsed=time.time() - started,
                                   outcome=OUTCOME_FETCHED)
                if 200 <= status < 300 and is_html(ctype):
                    body, truncated = await _read_limited(resp, config.max_body_bytes)
                    return replace(base, body=body, content_length=len(body),
                                   truncated=truncated, elapsed=time.time() - started,
                                   outcome=OUTCOME_FETCHED)
                if is_html(ctype) or ctype is None or ctype.startswith("text/"):
                    drained, truncated = await _read_limited(resp, _DISCARD_LIMIT)
                    size = declared or len(drained)
                    if truncated:
                        resp.close()
                else:  # media: the headers said enough, do not read the body
                    size = declared
                    resp.close()
                return replace(base, content_length=size, elapsed=time.time() - started,
                               outcome=OUTCOME_NOT_MODIFIED if status == 304
                               else OUTCOME_NOT_STORED)
        except LeaseExpired:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            return FetchResult(request=request, host=host, fetched_at=fetched_at, final_url=url,
                               redirects=tuple(hops), error=classify_error(exc),
                               error_detail=f"{type(exc).__name__}: {exc}"[:500],
                               elapsed=time.time() - started, outcome=OUTCOME_ERROR)


async def fetch_robots(session: aiohttp.ClientSession, url: str, gate: RequestGate,
                       config: FetchConfig) -> RobotsResponse:
    """Fetches robots.txt, following up to five same-host redirects (RFC 9309 section 2.3.1.2)."""
    host = gate.lease.host
    for _ in range(6):
        blocked = check_url_target(url, allow_private_networks=config.allow_private_networks)
        if blocked is not None:
            return RobotsResponse(None, None, time.time(), f"{SSRF_ERROR_KIND}: {blocked}")
        timeout = _timeout(config, await gate.acquire())
        fetched_at = time.time()
        try:
            async with released(gate), session.get(url, allow_redirects=False,
                                                    timeout=timeout,
                                                    headers=gate.headers()) as resp:
                if resp.status in REDIRECT_STATUSES and "Location" in resp.headers:
                    target = canonicalize_url(resp.headers["Location"], base=url)
                    if politeness_key(target) != host_of_key(host):
                        # Another authority: treated as unavailable, which RFC 9309 reads as
                        # "allow", without an unscheduled request to a host we have no lease on.
                        return RobotsResponse(404, None, fetched_at, "cross-host redirect")
                    url = target
                    continue
                # Raw, like every body: the cap on the decoded text is applied where the body
                # is decoded and parsed (transforms.core.robots.rules_from_response).
                body, truncated = await _read_limited(resp, config.max_robots_bytes)
                return RobotsResponse(resp.status, body, fetched_at,
                                      content_encoding=resp.headers.get("Content-Encoding"),
                                      truncated=truncated)
        except LeaseExpired:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            return RobotsResponse(None, None, fetched_at, f"{classify_error(exc)}: {exc}"[:300])
    return RobotsResponse(404, None, time.time(), "too many redirects")
