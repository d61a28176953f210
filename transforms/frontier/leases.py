"""Leases as data: what the frontier hands the fetch service, what comes back, and how a lease
checks its URLs against the webtable before it fetches them (pure; no aiohttp, no Beam).

A *lease* is a short, strictly sequential run of requests to one host (``transforms.core.schedule``
has the arithmetic). Before its first request, a lease reads its URLs' rows (the webtable is
the source of truth; the frontier's state is a cache that can be older, after a restore from a
checkpoint or a replay) and :func:`plan_lease` decides per URL:

* a URL whose row is terminal already and that is not a revisit was fetched by an earlier run
  of the same work: it is *skipped*, not fetched twice;
* a revisit (``CrawlRequest.revisit``) is decided from the row: a recrawl is fetched as a
  conditional GET with the stored validators; a seed submitted again is ``fresh`` before its
  ``s:next_fetch`` and fetched after, unless its last answer was an error, a 4xx/5xx or a
  robots.txt refusal (those are tried again: an error has no freshness); a sitemap entry is
  fetched only if its ``lastmod`` is after the last fetch; a revisit of a URL that is still
  pending is skipped (its first entry fetches it), unless a client batch asked for it: then it
  is *deferred*, to be answered from the row once the first entry has fetched the URL;
* a client batch's URL (``CrawlRequest.batches``) with a successful response younger than the
  batch's cache time (``cache_hours``; without one, the response's own freshness, its
  ``s:next_fetch``) is ``fresh`` (the batch's ``cached``); an error, a 4xx/5xx or a
  robots-blocked URL has no cache time: a new batch tries it again (robots.txt is checked again
  when the lease is made);
* everything else is fetched.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from transforms.core import status
from transforms.core.extraction import Extraction
from transforms.core.records import (
    REVISIT_LASTMOD,
    REVISIT_RECRAWL,
    REVISIT_RESUBMIT,
    CrawlRequest,
    FetchResult,
    UrlRecord,
)
from transforms.core.recrawl import Validators, conditional_headers


@dataclass(frozen=True)
class FetchConfig:
    """Fetcher settings; hashable so one ``FetchService`` per distinct config serves a process."""

    user_agent: str = "beam-crawler/0.1"
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    total_timeout: float = 30.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_robots_bytes: int = 500 * 1024
    max_redirects: int = 5
    min_request_window: float = 0.5
    max_connections: int = 512
    # SSRF guard: no connection to loopback, private, link-local, multicast or metadata
    # addresses (checked on the URL, after DNS resolution and on every redirect hop).
    allow_private_networks: bool = False


@dataclass(frozen=True)
class Lease:
    """A batch of one host's requests, fetched in order with ``delay`` between request starts.

    A robots lease (``robots_url`` set) fetches only the host's robots.txt.
    """

    lease_id: str
    host: str
    requests: tuple[CrawlRequest, ...]
    start_at: float
    delay: float
    deadline: float
    robots_url: str | None = None
    user_agent: str | None = None  # the host's policy may set its own; None: the session's
    # The lease this one is chained after (``transforms.frontier.leasing.plan_successor``):
    # the fetch service starts it ``delay`` after that one's last request ended, or fetches
    # nothing if that one stopped early.
    after: str | None = None

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex


@dataclass(frozen=True)
class RobotsResponse:
    """The outcome of fetching robots.txt: status None means no response (see ``error``)."""

    status: int | None
    body: bytes | None
    fetched_at: float
    error: str = ""
    content_encoding: str | None = None  # the body is as sent; the robots parser decodes it
    truncated: bool = False  # the body was cut at ``max_robots_bytes`` on the wire


@dataclass(frozen=True)
class LeaseOutcome:
    """What a finished lease did.

    Attributes:
        results: one per URL fetched.
        unfinished: URLs never started (deadline reached, or the lease stopped at a transient
            failure, or their rows could not be read).
        robots: the robots.txt response of a robots lease.
        request_starts, last_end: the lease's request times (politeness bookkeeping).
        skipped: URLs not fetched because their row was terminal already (or, for a revisit,
            still pending), with the reason.
        fresh: resubmitted URLs answered ``fresh`` from their row.
        records: the rows read for the lease's URLs (their fetch history), by URL.
        verify_error: why the rows could not be read ("" when they were).
        deferred: batch revisits of URLs still pending, answered once those are fetched.
        extracted: each final result's extraction (``transforms.core.extraction.extract``),
            made next to its fetch, by request URL; a result without one is extracted when
            the lease is harvested.
        copies: (URL, the first URL seen with its content; "" when unknown) of pages whose
            content the crawl saw first under another URL (the ``dedup`` table, or this
            process's recent pages): their links wait for the duplicate judgement instead of
            joining their key at harvest.
        cancelled: why a chained lease fetched nothing ("" when it ran): the lease it was
            chained after stopped early (a transient failure, its deadline) or is unknown.
    """

    lease_id: str
    results: tuple[FetchResult, ...]
    unfinished: tuple[CrawlRequest, ...]
    robots: RobotsResponse | None
    request_starts: tuple[float, ...]
    last_end: float | None
    finished_at: float
    skipped: tuple[tuple[CrawlRequest, str], ...] = ()
    fresh: tuple[tuple[CrawlRequest, UrlRecord], ...] = ()
    records: tuple[tuple[str, UrlRecord], ...] = ()
    verify_error: str = ""
    deferred: tuple[CrawlRequest, ...] = ()
    extracted: tuple[tuple[str, Extraction], ...] = ()
    copies: tuple[tuple[str, str], ...] = ()
    cancelled: str = ""

    @property
    def stopped_early(self) -> bool:
        """Requests were left (a transient failure, the deadline) or none could be checked."""
        return bool(self.unfinished or self.verify_error or self.cancelled)

    @property
    def last_start(self) -> float | None:
        return self.request_starts[-1] if self.request_starts else None

    def record_of(self, url: str) -> UrlRecord | None:
        for known, record in self.records:
            if known == url:
                return record
        return None

    def copy_of(self, url: str) -> str | None:
        """The first URL seen with the content of ``url``'s page, when it is a copy ("" when
        that URL is not known); None when it is not a copy."""
        for copy, first in self.copies:
            if copy == url:
                return first
        return None

    def extraction_of(self, url: str) -> Extraction | None:
        for known, extraction in self.extracted:
            if known == url:
                return extraction
        return None


@dataclass(frozen=True)
class LeasePlan:
    """:func:`plan_lease`'s answer: what to fetch (in order), what not, and why."""

    fetch: tuple[CrawlRequest, ...]
    skipped: tuple[tuple[CrawlRequest, str], ...]
    fresh: tuple[tuple[CrawlRequest, UrlRecord], ...]
    deferred: tuple[CrawlRequest, ...] = ()


def plan_lease(requests: Sequence[CrawlRequest], records: Mapping[str, UrlRecord],
               now: float) -> LeasePlan:
    """Decides, from the URLs' rows, which of a lease's requests are fetched (see the module
    docstring). Revisits that are fetched get the stored validators as a conditional GET."""
    fetch: list[CrawlRequest] = []
    skipped: list[tuple[CrawlRequest, str]] = []
    fresh: list[tuple[CrawlRequest, UrlRecord]] = []
    deferred: list[CrawlRequest] = []
    for request in requests:
        record = records.get(request.url)
        current = record.status if record is not None else None
        if not request.revisit:
            if status.is_terminal(current):
                skipped.append((request, f"already {current}"))
            else:
                fetch.append(request)
            continue
        if record is None or current is None:
            fetch.append(request)  # a revisit of a URL without a row: fetch it as new
            continue
        if status.is_pending(current):
            if request.batches:
                deferred.append(request)
            else:
                skipped.append((request, f"revisit of a URL still {current}"))
            continue
        if request.batches:
            if fresh_in_row(record, request.cache_hours, now):
                fresh.append((request, record))
            else:
                fetch.append(_conditional(request, record))
            continue
        if request.revisit == REVISIT_RESUBMIT and fresh_in_row(record, None, now):
            fresh.append((request, record))
            continue
        if (request.revisit == REVISIT_LASTMOD and record.fetched_at is not None
                and (request.lastmod is None or request.lastmod <= record.fetched_at)):
            skipped.append((request, "sitemap lastmod is not after the last fetch"))
            continue
        fetch.append(_conditional(request, record))
    return LeasePlan(tuple(fetch), tuple(skipped), tuple(fresh), tuple(deferred))


CACHEABLE = frozenset({status.FETCHED, status.NOT_MODIFIED, status.NOT_STORED, status.REDIRECT,
                       status.FRESH})


def fresh_in_row(record: UrlRecord, cache_hours: float | None, now: float) -> bool:
    """Whether a resubmitted URL (a client batch's, or a plain seed's) is answered from
    ``record`` without a request: a successful response (2xx/3xx) younger than
    ``cache_hours``, or, without one, still fresh by its own caching headers
    (``s:next_fetch``). Errors have no freshness."""
    if record.status not in CACHEABLE or record.fetched_at is None:
        return False
    if record.http_status is not None and record.http_status >= 400:
        return False
    if cache_hours is not None:
        return now - record.fetched_at < cache_hours * 3600.0
    return record.next_fetch_at is not None and now < record.next_fetch_at


def _conditional(request: CrawlRequest, record: UrlRecord) -> CrawlRequest:
    """A revisit of a URL with a stored response: a conditional GET with its validators."""
    if record.status not in status.RESPONDED | {status.FRESH} or request.revisit not in (
            REVISIT_RECRAWL, REVISIT_RESUBMIT, REVISIT_LASTMOD):
        return request
    headers = conditional_headers(Validators(record.etag, record.last_modified))
    return dataclasses.replace(request, conditional=tuple(headers.items()))
