"""The duplicate stages keep no runner state per key (a runner keeps every key's state for the
life of the job) and still judge a page against what this process wrote after its row was read:
the recent rows, a bounded per-process cache, win over a stale row sent with the page."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from tests.transforms.test_duplicates import discovered
from transforms.core.bounded import BoundedLru, shared_lru
from transforms.core.duplicates import content_key
from transforms.core.lsh import band_keys
from transforms.core.minhash import NUM_PERM
from transforms.core.records import ParsedPage
from transforms.duplicates import _JudgeFn
from transforms.near_duplicates import RECENT_BUCKETS, Probe, _JudgeBandsFn
from transforms.stores.memory import MemoryStoreSpec


class NoState:
    """A state parameter that fails the test when used."""

    def read(self) -> None:
        raise AssertionError("runner state read")

    def write(self, value: object) -> None:
        raise AssertionError("runner state written")

    def clear(self) -> None:
        raise AssertionError("runner state cleared")


def test_an_lru_keeps_the_most_recent_entries_up_to_its_capacity():
    lru: BoundedLru[str, int] = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # a is now the most recent
    lru.put("c", 3)
    assert len(lru) == 2 and lru.get("b") is None and lru.get("a") == 1
    assert shared_lru(("t", "x"), 5) is shared_lru(("t", "x"), 9)
    assert shared_lru(("t", "x"), 5).capacity == 5
    with pytest.raises(ValueError):
        BoundedLru(0)


def test_a_band_judged_after_a_stale_read_still_sees_the_page_written_before():
    judge = _JudgeBandsFn(MemoryStoreSpec(f"mem-{uuid.uuid4().hex}"), "dedup", 0.9)
    judge.setup()
    signature = np.random.default_rng(3).integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(
        "<u4").tobytes()
    key = band_keys(signature)[0]
    judge.start_bundle()
    list(judge.process((key, Probe("https://a.example/1", "a.example", signature, 1.0, {})),
                       NoState(), None, None))
    assert list(judge.finish_bundle()) == []
    judge.start_bundle()  # the next page's row was read before the first bundle wrote it
    list(judge.process((key, Probe("https://b.example/1", "b.example", signature, 2.0, {})),
                       NoState(), GlobalWindow(), Timestamp(2)))
    [report] = [w.value for w in judge.finish_bundle()]
    assert (report.url, report.original, report.similarity) == (
        "https://b.example/1", "https://a.example/1", 1.0)
    assert judge._recent.capacity == RECENT_BUCKETS


def test_a_content_judged_after_a_stale_read_still_sees_the_page_written_before():
    judge = _JudgeFn(MemoryStoreSpec(f"mem-{uuid.uuid4().hex}"), "dedup", follow_links=False)
    judge.setup()
    first = discovered("https://a.example/x", b"same", "t1", 1.0)
    second = discovered("https://b.example/y", b"same", "t1", 2.0)
    assert isinstance(first.item, ParsedPage)
    key = content_key(first.item)
    judge.start_bundle()
    [out] = judge.process((key, (first, {})), NoState())
    assert out.item.duplicate_of is None
    judge.finish_bundle()
    judge.start_bundle()
    [out] = judge.process((key, (second, {})), NoState())  # its row read before the write
    assert out.item.duplicate_of == "https://a.example/x" and out.links == ()
    judge.finish_bundle()
