"""Page parsing in the extract stage: bodies are decoded per Content-Encoding before parsing,
with the fetch's size cap on the decoded size; the stored body stays as sent."""

from __future__ import annotations

import dataclasses
import gzip
import zlib

import pytest

from transforms.core.extraction import UNDECODED, extract, parse_page
from transforms.core.records import CrawlRequest, FetchResult
from transforms.core.scope import SCOPE_DOMAIN, SCOPE_HOST

URL = "https://site.example/docs/"
HTML = (b"<!doctype html><html><head><title>Docs</title>"
        b'<meta name="robots" content="noindex"></head><body>'
        b'<a href="a.html">A</a> <a href="/b">B</a></body></html>')


def _page(body: bytes, encoding: str | None = None, truncated: bool = False) -> FetchResult:
    headers = (("Content-Type", "text/html"),) + (
        (("Content-Encoding", encoding),) if encoding else ())
    return FetchResult(CrawlRequest(URL), "site.example", 1.0, URL, status=200,
                       content_type="text/html", headers=headers, body=body,
                       content_length=len(body), truncated=truncated)


@pytest.mark.parametrize("encoding, encode", [
    (None, lambda b: b), ("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_a_compressed_page_is_parsed_like_a_plain_one(encoding, encode):
    result = _page(encode(HTML), encoding)
    page, requests = parse_page(result, "beam-crawler")
    assert page.title == "Docs" and page.noindex
    assert [r.url for r in requests] == ["https://site.example/docs/a.html",
                                         "https://site.example/b"]
    assert page.fetch.body == encode(HTML)  # the WARC record gets the bytes as sent
    assert page.fetch.detail == ""


def test_the_cap_applies_to_the_decoded_size():
    big = HTML.replace(b"</body>", b"<p>" + b"word " * 200_000 + b'</p><a href="/late">x</a>'
                       b"</body>")
    page, requests = parse_page(_page(gzip.compress(big), "gzip"), "beam-crawler",
                                max_bytes=100_000)
    assert "/late" not in {r.url.rsplit("site.example", 1)[1] for r in requests}
    assert len(requests) == 2 and page.fetch.detail == "decoded body cut at 100000 bytes"


def test_a_page_cut_on_the_wire_is_parsed_as_far_as_it_goes():
    body = gzip.compress(HTML)[:-30]  # the fetch stopped at --max_body_bytes mid-stream
    page, _ = parse_page(_page(body, "gzip", truncated=True), "beam-crawler")
    assert page.title == "Docs" and page.fetch.detail == ""  # f:truncated says it already


@pytest.mark.parametrize("encoding, body, why", [
    ("br", b"\x1b\x3a\x00\xf8", "unknown content-encoding 'br'"),
    ("gzip", HTML, "corrupt gzip: no gzip header"),
])
def test_an_undecodable_page_is_kept_as_sent_without_links_and_says_why(encoding, body, why):
    page, requests = parse_page(_page(body, encoding), "beam-crawler")
    assert requests == [] and page.title is None and page.outlinks == ()
    assert page.fetch.body == body
    assert page.fetch.detail == f"{UNDECODED}: {why}"


def test_every_decoded_page_gets_its_content_noindex_pages_too():
    page, _ = parse_page(_page(HTML), "beam-crawler")
    assert page.noindex and page.content is not None
    assert page.content.text == "A B" and page.content.word_count == 2
    assert [(link.url, link.anchor) for link in page.content.outlinks] == [
        ("https://site.example/docs/a.html", "A"), ("https://site.example/b", "B")]
    assert page.content.text_digest and page.content.signature == b""  # 2 words: no shingle


def test_a_nofollow_page_keeps_its_link_graph_out_of_the_frontier_only():
    body = HTML.replace(b'content="noindex"', b'content="nofollow"')
    page, requests = parse_page(_page(body), "beam-crawler")
    assert page.nofollow and requests == [] and page.outlinks == ()
    assert page.content is not None and len(page.content.outlinks) == 2


def test_an_x_robots_tag_noindex_page_has_content_and_the_header_language():
    body = (b"<html><body><p>Un deux trois quatre cinq six.</p>"
            b'<a href="/x" rel="nofollow">x</a></body></html>')
    result = dataclasses.replace(_page(body), headers=(
        ("Content-Type", "text/html"), ("X-Robots-Tag", "noindex"),
        ("Content-Language", "fr")))
    page, requests = parse_page(result, "beam-crawler")
    assert page.noindex and requests == []
    assert page.content is not None and page.content.lang == "fr"
    assert page.content.word_count == 7 and len(page.content.signature) == 512
    assert parse_page(result, "beam-crawler", sign=False)[0].content.signature == b""


def test_an_undecodable_page_has_no_content():
    page, _ = parse_page(_page(HTML, "gzip"), "beam-crawler")
    assert UNDECODED in page.fetch.detail and page.content is None


# -- extract: the whole step, with the crawl's scope ----------------------------------------------


def _html_result(url: str, body: bytes, depth: int = 1, **kw) -> FetchResult:
    return FetchResult(CrawlRequest(url, depth=depth), "a.example", 1.0, url, status=200,
                       content_type="text/html", body=body, content_length=len(body), **kw)


def test_extract_keeps_links_in_scope_and_trims_the_pages_outlinks():
    body = (b'<a href="/x">x</a><a href="https://b.a.example/y">y</a>'
            b'<a href="https://other.example/z">z</a>')
    url = "https://a.example/"
    every = extract(_html_result(url, body), "beam-crawler")
    assert [r.url for r in every.discovered.links] == [
        "https://a.example/x", "https://b.a.example/y", "https://other.example/z"]
    host = extract(_html_result(url, body), "beam-crawler", scope=SCOPE_HOST)
    assert [r.url for r in host.discovered.links] == ["https://a.example/x"]
    assert host.out_of_scope == 2 and host.discovered.item.outlinks == ("https://a.example/x",)
    domain = extract(_html_result(url, body), "beam-crawler", scope=SCOPE_DOMAIN)
    assert domain.out_of_scope == 1 and len(domain.discovered.links) == 2


def test_a_seeds_redirect_is_followed_out_of_host_scope_and_a_pages_is_not():
    seed = FetchResult(CrawlRequest("http://a.example/", depth=0), "a.example", 1.0,
                       "http://a.example/", status=301, redirect_to="https://www.a.example/",
                       outcome="redirect")
    moved = extract(seed, "beam-crawler", scope=SCOPE_HOST)
    assert [(r.url, r.depth) for r in moved.discovered.links] == [("https://www.a.example/", 0)]
    deeper = dataclasses.replace(seed, request=CrawlRequest("http://a.example/p", depth=2))
    assert extract(deeper, "beam-crawler", scope=SCOPE_HOST).discovered.links == ()
