"""Exact duplicates: originals, duplicate_of, revisits of identical payloads, DUST evidence."""

from __future__ import annotations

from transforms.core.duplicates import (
    MAX_CAPTURES,
    MAX_URLS,
    PAYLOAD_PREFIX,
    TEXT_PREFIX,
    Probe,
    content_key,
    judge,
)
from transforms.core.records import (
    DUPLICATE_PAYLOAD,
    DUPLICATE_TEXT,
    RULE_SORT,
    CrawlRequest,
    FetchResult,
    PageContent,
    ParsedPage,
    Revisit,
    UrlRule,
)

A = "https://a.example/page"


def probe(url: str, payload: str = "sha1:P1", *, key: str = "a.example", at: float = 1.0,
          words: int = 100, first: bool = True) -> Probe:
    return Probe(url, key, url, payload, f"date-{at}", at, words, first)


def test_the_first_url_is_the_original_and_a_later_url_with_the_same_bytes_a_revisit():
    record, verdict, changed = judge(None, probe(A))
    assert changed and verdict.duplicate_of is None and verdict.revisit is None
    record, verdict, changed = judge(record, probe("https://b.example/copy", at=2.0,
                                                   key="b.example"))
    assert verdict.duplicate_of == A and verdict.kind == DUPLICATE_PAYLOAD
    assert verdict.revisit == Revisit(A, "date-1.0", "sha1:P1")
    assert verdict.rule is None  # another key: no evidence


def test_same_text_other_bytes_is_a_text_duplicate_with_a_full_record():
    record, _, _ = judge(None, probe(A))
    record, verdict, changed = judge(record, probe("https://b.example/x", "sha1:P2"))
    assert verdict.duplicate_of == A and verdict.kind == DUPLICATE_TEXT
    assert verdict.revisit is None and changed and "sha1:P2" in record.captures


def test_a_recrawl_with_unchanged_bytes_is_a_revisit_of_its_own_capture_not_a_duplicate():
    record, _, _ = judge(None, probe(A))
    _, verdict, _ = judge(record, probe(A, at=5.0, first=False))
    assert verdict.duplicate_of is None and verdict.revisit == Revisit(A, "date-1.0", "sha1:P1")


def test_a_first_fetch_redone_after_a_crash_is_a_new_capture_not_a_revisit():
    record, _, _ = judge(None, probe(A))
    record, verdict, changed = judge(record, probe(A, at=3.0, first=True))
    assert verdict.revisit is None and changed
    assert record.captures["sha1:P1"] == (A, "date-3.0")


def test_two_urls_of_one_key_differing_in_parameter_order_are_dust_evidence():
    record, _, _ = judge(None, probe("https://a.example/f/?x=1&y=2"))
    _, verdict, _ = judge(record, probe("https://a.example/f/?y=2&x=1", "sha1:P2"))
    assert verdict.rule == UrlRule("/f/", RULE_SORT)


def test_short_pages_are_no_evidence():
    record, _, _ = judge(None, probe("https://a.example/f/?x=1&y=2", words=3))
    _, verdict, _ = judge(record, probe("https://a.example/f/?y=2&x=1", words=3))
    assert verdict.rule is None


def test_the_record_stays_bounded():
    record, _, _ = judge(None, probe(A))
    for i in range(50):
        record, _, _ = judge(record, probe(f"{A}?n={i}", f"sha1:X{i}"))
    assert len(record.captures) == MAX_CAPTURES and len(record.urls) == MAX_URLS
    assert record.original == A


def test_content_key_prefers_the_text_digest():
    fetch = FetchResult(CrawlRequest(A), "a.example", 1.0, A, 200, body=b"x")
    with_text = ParsedPage(fetch, None, (), "sha1:P", content=PageContent(text_digest="sha1:T"))
    without = ParsedPage(fetch, None, (), "sha1:P", content=PageContent())
    assert content_key(with_text) == TEXT_PREFIX + "sha1:T"
    assert content_key(without) == PAYLOAD_PREFIX + "sha1:P"
