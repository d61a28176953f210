"""The records that flow between the crawl stages.

All are frozen dataclasses made of primitives, tuples and other records, so Beam's deterministic
fallback coder encodes them; keys in the pipeline are always plain ``str`` politeness keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

from transforms.core import status
from transforms.core.batches import BatchSpec
from transforms.core.page_records import DUPLICATE_PAYLOAD as DUPLICATE_PAYLOAD
from transforms.core.page_records import DUPLICATE_TEXT as DUPLICATE_TEXT
from transforms.core.page_records import RULE_DROP as RULE_DROP
from transforms.core.page_records import RULE_SORT as RULE_SORT
from transforms.core.page_records import NearDuplicate as NearDuplicate
from transforms.core.page_records import OutLink as OutLink
from transforms.core.page_records import PageContent, Revisit, UrlRule
from transforms.core.recrawl import FetchHistory, Validators

# Statuses recorded in the webtable's ``f:outcome`` cell; ``transforms.core.status`` has the
# machine.
OUTCOME_QUEUED = status.QUEUED
OUTCOME_FETCHED = status.FETCHED
OUTCOME_NOT_STORED = status.NOT_STORED
OUTCOME_REDIRECT = status.REDIRECT
OUTCOME_ERROR = status.ERROR
OUTCOME_ROBOTS_BLOCKED = status.ROBOTS_BLOCKED
OUTCOME_FILTERED = status.FILTERED
OUTCOME_BUDGET = status.BUDGET_EXCEEDED
OUTCOME_NOT_MODIFIED = status.NOT_MODIFIED
OUTCOME_FRESH = status.FRESH
OUTCOME_RETRY = status.RETRY_SCHEDULED
TERMINAL_OUTCOMES = status.TERMINAL

# What a request fetches: a page, a sitemap named by robots.txt or found at /sitemap.xml, or a
# sitemap listed by a sitemap index (which must not list further indexes).
KIND_PAGE = "page"
KIND_SITEMAP = "sitemap"
KIND_SITEMAP_CHILD = "sitemap_child"
SITEMAP_KINDS = frozenset({KIND_SITEMAP, KIND_SITEMAP_CHILD})

# Why a URL the frontier knows already is visited again (``CrawlRequest.revisit``): its next
# fetch time came, it was submitted again as a seed, or a sitemap lastmod is after its fetch.
REVISIT_RECRAWL = "recrawl"
REVISIT_RESUBMIT = "resubmit"
REVISIT_LASTMOD = "lastmod"
REVISITS = frozenset({REVISIT_RECRAWL, REVISIT_RESUBMIT, REVISIT_LASTMOD})


@dataclass(frozen=True)
class CrawlRequest:
    """One URL to crawl.

    Attributes:
        url: the canonical URL (``transforms.core.urls.canonicalize_url``).
        depth: link distance from a seed (seeds are 0).
        priority: higher is fetched first within a host; seeds may set it.
        discovered_from: the URL of the page that linked here, or None for a seed.
        attempt: fetch attempts already made (a URL returned by an expired lease keeps its count).
        conditional: request headers that make a recrawl a conditional GET (``If-None-Match``,
            ``If-Modified-Since``), from the previous response's validators; empty otherwise.
        kind: ``page``, or a sitemap kind (``KIND_SITEMAP``, ``KIND_SITEMAP_CHILD``).
        via: for a sitemap named in robots.txt, that robots.txt URL (it widens the sitemap's
            scope to the robots origin); None otherwise.
        lastmod: a sitemap's ``<lastmod>`` for the URL (seconds since the epoch), or None: a
            known URL whose lastmod is after its last fetch is fetched again.
        revisit: ``""`` for a URL the frontier has not fetched yet, else why a known URL is
            visited again (``REVISITS``); the lease decides from the URL's row whether to fetch
            it (conditionally), answer ``fresh`` or drop it.
        batches: the client batches that asked for this URL (``transforms.core.batches``);
            each gets the URL's terminal outcome. Empty for discovered links and plain seeds.
        client: the client of those batches ("" for the crawl's own work): its fair share of
            the host's queue.
        cache_hours: a batch's cache time: a URL fetched successfully less than this long ago
            is answered ``cached`` from its row; None: the response's own freshness decides.
    """

    url: str
    depth: int = 0
    priority: int = 0
    discovered_from: str | None = None
    attempt: int = 0
    conditional: tuple[tuple[str, str], ...] = ()
    kind: str = KIND_PAGE
    via: str | None = None
    lastmod: float | None = None
    revisit: str = ""
    batches: tuple[str, ...] = ()
    client: str = ""
    cache_hours: float | None = None

    def crawl_only(self) -> CrawlRequest:
        """The request without its client batches (a recrawl or retry the crawl owns)."""
        if not (self.batches or self.client or self.cache_hours is not None):
            return self
        return dataclasses.replace(self, batches=(), client="", cache_hours=None)


@dataclass(frozen=True)
class FetchResult:
    """What one fetch of one URL produced (a response, or an error with no usable response).

    ``body`` holds the payload exactly as the server sent it (content-encoding intact) and only
    for responses that are stored; ``body`` is None for everything else.
    """

    request: CrawlRequest
    host: str
    fetched_at: float
    final_url: str
    status: int | None = None
    content_type: str | None = None
    http_version: str = "1.1"
    reason: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    content_length: int = 0
    truncated: bool = False
    redirects: tuple[str, ...] = ()
    redirect_to: str | None = None
    links: tuple[str, ...] = ()  # links known without parsing (an FTP directory's entries)
    error: str | None = None
    error_detail: str | None = None
    elapsed: float = 0.0
    outcome: str = OUTCOME_FETCHED
    next_fetch_at: float | None = None  # set by the frontier from the URL's fetch history
    detail: str = ""  # what became of the response, e.g. a sitemap's summary (``f:detail``)
    # The frontier index entry this fetch settles: deleted once the URL's row is durable.
    index_key: str | None = None
    # ``sha1:`` + base32 of ``body`` as sent, computed once when it arrived
    # (``transforms.core.digests``); None without a body.
    payload_digest: str | None = None

    def without_body(self) -> FetchResult:
        return dataclasses.replace(self, body=None, payload_digest=None)


@dataclass(frozen=True)
class UrlOutcome:
    """A URL that ended without a fetch (or was just accepted: outcome ``queued``)."""

    request: CrawlRequest
    host: str
    outcome: str
    at: float
    detail: str = ""


class BatchEvent(NamedTuple):
    """One batch URL's terminal outcome, emitted once its cells are durable (the URL's row and
    the batch's ``u:<url>`` cell); ``transforms.batch_progress`` counts it."""

    batch_id: str
    url: str
    outcome: str
    at: float
    http_status: int | None = None
    fetched_at: float | None = None
    warc_file: str | None = None
    warc_offset: int | None = None
    detail: str = ""


def by_batch(events: list[BatchEvent]) -> list[tuple[str, tuple[BatchEvent, ...]]]:
    """``events`` grouped by batch id, in first-seen order: one element per batch."""
    groups: dict[str, list[BatchEvent]] = {}
    for event in events:
        groups.setdefault(event.batch_id, []).append(event)
    return [(batch_id, tuple(group)) for batch_id, group in groups.items()]


class BatchWake(NamedTuple):
    """Asks a batch's progress key to read its row again (``transforms.wake``: a new job)."""

    reason: str = "job start"


@dataclass(frozen=True)
class BatchSubmission:
    """A client batch message as read: its spec, the URLs as sent, when it was read, and the
    acknowledgement that waits until the intake has recorded it."""

    spec: BatchSpec
    urls: tuple[str, ...]
    received_at: float
    tokens: tuple[AckToken, ...] = ()
    sent: int | None = None  # the size as the client sent it, when the message says


@dataclass(frozen=True)
class ParsedPage:
    """A fetched HTML page with what extraction found in it.

    ``duplicate_of``: the first URL seen with the same content (``duplicate_kind`` says which
    digest matched); ``revisit``: set when the payload is byte-identical to an earlier capture
    (another URL's, or this URL's own earlier fetch), so the WARC writer writes a revisit."""

    fetch: FetchResult
    title: str | None
    outlinks: tuple[str, ...]
    checksum: str
    noindex: bool = False  # meta robots / X-Robots-Tag: stored, but not exported for indexing
    nofollow: bool = False  # no link of this page entered the frontier
    canonical: str | None = None  # <link rel=canonical>, canonicalized
    content: PageContent | None = None
    duplicate_of: str | None = None
    duplicate_kind: str = ""
    revisit: Revisit | None = None




@dataclass(frozen=True)
class WarcLocation:
    """Where a page's WARC record lives: file URI, byte offset and length of the gzip member."""

    file: str
    offset: int
    length: int


@dataclass(frozen=True)
class StoredPage:
    """A page whose WARC record is written (body dropped), ready for its webtable row."""

    page: ParsedPage
    location: WarcLocation


@dataclass(frozen=True)
class HostStats:
    """Cumulative per-key counters and where the key stands, written to the hosts table when
    they change (at every lease end, and when URLs arrive).

    ``queued`` counts the key's pending URLs (head, lease, arrivals, and an estimate of those
    only in the index); ``pending`` is False only when the key is idle: nothing queued or in
    flight and no read pending; ``next_recrawl_at`` is its earliest scheduled revisit.
    """

    host: str
    updated_at: float
    fetched: int = 0
    errors: int = 0
    bytes: int = 0
    robots_blocked: int = 0
    dedup_dropped: int = 0
    filtered: int = 0
    budget_exceeded: int = 0
    accepted: int = 0
    queued: int = 0
    lease_active: bool = False
    delay: float = 0.0
    robots_status: str = "unknown"
    last_error: str = ""
    robots_rules: int = 0  # Allow/Disallow lines in the host's robots.txt
    crawl_delay: float | None = None  # the Crawl-delay robots.txt asks of our agent, if any
    pending: bool = False
    next_recrawl_at: float | None = None
    phase: str = "ready"  # "rebuilding" while the key reads its rows back
    state_bytes: int = 0  # bytes of state this key has written, cumulative
    out_of_scope: int = 0  # links its pages had outside the crawl's --scope
    # Loop latency of the links that came to this key from other keys, as a histogram
    # (``transforms.core.latency``: "edge_ms:count,...").
    loop_latency: str = ""


@dataclass(frozen=True)
class AckToken:
    """A part of a Pub/Sub message whose acknowledgement waits until that part is recorded.

    A message's URLs may go to several frontier keys (and its bad URLs to the dead-letter
    table); it is acknowledged once every one of its ``parts`` is durable.
    """

    ack_id: str
    part: int
    parts: int


class Discovered(NamedTuple):
    """What extraction makes of a fetch result: the links it yields (for the frontier) and
    what is recorded of it (a ``ParsedPage`` to store, or a ``FetchResult`` that is not
    stored, or None). The loop publishes the links before the result moves on, so a URL's
    terminal row never exists before the links it yields are safe in the frontier topic."""

    links: tuple[CrawlRequest, ...]
    item: ParsedPage | FetchResult | None
    # DUST evidence for the frontier (``transforms.core.dust``): (a URL of the key that showed
    # the rule, the rule, the content digest), published with the links.
    rules: tuple[tuple[str, UrlRule, str], ...] = ()


class FrontierWork(NamedTuple):
    """An element of the frontier's input: requests for one key, and the acknowledgements of
    the messages they came in (released once the requests are recorded)."""

    requests: tuple[CrawlRequest, ...]
    tokens: tuple[AckToken, ...] = ()
    # Evidence of DUST rules for the key (``transforms.core.dust``): each with the content
    # digest that showed it.
    rules: tuple[tuple[UrlRule, str], ...] = ()
    # When the links were discovered (their pages' fetch; seconds since the epoch), for links
    # that came through the loop from another key; None for seeds and other producers.
    discovered_at: float | None = None


@dataclass(frozen=True)
class DeadLetter:
    """An element that could not be processed, kept with its reason so nothing is lost.

    ``tokens``: the acknowledgements that wait for this row (``AckToken``)."""

    stage: str
    reason: str
    payload: bytes
    at: float
    tokens: tuple[AckToken, ...] = ()


@dataclass(frozen=True)
class UrlRecord:
    """What the webtable says about one URL: the cells the frontier reads back.

    Attributes:
        url: the canonical URL.
        status: ``f:outcome`` (``transforms.core.status``), None without one.
        key: ``s:host``, the frontier key that owns the URL.
        accepted: the URL was queued once (``s:first_seen`` is set): it counts in the budget.
        fetched_at: ``f:fetched_at``, seconds since the epoch.
        next_fetch_at: ``s:next_fetch``.
        interval: ``s:recrawl_interval``, seconds.
        checksum, etag, last_modified: of the last response.
        length: ``f:length`` of the last response.
        http_status: ``f:status``, the last response's HTTP status (None without one).
    """

    url: str
    status: str | None = None
    key: str | None = None
    accepted: bool = False
    fetched_at: float | None = None
    next_fetch_at: float | None = None
    interval: float | None = None
    checksum: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    length: int = 0
    http_status: int | None = None

    def history(self) -> FetchHistory | None:
        """The fetch history the recrawl logic needs, or None if the URL never had a response."""
        if self.fetched_at is None or self.status not in status.RESPONDED | {status.FRESH}:
            return None
        interval = self.interval if self.interval is not None else 0.0
        next_fetch = (self.next_fetch_at if self.next_fetch_at is not None
                      else self.fetched_at + interval)
        return FetchHistory(self.fetched_at, self.checksum,
                            Validators(self.etag, self.last_modified), interval, next_fetch)
