"""``DetectDuplicates`` in a pipeline: originals, duplicates, revisits, links, DUST evidence, and
the record read back from the dedup table by a later job."""

from __future__ import annotations

import uuid

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.core.records import (
    DUPLICATE_PAYLOAD,
    DUPLICATE_TEXT,
    RULE_SORT,
    CrawlRequest,
    Discovered,
    FetchResult,
    PageContent,
    ParsedPage,
    UrlRule,
)
from transforms.duplicates import DetectDuplicates
from transforms.formats.schema import DEDUP_TABLE
from transforms.formats.warc import capture_date
from transforms.stores.memory import MemoryStoreSpec, memory_store


def discovered(url: str, body: bytes, text_digest: str, at: float, words: int = 50
               ) -> Discovered:
    fetch = FetchResult(CrawlRequest(url), url.split("/")[2], at, url, 200, body=body)
    page = ParsedPage(fetch, "t", (url + "/next",), "sha1:" + body.decode(),
                      content=PageContent(text="x", word_count=words, text_digest=text_digest))
    return Discovered((CrawlRequest(url + "/next", 1),), page)


def summary(item: Discovered) -> tuple:
    page = item.item
    assert isinstance(page, ParsedPage)
    revisit = page.revisit and (page.revisit.refers_to_uri, page.revisit.refers_to_date)
    return (page.fetch.request.url, page.duplicate_of, page.duplicate_kind, revisit,
            len(item.links), tuple((u, r) for u, r, _ in item.rules))


def run(spec: MemoryStoreSpec, steps: list[tuple[Discovered, tuple]], follow: bool = False
        ) -> None:
    """One element per pipeline, in order (the first URL of a content is its original), each
    checked against what it should come out as."""
    for item, expected in steps:
        with TestPipeline() as p:
            out = (p | beam.Create([item]) | DetectDuplicates(spec, follow_links=follow)
                   | beam.Map(summary))
            assert_that(out, equal_to([expected]))


def test_duplicates_are_marked_their_links_dropped_and_identical_bytes_revisited():
    spec = MemoryStoreSpec(uuid.uuid4().hex)
    original = discovered("https://a.example/p", b"AAA", "sha1:T1", 1.0)
    assert isinstance(original.item, ParsedPage)
    first = ("https://a.example/p", capture_date(original.item.fetch))
    run(spec, [
        (original, ("https://a.example/p", None, "", None, 1, ())),
        (discovered("https://b.example/mirror", b"AAA", "sha1:T1", 2.0),
         ("https://b.example/mirror", "https://a.example/p", DUPLICATE_PAYLOAD, first, 0, ())),
        (discovered("https://c.example/print", b"BBB", "sha1:T1", 3.0),
         ("https://c.example/print", "https://a.example/p", DUPLICATE_TEXT, None, 0, ())),
        (discovered("https://a.example/other", b"CCC", "sha1:T2", 4.0),
         ("https://a.example/other", None, "", None, 1, ()))])
    # A later job (empty state) reads the record back from the dedup table; with
    # --follow_duplicate_links the duplicate's links still go out.
    run(spec, [(discovered("https://d.example/late", b"AAA", "sha1:T1", 9.0),
                ("https://d.example/late", "https://a.example/p", DUPLICATE_PAYLOAD, first, 1,
                 ()))], follow=True)
    assert memory_store(spec.name).read_row(DEDUP_TABLE, "d#t:sha1:T1")


def test_parameter_order_twins_of_one_key_are_dust_evidence_and_others_pass_through():
    spec = MemoryStoreSpec(uuid.uuid4().hex)
    twin = "https://a.example/f/?y=2&x=1"
    run(spec, [(discovered("https://a.example/f/?x=1&y=2", b"A1", "sha1:T", 1.0),
                ("https://a.example/f/?x=1&y=2", None, "", None, 1, ())),
               (discovered(twin, b"A2", "sha1:T", 2.0),
                (twin, "https://a.example/f/?x=1&y=2", DUPLICATE_TEXT, None, 0,
                 ((twin, UrlRule("/f/", RULE_SORT)),)))])
    error = FetchResult(CrawlRequest("https://a.example/e"), "a.example", 1.0,
                        "https://a.example/e", error="timeout")
    with TestPipeline() as p:
        out = p | beam.Create([Discovered((), error)]) | DetectDuplicates(spec)
        assert_that(out, equal_to([Discovered((), error)]))
