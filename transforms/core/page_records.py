"""The analysts' records: a page's content (previews, main text, links, signature), what
duplicate detection decides, and DUST rules. ``transforms.core.records`` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class OutLink(NamedTuple):
    """A link of a page as the analysts see it: the absolute URL, its anchor text
    (whitespace-collapsed, capped) and its ``rel`` tokens (lowercased, space-separated)."""

    url: str
    anchor: str = ""
    rel: str = ""


@dataclass(frozen=True)
class PageContent:
    """What an HTML page says for its preview, its main text and its shape: the analysts'
    fields (``transforms.core.page_content``). Large fields are capped there.

    Attributes:
        description: ``<meta name=description>``.
        og_title, og_description, og_image, og_type, og_site_name: Open Graph properties
            (``og_image`` resolved against the page's base URL).
        lang: the declared language: ``<html lang>``, else the first ``Content-Language``.
        text: the main text: visible text without script, style, navigation, header, footer
            and similar boilerplate, whitespace-normalized, capped.
        text_truncated: the text was cut at the cap.
        word_count: words of the whole main text (before the cap).
        outlinks: every link of the page with its anchor text and rel (capped), followed or
            not.
        text_digest: ``sha1:`` + base32 of the normalized main text; "" without text.
        signature: the MinHash signature of the main text's word shingles (128 little-endian
            uint32 values, ``transforms.core.minhash``); b"" when the text is too short.
    """

    description: str | None = None
    og_title: str | None = None
    og_description: str | None = None
    og_image: str | None = None
    og_type: str | None = None
    og_site_name: str | None = None
    lang: str | None = None
    text: str = ""
    text_truncated: bool = False
    word_count: int = 0
    outlinks: tuple[OutLink, ...] = ()
    text_digest: str = ""
    signature: bytes = b""


class Revisit(NamedTuple):
    """The earlier capture an exact payload duplicate refers to: its WARC record becomes a
    ``revisit`` (WARC/1.1 identical-payload-digest profile) instead of a second response."""

    refers_to_uri: str
    refers_to_date: str  # the original record's WARC-Date, exactly
    payload_digest: str  # the original's WARC-Payload-Digest (equal to this payload's)


DUPLICATE_PAYLOAD = "payload"  # the same bytes as another URL's response
DUPLICATE_TEXT = "text"  # the same normalized main text, different bytes


class NearDuplicate(NamedTuple):
    """A page whose main text is a near copy of an earlier page's (MinHash LSH, estimated
    Jaccard similarity of their word shingles at or above the threshold)."""

    url: str
    host: str
    original: str
    similarity: float
    at: float


class UrlRule(NamedTuple):
    """A canonicalization rule a host learned from duplicate content (DUST): on ``path``,
    ``sort`` the query parameters, or ``drop`` the parameter ``param``."""

    path: str
    action: str  # RULE_SORT or RULE_DROP
    param: str = ""


RULE_SORT = "sort"
RULE_DROP = "drop"
