"""What an HTML page gives the analysts: its preview, main text, word count, outlinks with anchor
text, the text's digest and its MinHash signature (pure).

It reads the tree that ``transforms.core.links.parse_html`` built, so a page is parsed once: the
preview and the outlinks come from that module's one walk (``HtmlInfo``), the main text from
the tree itself.

**Main text.** No text-extraction library fits the extract stage's budget (about 1 ms a page
for everything; trafilatura takes 20 ms, justext 11, resiliparse 1.5 and parses the page again),
so the boilerplate is removed on the parsed tree. One ``css()`` walk selects the candidates:
the tags of :data:`BOILERPLATE_TAGS` (scripts, styles, embedded objects, ``nav``, ``header``,
``footer``, ``aside``, buttons, selects, dialogs) and every element with a ``role``,
``aria-hidden`` or ``hidden`` attribute, of which those ``hidden``, ``aria-hidden=true`` or
with a role of :data:`LANDMARK_ROLES` (the ARIA navigation, banner, contentinfo, complementary,
search, menu and menubar) are boilerplate too. Each is unlinked, and the rest of ``<body>`` is
read with a space at every element boundary (so that ``<td>a</td><td>b</td>`` gives two words,
not ``ab``) and its whitespace collapsed. Site chrome written as plain ``div``s
(``<div class=sidebar>``) stays. This costs about 0.3 ms a page on top of the parse.

**Caps** (the webtable's ``p`` family and the exports hold these as they are):

* the text: :data:`MAX_TEXT_CHARS` characters (64 Ki), cut at a word boundary,
  ``text_truncated`` set; the word count and the digest are over the whole text, the MinHash
  signature over the kept text (so a 10 MB page costs no more to sign than a 64 KiB one);
* outlinks: the first :data:`MAX_OUTLINKS` (1,000) distinct (URL, anchor, rel) links in
  document order; URLs longer than :data:`MAX_URL_CHARS` are left out, anchors are cut at
  ``links.MAX_ANCHOR_CHARS`` (200), rel strings at :data:`MAX_REL_CHARS`;
* the description and ``og:*`` values: :data:`MAX_PREVIEW_CHARS` characters; an ``og:image``
  URL longer than :data:`MAX_URL_CHARS` is left out (a cut URL is a wrong one).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborAttributes, LexborHTMLParser

from transforms.core.content import header
from transforms.core.digests import payload_digest
from transforms.core.links import HtmlInfo
from transforms.core.minhash import text_signature
from transforms.core.records import OutLink, PageContent

MAX_TEXT_CHARS = 65_536
MAX_OUTLINKS = 1_000
MAX_PREVIEW_CHARS = 1_000
MAX_URL_CHARS = 4_096
MAX_REL_CHARS = 128
MAX_LANG_CHARS = 35  # the length RFC 5646 (section 4.4.1) asks every implementation to handle

BOILERPLATE_TAGS = frozenset({
    "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas",
    "nav", "footer", "header", "aside", "head", "button", "select", "dialog",
})
LANDMARK_ROLES = frozenset({
    "navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar",
})
# The tags, and every element with one of the attributes that may make it boilerplate: three
# plain attribute tests select faster than nine value tests, and Python decides on the few
# elements that have them (see _is_boilerplate).
_CANDIDATES = ", ".join(sorted(BOILERPLATE_TAGS)) + ", [role], [aria-hidden], [hidden]"
# A language tag's shape (RFC 5646, loosely: subtags of 1-8 letters or digits, the first
# letters only); anything else (template placeholders, "English (US)") is not a tag.
_LANG_TAG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")


def page_content(info: HtmlInfo, tree: LexborHTMLParser,
                 headers: tuple[tuple[str, str], ...] = (), *, sign: bool = True
                 ) -> PageContent:
    """The analysts' fields of a parsed page.

    Args:
        info: the page's walk (``links.parse_html``).
        tree: the tree ``info`` came from. It is changed: boilerplate nodes are removed, so read
            anything else from it first.
        headers: the response headers, for ``Content-Language``.
        sign: compute the MinHash signature (the costliest step, about a third of the total);
            False leaves ``signature`` empty, for callers that detect no near duplicates.

    Returns:
        The page's :class:`PageContent`, every field capped as the module docstring says.
    """
    og = dict(info.open_graph)
    whole = main_text(tree)
    text, truncated = cap_text(whole, MAX_TEXT_CHARS)
    return PageContent(
        description=_preview(info.description),
        og_title=_preview(og.get("og:title")),
        og_description=_preview(og.get("og:description")),
        og_image=_url(og.get("og:image")),
        og_type=_preview(og.get("og:type")),
        og_site_name=_preview(og.get("og:site_name")),
        lang=declared_language(info.lang, header(headers, "Content-Language")),
        text=text,
        text_truncated=truncated,
        word_count=whole.count(" ") + 1 if whole else 0,
        outlinks=capped_outlinks(info.outlinks),
        text_digest=payload_digest(whole.encode("utf-8")) if whole else "",
        signature=text_signature(text) if sign else b"",
    )


def main_text(tree: LexborHTMLParser) -> str:
    """The visible text of the page without boilerplate, whitespace-collapsed ("" if none).

    Removes the boilerplate nodes from ``tree`` (unlinked, not freed: a node inside one already
    removed is safe to remove too).
    """
    for node in tree.css(_CANDIDATES):
        if node.tag in BOILERPLATE_TAGS or _is_boilerplate(node.attrs):
            node.decompose()
    body = tree.body or tree.root
    if body is None:
        return ""
    return " ".join(body.text(separator=" ").split())


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters at its last space before the cut (at the
    limit itself when there is no space in it), and whether it was cut."""
    if len(text) <= limit:
        return text, False
    if text[limit] == " ":
        return text[:limit], True
    head = text[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > 0 else head), True


def declared_language(html_lang: str | None, content_language: str | None) -> str | None:
    """The page's language: ``<html lang>`` if it is a well-formed tag, else the first tag of
    the ``Content-Language`` header; None if neither is.

    ``<html lang>`` wins because it is the author's, in the document, while the header is often
    a server default. Tags come in their conventional case (``en-US``, ``zh-Hant-TW``), with
    ``_`` read as ``-`` (``en_US`` is a common mistake), so that analysts can group by them.
    """
    for candidate in (html_lang, (content_language or "").split(",", 1)[0]):
        tag = language_tag(candidate)
        if tag is not None:
            return tag
    return None


def language_tag(value: str | None) -> str | None:
    """``value`` as a language tag in conventional case, or None if it is not one."""
    tag = (value or "").strip().replace("_", "-")
    if len(tag) > MAX_LANG_CHARS or not _LANG_TAG.fullmatch(tag):
        return None
    subtags = tag.split("-")
    out = [subtags[0].lower()]
    private = False  # after a singleton (x-..., u-...) subtags are not regions or scripts
    for subtag in subtags[1:]:
        private = private or len(out[-1]) == 1
        if not private and len(subtag) == 2 and subtag.isalpha():
            out.append(subtag.upper())
        elif not private and len(subtag) == 4 and subtag.isalpha():
            out.append(subtag.title())
        else:
            out.append(subtag.lower())
    return "-".join(out)


def capped_outlinks(outlinks: tuple[OutLink, ...]) -> tuple[OutLink, ...]:
    """The first :data:`MAX_OUTLINKS` links whose URL fits :data:`MAX_URL_CHARS`, with rel
    strings cut at :data:`MAX_REL_CHARS`."""
    kept = [link for link in outlinks if len(link.url) <= MAX_URL_CHARS][:MAX_OUTLINKS]
    return tuple(link if len(link.rel) <= MAX_REL_CHARS
                 else link._replace(rel=link.rel[:MAX_REL_CHARS]) for link in kept)


def _is_boilerplate(attrs: LexborAttributes) -> bool:
    """``hidden``, ``aria-hidden=true`` (any case), or a landmark role among the role tokens."""
    if "hidden" in attrs or (attrs.get("aria-hidden") or "").strip().lower() == "true":
        return True
    return not LANDMARK_ROLES.isdisjoint((attrs.get("role") or "").lower().split())


def _preview(value: str | None) -> str | None:
    return value[:MAX_PREVIEW_CHARS] if value else None


def _url(value: str | None) -> str | None:
    return value if value and len(value) <= MAX_URL_CHARS else None
