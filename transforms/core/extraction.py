"""What extraction makes of a fetch result, in plain Python: a stored HTML page parsed into its
title, links, robots directives and the analysts' content (``transforms.core.page_content``:
preview, main text, outlinks with anchors, digest, signature), a sitemap into the requests it
adds, and the requests for a page's outlinks. Bodies are decoded per their
``Content-Encoding`` first (``transforms.core.content``), capped on the decoded size. A page is
parsed once: the links, the preview and the main text share its tree.

:func:`extract` is the whole step for one fetch result. The fetch service runs it next to the
fetch (``transforms.fetchers.service``), so the frontier can admit a page's links to its own
host when it harvests the lease; the ``ExtractLinks`` composite carries the result on (and runs
it for fetch results that come without it).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from transforms.core.content import Decoded, decode_body, header
from transforms.core.digests import digest_of
from transforms.core.links import parse_html
from transforms.core.page_content import page_content
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
from transforms.core.scope import SCOPE_ANY, split_scope
from transforms.core.sitemap_links import SitemapYield, sitemap_outlinks
from transforms.core.sitemaps import MAX_SITEMAP_BYTES, parse_sitemap
from transforms.core.urls import InvalidUrl, canonicalize_url

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
               max_bytes: int = DEFAULT_MAX_DECODED_BYTES, *, sign: bool = True
               ) -> tuple[ParsedPage, list[CrawlRequest]]:
    """Parses a stored HTML page; returns it with the requests for its followable links.

    The body is decoded per its ``Content-Encoding`` first, at most ``max_bytes`` decoded (the
    fetch's ``--max_body_bytes``). A body that cannot be decoded is still stored as sent; its
    page has no title, links or content, and ``f:detail`` says why. Every decoded page gets its
    ``content``, ``noindex`` and ``nofollow`` pages too: the exports mark ``noindex`` pages
    (search leaves them out), and ``nofollow`` only keeps links out of the frontier, so the
    link graph still shows them. ``sign``: compute the MinHash signature of the main text
    (``page_content``'s ``sign``).
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
    info, tree = parse_html(decoded.data, result.final_url, result.content_type)
    content = page_content(info, tree, result.headers, sign=sign)
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
                      canonical=canonical, content=content)
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




class Extraction(NamedTuple):
    """What extraction makes of one fetch result.

    Attributes:
        discovered: the links it yields (those in the crawl's scope) and what is recorded of
            it: a ``ParsedPage`` to store, or the ``FetchResult`` itself when it is not stored
            (errors, non-HTML, redirects; a sitemap, without its body, with its summary).
        out_of_scope: links dropped by the crawl's scope (``transforms.core.scope``).
        sitemap_out_of_scope: a sitemap's entries outside the sitemap's own scope (the
            sitemaps protocol's rule).
    """

    discovered: Discovered
    out_of_scope: int = 0
    sitemap_out_of_scope: int = 0


def extract(result: FetchResult, user_agent: str, max_bytes: int = DEFAULT_MAX_DECODED_BYTES,
            scope: str = SCOPE_ANY) -> Extraction:
    """The extract step for one fetch result (see :class:`Extraction`).

    A cross-host redirect becomes a request one level no deeper than its source, in scope
    when its source is a seed (depth 0: a site moving its home page is still that site); a
    page's links are one level deeper than the page and kept when in ``scope`` relative to the
    page; a sitemap's entries are kept when in ``scope`` relative to the sitemap.
    """
    if result.request.kind in SITEMAP_KINDS and result.body is not None:
        sitemap = read_sitemap(result)
        kept, dropped = _scoped(scope, list(sitemap.requests), result.final_url)
        item = dataclasses.replace(result.without_body(), outcome=OUTCOME_NOT_STORED,
                                   detail=sitemap.detail)
        return Extraction(Discovered(tuple(kept), item), dropped, sitemap.out_of_scope)
    links: list[CrawlRequest] = []
    if result.redirect_to is not None:
        request = result.request
        links.append(CrawlRequest(result.redirect_to, request.depth, request.priority,
                                  request.url))
    links += outlink_requests(result, result.links)
    if result.body is None:
        if result.request.depth == 0 or not links:
            return Extraction(Discovered(tuple(links), result))
        kept, dropped = _scoped(scope, links, result.final_url)
        return Extraction(Discovered(tuple(kept), result), dropped)
    page, requests = parse_page(result, user_agent, max_bytes)
    kept, dropped = _scoped(scope, links + requests, result.final_url)
    if dropped:
        followed = {r.url for r in kept}
        page = dataclasses.replace(page, outlinks=tuple(u for u in page.outlinks
                                                        if u in followed))
    return Extraction(Discovered(tuple(kept), page), dropped)


def _scoped(scope: str, requests: list[CrawlRequest], found_on: str
            ) -> tuple[list[CrawlRequest], int]:
    keep, dropped = split_scope(scope, [r.url for r in requests], found_on)
    if not dropped:
        return requests, 0
    return [r for r, k in zip(requests, keep, strict=True) if k], dropped
