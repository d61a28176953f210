"""Tests for transforms.core.links: decoding, link resolution, title and robots extraction."""

from __future__ import annotations

import codecs
import random

import pytest

from transforms.core.links import (
    HtmlInfo,
    decode_html,
    extract_html,
    is_html,
    resolve_href,
)
from transforms.core.urls import InvalidUrl, canonicalize_url

PAGE_URL = "https://www.example.com/blog/2024/post.html"

# A news-site article page, shaped like real ones: uppercase markup from an old CMS, nested
# navigation, scripts holding markup-like strings, an image map, an iframe, social links
# marked nofollow, and a duplicate link to the home page.
ARTICLE_PAGE = b"""<!DOCTYPE html>
<HTML lang="en">
<HEAD>
  <META charset="utf-8">
  <TITLE>
      Rain expected
      over   the weekend | Example News
  </TITLE>
  <meta name="viewport" content="width=device-width">
  <meta name="Robots" content="NOARCHIVE, Max-Snippet:50">
  <LINK REL="stylesheet" HREF="/static/site.css">
  <link rel="shortcut icon" href="/favicon.ico">
  <link rel="preload" href="/static/font.woff2" as="font">
  <link rel="dns-prefetch" href="//cdn.example.net">
  <link rel="alternate stylesheet" href="/static/contrast.css" title="High contrast">
  <link rel="canonical" href="/blog/2024/post.html">
  <link rel="alternate" hreflang="fr" href="https://fr.example.com/blog/2024/post.html">
  <link rel="next" href="post-2.html">
  <script>document.write('<a href="/from-script">no</a>');</script>
</HEAD>
<BODY class="article">
  <header>
    <nav><ul>
      <li><A HREF="/">Home</A></li>
      <li><a href="/world/"><span>World <b>news</b></span></a></li>
      <li><a href="../archive/">Archive</a></li>
      <li><a href="./related.html">Related</a></li>
      <li><a href="comments">Comments</a></li>
      <li><a href="//static.example.org/about">About</a></li>
    </ul></nav>
  </header>
  <main>
    <p>Forecasters say <a href="https://weather.example.org/forecast?city=paris&amp;d=3">rain
    </a> will <a href="#details">continue</a>.</p>
    <img src="/img/map.png" usemap="#m">
    <map name="m"><AREA shape="rect" coords="0,0,10,10" HREF="/regions/north"></map>
    <iframe src="/embed/video/42"></iframe>
    <p><a href="/" title="back home">Back to the home page</a></p>
    <p>Share: <a href="https://social.example.com/share?u=1" rel="nofollow noopener">share</a>
       <a href="https://ads.example.com/click" REL="Sponsored NoFollow">ad</a></p>
    <svg><title>chart of rainfall</title><a href="/chart-source">src</a></svg>
  </main>
  <footer>
    <a href="mailto:news@example.com">Mail us</a>
    <a href="tel:+331234">Call</a>
    <a href="javascript:void(0)">Menu</a>
    <a href="data:text/plain,hi">Data</a>
    <a href="">Self</a>
    <a href="   ">Blank</a>
    <a>No href</a>
  </footer>
</BODY>
</HTML>
"""

# An old frameset page served as latin-1, with a base href to another directory.
FRAMESET_PAGE = """<html><head>
<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">
<title>Caf\u00e9 menu</title>
<base href="/menus/2023/">
</head>
<frameset cols="20%,80%">
  <frame src="left.html">
  <frame src="main.html#top">
</frameset>
</html>""".encode("latin-1")


def test_is_html_accepts_html_media_types_only():
    assert is_html("text/html")
    assert is_html("Text/HTML; charset=UTF-8")
    assert is_html(" application/xhtml+xml ;q=1")
    assert not is_html("application/json")
    assert not is_html("text/plain; charset=utf-8")
    assert not is_html("")
    assert not is_html(None)


def test_article_title_is_stripped_and_collapsed():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    assert info.title == "Rain expected over the weekend | Example News"


def test_article_links_are_absolute_in_document_order_and_unique():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    assert info.links == (
        "https://www.example.com/blog/2024/post.html",  # canonical
        "https://fr.example.com/blog/2024/post.html",  # alternate
        "https://www.example.com/blog/2024/post-2.html",  # next
        "https://www.example.com/",
        "https://www.example.com/world/",
        "https://www.example.com/blog/archive/",
        "https://www.example.com/blog/2024/related.html",
        "https://www.example.com/blog/2024/comments",
        "https://static.example.org/about",
        "https://weather.example.org/forecast?city=paris&d=3",
        "https://www.example.com/regions/north",
        "https://www.example.com/embed/video/42",
        "https://www.example.com/chart-source",
    )


def test_article_nofollow_links_are_kept_apart():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    assert info.nofollow_links == (
        "https://social.example.com/share?u=1",
        "https://ads.example.com/click",
    )
    assert not set(info.nofollow_links) & set(info.links)


def test_article_skips_subresources_scripts_and_non_http_links():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    everything = " ".join(info.links + info.nofollow_links)
    for absent in ("site.css", "favicon", "font.woff2", "cdn.example.net", "contrast.css",
                   "from-script", "mailto:", "tel:", "javascript:", "data:", "map.png"):
        assert absent not in everything


def test_article_canonical_robots_and_base():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    assert info.canonical == "https://www.example.com/blog/2024/post.html"
    assert info.meta_robots == ("noarchive", "max-snippet:50")
    assert info.base_url == PAGE_URL


def test_frameset_page_latin1_meta_charset_and_relative_base():
    info = extract_html(FRAMESET_PAGE, "http://old.example.com/index.html")
    assert info.title == "Caf\u00e9 menu"
    assert info.base_url == "http://old.example.com/menus/2023/"
    assert info.links == (
        "http://old.example.com/menus/2023/left.html",
        "http://old.example.com/menus/2023/main.html#top",
    )


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("../x", "http://h.example/a/x"),
        ("./y", "http://h.example/a/b/y"),
        ("z", "http://h.example/a/b/z"),
        ("/abs", "http://h.example/abs"),
        ("/abs/../up", "http://h.example/up"),
        ("//other.host/p", "http://other.host/p"),
        ("?q=1", "http://h.example/a/b/c.html?q=1"),
        ("../../../../too-far", "http://h.example/too-far"),
        ("HTTPS://Upper.Example/Path", "HTTPS://Upper.Example/Path"),
        ("  /padded  ", "http://h.example/padded"),
        ("/split\n/across\tlines", "http://h.example/split/acrosslines"),
        ("/with space", "http://h.example/with%20space"),
        ("\\\\back.slash\\p", "http://back.slash/p"),
        ("/page#section", "http://h.example/page#section"),
        ("http://user:pw@[::1]:8080/x", "http://user:pw@[::1]:8080/x"),
    ],
)
def test_resolve_href_resolves_like_a_browser(href, expected):
    assert resolve_href(href, "http://h.example/a/b/c.html") == expected


@pytest.mark.parametrize(
    "href",
    ["", "   ", "#", "#top", "javascript:alert(1)", " JavaScript:x", "mailto:a@b.example",
     "tel:+1", "data:text/html,hi", "ftp://", "gopher://h.example/x", "http://", "http:///nohost",
     "http://[::1/broken", "//[bad", "about:blank"],
)
def test_resolve_href_rejects_what_is_not_a_crawlable_link(href):
    assert resolve_href(href, "http://h.example/a/b/c.html") is None


def test_resolve_href_keeps_ftp_links_the_crawler_can_fetch():
    assert resolve_href("ftp://files.example/x", "http://h.example/") == "ftp://files.example/x"
    assert resolve_href("FTP://files.example/a b", "http://h.example/") == (
        "FTP://files.example/a%20b")
    assert resolve_href("/x", "ftp://files.example/dir/") == "ftp://files.example/x"


def test_resolve_href_needs_an_absolute_base_for_relative_links():
    assert resolve_href("/x", "mailto:a@b.example") is None
    assert resolve_href("//h.example/x", "") is None
    assert resolve_href("https://h.example/x", "") == "https://h.example/x"


def test_resolve_href_fast_paths_agree_with_the_canonicalizers_resolution():
    """One resolver: the fast paths give what the canonicalizer's RFC 3986 resolution gives
    (tests/unit/core/test_urls_rfc3986.py checks that one against the RFC's examples)."""
    rng = random.Random(7)
    bases = ["https://a.example/d/e/f.html", "http://b.example:8080", "https://c.example/?q#f",
             "https://d.example/g//h/i?j"]
    pieces = ["", "x", "y.html", "..", ".", "a b", "%41", "?k=v", "#frag", ";p", "/", "//"]
    for _ in range(20000):
        href = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 5)))
        href = rng.choice(["", "/", "//h.example/", "https://i.example/"]) + href
        base = rng.choice(bases)
        got = resolve_href(href, base)
        if got is None:
            continue
        assert _canonical_or_none(got) == _canonical_or_none(href.replace(" ", "%20"), base), (
            href, base)


def _canonical_or_none(url: str, base: str | None = None) -> str | None:
    try:
        return canonicalize_url(url, base, remove_params=())
    except InvalidUrl:
        return None


def test_base_href_absolute_applies_to_all_links_even_earlier_ones():
    page = b"""<html><head><link rel="next" href="p2"><base href="https://cdn.example/root/">
    <base href="https://ignored.example/"></head><body><a href="a">a</a><a href="/b">b</a>
    </body></html>"""
    info = extract_html(page, "https://site.example/dir/page")
    assert info.base_url == "https://cdn.example/root/"
    assert info.links == (
        "https://cdn.example/root/p2", "https://cdn.example/root/a", "https://cdn.example/b")


def test_base_href_that_is_not_http_is_ignored():
    page = b'<base href="javascript:void(0)"><a href="x">x</a>'
    info = extract_html(page, "https://site.example/dir/page")
    assert info.base_url == "https://site.example/dir/page"
    assert info.links == ("https://site.example/dir/x",)


def test_fragments_are_kept_but_fragment_only_links_dropped():
    page = b'<a href="#a">a</a><a href="/p#one">1</a><a href="/p#two">2</a><a href="/p#one">1</a>'
    info = extract_html(page, "https://site.example/")
    assert info.links == ("https://site.example/p#one", "https://site.example/p#two")


def test_link_followed_and_nofollow_is_followed():
    page = b'<a href="/x" rel="nofollow">1</a><a href="/x">2</a><a href="/y" rel="ugc nofollow">'
    info = extract_html(page, "https://site.example/")
    assert info.links == ("https://site.example/x",)
    assert info.nofollow_links == ("https://site.example/y",)


def test_link_elements_without_rel_are_followed_and_unknown_rels_are_not():
    page = (b'<link href="/norel"><link rel="" href="/emptyrel"><link rel="author" href="/me">'
            b'<link rel="manifest" href="/m.json"><link rel="prev" href="/p1">')
    info = extract_html(page, "https://site.example/")
    assert info.links == (
        "https://site.example/norel", "https://site.example/emptyrel", "https://site.example/p1")


def test_meta_robots_directives_merge_and_tolerate_spaces():
    page = (b'<meta name="robots" content="NoIndex NoFollow"><meta name="ROBOTS" '
            b'content="noindex, unavailable_after: 25 Jun 2030 15:00:00 PST">'
            b'<meta name="googlebot" content="nosnippet"><meta name="robots">')
    info = extract_html(page, "https://site.example/")
    assert info.meta_robots == (
        "noindex", "nofollow", "unavailable_after: 25 jun 2030 15:00:00 pst")


def test_missing_and_blank_titles_are_none():
    assert extract_html(b"<p>no title</p>", "https://s.example/").title is None
    assert extract_html(b"<title> \n </title>", "https://s.example/").title is None


def test_svg_title_is_not_the_document_title():
    page = b"<body><svg><title>icon</title></svg><title>Real</title></body>"
    assert extract_html(page, "https://s.example/").title == "Real"


def test_broken_unclosed_html_still_yields_links():
    page = (b"<html><head><title>Broken <b>page</title><body><div><p><a href='/one'>one"
            b"<a href=/two>two<table><tr><td><a href=\"/three\"   >three</td></div"
            b"<a href='/four")
    info = extract_html(page, "https://s.example/")
    assert info.title == "Broken <b>page"
    assert info.links[:3] == (
        "https://s.example/one", "https://s.example/two", "https://s.example/three")


def test_empty_body_gives_empty_info():
    assert extract_html(b"", "https://s.example/x") == HtmlInfo(
        title=None, links=(), nofollow_links=(), base_url="https://s.example/x",
        canonical=None, meta_robots=())


def test_canonical_is_resolved_and_only_http():
    page = b'<link rel="canonical" href="mailto:x@y"><link rel="Canonical" href="../c">'
    info = extract_html(page, "https://s.example/a/b")
    # The first canonical element counts; an unusable one gives None rather than a later one.
    assert info.canonical is None
    page = b'<link rel="canonical" href="../c">'
    assert extract_html(page, "https://s.example/a/b").canonical == "https://s.example/c"


LATIN1_PAGE = "<html><head><title>R\u00e9sum\u00e9 \u2013 caf\u00e9</title></head></html>"


def test_decode_uses_header_charset():
    body = LATIN1_PAGE.replace("\u2013", "-").encode("latin-1")
    assert extract_html(body, "https://s.example/", "text/html; charset=iso-8859-1").title == (
        "R\u00e9sum\u00e9 - caf\u00e9")
    assert "R\u00e9sum\u00e9" in decode_html(body, 'text/html; charset="ISO-8859-1"')


def test_decode_latin1_label_uses_windows_1252_like_browsers():
    body = LATIN1_PAGE.encode("cp1252")  # the en dash is byte 0x96
    assert "\u2013" in decode_html(body, "text/html; charset=latin1")


def test_decode_header_beats_meta():
    body = b'<meta charset="utf-8"><title>caf\xe9</title>'
    assert "caf\u00e9" in decode_html(body, "text/html; charset=windows-1252")


def test_decode_meta_charset_when_header_has_none():
    body = b'<meta charset="windows-1252"><title>caf\xe9</title>'
    assert "caf\u00e9" in decode_html(body, "text/html")
    http_equiv = b'<META HTTP-EQUIV="content-type" CONTENT="text/html;charset=koi8-r">\xc1'
    assert decode_html(http_equiv, None).endswith("\u0430")


def test_decode_meta_after_first_4kb_is_ignored():
    body = b"<!--" + b"x" * 5000 + b'--><meta charset="windows-1252">caf\xe9'
    assert decode_html(body, None).endswith("caf\ufffd")


def test_decode_bom_wins_over_header_and_is_removed():
    body = codecs.BOM_UTF8 + "<title>caf\u00e9</title>".encode()
    text = decode_html(body, "text/html; charset=iso-8859-1")
    assert text == "<title>caf\u00e9</title>"
    utf16 = codecs.BOM_UTF16_LE + "<title>\u65e5\u672c</title>".encode("utf-16-le")
    assert extract_html(utf16, "https://s.example/").title == "\u65e5\u672c"


def test_decode_unknown_or_unusable_charset_falls_back_to_utf8():
    body = "caf\u00e9".encode()
    for label in ("x-no-such-charset", "base64", "rot13", "undefined", "utf-7", "idna", "a\x00b"):
        assert decode_html(body, f"text/html; charset={label}") == "caf\u00e9", label


def test_decode_meta_utf16_means_utf8():
    body = '<meta charset="utf-16"><p>caf\u00e9'.encode()
    assert decode_html(body, None).endswith("caf\u00e9")


def test_decode_invalid_bytes_are_replaced():
    assert decode_html(b"ok \xff\xfe\xc3", "text/html; charset=utf-8") == "ok \ufffd\ufffd\ufffd"


def test_extract_never_raises_on_random_bytes():
    rng = random.Random(1234)
    fragments = [b"<a href='", b"'>", b"<base href=", b"<title>", b"</title>", b"<meta charset=",
                 b"utf-16", b"\x00", b"\xff\xfe", b"<svg>", b"<frame src=", b"http://[", b"#",
                 b"<!--", b"<script>", b"&#0;", b"&#xD800;", b"\\", b" rel=nofollow>"]
    for i in range(400):
        if i % 2:
            body = rng.randbytes(rng.randint(0, 3000))
        else:
            body = b"".join(rng.choice(fragments) for _ in range(rng.randint(0, 80)))
        content_type = rng.choice([None, "text/html", "text/html; charset=utf-16",
                                   "text/html; charset=shift_jis", "text/html; charset=\x00"])
        url = rng.choice(["https://s.example/a/", "", "http://[::1]/", "not a url"])
        info = extract_html(body, url, content_type)
        assert isinstance(info, HtmlInfo)
        for link in info.links + info.nofollow_links:
            assert link.lower().startswith(("http://", "https://"))


def test_meta_names_keep_every_named_meta_in_document_order():
    page = (b'<head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
            b'<meta name=" ROBOTS " content="NoIndex"><meta name="robots" content="nofollow">'
            b'<meta name="Beam-Crawler" content="none"><meta name="googlebot">'
            b'<meta name="" content="nameless"><meta property="og:title" content="Title">'
            b'<meta name="description" content=""></head><body>'
            b'<meta name="robots" content="noarchive"></body>')
    info = extract_html(page, "https://s.example/")
    assert info.meta_names == (
        ("viewport", "width=device-width"), ("robots", "NoIndex"), ("robots", "nofollow"),
        ("beam-crawler", "none"), ("description", ""), ("robots", "noarchive"))
    assert info.meta_robots == ("noindex", "nofollow", "noarchive")


def test_article_meta_names():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    assert ("robots", "NOARCHIVE, Max-Snippet:50") in info.meta_names
    assert info.meta_names[0] == ("viewport", "width=device-width")


def test_article_outlinks_are_every_a_and_area_with_anchor_and_rel():
    info = extract_html(ARTICLE_PAGE, PAGE_URL, "text/html")
    by_url = {link.url: (link.anchor, link.rel) for link in info.outlinks}
    assert by_url["https://www.example.com/world/"] == ("World news", "")
    assert by_url["https://social.example.com/share?u=1"] == ("share", "nofollow noopener")
    assert by_url["https://ads.example.com/click"] == ("ad", "sponsored nofollow")
    assert by_url["https://www.example.com/regions/north"] == ("", "")  # an area without alt
    # The same URL with two anchors is two links of the graph; <link> and <iframe> are not.
    assert [link.anchor for link in info.outlinks if link.url == "https://www.example.com/"] == [
        "Home", "Back to the home page"]
    assert "https://www.example.com/embed/video/42" not in by_url
    assert "https://fr.example.com/blog/2024/post.html" not in by_url
    assert info.lang == "en" and info.description is None and info.open_graph == ()


def test_a_meta_with_name_and_property_is_read_once_for_each():
    page = (b'<meta name="description" property="og:description" content="Both">'
            b'<meta property="og:title" content=" T "><meta name="og:type" content="video">')
    info = extract_html(page, "https://s.example/")
    assert info.meta_names == (("description", "Both"), ("og:type", "video"))
    assert info.description == "Both"
    assert info.open_graph == (("og:description", "Both"), ("og:title", "T"),
                               ("og:type", "video"))
