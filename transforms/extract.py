"""``ExtractLinks``: fetched HTML -> parsed pages (title, outlinks) and the links to crawl next.

The HTML work is ``transforms.links.extract_html`` (selectolax); this module decodes the body's
content-coding, canonicalizes links and applies page-level robots directives
(``transforms.robots_meta``: ``<meta name="robots">``, ``<meta name="<our token>">`` and
``X-Robots-Tag``, per-user-agent forms included): ``nofollow`` keeps every link of the page out
of the frontier, ``noindex`` marks the page (stored, not exported for indexing). Links with
``rel=nofollow`` are never followed; ``rel=canonical`` is recorded and, unless the page is
nofollow, enqueued. Cross-host redirects become requests so they go back through the frontier.
A fetched sitemap (``transforms.sitemap_links``) yields its child sitemaps or pages and a row
with its summary; it is not stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms.content import decode_content, header
from transforms.links import extract_html
from transforms.policy import SUPPORTED_SCHEMES
from transforms.records import (
    OUTCOME_NOT_STORED,
    SITEMAP_KINDS,
    CrawlRequest,
    FetchResult,
    ParsedPage,
)
from transforms.robots_meta import meta_contents, page_directives, x_robots_tags
from transforms.sitemap_links import SitemapYield, sitemap_outlinks
from transforms.sitemaps import MAX_SITEMAP_BYTES, parse_sitemap
from transforms.urls import InvalidUrl, canonicalize_url
from transforms.warc import payload_checksum

METRICS_NAMESPACE = "crawler"
LINKS_TAG = "links"
UNSTORED_TAG = "unstored"
MAX_DECODED_BYTES = 50 * 1024 * 1024


def outlink_requests(page: FetchResult, links: tuple[str, ...]) -> list[CrawlRequest]:
    """Requests for a page's links: canonical, deduplicated, one level deeper than the page."""
    seen: set[str] = set()
    out = []
    for link in links:
        try:
            # Parameters stay: ingest removes them by the link's own host policy.
            url = canonicalize_url(link, allowed_schemes=SUPPORTED_SCHEMES, remove_params=())
        except InvalidUrl:
            continue
        if url in seen:
            continue
        seen.add(url)
        out.append(CrawlRequest(url, page.request.depth + 1, page.request.priority,
                                page.request.url))
    return out


def parse_page(result: FetchResult, user_agent: str) -> tuple[ParsedPage, list[CrawlRequest]]:
    """Parses a stored HTML page; returns it with the requests for its followable links."""
    body = result.body or b""
    decoded, _ = decode_content(body, header(result.headers, "Content-Encoding"),
                                MAX_DECODED_BYTES)
    info = extract_html(decoded, result.final_url, result.content_type)
    directives = page_directives(meta_contents(info.meta_names), x_robots_tags(result.headers),
                                 user_agent)
    canonical = None
    if info.canonical:
        try:
            canonical = canonicalize_url(info.canonical)
        except InvalidUrl:
            canonical = None
    requests = []
    if not directives.nofollow:
        links = info.links + ((canonical,) if canonical and canonical != result.final_url
                              else ())
        requests = outlink_requests(result, links)
    page = ParsedPage(result, info.title, tuple(r.url for r in requests), payload_checksum(body),
                      noindex=directives.noindex, nofollow=directives.nofollow,
                      canonical=canonical)
    return page, requests


def read_sitemap(result: FetchResult) -> SitemapYield:
    """Parses a fetched sitemap (content-coding undone) into what it adds to the crawl."""
    decoded, _ = decode_content(result.body or b"", header(result.headers, "Content-Encoding"),
                                MAX_SITEMAP_BYTES)
    return sitemap_outlinks(result, parse_sitemap(decoded, result.final_url,
                                                  result.content_type))


class _ExtractFn(beam.DoFn):
    def __init__(self, user_agent: str) -> None:
        self._user_agent = user_agent

    def setup(self) -> None:
        self._pages = Metrics.counter(METRICS_NAMESPACE, "pages_parsed")
        self._links = Metrics.counter(METRICS_NAMESPACE, "links_discovered")
        self._redirects = Metrics.counter(METRICS_NAMESPACE, "redirects_to_frontier")
        self._nofollow = Metrics.counter(METRICS_NAMESPACE, "pages_nofollow")
        self._noindex = Metrics.counter(METRICS_NAMESPACE, "pages_noindex")
        self._sitemaps = Metrics.counter(METRICS_NAMESPACE, "sitemaps_parsed")
        self._sitemap_urls = Metrics.counter(METRICS_NAMESPACE, "sitemap_urls")
        self._sitemap_out_of_scope = Metrics.counter(METRICS_NAMESPACE, "sitemap_out_of_scope")

    def process(self, result: FetchResult) -> Iterator[Any]:
        if result.request.kind in SITEMAP_KINDS and result.body is not None:
            yield from self._sitemap(result)
            return
        if result.redirect_to is not None:
            self._redirects.inc()
            request = result.request
            yield beam.pvalue.TaggedOutput(LINKS_TAG, CrawlRequest(
                result.redirect_to, request.depth, request.priority, request.url))
        for request in outlink_requests(result, result.links):
            self._links.inc()
            yield beam.pvalue.TaggedOutput(LINKS_TAG, request)
        if result.body is None:
            yield beam.pvalue.TaggedOutput(UNSTORED_TAG, result)
            return
        page, requests = parse_page(result, self._user_agent)
        self._pages.inc()
        if page.nofollow:
            self._nofollow.inc()
        if page.noindex:
            self._noindex.inc()
        self._links.inc(len(requests))
        yield page
        for request in requests:
            yield beam.pvalue.TaggedOutput(LINKS_TAG, request)


    def _sitemap(self, result: FetchResult) -> Iterator[Any]:
        """A fetched sitemap: its child sitemaps or pages to the frontier, and its row with a
        summary of what it listed and dropped (the sitemap itself is not stored)."""
        outcome = read_sitemap(result)
        self._sitemaps.inc()
        self._sitemap_urls.inc(len(outcome.requests))
        self._sitemap_out_of_scope.inc(outcome.out_of_scope)
        for request in outcome.requests:
            yield beam.pvalue.TaggedOutput(LINKS_TAG, request)
        yield beam.pvalue.TaggedOutput(UNSTORED_TAG, dataclasses.replace(
            result.without_body(), outcome=OUTCOME_NOT_STORED, detail=outcome.detail))


class ExtractOutputs(NamedTuple):
    pages: beam.PCollection  # ParsedPage (body still attached, for the WARC writer)
    links: beam.PCollection  # CrawlRequest
    unstored: beam.PCollection  # FetchResult without a stored body (errors, non-HTML, redirects)


class ExtractLinks(beam.PTransform):
    """FetchResults -> parsed pages, discovered links, and results that are not stored.

    ``user_agent`` selects the crawler-specific robots meta names and X-Robots-Tag forms.
    """

    def __init__(self, user_agent: str = "beam-crawler") -> None:
        super().__init__()
        self._user_agent = user_agent

    def expand(self, results: beam.PCollection) -> ExtractOutputs:
        outputs = results | "ParseHtml" >> beam.ParDo(_ExtractFn(self._user_agent)).with_outputs(
            LINKS_TAG, UNSTORED_TAG, main="pages")
        return ExtractOutputs(outputs.pages, outputs[LINKS_TAG], outputs[UNSTORED_TAG])
