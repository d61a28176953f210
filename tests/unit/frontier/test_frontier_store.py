"""The status machine, the lease's check of its rows, and the store's semantics (the memory
store; the Bigtable one runs the same cases against the emulator in
tests/integration/test_bigtable_store.py)."""

from __future__ import annotations

import pytest

from transforms.core import status
from transforms.core.records import CrawlRequest, UrlOutcome, UrlRecord
from transforms.core.robots import RobotsRules
from transforms.formats.index import IndexEntry
from transforms.formats.rows import Row, outcome_row, pending_host_row, robots_host_row, url_record
from transforms.frontier.leases import plan_lease
from transforms.frontier.store import StoreBatch
from transforms.stores.memory import MemoryFrontierStore

URL = "https://a.example/p"


@pytest.mark.parametrize(("before", "after", "revisit", "ok"), [
    (None, "queued", False, True), (None, "filtered", False, True),
    (None, "fetched", False, False),
    ("queued", "fetched", False, True), ("queued", "retry_scheduled", False, True),
    ("retry_scheduled", "error", False, True), ("queued", "queued", False, False),
    ("fetched", "fetched", False, False), ("fetched", "not_modified", True, True),
    ("fetched", "queued", True, False), ("fresh", "fetched", True, True),
    ("queued", "queue_overflow", False, False),
])
def test_the_status_machine(before, after, revisit, ok):
    assert status.allowed(before, after, revisit=revisit) is ok


def _record(state: str | None, **kw) -> UrlRecord:
    return UrlRecord(URL, state, "a.example", True, **kw)


def test_a_lease_does_not_fetch_what_its_rows_say_is_done():
    requests = [CrawlRequest(URL), CrawlRequest(URL + "2")]
    plan = plan_lease(requests, {URL: _record("fetched", fetched_at=5.0)}, now=10.0)
    assert [r.url for r in plan.fetch] == [URL + "2"]
    assert [(r.url, why) for r, why in plan.skipped] == [(URL, "already fetched")]


def test_revisits_are_decided_from_the_row():
    row = _record("fetched", fetched_at=5.0, next_fetch_at=100.0, etag='"e"')
    recrawl = CrawlRequest(URL, revisit="recrawl")
    plan = plan_lease([recrawl], {URL: row}, now=200.0)
    assert plan.fetch[0].conditional == (("If-None-Match", '"e"'),)
    fresh = plan_lease([CrawlRequest(URL, revisit="resubmit")], {URL: row}, now=50.0)
    assert [r.url for r, _ in fresh.fresh] == [URL]
    due = plan_lease([CrawlRequest(URL, revisit="resubmit")], {URL: row}, now=150.0)
    assert [r.url for r in due.fetch] == [URL]
    old = plan_lease([CrawlRequest(URL, lastmod=4.0, revisit="lastmod")], {URL: row}, now=50.0)
    assert old.fetch == () and len(old.skipped) == 1
    new = plan_lease([CrawlRequest(URL, lastmod=6.0, revisit="lastmod")], {URL: row}, now=50.0)
    assert [r.url for r in new.fetch] == [URL]
    pending = plan_lease([CrawlRequest(URL, revisit="resubmit")], {URL: _record("queued")}, 1.0)
    assert pending.fetch == () and "still queued" in pending.skipped[0][1]


def test_rows_read_back_as_records():
    row = outcome_row(UrlOutcome(CrawlRequest(URL), "a.example", "queued", 7.0))
    record = url_record(row.key, row.cells)
    assert record == UrlRecord(URL, "queued", "a.example", True)


def test_the_memory_store_keeps_the_newest_cell_and_applies_batches_in_order():
    store = MemoryFrontierStore()
    queued = outcome_row(UrlOutcome(CrawlRequest(URL), "a.example", "queued", 7.0))
    store.write(StoreBatch(rows=[Row(queued.key, {"f": {"outcome": "fetched"}}, 9.0)]))
    store.write(StoreBatch(rows=[queued]))  # lands later, but is older: fetched stays on top
    assert store.status(URL) == "fetched"
    entry = IndexEntry("a.example", 1.0, CrawlRequest(URL), 0.0, 1)
    store.write(StoreBatch(index_puts=[entry], index_deletes=[entry.row_key]))
    assert store.index_urls("a.example") == []  # deletions come last


def test_an_index_page_passes_held_and_skipped_entries_and_finds_the_next_due_one():
    store = MemoryFrontierStore()
    entries = [IndexEntry("k", 1.0, CrawlRequest(f"{URL}{i}"), 0.0, i) for i in range(4)]
    entries.append(IndexEntry("k", 90.0, CrawlRequest(URL + "later"), 500.0, 9))
    entries[1] = IndexEntry("k", 1.0, CrawlRequest(URL + "1"), 0.0, 1, "me", 100.0)
    store.write(StoreBatch(index_puts=entries))
    from transforms.core.url_keys import url_fingerprint

    page = store.index_page("k", 10, frozenset({url_fingerprint(URL + "2")}), 50.0, 100, "me")
    assert [e.request.url for e in page.entries] == [URL + "0", URL + "3"]
    assert page.next_eligible_at == 500.0 and page.exhausted
    other = store.index_page("k", 10, frozenset(), 50.0, 100, "someone else")
    assert URL + "1" in [e.request.url for e in other.entries]  # not held for a new state
    limited = store.index_page("k", 1, frozenset(), 50.0, 100)
    assert len(limited.entries) == 1 and not limited.exhausted


def test_robots_verdicts_and_pending_marks_are_read_back():
    store = MemoryFrontierStore()
    rules = RobotsRules("parsed", "User-agent: *\nDisallow: /x\n", 200, 5.0)
    store.write(StoreBatch(host_rows=[robots_host_row("a.example", rules, 5.0),
                                      pending_host_row("a.example", True, 5.0),
                                      pending_host_row("b.example", False, 5.0)]))
    assert store.rebuild_page("a.example", None, 10, True, 10, 6.0).robots == rules
    assert store.pending_keys() == ["a.example"]
