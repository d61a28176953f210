"""Link, title and robots-directive extraction from fetched HTML pages.

Pure functions over bytes, with no Beam import, so that ``ExtractLinks`` stays a thin wrapper and
the rules here are tested with plain pytest. Parsing uses selectolax's Lexbor backend (an HTML5
tree builder, so broken markup is repaired the way a browser would repair it); selectolax 1.0
removed its older Modest backend.

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

import codecs
import functools
import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

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

_SNIFF_BYTES = 4096
LINK_SCHEMES = frozenset({"http", "https", "ftp"})  # the schemes the crawler has fetchers for
# An http(s) or ftp URL with a non-empty host (userinfo and port allowed, IPv6 literals
# bracketed): the schemes the crawler has fetchers for.
_HTTP_AUTHORITY = re.compile(
    r"(?:https?|ftp)://(?:[^/?#]*@)?(?:[^/?#:@\[\]]+|\[[^/?#@\[\]]+\])(?::[^/?#]*)?(?:[/?#]|$)",
    re.IGNORECASE,
)
_SELECTOR = (
    "a[href], area[href], link[href], iframe[src], frame[src], base[href], "
    "meta[name][content], title"
)

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s;"',]+)""", re.IGNORECASE)
# Matches both <meta charset=x> and <meta http-equiv=content-type content="...; charset=x">.
# The attribute run is bounded so that a page of unclosed "<meta" cannot make it quadratic.
_META_CHARSET = re.compile(
    rb"""<meta\b[^>]{0,512}?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE
)
# Python codec names that must not decode a web page: they are not character sets (or raise
# on any input), and UTF-7 is refused by browsers.
_REFUSED_CODECS = frozenset({
    "idna", "punycode", "raw-unicode-escape", "undefined", "unicode-escape", "utf-7",
})
# Labels that browsers decode with a superset (WHATWG Encoding Standard); the superset gives
# the text the page author saw, e.g. curly quotes on pages labelled iso-8859-1.
_BROWSER_SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "tis-620": "cp874",
    "euc_kr": "cp949",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "big5": "big5hkscs",
}
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
    """

    title: str | None
    links: tuple[str, ...]
    nofollow_links: tuple[str, ...]
    base_url: str
    canonical: str | None
    meta_robots: tuple[str, ...]
    meta_names: tuple[tuple[str, str], ...] = ()


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


def decode_html(body: bytes, content_type: str | None) -> str:
    """Decodes an HTML body to text, the way a browser picks the encoding.

    The order follows the WHATWG encoding sniffing algorithm: a byte-order mark wins (it cannot
    be there by accident, while headers are often wrong), then the charset of the Content-Type
    header, then a ``<meta charset>`` or ``<meta http-equiv=content-type>`` within the first
    4 KB, then UTF-8. Unknown or unusable charset names fall through to the next source.

    Args:
        body: the raw (content-decoded) response body.
        content_type: the Content-Type header, or None.

    Returns:
        The text; undecodable bytes become U+FFFD. Never raises.
    """
    for bom, bom_encoding in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(bom_encoding, "replace")
    encoding: str | None = None
    if content_type:
        header_match = _HEADER_CHARSET.search(content_type)
        if header_match:
            encoding = _codec_for(header_match.group(1), from_meta=False)
    if encoding is None:
        meta_match = _META_CHARSET.search(body, 0, _SNIFF_BYTES)
        if meta_match:
            encoding = _codec_for(meta_match.group(1).decode("ascii"), from_meta=True)
    if encoding is not None:
        try:
            return body.decode(encoding, "replace")
        except (LookupError, UnicodeError):
            pass  # a codec that cannot decode with replacement; UTF-8 below is the default
    return body.decode("utf-8", "replace")


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
    """Extracts the title, outlinks and robots directives of an HTML page.

    Args:
        body: the raw (content-decoded) response body, any bytes.
        url: the page's final URL after redirects; the base when no ``<base href>`` applies.
        content_type: the response's Content-Type header, for its charset.

    Returns:
        The page's :class:`HtmlInfo`. Never raises: broken markup is repaired by the HTML5
        tree builder and unusable URLs are skipped.
    """
    tree = LexborHTMLParser(decode_html(body, content_type))
    nodes = tree.css(_SELECTOR)
    base_url = _base_url(nodes, url)

    title: str | None = None
    canonical: str | None = None
    canonical_seen = False
    followed: dict[str, None] = {}
    nofollow: dict[str, None] = {}
    robots: dict[str, None] = {}
    meta_names: list[tuple[str, str]] = []
    for node in nodes:
        tag = node.tag
        if tag == "title":
            if title is None and not _in_foreign_content(node):
                title = " ".join(node.text(deep=True).split()) or None
            continue
        if tag == "meta":
            name = (node.attrs.get("name") or "").strip().lower()
            content = node.attrs.get("content") or ""
            if name == "robots":
                for directive in _robots_directives(content):
                    robots[directive] = None
            if name:
                meta_names.append((name, content))
            continue
        if tag == "base":
            continue
        attrs = node.attrs
        if tag in ("iframe", "frame"):
            href, rels = attrs.get("src"), _NO_RELS
        else:
            href, rels = attrs.get("href"), _rel_tokens(attrs.get("rel"))
        if href is None:
            continue
        if tag == "link":
            if not canonical_seen and "canonical" in rels:
                canonical_seen = True
                canonical = resolve_href(href, base_url)
            if not _is_followed_link_rel(rels):
                continue
        target = resolve_href(href, base_url)
        if target is None:
            continue
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
    )


def _codec_for(label: str, *, from_meta: bool) -> str | None:
    """Maps a charset label to a Python codec name, or None if it cannot decode a page."""
    try:
        name = codecs.lookup(label.strip().lower()).name
    except (LookupError, ValueError):
        return None
    if name in _REFUSED_CODECS:
        return None
    if from_meta and name.startswith("utf-16"):
        # A meta tag was readable as ASCII, so the page is not UTF-16 (WHATWG: use UTF-8).
        return "utf-8"
    return _BROWSER_SUPERSETS.get(name, name)


@functools.lru_cache(maxsize=64)
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


def _rel_tokens(rel: str | None) -> frozenset[str]:
    return frozenset(rel.lower().split()) if rel else frozenset()


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
