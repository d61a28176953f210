"""Tests for transforms.core.page_content on real-world-shaped HTML: previews (Open Graph,
description, language), main text without boilerplate, anchors, caps, digests, signatures."""

from __future__ import annotations

import pytest

from transforms.core.digests import payload_digest
from transforms.core.links import MAX_ANCHOR_CHARS, parse_html
from transforms.core.minhash import SIGNATURE_BYTES, estimated_jaccard, text_signature
from transforms.core.page_content import (
    MAX_OUTLINKS,
    MAX_PREVIEW_CHARS,
    MAX_REL_CHARS,
    MAX_TEXT_CHARS,
    MAX_URL_CHARS,
    cap_text,
    declared_language,
    language_tag,
    main_text,
    page_content,
)
from transforms.core.records import OutLink, PageContent

URL = "https://news.example.com/2024/05/rain.html"

# A news article as CMSs write them: Open Graph and Twitter tags, a cookie banner, a header with
# the site navigation, an ARIA search form, a sidebar, an off-screen menu, scripts holding
# markup and JSON-LD, a share bar, a footer, and text split across inline elements.
ARTICLE = b"""<!DOCTYPE html>
<html lang="en-GB" class="no-js">
<head>
<meta charset="utf-8">
<title>Rain expected over the weekend | Example News</title>
<meta name="description" content="  Forecasters expect heavy
   rain across the north.  ">
<meta property="og:title" content="Rain expected over the weekend">
<meta property="og:description" content="Heavy rain in the north.">
<meta property="og:image" content="/media/rain.jpg">
<meta property="og:type" content="article">
<meta property="og:site_name" content="Example News">
<meta name="twitter:card" content="summary_large_image">
<script type="application/ld+json">{"@type": "NewsArticle", "headline": "JSON-LD"}</script>
<style>.x { content: "style text"; }</style>
</head>
<body>
<div id="cookie" role="dialog" aria-hidden="true">We use cookies. <button>Accept</button></div>
<header class="site-header">
  <a href="/"><img src="/logo.svg" alt="Example News home"></a>
  <nav aria-label="Main"><ul>
    <li><a href="/world/">World</a></li><li><a href="/weather/">Weather</a></li>
  </ul></nav>
</header>
<div role="search"><form action="/search"><input name="q"><button>Search</button></form></div>
<main>
  <article>
    <h1>Rain expected over the <em>weekend</em></h1>
    <p>Forecasters say <a href="https://weather.example.org/forecast?city=leeds">heavy
       rain</a> will reach the north on Saturday.</p>
    <p>Rivers   may rise.<br>Residents should check the
       <a href="/flood-warnings" rel="NoFollow UGC">flood <b>warnings</b></a>.</p>
    <noscript>Enable JavaScript to see the map.</noscript>
    <svg><text>svg label</text></svg>
    <template><p>template text</p></template>
    <iframe src="/embed/map"></iframe>
    <select><option>Leeds</option></select>
    <div class="share" role="menu"><a href="https://social.example/share">Share</a></div>
  </article>
  <aside><h2>Most read</h2><a href="/popular">Popular story</a></aside>
  <div hidden>hidden text</div>
</main>
<div class="offcanvas" role="navigation">Sections</div>
<div role="contentinfo">Legal footer</div>
<footer><p>&copy; Example News</p><a href="/privacy">Privacy</a></footer>
<script>document.write("<p>script text</p>");</script>
</body>
</html>
"""
ARTICLE_TEXT = ("Rain expected over the weekend Forecasters say heavy rain will reach the "
                "north on Saturday. Rivers may rise. Residents should check the flood "
                "warnings .")


def _content(body: bytes, url: str = URL, headers: tuple[tuple[str, str], ...] = (),
             **kwargs: bool) -> PageContent:
    info, tree = parse_html(body, url, "text/html")
    return page_content(info, tree, headers, **kwargs)


def test_article_preview_fields():
    content = _content(ARTICLE)
    assert content.description == "Forecasters expect heavy rain across the north."
    assert content.og_title == "Rain expected over the weekend"
    assert content.og_description == "Heavy rain in the north."
    assert content.og_image == "https://news.example.com/media/rain.jpg"
    assert content.og_type == "article"
    assert content.og_site_name == "Example News"
    assert content.lang == "en-GB"


def test_article_main_text_has_no_boilerplate():
    content = _content(ARTICLE)
    assert content.text == ARTICLE_TEXT
    assert content.word_count == len(ARTICLE_TEXT.split()) and not content.text_truncated
    for chrome in ("cookies", "Accept", "World", "Search", "Share", "Most read", "hidden text",
                   "Sections", "Legal footer", "Example News", "Privacy", "script text",
                   "style text", "JSON-LD", "svg label", "template text", "Enable JavaScript",
                   "Leeds"):
        assert chrome not in content.text, chrome


def test_article_outlinks_keep_every_link_with_anchor_and_rel_even_in_boilerplate():
    content = _content(ARTICLE)
    assert content.outlinks == (
        OutLink("https://news.example.com/", "Example News home"),
        OutLink("https://news.example.com/world/", "World"),
        OutLink("https://news.example.com/weather/", "Weather"),
        OutLink("https://weather.example.org/forecast?city=leeds", "heavy rain"),
        OutLink("https://news.example.com/flood-warnings", "flood warnings", "nofollow ugc"),
        OutLink("https://social.example/share", "Share"),
        OutLink("https://news.example.com/popular", "Popular story"),
        OutLink("https://news.example.com/privacy", "Privacy"),
    )


def test_article_digest_and_signature_are_of_the_main_text():
    content = _content(ARTICLE)
    assert content.text_digest == payload_digest(ARTICLE_TEXT.encode("utf-8"))
    assert content.signature == text_signature(ARTICLE_TEXT)
    assert len(content.signature) == SIGNATURE_BYTES
    assert _content(ARTICLE, sign=False).signature == b""


def test_open_graph_forms_seen_in_the_wild():
    page = b"""<head>
    <meta property="og:title" content="   ">
    <meta name="og:title" content="From a name attribute">
    <meta property="og:title" content="Second title, ignored">
    <meta property="OG:Type" content="website">
    <meta name="description" property="og:description" content="Both attributes">
    <meta property="og:image" content="javascript:alert(1)">
    <meta property="og:image" content="//cdn.example.net/a b.png">
    <meta property="og:site_name">
    </head>"""
    content = _content(page, "http://site.example/dir/")
    assert content.og_title == "From a name attribute"
    assert content.og_type == "website"
    assert content.description == content.og_description == "Both attributes"
    assert content.og_image == "http://cdn.example.net/a%20b.png"
    assert content.og_site_name is None


def test_a_page_without_preview_tags_has_none():
    content = _content(b"<html><body><p>Just text here.</p></body></html>")
    assert (content.description, content.og_title, content.og_description, content.og_image,
            content.og_type, content.og_site_name, content.lang) == (None,) * 7
    assert content.text == "Just text here." and content.word_count == 3


def test_og_image_is_resolved_against_base_href():
    page = (b'<head><base href="https://cdn.example.com/sub/">'
            b'<meta property="og:image" content="img/card.png"></head>')
    assert _content(page).og_image == "https://cdn.example.com/sub/img/card.png"


@pytest.mark.parametrize("html_lang, content_language, expected", [
    ('lang="en"', None, "en"),
    ('lang="en-US"', None, "en-US"),
    ('lang="EN-us"', None, "en-US"),
    ('lang="en_GB"', None, "en-GB"),
    ('lang="zh-hant-tw"', None, "zh-Hant-TW"),
    ('lang=" de "', "fr", "de"),  # the document's own declaration wins over the header
    ("", "fr-CA, en", "fr-CA"),
    ("", "DE", "de"),
    ('lang=""', "it", "it"),  # lang="" says "unknown": the header is better than nothing
    ('lang="{{ page.lang }}"', "es", "es"),  # an unrendered template placeholder
    ('xml:lang="pt-BR"', None, "pt-BR"),  # XHTML
    ("", None, None),
    ('lang="English (US)"', "not a tag!", None),
])
def test_language_variants(html_lang, content_language, expected):
    page = f"<html {html_lang}><body><p>Hello</p></body></html>".encode()
    headers = (("Content-Language", content_language),) if content_language else ()
    assert _content(page, headers=headers).lang == expected


def test_language_tag_rules():
    assert language_tag("sr-latn-rs") == "sr-Latn-RS"
    assert language_tag("en-x-us") == "en-x-us"  # private-use subtags are not regions
    assert language_tag("es-419") == "es-419"
    assert language_tag("a" * 9) is None
    assert language_tag("en-" + "-".join(["abcdefgh"] * 5)) is None  # longer than a real tag
    assert declared_language(None, " ja , en") == "ja"


@pytest.mark.parametrize("chrome", [
    '<div role="navigation">chrome</div>',
    '<div role="Banner">chrome</div>',
    '<div role="search menu">chrome</div>',
    '<ul role="menubar"><li>chrome</li></ul>',
    '<section role="complementary">chrome</section>',
    '<div aria-hidden="TRUE">chrome</div>',
    "<p hidden>chrome</p>",
    '<p hidden="hidden">chrome</p>',
    "<dialog open>chrome</dialog>",
    "<button>chrome</button>",
    "<canvas>chrome</canvas>",
    "<object>chrome</object>",
    "<math><mi>chrome</mi></math>",
    "<nav><div><p>chrome</p></div></nav>",
])
def test_boilerplate_is_removed(chrome):
    page = f"<body><p>Main words.</p>{chrome}<p>More words.</p></body>".encode()
    assert _content(page).text == "Main words. More words."


def test_what_is_not_boilerplate_stays():
    page = (b'<body><div role="main"><p>Main</p></div><div aria-hidden="false">visible</div>'
            b'<div role="article">article</div><div class="sidebar">sidebar div</div>'
            b"<table><tr><td>cell</td><td>next</td></tr></table>"
            b"<details><summary>More</summary>folded</details></body>")
    # Chrome written as plain divs stays: only semantic boilerplate is recognized.
    assert _content(page).text == "Main visible article sidebar div cell next More folded"


def test_broken_markup_is_repaired_like_a_browser_does():
    page = (b"<html><head><title>Broken</title><body><div class=content><p>First <b>bold"
            b" paragraph<p>Second paragraph</div></div></div><span>stray closers"
            b"<a href=/one title=unquoted>one <i>link</a> after<nav><a href=two>menu"
            b"</body></html><p>after html")
    content = _content(page, "https://s.example/x/")
    assert content.text == ("First bold paragraph Second paragraph stray closers one link "
                            "after")
    assert content.outlinks == (OutLink("https://s.example/one", "one link"),
                                # the unclosed nav and link take in the rest of the page
                                OutLink("https://s.example/x/two", "menu after html"))


def test_unclosed_script_or_comment_swallows_the_rest_but_never_raises():
    assert _content(b"<p>before</p><script>var a = '<p>x</p>';").text == "before"
    assert _content(b"<p>before</p><!-- <p>never closed").text == "before"
    assert _content(b"").text == "" and _content(b"").word_count == 0


def test_anchor_text_forms():
    long_anchor = "word " * 100
    page = f"""<body>
    <a href="/logo"><img src="/l.png" alt=" Site   logo "></a>
    <a href="/pic"><img src="/p.png"></a>
    <a href="/both"><img src="/b.png" alt="ignored">Text wins</a>
    <a href="/nested"><span><b>Deep</b> <i>ly</i></span>
        nested</a>
    <a href="/long">{long_anchor}</a>
    <map><area href="/region" alt="North  region"><area href="/noalt"></map>
    <a href="/x" rel=" NoFollow   UGC ">x</a>
    <a href="/x">x</a><a href="/x">x</a><a href="/x">other anchor</a>
    <a href="/entities">Caf&eacute; &amp; bar</a>
    <a href="/card"><div>Card title</div><div>Card subtitle</div></a>
    </body>""".encode()
    links = _content(page, "https://s.example/").outlinks
    assert [(link.url.rsplit("/", 1)[1], link.anchor, link.rel) for link in links] == [
        ("logo", "Site logo", ""), ("pic", "", ""), ("both", "Text wins", ""),
        ("nested", "Deep ly nested", ""),
        ("long", long_anchor.strip()[:MAX_ANCHOR_CHARS], ""),
        ("region", "North region", ""), ("noalt", "", ""),
        ("x", "x", "nofollow ugc"), ("x", "x", ""), ("x", "other anchor", ""),
        ("entities", "Caf\u00e9 & bar", ""), ("card", "Card title Card subtitle", ""),
    ]
    assert len(links[4].anchor) == MAX_ANCHOR_CHARS


def test_text_is_capped_at_a_word_boundary_but_counted_and_digested_whole():
    words = [f"w{i}" for i in range(20_000)]  # ~118,000 characters
    whole = " ".join(words)
    content = _content(f"<body><p>{whole}</p></body>".encode())
    assert content.text_truncated and len(content.text) <= MAX_TEXT_CHARS
    assert whole.startswith(content.text + " ")  # no word is cut in half
    assert content.word_count == 20_000
    assert content.text_digest == payload_digest(whole.encode())
    assert content.signature == text_signature(content.text)  # signed as kept


def test_cap_text_edges():
    assert cap_text("ab cd", 5) == ("ab cd", False)
    assert cap_text("ab cd ef", 5) == ("ab cd", True)
    assert cap_text("ab cdef", 5) == ("ab", True)
    assert cap_text("abcdefgh", 5) == ("abcde", True)  # one huge "word" is cut where it must


def test_outlinks_are_capped_and_overlong_urls_left_out():
    links = "".join(f'<a href="/p{i}">page {i}</a>' for i in range(MAX_OUTLINKS + 50))
    long_url = "/" + "a" * MAX_URL_CHARS
    page = (f'<body><a href="{long_url}">long</a><a href="/r" rel="{"x " * 100}">r</a>'
            f"{links}</body>").encode()
    outlinks = _content(page, "https://s.example/").outlinks
    assert len(outlinks) == MAX_OUTLINKS
    assert outlinks[0].url == "https://s.example/r" and len(outlinks[0].rel) == MAX_REL_CHARS
    assert outlinks[1] == OutLink("https://s.example/p0", "page 0")
    assert all(len(link.url) <= MAX_URL_CHARS for link in outlinks)


def test_long_preview_values_are_capped():
    page = f'<meta name="description" content="{"d" * 5000}">'.encode()
    assert _content(page).description == "d" * MAX_PREVIEW_CHARS
    long_image = f'<meta property="og:image" content="/{"i" * MAX_URL_CHARS}">'.encode()
    assert _content(long_image).og_image is None


def test_equal_text_under_different_markup_has_equal_digest_and_signature():
    plain = b"<body><p>The quick brown fox jumps over the lazy dog.</p></body>"
    dressed = b"""<html lang=en><head><title>Other title</title><style>p{}</style></head>
    <body><header><nav><a href=/>Home</a></nav></header>
    <div class="x">  The <b>quick</b>
        brown\tfox&nbsp;jumps <span>over</span> the lazy dog.</div>
    <footer>Footer</footer><script>x()</script></body></html>"""
    a, b = _content(plain), _content(dressed, "https://other.example/")
    assert a.text == b.text and a.text_digest == b.text_digest != ""
    assert a.signature == b.signature and estimated_jaccard(a.signature, b.signature) == 1.0
    c = _content(b"<body><p>The quick brown fox jumps over the lazy cat.</p></body>")
    assert c.text_digest != a.text_digest and c.signature != a.signature


def test_a_page_without_words_has_no_digest_or_signature():
    content = _content(b"<body><nav>Only navigation</nav><script>x()</script></body>")
    assert content.text == "" and content.word_count == 0
    assert content.text_digest == "" and content.signature == b""
    assert _content(b"<p>four words only here</p>").signature == b""  # fewer than 5 words


def test_main_text_changes_the_tree_so_it_comes_after_the_walk():
    info, tree = parse_html(b"<body><nav><a href=/n>Nav</a></nav><p>Body</p></body>",
                            "https://s.example/")
    assert main_text(tree) == "Body"
    assert tree.css_first("nav") is None  # removed from the very tree the walk read
    assert [link.anchor for link in info.outlinks] == ["Nav"]
