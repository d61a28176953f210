"""Sitemaps in the crawl: which sitemaps a host's robots.txt leads to, and what a fetched
sitemap adds to the frontier (pure; parsing and the scope rule are ``transforms.core.sitemaps``).

How sitemaps flow through the pipeline:

1. When the frontier parses a host's robots.txt (``transforms.frontier.hostcore``), the ``Sitemap:``
   lines become requests of kind ``sitemap`` (:func:`robots_sitemap_requests`), with ``via``
   set to the robots.txt URL so the sitemap may list any URL of that origin. With the policy's
   ``probe_sitemap_xml``, a robots.txt that names no sitemap leads to ``/sitemap.xml``.
2. A sitemap request is fetched through its host's lease like a page (politeness and
   robots.txt apply); the fetcher keeps its body up to the protocol's 50 MB.
3. ``ExtractLinks`` parses it (:func:`sitemap_outlinks`): an index yields child sitemaps (kind
   ``sitemap_child``, which may not be indexes again), a urlset or text sitemap yields page
   requests one level deeper, with the entry's ``<priority>`` mapped onto the request priority
   and its ``<lastmod>`` carried along, so that a URL fetched before its lastmod is fetched
   again (``transforms.frontier.hostcore``). Entries outside the sitemap's scope are dropped and
   counted.
4. The sitemap's own row records a summary in ``f:detail``; the sitemap is not stored in WARC.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from transforms.core.policy import SUPPORTED_SCHEMES
from transforms.core.records import KIND_SITEMAP, KIND_SITEMAP_CHILD, CrawlRequest, FetchResult
from transforms.core.sitemap_scope import filter_scope, sitemap_priority
from transforms.core.sitemaps import (
    DEFAULT_SITEMAP_PATHS,
    KIND_INDEX,
    MAX_ENTRIES,
    MAX_SITEMAP_BYTES,
    Sitemap,
)
from transforms.core.urls import InvalidUrl, canonicalize_url


@dataclass(frozen=True)
class SitemapYield:
    """What one fetched sitemap adds to the crawl.

    Attributes:
        requests: child sitemaps (from an index) or pages (from a urlset or text sitemap).
        out_of_scope: entries dropped by the scope rule.
        invalid: in-scope entries whose URL cannot be crawled.
        nested_index_ignored: True for an index listed by an index (the protocol forbids it;
            its children are not followed).
        detail: a one-line summary for the sitemap's ``f:detail``.
    """

    requests: tuple[CrawlRequest, ...]
    out_of_scope: int
    invalid: int
    nested_index_ignored: bool
    detail: str


def robots_sitemap_requests(sitemap_urls: Iterable[str], robots_url: str, *, probe: bool,
                            priority: int = 0) -> list[CrawlRequest]:
    """The sitemap requests a parsed robots.txt leads to.

    Args:
        sitemap_urls: the ``Sitemap:`` URLs of the robots.txt, as written.
        robots_url: the robots.txt URL (its origin is the sitemaps' extended scope).
        probe: also ask for ``/sitemap.xml`` of the robots origin when no valid sitemap is named.
        priority: the requests' priority.

    Returns:
        Canonical sitemap requests, each URL once, invalid URLs skipped.
    """
    out: dict[str, CrawlRequest] = {}
    for url in sitemap_urls:
        try:
            canonical = canonicalize_url(url)
        except InvalidUrl:
            continue
        out.setdefault(canonical, CrawlRequest(canonical, 0, priority, robots_url,
                                               kind=KIND_SITEMAP, via=robots_url))
    if probe and not out:
        origin = robots_url[:robots_url.index("/", robots_url.index("//") + 2)]
        for path in DEFAULT_SITEMAP_PATHS:
            url = canonicalize_url(origin + path)
            out[url] = CrawlRequest(url, 0, priority, robots_url, kind=KIND_SITEMAP)
    return list(out.values())


def sitemap_outlinks(result: FetchResult, sitemap: Sitemap) -> SitemapYield:
    """The requests a fetched sitemap yields, and a summary of what was dropped.

    Args:
        result: the sitemap's fetch (its request's ``kind``, ``via``, depth and priority
            matter; scope is judged from ``final_url``).
        sitemap: the parsed body.

    Returns:
        The :class:`SitemapYield`.
    """
    request = result.request
    kept, out_of_scope = filter_scope(sitemap, result.final_url, robots_origin=request.via)
    nested = sitemap.kind == KIND_INDEX and request.kind == KIND_SITEMAP_CHILD
    requests: dict[str, CrawlRequest] = {}
    invalid = 0
    if not nested:
        for entry in kept:
            try:
                url = canonicalize_url(entry.url, allowed_schemes=SUPPORTED_SCHEMES,
                                       remove_params=())
            except InvalidUrl:
                invalid += 1
                continue
            if sitemap.kind == KIND_INDEX:
                requests.setdefault(url, CrawlRequest(
                    url, request.depth, request.priority, result.final_url,
                    kind=KIND_SITEMAP_CHILD, via=request.via))
            else:
                requests.setdefault(url, CrawlRequest(
                    url, request.depth + 1, sitemap_priority(entry, request.priority),
                    result.final_url, lastmod=entry.lastmod))
    what = "sitemaps" if sitemap.kind == KIND_INDEX else "urls"
    parts = [f"sitemap {sitemap.kind}: {len(requests)} {what}"]
    if out_of_scope:
        parts.append(f"{out_of_scope} out of scope")
    if invalid:
        parts.append(f"{invalid} invalid")
    if nested:
        parts.append(f"an index listed by an index: {len(kept)} sitemaps not followed")
    if sitemap.truncated:
        parts.append(f"truncated at {MAX_ENTRIES} entries or {MAX_SITEMAP_BYTES} bytes")
    if sitemap.errors:
        parts.append(f"{len(sitemap.errors)} errors, first: {sitemap.errors[0]}")
    return SitemapYield(tuple(requests.values()), out_of_scope, invalid, nested,
                        "; ".join(parts)[:500])
