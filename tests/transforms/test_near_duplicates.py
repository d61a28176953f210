"""``FindNearDuplicates`` on Beam's TestPipeline with the in-memory store: near copies found,
distinct pages not, buckets reloaded from the dedup table by a later job, and bounded under a
flood."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterable

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import BeamAssertException, assert_that

from tests.transforms.results import fetch_result
from transforms.core.lsh import BANDS, MAX_CANDIDATES, MAX_PER_HOST, ROWS, band_keys
from transforms.core.minhash import NUM_PERM, estimated_jaccard, text_signature
from transforms.core.records import (
    NearDuplicate,
    PageContent,
    ParsedPage,
    StoredPage,
    WarcLocation,
)
from transforms.formats.band_rows import band_row_key, bucket_from_cells
from transforms.formats.schema import DEDUP_TABLE
from transforms.near_duplicates import FindNearDuplicates
from transforms.stores.memory import MemoryStoreSpec, memory_store

VOCAB = [f"w{i}" for i in range(20000)]
AT = 1_764_000_000.0


def make_text(rng: random.Random, n: int = 400) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def near_copy(rng: random.Random, text: str) -> str:
    """``text`` with a sentence of 6 words inserted: J about 0.97."""
    words = text.split()
    at = rng.randrange(len(words))
    return " ".join([*words[:at], *(rng.choice(VOCAB) for _ in range(6)), *words[at:]])


def stored(url: str, text: str | None = None, *, signature: bytes | None = None,
           duplicate_of: str | None = None, at: float = AT) -> StoredPage:
    host = url.split("/")[2]
    sig = signature if signature is not None else text_signature(text or "")
    fetch = fetch_result(url, host=host, fetched_at=at)
    page = ParsedPage(fetch.without_body(), "title", (), "sha1:X",
                      content=PageContent(text=text or "", signature=sig),
                      duplicate_of=duplicate_of)
    return StoredPage(page, WarcLocation("file:///x.warc.gz", 0, 1))


def run(pages: Iterable[StoredPage], store_name: str,
        check: Callable[[list[NearDuplicate]], None], **kwargs) -> dict[str, int]:
    """Runs FindNearDuplicates over ``pages``, asserts ``check`` on its output, returns the
    counters."""
    p = TestPipeline()
    found = p | beam.Create(list(pages)) | FindNearDuplicates(MemoryStoreSpec(store_name),
                                                              **kwargs)
    assert_that(found, check)
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter())["counters"]
    return {c.key.metric.name: c.committed for c in counters}


def pairs_checker(expected: set[frozenset[str]], similarity: dict[frozenset[str], float]
                  ) -> Callable[[list[NearDuplicate]], None]:
    """Each expected pair reported (either way round: arrival order decides the original),
    with its estimated similarity, and nothing else; a URL at most once per band."""
    def check(reports: list[NearDuplicate]) -> None:
        got = {frozenset((r.url, r.original)) for r in reports}
        if got != expected:
            raise BeamAssertException(f"pairs {sorted(map(sorted, got))} != "
                                      f"{sorted(map(sorted, expected))}")
        for r in reports:
            if abs(r.similarity - similarity[frozenset((r.url, r.original))]) > 1e-9:
                raise BeamAssertException(f"similarity of {r}")
            if r.at != AT or r.host != r.url.split("/")[2]:
                raise BeamAssertException(f"url fields of {r}")
        per_url = Counter(r.url for r in reports)
        if max(per_url.values(), default=0) > BANDS:
            raise BeamAssertException(f"reports per url {per_url}")
    return check


def test_near_copies_are_found_and_distinct_pages_are_not() -> None:
    rng = random.Random(1)
    name = f"near-{uuid.uuid4().hex}"
    originals = [make_text(rng) for _ in range(6)]
    pages = [stored(f"https://a.example/o{i}", t) for i, t in enumerate(originals)]
    copies = [near_copy(rng, t) for t in originals]
    pages += [stored(f"https://b.example/c{i}", t) for i, t in enumerate(copies)]
    pages += [stored(f"https://a.example/d{i}", make_text(rng)) for i in range(6)]
    # Skipped: exact duplicates (the exact stage's), pages too short to sign, no content.
    pages.append(stored("https://c.example/dup", originals[0], duplicate_of=pages[0].page.fetch
                        .request.url))
    pages.append(stored("https://c.example/short", "four words only here"))
    no_content = stored("https://c.example/none", "x")
    pages.append(StoredPage(ParsedPage(no_content.page.fetch, None, (), "sha1:Y"),
                            no_content.location))
    expected = {frozenset((f"https://a.example/o{i}", f"https://b.example/c{i}"))
                for i in range(6)}
    similarity = {frozenset((f"https://a.example/o{i}", f"https://b.example/c{i}")):
                  estimated_jaccard(text_signature(originals[i]), text_signature(copies[i]))
                  for i in range(6)}
    assert min(similarity.values()) >= 0.9
    counters = run(pages, name, pairs_checker(expected, similarity))
    assert counters["pages_signed"] == 18
    assert counters["near_dup_skipped_exact_duplicate"] == 1
    assert counters["near_dup_skipped_no_signature"] == 2
    signed = [text_signature(t) for t in originals + copies] + [
        p.page.content.signature for p in pages[12:18] if p.page.content is not None]
    assert counters["band_rows_read"] == len({k for s in signed for k in band_keys(s)})
    assert counters["near_duplicates_found"] >= 6
    assert counters["lsh_candidates_checked"] >= 6


def test_a_later_job_finds_a_copy_of_a_page_the_first_job_saw() -> None:
    rng = random.Random(2)
    name = f"near-{uuid.uuid4().hex}"
    original, other = make_text(rng), make_text(rng)
    first = [stored("https://a.example/original", original),
             stored("https://a.example/other", other)]
    run(first, name, pairs_checker(set(), {}))
    rows = memory_store(name).other[DEDUP_TABLE]
    for key in band_keys(text_signature(original)):
        bucket = bucket_from_cells(memory_store(name).read_row(DEDUP_TABLE, band_row_key(key)))
        assert [c.url for c in bucket] == ["https://a.example/original"]
    assert len(rows) == 2 * BANDS
    copy = near_copy(rng, original)
    pair = frozenset(("https://z.example/copy", "https://a.example/original"))
    sim = estimated_jaccard(text_signature(copy), text_signature(original))
    counters = run([stored("https://z.example/copy", copy)], name,
                   pairs_checker({pair}, {pair: sim}))
    assert counters["band_rows_read"] == BANDS
    # The original's URL seen again (a recrawl) is never its own near copy.
    run([stored("https://a.example/original", original)], name, pairs_checker(set(), {}))


def colliding_signature(rng: np.random.Generator, base: np.ndarray) -> bytes:
    """A signature sharing band 0 with ``base`` and nothing else (estimate 12/128)."""
    out = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32)
    out[:ROWS] = base[:ROWS]
    return out.astype("<u4").tobytes()


def test_buckets_stay_bounded_under_a_flood() -> None:
    """300 pages from one host and then 40 from other hosts, all colliding in band 0 with a
    legitimate page that came first: the bucket keeps the legitimate page, at most 4 pages of
    the flooding host and at most 16 in all; a copy of the legitimate page is still found."""
    rng = np.random.default_rng(3)
    name = f"near-{uuid.uuid4().hex}"
    base = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32)
    legit_sig = base.astype("<u4").tobytes()
    run([stored("https://good.example/", signature=legit_sig)], name, pairs_checker(set(), {}))
    flood = [stored(f"https://evil.example/{i}", signature=colliding_signature(rng, base))
             for i in range(300)]
    flood += [stored(f"https://e{i}.example/", signature=colliding_signature(rng, base))
              for i in range(40)]
    run(flood, name, pairs_checker(set(), {}))
    key = band_keys(legit_sig)[0]
    bucket = bucket_from_cells(memory_store(name).read_row(DEDUP_TABLE, band_row_key(key)))
    assert bucket[0].url == "https://good.example/"
    assert len(bucket) == MAX_CANDIDATES
    assert Counter(c.host for c in bucket)["evil.example"] <= MAX_PER_HOST
    for cells in (c for _, c in memory_store(name).scan_rows(DEDUP_TABLE, "l")):
        assert len(bucket_from_cells(cells)) <= MAX_CANDIDATES
    pair = frozenset(("https://mirror.example/", "https://good.example/"))
    run([stored("https://mirror.example/", signature=legit_sig)], name,
        pairs_checker({pair}, {pair: 1.0}))


def test_threshold_is_applied_and_validated() -> None:
    rng = random.Random(5)
    name = f"near-{uuid.uuid4().hex}"
    original = make_text(rng, 300)
    words = original.split()
    words[100:120] = [f"edit{i}" for i in range(20)]  # a passage replaced: exact J 0.85
    copy = " ".join(words)
    a, b = text_signature(original), text_signature(copy)
    sim = estimated_jaccard(a, b)
    assert 0.8 <= sim < 0.9
    assert set(band_keys(a)) & set(band_keys(b))  # a candidate pair, below the default
    pages = [stored("https://a.example/o", original), stored("https://a.example/c", copy)]
    run(pages, name, pairs_checker(set(), {}))
    pair = frozenset(("https://a.example/o", "https://a.example/c"))
    run(pages, f"near-{uuid.uuid4().hex}", pairs_checker({pair}, {pair: sim}), threshold=0.8)
    for bad in (0.0, 0.79, 1.5):
        with pytest.raises(ValueError):
            FindNearDuplicates(MemoryStoreSpec(name), threshold=bad)


def test_a_page_fetched_earlier_but_judged_later_still_reaches_the_row() -> None:
    """Rows are stamped when written, not with the page's fetch time: a bucket row written by
    a later job for an older page replaces the newer page's row instead of hiding under it."""
    rng = np.random.default_rng(6)
    name = f"near-{uuid.uuid4().hex}"
    base = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32)
    first = base.astype("<u4").tobytes()
    run([stored("https://new.example/", signature=first, at=AT + 86400)], name,
        pairs_checker(set(), {}))
    older = colliding_signature(rng, base)
    run([stored("https://old.example/", signature=older)], name, pairs_checker(set(), {}))
    key = band_keys(first)[0]
    bucket = bucket_from_cells(memory_store(name).read_row(DEDUP_TABLE, band_row_key(key)))
    assert [c.url for c in bucket] == ["https://new.example/", "https://old.example/"]
