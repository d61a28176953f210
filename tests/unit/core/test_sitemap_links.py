"""Sitemaps in the crawl: robots.txt -> sitemap requests, a fetched sitemap -> requests."""

from __future__ import annotations

import gzip

from transforms.core.extraction import read_sitemap
from transforms.core.records import (
    KIND_PAGE,
    KIND_SITEMAP,
    KIND_SITEMAP_CHILD,
    CrawlRequest,
    FetchResult,
)
from transforms.core.sitemap_links import robots_sitemap_requests, sitemap_outlinks
from transforms.core.sitemaps import parse_sitemap
from transforms.formats.messages import decode_requests, encode_requests

ROBOTS = "https://example.com/robots.txt"


def test_robots_sitemap_lines_become_sitemap_requests_once_each():
    requests = robots_sitemap_requests(
        ["https://example.com/sm.xml", "HTTPS://EXAMPLE.com/sm.xml", "not a url",
         "https://cdn.example.net/sitemaps/a.xml.gz"], ROBOTS, probe=True, priority=2)
    assert [(r.url, r.kind, r.via, r.priority) for r in requests] == [
        ("https://example.com/sm.xml", KIND_SITEMAP, ROBOTS, 2),
        ("https://cdn.example.net/sitemaps/a.xml.gz", KIND_SITEMAP, ROBOTS, 2)]


def test_sitemap_xml_is_probed_only_when_asked_and_nothing_is_named():
    assert robots_sitemap_requests([], ROBOTS, probe=False) == []
    (probe,) = robots_sitemap_requests([], "http://h.example:8080/robots.txt", probe=True)
    assert (probe.url, probe.kind, probe.via) == ("http://h.example:8080/sitemap.xml",
                                                  KIND_SITEMAP, None)
    named = robots_sitemap_requests(["https://example.com/s.xml"], ROBOTS, probe=True)
    assert [r.url for r in named] == ["https://example.com/s.xml"]


def _fetched(url: str, body: bytes, request: CrawlRequest | None = None,
             content_type: str = "application/xml",
             headers: tuple[tuple[str, str], ...] = ()) -> FetchResult:
    request = request or CrawlRequest(url, 0, 3, ROBOTS, kind=KIND_SITEMAP, via=ROBOTS)
    return FetchResult(request, "example.com", 0.0, url, status=200, content_type=content_type,
                       body=body, headers=headers)


URLSET = b"""<?xml version="1.0"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://example.com/docs/a</loc><priority>1.0</priority>
       <lastmod>2026-11-01</lastmod></url>
  <url><loc>https://example.com/docs/b#top</loc></url>
  <url><loc>https://example.com/other/c</loc><priority>0.1</priority></url>
  <url><loc>https://elsewhere.example/docs/d</loc></url>
</urlset>"""


def test_a_urlset_yields_pages_with_priority_and_lastmod_and_drops_what_is_out_of_scope():
    result = _fetched("https://example.com/docs/sitemap.xml", URLSET,
                      CrawlRequest("https://example.com/docs/sitemap.xml", 0, 3, None,
                                   kind=KIND_SITEMAP))
    y = sitemap_outlinks(result, parse_sitemap(URLSET, result.final_url))
    assert [(r.url, r.kind, r.depth, r.priority, r.discovered_from) for r in y.requests] == [
        ("https://example.com/docs/a", KIND_PAGE, 1, 8, result.final_url),
        ("https://example.com/docs/b", KIND_PAGE, 1, 3, result.final_url)]
    assert y.requests[0].lastmod == 1793491200.0 and y.requests[1].lastmod is None
    assert y.out_of_scope == 2  # /other/ is outside /docs/, elsewhere.example another origin
    assert y.detail == "sitemap urlset: 2 urls; 2 out of scope"


def test_a_robots_named_sitemap_may_list_its_whole_origin():
    result = _fetched("https://example.com/docs/sitemap.xml", URLSET)  # via robots.txt
    y = sitemap_outlinks(result, parse_sitemap(URLSET, result.final_url))
    assert {r.url for r in y.requests} == {"https://example.com/docs/a",
                                           "https://example.com/docs/b",
                                           "https://example.com/other/c"}
    assert y.out_of_scope == 1


INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://example.com/s1.xml.gz</loc></sitemap>
  <sitemap><loc>https://example.com/s2.txt</loc></sitemap>
  <sitemap><loc>https://evil.example/s3.xml</loc></sitemap>
</sitemapindex>"""


def test_an_index_yields_child_sitemaps_and_an_index_in_an_index_is_not_followed():
    result = _fetched("https://example.com/index.xml", INDEX)
    y = sitemap_outlinks(result, parse_sitemap(INDEX, result.final_url))
    assert [(r.url, r.kind, r.via, r.depth) for r in y.requests] == [
        ("https://example.com/s1.xml.gz", KIND_SITEMAP_CHILD, ROBOTS, 0),
        ("https://example.com/s2.txt", KIND_SITEMAP_CHILD, ROBOTS, 0)]
    assert y.out_of_scope == 1 and y.detail == "sitemap index: 2 sitemaps; 1 out of scope"
    child = CrawlRequest("https://example.com/s1.xml.gz", 0, 0, None, kind=KIND_SITEMAP_CHILD)
    nested = sitemap_outlinks(_fetched(child.url, INDEX, child),
                              parse_sitemap(INDEX, child.url))
    assert nested.requests == () and nested.nested_index_ignored
    assert "an index listed by an index: 2 sitemaps not followed" in nested.detail


def test_read_sitemap_undoes_content_coding_and_reads_gzip_files_and_text():
    text = b"https://example.com/t1\n\nhttps://example.com/t2\n"
    coded = _fetched("https://example.com/s.txt", gzip.compress(text), content_type="text/plain",
                     headers=(("Content-Encoding", "gzip"),))
    assert [r.url for r in read_sitemap(coded).requests] == ["https://example.com/t1",
                                                             "https://example.com/t2"]
    gz_file = _fetched("https://example.com/s.xml.gz", gzip.compress(URLSET),
                       content_type="application/gzip")
    assert len(read_sitemap(gz_file).requests) == 3
    html = _fetched("https://example.com/sitemap.xml", b"not found, sorry",
                    content_type="text/html")
    y = read_sitemap(html)
    assert y.requests == () and "an HTML page, not a sitemap" in y.detail


def test_sitemap_fields_survive_the_frontier_topic():
    requests = [CrawlRequest("https://example.com/s.xml", 0, 1, ROBOTS, kind=KIND_SITEMAP,
                             via=ROBOTS),
                CrawlRequest("https://example.com/a", 1, 6, "https://example.com/s.xml",
                             lastmod=1793491200.5),
                CrawlRequest("https://example.com/b")]
    assert decode_requests(encode_requests(requests)) == requests


def test_an_undecodable_sitemap_adds_nothing_and_its_row_says_why():
    # A server that gzips the whole body twice over (".xml.gz" gzipped again) is fine; a body
    # that says gzip and is not, or a coding we never asked for, is not read as "no URLs".
    twice = _fetched("https://example.com/s.xml.gz", gzip.compress(gzip.compress(URLSET)),
                     content_type="application/gzip", headers=(("Content-Encoding", "gzip"),))
    assert len(read_sitemap(twice).requests) == 3
    for encoding, body in (("gzip", URLSET), ("br", b"\x1b\x3a\x00")):
        y = read_sitemap(_fetched("https://example.com/s.xml", body,
                                  headers=(("Content-Encoding", encoding),)))
        assert y.requests == () and y.detail.startswith("body not decoded: "), y.detail
