"""``ExtractLinks``: fetched HTML -> parsed pages (title, outlinks, the analysts' content) and
the links to crawl next.

The work is ``transforms.core.extraction`` (HTML through ``transforms.core.links``, selectolax):
it decodes the body's content-coding, canonicalizes links and applies page-level robots
directives
(``transforms.core.robots_meta``: ``<meta name="robots">``, ``<meta name="<our token>">`` and
``X-Robots-Tag``, per-user-agent forms included): ``nofollow`` keeps every link of the page out
of the frontier, ``noindex`` marks the page (stored, not exported for indexing). Links with
``rel=nofollow`` are never followed; ``rel=canonical`` is recorded and, unless the page is
nofollow, enqueued. Cross-host redirects become requests so they go back through the frontier.
A fetched sitemap (``transforms.core.sitemap_links``) yields its child sitemaps or pages and a row
with its summary; it is not stored.

Every decoded page also gets its ``PageContent`` (``transforms.core.page_content``: preview,
main text, word count, outlinks with anchor text, text digest, MinHash signature) from the same
parse; the counters ``pages_with_text`` and ``pages_text_truncated`` and the distributions
``text_words`` and ``page_outlinks`` show what the crawl's pages hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import METRICS_NAMESPACE
from transforms.core.extraction import (
    DEFAULT_MAX_DECODED_BYTES,
    UNDECODED,
    outlink_requests,
    parse_page,
    read_sitemap,
)
from transforms.core.records import (
    OUTCOME_NOT_STORED,
    SITEMAP_KINDS,
    CrawlRequest,
    Discovered,
    FetchResult,
    PageContent,
)


class _ExtractFn(beam.DoFn):
    def __init__(self, user_agent: str, max_body_bytes: int) -> None:
        self._user_agent = user_agent
        self._max_body_bytes = max_body_bytes

    def setup(self) -> None:
        self._pages = Metrics.counter(METRICS_NAMESPACE, "pages_parsed")
        self._links = Metrics.counter(METRICS_NAMESPACE, "links_discovered")
        self._redirects = Metrics.counter(METRICS_NAMESPACE, "redirects_to_frontier")
        self._nofollow = Metrics.counter(METRICS_NAMESPACE, "pages_nofollow")
        self._noindex = Metrics.counter(METRICS_NAMESPACE, "pages_noindex")
        self._sitemaps = Metrics.counter(METRICS_NAMESPACE, "sitemaps_parsed")
        self._sitemap_urls = Metrics.counter(METRICS_NAMESPACE, "sitemap_urls")
        self._sitemap_out_of_scope = Metrics.counter(METRICS_NAMESPACE, "sitemap_out_of_scope")
        self._undecodable = Metrics.counter(METRICS_NAMESPACE, "bodies_undecodable")
        self._with_text = Metrics.counter(METRICS_NAMESPACE, "pages_with_text")
        self._text_truncated = Metrics.counter(METRICS_NAMESPACE, "pages_text_truncated")
        self._text_words = Metrics.distribution(METRICS_NAMESPACE, "text_words")
        self._page_outlinks = Metrics.distribution(METRICS_NAMESPACE, "page_outlinks")

    def process(self, result: FetchResult) -> Iterator[Discovered]:
        if result.request.kind in SITEMAP_KINDS and result.body is not None:
            yield self._sitemap(result)
            return
        links: list[CrawlRequest] = []
        if result.redirect_to is not None:
            self._redirects.inc()
            request = result.request
            links.append(CrawlRequest(result.redirect_to, request.depth, request.priority,
                                      request.url))
        links += outlink_requests(result, result.links)
        if result.body is None:
            self._links.inc(len(links))
            yield Discovered(tuple(links), result)
            return
        page, requests = parse_page(result, self._user_agent, self._max_body_bytes)
        if UNDECODED in page.fetch.detail:
            self._undecodable.inc()
        self._pages.inc()
        if page.nofollow:
            self._nofollow.inc()
        if page.noindex:
            self._noindex.inc()
        if page.content is not None:
            self._count_content(page.content)
        links += requests
        self._links.inc(len(links))
        yield Discovered(tuple(links), page)

    def _count_content(self, content: PageContent) -> None:
        self._text_words.update(content.word_count)
        self._page_outlinks.update(len(content.outlinks))
        if content.word_count:
            self._with_text.inc()
        if content.text_truncated:
            self._text_truncated.inc()

    def _sitemap(self, result: FetchResult) -> Discovered:
        """A fetched sitemap: its child sitemaps or pages for the frontier, and its row with a
        summary of what it listed and dropped (the sitemap itself is not stored)."""
        outcome = read_sitemap(result)
        if UNDECODED in outcome.detail:
            self._undecodable.inc()
        self._sitemaps.inc()
        self._sitemap_urls.inc(len(outcome.requests))
        self._sitemap_out_of_scope.inc(outcome.out_of_scope)
        return Discovered(outcome.requests, dataclasses.replace(
            result.without_body(), outcome=OUTCOME_NOT_STORED, detail=outcome.detail))


class ExtractOutputs(NamedTuple):
    # Each result with the links it yields: a ParsedPage (body still attached, for the WARC
    # writer) or a FetchResult that is not stored (errors, non-HTML, redirects, sitemaps).
    discovered: beam.PCollection  # Discovered


class ExtractLinks(beam.PTransform):
    """FetchResults -> each with the links it yields (``Discovered``): a parsed page, or the
    result itself when it is not stored.

    ``user_agent`` selects the crawler-specific robots meta names and X-Robots-Tag forms;
    ``max_body_bytes`` caps a page's decoded size, as the fetch caps its size on the wire.
    """

    def __init__(self, user_agent: str = "beam-crawler",
                 max_body_bytes: int = DEFAULT_MAX_DECODED_BYTES) -> None:
        super().__init__()
        self._user_agent = user_agent
        self._max_body_bytes = max_body_bytes

    def expand(self, results: beam.PCollection) -> ExtractOutputs:
        return ExtractOutputs(results | "ParseHtml" >> beam.ParDo(
            _ExtractFn(self._user_agent, self._max_body_bytes)))
