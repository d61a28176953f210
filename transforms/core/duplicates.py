"""Exact duplicates across URLs (pure): what one content digest's record says about a page.

The keyed stage ``transforms.duplicates`` keys every parsed page by its content: the digest of
its normalized main text (``t:`` + ``PageContent.text_digest``), or, for a page without text,
its payload digest (``p:`` + ``ParsedPage.checksum``). One key holds one :class:`DigestRecord`
(a cache of its ``dedup`` table row) and :func:`judge` decides each page against it:

* the first URL seen with the content is the original; a later, different URL gets
  ``duplicate_of = <original>`` (``duplicate_kind``: ``payload`` when its bytes equal a
  capture's, ``text`` when only the main text is the same);
* a payload equal to an earlier capture's (another URL's, or this URL's own earlier fetch) gets
  a :class:`~transforms.core.records.Revisit`, so its WARC record is a ``revisit`` that refers to
  that capture instead of a second copy of the bytes, as Heritrix does;
* two URLs of one frontier key with the same text are DUST evidence
  (``transforms.core.dust.rule_between``), sent to that key.

A URL whose own capture is the record's but whose request is not a revisit (its first fetch
was redone after a crash, before its WARC record or row was written) is a new capture, not a
revisit of bytes that may never have been written.

Bounds per content: ``MAX_CAPTURES`` distinct payloads and ``MAX_URLS`` URLs are kept (the
first ones); beyond them a page is still judged against the original, its payload is written
in full and its URL is no evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from transforms.core.dust import MIN_EVIDENCE_WORDS, rule_between
from transforms.core.records import (
    DUPLICATE_PAYLOAD,
    DUPLICATE_TEXT,
    ParsedPage,
    Revisit,
    UrlRule,
)

MAX_CAPTURES = 8
MAX_URLS = 8
TEXT_PREFIX = "t:"
PAYLOAD_PREFIX = "p:"


@dataclass
class DigestRecord:
    """What the crawl knows of one content digest.

    Attributes:
        original: the first URL seen with this content.
        original_at: when it was fetched (seconds since the epoch).
        captures: payload digest -> (WARC-Target-URI, WARC-Date) of the first capture of those
            bytes (the target is the fetch's final URL, after redirects).
        urls: (URL, frontier key) of the first ``MAX_URLS`` URLs seen with this content.
    """

    original: str
    original_at: float
    captures: dict[str, tuple[str, str]] = field(default_factory=dict)
    urls: list[tuple[str, str]] = field(default_factory=list)


class Verdict(NamedTuple):
    """What a page is, given the record of its content."""

    duplicate_of: str | None = None
    kind: str = ""
    revisit: Revisit | None = None
    rule: UrlRule | None = None  # DUST evidence for the page's key, if any


class Probe(NamedTuple):
    """The facts about a page that :func:`judge` needs."""

    url: str
    key: str  # the frontier key
    target: str  # the URL its WARC record names (WARC-Target-URI: the final URL)
    payload_digest: str
    warc_date: str  # the WARC-Date its response record would carry
    at: float
    words: int
    first_fetch: bool  # not a revisit (recrawl, resubmit, lastmod) of a known URL


def content_key(page: ParsedPage) -> str:
    """The stage's key for a page: its text digest, else its payload digest."""
    if page.content is not None and page.content.text_digest:
        return TEXT_PREFIX + page.content.text_digest
    return PAYLOAD_PREFIX + page.checksum


def judge(record: DigestRecord | None, probe: Probe) -> tuple[DigestRecord, Verdict, bool]:
    """Decides ``probe`` against its content's record; returns the record (new or updated in
    place), the verdict and whether the record changed (and must be written)."""
    if record is None:
        record = DigestRecord(probe.url, probe.at, {probe.payload_digest: (probe.target,
                                                                           probe.warc_date)},
                              [(probe.url, probe.key)])
        return record, Verdict(), True
    changed = False
    revisit = None
    capture = record.captures.get(probe.payload_digest)
    if capture is not None and capture[0] == probe.target and probe.first_fetch:
        record.captures[probe.payload_digest] = (probe.target, probe.warc_date)  # redone
        changed = True
    elif capture is not None:
        revisit = Revisit(capture[0], capture[1], probe.payload_digest)
    elif len(record.captures) < MAX_CAPTURES:
        record.captures[probe.payload_digest] = (probe.target, probe.warc_date)
        changed = True
    duplicate_of, kind = None, ""
    if record.original != probe.url:
        duplicate_of = record.original
        kind = DUPLICATE_PAYLOAD if revisit is not None else DUPLICATE_TEXT
    rule = None
    known = any(url == probe.url for url, _ in record.urls)
    if not known:
        if probe.words >= MIN_EVIDENCE_WORDS:
            rule = next((r for url, key in record.urls if key == probe.key
                         for r in (rule_between(url, probe.url),) if r is not None), None)
        if len(record.urls) < MAX_URLS:
            record.urls.append((probe.url, probe.key))
            changed = True
    return record, Verdict(duplicate_of, kind, revisit, rule), changed
