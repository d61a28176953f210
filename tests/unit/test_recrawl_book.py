"""RecrawlBook: the per-host memory of fetched URLs and their next fetch times."""

from __future__ import annotations

import pickle

import pytest

from transforms.records import CrawlRequest
from transforms.recrawl import FetchHistory, Validators
from transforms.recrawl_book import RecrawlBook


def _history(due: float, etag: str | None = None, modified: str | None = None,
             interval: float = 10.0) -> FetchHistory:
    return FetchHistory(fetched_at=due - interval, checksum="sha1:X",
                        validators=Validators(etag, modified), interval=interval,
                        next_fetch_at=due)


def _req(path: str, depth: int = 1, priority: int = 2) -> CrawlRequest:
    return CrawlRequest(f"https://h.example/{path}", depth, priority, "https://h.example/")


def test_record_and_get_round_trip_through_pickle():
    book = RecrawlBook(10)
    assert book.record(b"a", _req("a"), _history(100.0, '"v1"', "Mon, 01 Jan 2024 00:00:00 GMT"))
    book = pickle.loads(pickle.dumps(book))
    entry = book.get(b"a")
    assert entry is not None and len(book) == 1
    assert entry.request == _req("a")
    assert entry.history == _history(100.0, '"v1"', "Mon, 01 Jan 2024 00:00:00 GMT")
    assert book.get(b"b") is None


def test_the_recrawl_request_is_conditional_and_starts_its_attempts_afresh():
    book = RecrawlBook(10)
    book.record(b"a", _req("a"), _history(100.0, '"v1"', "Mon, 01 Jan 2024 00:00:00 GMT"))
    entry = book.get(b"a")
    assert entry is not None
    request = entry.recrawl_request()
    assert (request.url, request.depth, request.priority, request.attempt) == (
        _req("a").url, 1, 2, 0)
    assert dict(request.conditional) == {"If-None-Match": '"v1"',
                                         "If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}
    book.record(b"b", _req("b"), _history(100.0))
    plain = book.get(b"b")
    assert plain is not None and plain.recrawl_request().conditional == ()


def test_due_urls_come_out_earliest_first_once_and_within_the_limit():
    book = RecrawlBook(10)
    for name, due in ((b"late", 300.0), (b"early", 100.0), (b"mid", 200.0)):
        book.record(name, _req(name.decode()), _history(due))
    assert book.next_due() == 100.0
    assert book.pop_due(99.0, 10) == []
    first = book.pop_due(250.0, 1)
    assert [e.request.url for e in first] == [_req("early").url]
    assert [e.request.url for e in book.pop_due(250.0, 10)] == [_req("mid").url]
    assert book.pop_due(250.0, 10) == []  # scheduled ones never come out twice
    assert book.next_due() == 300.0
    assert book.is_scheduled(b"early") and not book.is_scheduled(b"late")


def test_a_new_record_supersedes_the_old_due_time():
    book = RecrawlBook(10)
    book.record(b"a", _req("a"), _history(100.0))
    book.pop_due(100.0, 10)
    book.record(b"a", _req("a"), _history(500.0))  # fetched again: due later
    assert not book.is_scheduled(b"a")
    assert book.pop_due(400.0, 10) == [] and book.next_due() == 500.0


def test_a_recrawl_without_response_is_due_one_interval_later():
    book = RecrawlBook(10)
    book.record(b"a", _req("a"), _history(100.0, interval=40.0))
    book.pop_due(100.0, 10)
    assert book.reschedule(b"a", now=120.0)
    assert book.next_due() == 160.0
    assert not book.reschedule(b"unknown", now=120.0)


def test_a_resubmission_marks_the_url_scheduled():
    book = RecrawlBook(10)
    book.record(b"a", _req("a"), _history(100.0))
    book.mark_scheduled(b"a")
    book.mark_scheduled(b"unknown")  # nothing to mark
    assert book.pop_due(1000.0, 10) == [] and book.next_due() is None
    assert not book.is_scheduled(b"unknown")


def test_the_book_is_bounded():
    book = RecrawlBook(2)
    assert book.record(b"a", _req("a"), _history(100.0))
    assert book.record(b"b", _req("b"), _history(100.0))
    assert not book.record(b"c", _req("c"), _history(100.0))
    assert book.record(b"a", _req("a"), _history(200.0))  # a known URL is always updated
    assert len(book) == 2 and book.get(b"c") is None
    with pytest.raises(ValueError):
        RecrawlBook(0)
