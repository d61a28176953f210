"""Link, title and robots-directive extraction from fetched HTML pages.

Pure functions over bytes, with no Beam import, so that ``ExtractLinks`` stays a thin wrapper and
the rules here are tested with plain pytest. Parsing uses selectolax's Lexbor backend (an HTML5
tree builder, so broken markup is repaired the way a browser would repair it); selectolax 1.0
removed its older Modest backend.

The same walk collects what a page says for its preview (meta description, Open Graph
properties, ``<html lang>``) and every ``a``/``area`` link with its anchor text and ``rel``, for
the analysts; :func:`parse_html` also returns the parsed tree, so the main text
(``transforms.core.page_content``) is taken from the same parse.

What counts as a link:

* ``a[href]`` and ``area[href]``, followed unless their ``rel`` contains ``nofollow``;
* ``iframe[src]`` and ``frame[src]``, since framed documents are pages in their own right;
* ``link[href]`` only when it points at another document: a ``rel`` in :data:`LINK_RELS_FOLLOWED`
  (alternate, canonical, next, prev, ...) or no ``rel`` at all. Links to sub-resources
  (stylesheet, icon, preload, dns-prefetch, manifest, ...) are not pages and are never
  crawled; any token of :data:`LINK_RELS_IGNORED` excludes the element even when a followed
  token is also present (``rel="alternate stylesheet"`` is a stylesheet).

Every href is cleaned and resolved as a browser would (see :func:`resolve_href`) and only
absolute ``http``/``https``/``ftp`` URLs with a host are kept, which also drops ``javascript:``,
``mailto:``, ``tel:``, ``data:`` and the like. Fragments are kept: the caller canonicalizes.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple

from selectolax.lexbor import LexborHTMLParser, LexborNode

from transforms.core.charsets import decode_html
from transforms.core.records import OutLink
from transforms.core.urls import InvalidUrl, canonicalize_url

HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# rel tokens of <link> that name another document worth crawling.
LINK_RELS_FOLLOWED = frozenset({
    "alternate", "amphtml", "canonical", "first", "home", "index", "last", "next", "prev",
    "previous", "start", "up",
})
# rel tokens of <link> that name a sub-resource or an endpoint, never a page.
LINK_RELS_IGNORED = frozenset({
    "apple-touch-icon", "apple-touch-icon-precomposed", "apple-touch-startup-image",
    "dns-prefetch", "edituri", "icon", "manifest", "mask-icon", "modulepreload", "pingback",
    "preconnect", "prefetch", "preload", "prerender", "search", "shortcut", "stylesheet",
    "webmention", "wlwmanifest",
})

LINK_SCHEMES = frozenset({"http", "https", "ftp"})  # the schemes the crawler has fetchers for
# An http(s) or ftp URL with a non-empty host (userinfo and port allowed, IPv6 literals
# bracketed): the schemes the crawler has fetchers for.
_HTTP_AUTHORITY = re.compile(
    r"(?:https?|ftp)://(?:[^/?#]*@)?(?:[^/?#:@\[\]]+|\[[^/?#@\[\]]+\])(?::[^/?#]*)?(?:[/?#]|$)",
    re.IGNORECASE,
)
# meta[content], not meta[name], meta[property]: a node matching two selectors of a list is
# returned twice, and <meta name=x property=og:y> is common.
_SELECTOR = ("a[href], area[href], link[href], iframe[src], frame[src], base[href], "
             "meta[content], title")
OPEN_GRAPH = frozenset({"og:title", "og:description", "og:image", "og:type", "og:site_name"})
MAX_ANCHOR_CHARS = 200  # anchor text kept per link, after whitespace collapsing
_ANCHOR_SCAN = 8 * MAX_ANCHOR_CHARS  # raw characters read for it: an <a> may wrap a whole page

_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))
_NO_RELS: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HtmlInfo:
    """What a page says about itself and where it points.

    Attributes:
        title: the document title, stripped and whitespace-collapsed; None if absent or blank.
        links: absolute http(s) URLs to follow, in document order, each once; fragments kept.
        nofollow_links: URLs that only appear with ``rel=nofollow`` (disjoint from ``links``:
            a URL linked both ways is followed).
        base_url: the URL that relative links were resolved against.
        canonical: the absolute URL of the first ``<link rel=canonical>``; None if there is
            none or its href is not an http(s) URL.
        meta_robots: lowercased directives of ``<meta name=robots>`` in order, each once;
            honouring them (e.g. ``nofollow``) is the caller's decision.
        meta_names: ``(name, content)`` of every ``<meta name=... content=...>`` with a
            non-blank name, in document order; names stripped and lowercased, contents as
            written. All names are kept, not only ``robots``: a crawler-specific name
            (``<meta name="googlebot">``) can be any product token and only the caller knows
            its own (see ``transforms.core.robots_meta.page_directives``).
        description: the first non-blank ``<meta name=description>``, whitespace-collapsed.
        open_graph: ``(property, value)`` of the first non-blank value of each property of
            :data:`OPEN_GRAPH` (``<meta property>``, or ``<meta name>`` as some sites write it),
            whitespace-collapsed; ``og:image`` resolved against ``base_url`` (dropped if it is
            not an http(s) URL).
        lang: ``<html lang>`` (else ``xml:lang``) as written, stripped; None if absent or blank.
        outlinks: every ``a``/``area`` link, followed or not, in document order, each distinct
            (URL, anchor, rel) once: anchor text collapsed and cut at :data:`MAX_ANCHOR_CHARS`
            (an image-only link's from its ``img[alt]``, an area's from its ``alt``), rel tokens
            lowercased.
    """

    title: str | None
    links: tuple[str, ...]
    nofollow_links: tuple[str, ...]
    base_url: str
    canonical: str | None
    meta_robots: tuple[str, ...]
    meta_names: tuple[tuple[str, str], ...] = ()
    description: str | None = None
    open_graph: tuple[tuple[str, str], ...] = ()
    lang: str | None = None
    outlinks: tuple[OutLink, ...] = ()


class ParsedHtml(NamedTuple):
    """A page's :class:`HtmlInfo` and the tree it came from, for steps that read more of it."""

    info: HtmlInfo
    tree: LexborHTMLParser


def is_html(content_type: str | None) -> bool:
    """Tells whether a Content-Type header names an HTML document.

    Args:
        content_type: the header value, parameters and case as sent; None if absent.

    Returns:
        True for ``text/html`` and ``application/xhtml+xml``.
    """
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() in HTML_MEDIA_TYPES


def resolve_href(href: str, base: str) -> str | None:
    """Turns an attribute value into an absolute http(s) or ftp URL, as a browser would.

    Leading and trailing spaces and control characters are stripped, tabs and newlines inside
    are removed, backslashes count as slashes and inner spaces are percent-encoded (all as the
    WHATWG URL parser does for http URLs). Empty and fragment-only values point at the current
    page and give None, as do URLs of any other scheme and URLs without a host.

    Args:
        href: the raw attribute value.
        base: the absolute URL to resolve against.

    Returns:
        The absolute URL (fragment kept), or None if it is not a crawlable link.
    """
    cleaned = href.strip(_C0_AND_SPACE)
    if "\t" in cleaned or "\n" in cleaned or "\r" in cleaned:
        cleaned = cleaned.translate(_TAB_OR_NEWLINE)
    if not cleaned or cleaned[0] == "#":
        return None
    cleaned = cleaned.replace("\\", "/").replace(" ", "%20")
    # Fast paths for the common shapes, which resolve as RFC 3986 does at a fraction of the
    # cost; everything else is resolved by the canonicalizer, the crawler's one resolver.
    if _HTTP_AUTHORITY.match(cleaned):
        return cleaned
    if cleaned[:8].lower().startswith(("http://", "https://", "ftp://")):
        return None  # absolute but hostless ("http://"), which urljoin would make the base
    if cleaned[0] == "/" and "/." not in cleaned:
        origin = _split_origin(base)
        if origin is not None:
            if cleaned[1:2] != "/":
                return origin[1] + cleaned
            absolute = f"{origin[0]}:{cleaned}"
            return absolute if _HTTP_AUTHORITY.match(absolute) else None
    if (cleaned[0] not in "?./" and "/." not in cleaned and "//" not in cleaned
            and ":" not in cleaned.split("/", 1)[0]):
        # A plain relative path ("page.html", "sub/page.html?x=1"): the base's directory plus
        # the reference, as RFC 3986 resolves it (empty and dot segments take the long way).
        directory = _base_directory(base)
        if directory is not None:
            return directory + cleaned
    try:  # resolved and canonicalized in one step (fragment dropped); parameters kept
        return canonicalize_url(cleaned, base, allowed_schemes=LINK_SCHEMES, remove_params=())
    except InvalidUrl:  # e.g. an unterminated IPv6 literal: not a URL a browser would load
        return None


def extract_html(body: bytes, url: str, content_type: str | None = None) -> HtmlInfo:
    """Extracts the title, outlinks, robots directives and preview of an HTML page.

    Args:
        body: the raw (content-decoded) response body, any bytes.
        url: the page's final URL after redirects; the base when no ``<base href>`` applies.
        content_type: the response's Content-Type header, for its charset.

    Returns:
        The page's :class:`HtmlInfo`. Never raises: broken markup is repaired by the HTML5
        tree builder and unusable URLs are skipped.
    """
    return parse_html(body, url, content_type).info


def parse_html(body: bytes, url: str, content_type: str | None = None) -> ParsedHtml:
    """:func:`extract_html`, with the parsed tree: the main text is read from the same parse."""
    tree = LexborHTMLParser(decode_html(body, content_type))
    return ParsedHtml(_html_info(tree, url), tree)


def _html_info(tree: LexborHTMLParser, url: str) -> HtmlInfo:
    """The one walk over the nodes that matter (:data:`_SELECTOR`, in document order)."""
    nodes = tree.css(_SELECTOR)
    base_url = _base_url(nodes, url)

    title: str | None = None
    canonical: str | None = None
    canonical_seen = False
    followed: dict[str, None] = {}
    nofollow: dict[str, None] = {}
    robots: dict[str, None] = {}
    meta_names: list[tuple[str, str]] = []
    description: str | None = None
    open_graph: dict[str, str] = {}
    outlinks: dict[OutLink, None] = {}
    resolved: dict[str, str | None] = {}  # pages repeat their hrefs (menus at top and bottom)
    for node in nodes:
        tag = node.tag
        if tag == "title":
            if title is None and not _in_foreign_content(node):
                title = " ".join(node.text(deep=True).split()) or None
            continue
        if tag == "meta":
            attrs = node.attrs
            name = (attrs.get("name") or "").strip().lower()
            content = attrs.get("content") or ""
            if name == "robots":
                for directive in _robots_directives(content):
                    robots[directive] = None
            if name:
                meta_names.append((name, content))
            if name == "description" and description is None:
                description = " ".join(content.split()) or None
            prop = (attrs.get("property") or name).strip().lower()
            if prop in OPEN_GRAPH and prop not in open_graph:
                value = (resolve_href(content, base_url) if prop == "og:image"
                         else " ".join(content.split()))
                if value:
                    open_graph[prop] = value
            continue
        if tag == "base":
            continue
        attrs = node.attrs
        if tag in ("iframe", "frame"):
            href, rels = attrs.get("src"), _NO_RELS
        else:
            href, rel_attr = attrs.get("href"), attrs.get("rel")
            rel = " ".join(rel_attr.lower().split()) if rel_attr else ""
            rels = frozenset(rel.split()) if rel else _NO_RELS
        if href is None:
            continue
        if tag == "link":
            if not canonical_seen and "canonical" in rels:
                canonical_seen = True
                canonical = resolve_href(href, base_url)
            if not _is_followed_link_rel(rels):
                continue
        if href in resolved:
            target = resolved[href]
        else:
            target = resolved[href] = resolve_href(href, base_url)
        if target is None:
            continue
        if tag == "a" or tag == "area":
            outlinks[OutLink(target, anchor_text(node), rel)] = None
        if "nofollow" in rels:
            nofollow[target] = None
        else:
            followed[target] = None

    return HtmlInfo(
        title=title,
        links=tuple(followed),
        nofollow_links=tuple(link for link in nofollow if link not in followed),
        base_url=base_url,
        canonical=canonical,
        meta_robots=tuple(robots),
        meta_names=tuple(meta_names),
        description=description,
        open_graph=tuple(open_graph.items()),
        lang=_declared_lang(tree),
        outlinks=tuple(outlinks),
    )


def anchor_text(node: LexborNode) -> str:
    """A link's anchor text as a reader sees it: its text, whitespace-collapsed and cut at
    :data:`MAX_ANCHOR_CHARS`; an image-only link's is the image's ``alt``, an area's its own."""
    if node.tag == "area":
        text = node.attrs.get("alt") or ""
    else:
        text = node.text(deep=True, separator=" ")  # "<div>a</div><div>b</div>": two words
        if not text or text.isspace():
            image = node.css_first("img[alt]")
            text = (image.attrs.get("alt") or "") if image is not None else ""
    return " ".join(text[:_ANCHOR_SCAN].split())[:MAX_ANCHOR_CHARS]


def _declared_lang(tree: LexborHTMLParser) -> str | None:
    root = tree.root
    if root is None:
        return None
    attrs = root.attrs
    return (attrs.get("lang") or attrs.get("xml:lang") or "").strip() or None


@functools.lru_cache(maxsize=256)
def _base_directory(base: str) -> str | None:
    """``http://h/a/b.html?q#f`` -> ``http://h/a/``; None for a base that is not a plain
    absolute http(s)/ftp URL (then urljoin decides)."""
    if not _HTTP_AUTHORITY.match(base):
        return None
    origin = _split_origin(base)
    if origin is None:
        return None
    path = base[len(origin[1]):].split("#", 1)[0].split("?", 1)[0]
    if not path:
        return origin[1] + "/"
    if "/." in path or "//" in path:
        return None
    return origin[1] + path[: path.rfind("/") + 1]


@functools.lru_cache(maxsize=64)
def _split_origin(base: str) -> tuple[str, str] | None:
    """The lowercased scheme of an http(s) base URL and its ``scheme://authority`` prefix.

    Cached because every link of a page is resolved against the same base.
    """
    match = _HTTP_AUTHORITY.match(base)
    if match is None:
        return None
    authority_end = match.end() - 1 if match.group(0)[-1] in "/?#" else match.end()
    return base[:base.index(":")].lower(), base[:authority_end]


def _base_url(nodes: list[LexborNode], url: str) -> str:
    """The first ``<base href>`` resolved against the page URL, if it is http(s); else url."""
    for node in nodes:
        if node.tag == "base":
            base = resolve_href(node.attrs.get("href") or "", url)
            return base if base is not None else url
    return url


def _in_foreign_content(node: LexborNode) -> bool:
    """True for a node inside <svg> or <math>, whose <title> is not the document's."""
    parent = node.parent
    while parent is not None:
        if parent.tag in ("svg", "math"):
            return True
        parent = parent.parent
    return False


def _is_followed_link_rel(rels: frozenset[str]) -> bool:
    if rels & LINK_RELS_IGNORED:
        return False
    return not rels or bool(rels & LINK_RELS_FOLLOWED)


def _robots_directives(content: str) -> list[str]:
    """Splits a robots meta content on commas (and on spaces, which many pages use instead)."""
    directives = []
    for part in content.lower().split(","):
        part = part.strip()
        if not part:
            continue
        # "unavailable_after: 25 Jun 2010" holds spaces; "noindex nofollow" is two directives.
        directives.extend([part] if ":" in part else part.split())
    return directives
