"""What extraction makes of a fetch result, in plain Python (the ``ExtractLinks`` composite runs
it): a stored HTML page parsed into its title, links, robots directives and the analysts'
content (``transforms.core.page_content``: preview, main text, outlinks with anchors, digest,
signature), a sitemap into the requests it adds, and the requests for a page's outlinks. Bodies
are decoded per their ``Content-Encoding`` first (``transforms.core.content``), capped on the
decoded size. A page is parsed once: the links, the preview and the main text share its tree.
"""

from __future__ import annotations

import dataclasses

from transforms.core.content import Decoded, decode_body, header
from transforms.core.digests import digest_of
from transforms.core.links import parse_html
from transforms.core.page_content import page_content
from transforms.core.policy import SUPPORTED_SCHEMES
from transforms.core.records import (
    CrawlRequest,
    FetchResult,
    ParsedPage,
)
from transforms.core.robots_meta import meta_contents, page_directives, x_robots_tags
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


