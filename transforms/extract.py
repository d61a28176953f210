"""``ExtractLinks``: fetched HTML -> parsed pages (title, outlinks) and the links to crawl next.

The HTML work is ``transforms.core.links.extract_html`` (selectolax); this module decodes the body's
content-coding, canonicalizes links and applies page-level robots directives
(``transforms.core.robots_meta``: ``<meta name="robots">``, ``<meta name="<our token>">`` and
``X-Robots-Tag``, per-user-agent forms included): ``nofollow`` keeps every link of the page out
of the frontier, ``noindex`` marks the page (stored, not exported for indexing). Links with
``rel=nofollow`` are never followed; ``rel=canonical`` is recorded and, unless the page is
nofollow, enqueued. Cross-host redirects become requests so they go back through the frontier.
A fetched sitemap (``transforms.core.sitemap_links``) yields its child sitemaps or pages and a row
with its summary; it is not stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms.core.content import Decoded, decode_body, header
from transforms.core.digests import digest_of
from transforms.core.links import extract_html
from transforms.core.policy import SUPPORTED_SCHEMES
from transforms.core.records import (
    OUTCOME_NOT_STORED,
    SITEMAP_KINDS,
    CrawlRequest,
    Discovered,
    FetchResult,
    ParsedPage,
)
from transforms.core.robots_meta import meta_contents, page_directives, x_robots_tags
from transforms.core.sitemap_links import SitemapYield, sitemap_outlinks
from transforms.core.sitemaps import MAX_SITEMAP_BYTES, parse_sitemap
from transforms.core.urls import InvalidUrl, canonicalize_url

METRICS_NAMESPACE = "crawler"
DEFAULT_MAX_DECODED_BYTES = 10 * 1024 * 1024  # --max_body_bytes' default
UNDECODED = "body not decoded"  # f:detail prefix of a body whose content-coding failed


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


def decoding_detail(decoded: Decoded, max_bytes: int) -> str:
    """What ``f:detail`` says about a body's decoding: nothing when it was whole."""
    if decoded.error:
        return f"{UNDECODED}: {decoded.error}"
    if decoded.truncated:
        return f"decoded body cut at {max_bytes} bytes"
    return ""


def parse_page(result: FetchResult, user_agent: str,
               max_bytes: int = DEFAULT_MAX_DECODED_BYTES
               ) -> tuple[ParsedPage, list[CrawlRequest]]:
    """Parses a stored HTML page; returns it with the requests for its followable links.

    The body is decoded per its ``Content-Encoding`` first, at most ``max_bytes`` decoded (the
    fetch's ``--max_body_bytes``). A body that cannot be decoded is still stored as sent; its
    page has no title or links, and ``f:detail`` says why.
    """
    body = result.body or b""
    decoded = decode_body(body, header(result.headers, "Content-Encoding"), max_bytes,
                          result.truncated)
    # A body cut on the wire is marked already (f:truncated); only a cut of the decoded text
    # at the cap is news here.
    detail = decoding_detail(dataclasses.replace(decoded, truncated=decoded.truncated
                                                 and not result.truncated), max_bytes)
    if detail:
        result = dataclasses.replace(result, detail="; ".join(filter(None, (result.detail,
                                                                           detail))))
    if not decoded.ok:
        return ParsedPage(result, None, (), digest_of(result) or ''), []
    info = extract_html(decoded.data, result.final_url, result.content_type)
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
    page = ParsedPage(result, info.title, tuple(r.url for r in requests), digest_of(result) or '',
                      noindex=directives.noindex, nofollow=directives.nofollow,
                      canonical=canonical)
    return page, requests


def read_sitemap(result: FetchResult) -> SitemapYield:
    """Parses a fetched sitemap into what it adds to the crawl.

    Its ``Content-Encoding`` is undone first (at most ``MAX_SITEMAP_BYTES`` decoded, the
    protocol's 50 MB; a ``.xml.gz`` file stays gzip and ``parse_sitemap`` inflates it). A body
    that cannot be decoded adds nothing, and the sitemap's row says why.
    """
    decoded = decode_body(result.body or b"", header(result.headers, "Content-Encoding"),
                          MAX_SITEMAP_BYTES, result.truncated)
    if not decoded.ok:
        return SitemapYield((), 0, 0, False, decoding_detail(decoded, MAX_SITEMAP_BYTES))
    outcome = sitemap_outlinks(result, parse_sitemap(decoded.data, result.final_url,
                                                     result.content_type))
    if decoded.truncated:
        outcome = dataclasses.replace(outcome, detail="; ".join(filter(None, (
            outcome.detail, decoding_detail(decoded, MAX_SITEMAP_BYTES)))))
    return outcome


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
        links += requests
        self._links.inc(len(links))
        yield Discovered(tuple(links), page)

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
