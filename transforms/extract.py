"""``ExtractLinks``: fetched HTML -> parsed pages (title, outlinks) and the links to crawl next.

The HTML work is ``transforms.links.extract_html`` (selectolax); this module decodes the body's
content-coding, canonicalizes links, honours ``<meta name="robots" content="nofollow">`` and turns
cross-host redirects into requests so they go back through the frontier.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms.content import decode_content, header
from transforms.links import extract_html
from transforms.records import CrawlRequest, FetchResult, ParsedPage
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
            url = canonicalize_url(link)
        except InvalidUrl:
            continue
        if url in seen:
            continue
        seen.add(url)
        out.append(CrawlRequest(url, page.request.depth + 1, page.request.priority,
                                page.request.url))
    return out


def parse_page(result: FetchResult) -> tuple[ParsedPage, list[CrawlRequest]]:
    """Parses a stored HTML page; returns it with the requests for its followable links."""
    body = result.body or b""
    decoded, _ = decode_content(body, header(result.headers, "Content-Encoding"),
                                MAX_DECODED_BYTES)
    info = extract_html(decoded, result.final_url, result.content_type)
    follow = not ({"nofollow", "none"} & set(info.meta_robots))
    requests = outlink_requests(result, info.links) if follow else []
    page = ParsedPage(result, info.title, tuple(r.url for r in requests) if follow else (),
                      payload_checksum(body))
    return page, requests


class _ExtractFn(beam.DoFn):
    def setup(self) -> None:
        self._pages = Metrics.counter(METRICS_NAMESPACE, "pages_parsed")
        self._links = Metrics.counter(METRICS_NAMESPACE, "links_discovered")
        self._redirects = Metrics.counter(METRICS_NAMESPACE, "redirects_to_frontier")

    def process(self, result: FetchResult) -> Iterator[Any]:
        if result.redirect_to is not None:
            self._redirects.inc()
            request = result.request
            yield beam.pvalue.TaggedOutput(LINKS_TAG, CrawlRequest(
                result.redirect_to, request.depth, request.priority, request.url))
        if result.body is None:
            yield beam.pvalue.TaggedOutput(UNSTORED_TAG, result)
            return
        page, requests = parse_page(result)
        self._pages.inc()
        self._links.inc(len(requests))
        yield page
        for request in requests:
            yield beam.pvalue.TaggedOutput(LINKS_TAG, request)


class ExtractOutputs(NamedTuple):
    pages: beam.PCollection  # ParsedPage (body still attached, for the WARC writer)
    links: beam.PCollection  # CrawlRequest
    unstored: beam.PCollection  # FetchResult without a stored body (errors, non-HTML, redirects)


class ExtractLinks(beam.PTransform):
    """FetchResults -> parsed pages, discovered links, and results that are not stored."""

    def expand(self, results: beam.PCollection) -> ExtractOutputs:
        outputs = results | "ParseHtml" >> beam.ParDo(_ExtractFn()).with_outputs(
            LINKS_TAG, UNSTORED_TAG, main="pages")
        return ExtractOutputs(outputs.pages, outputs[LINKS_TAG], outputs[UNSTORED_TAG])
