"""Which of a lease's pages are copies: this process's recent contents first, then the dedup
table (an earlier job's originals), bounded; an unreadable table makes every page a copy."""

from __future__ import annotations

import pytest

from transforms.core.duplicates import DigestRecord
from transforms.formats.digest_rows import digest_row
from transforms.formats.schema import DEDUP_TABLE
from transforms.frontier.copies import CopyCheck, RecentContent
from transforms.stores.memory import MemoryFrontierStore


def test_the_first_url_of_a_content_is_the_original_and_later_ones_copies():
    check = CopyCheck(MemoryFrontierStore(), DEDUP_TABLE, RecentContent())
    assert check([("https://a/1", "t:x"), ("https://a/2", "t:x"), ("https://a/3", "t:y")]) \
        == (("https://a/2", "https://a/1"),)
    assert check([("https://b/1", "t:x"), ("https://a/1", "t:x")]) == (
        ("https://b/1", "https://a/1"),)


def test_an_earlier_jobs_original_is_read_from_the_dedup_table():
    store = MemoryFrontierStore()
    store.write_rows(DEDUP_TABLE, [digest_row("t:x", DigestRecord("https://old/1", 1.0), 1.0)])
    check = CopyCheck(store, DEDUP_TABLE, RecentContent())
    assert check([("https://new/1", "t:x")]) == (("https://new/1", "https://old/1"),)
    assert check([("https://old/1", "t:x")]) == ()  # its own recrawl is no copy


class _Unreadable(MemoryFrontierStore):
    def read_rows(self, table, keys):
        raise OSError("table unreachable")


def test_an_unreadable_table_sends_every_page_the_judged_way():
    check = CopyCheck(_Unreadable(), DEDUP_TABLE, RecentContent())
    assert check([("https://a/1", "t:x")]) == (("https://a/1", ""),)


def test_recent_contents_are_bounded_and_forget_the_least_recent():
    recent = RecentContent(capacity=2)
    assert recent.first("k1", "u1") == "u1" and recent.first("k2", "u2") == "u2"
    assert recent.first("k1", "other") == "u1"  # k1 is now the most recent
    recent.first("k3", "u3")  # k2 goes
    assert len(recent) == 2 and recent.get("k2") is None and recent.get("k1") == "u1"
    with pytest.raises(ValueError):
        RecentContent(0)
