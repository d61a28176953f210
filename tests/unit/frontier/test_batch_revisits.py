"""A URL two batches ask for while it is still queued is fetched once and both batches get its
outcome. Driven through HostCore with the in-memory store: the head holds one
entry, which the second batch's revisit joins; a revisit that arrives while the URL's lease is
out waits in the index until the URL has a row."""

from __future__ import annotations

from tests.unit.frontier.test_batch_fairness import HOST, Crawl
from transforms.core.records import CrawlRequest
from transforms.formats.schema import BATCHES_TABLE


def test_a_url_two_batches_ask_for_while_it_is_queued_is_fetched_once_for_both():
    page = f"https://{HOST}/shared"
    first = CrawlRequest(page, batches=("a1",), client="a")
    again = CrawlRequest(page, batches=("b1",), client="b")
    crawl = Crawl([first], [again])
    outcomes: dict[str, str] = {}
    for _ in range(400):
        for batch_id in ("a1", "b1"):
            cells = crawl.d.store.read_row(BATCHES_TABLE, batch_id) or {}
            if page in cells.get("u", {}):
                outcomes[batch_id] = cells["u"][page]
        if len(outcomes) == 2:
            break
        crawl.step()
        crawl.now += 1.0  # the deferred entry asks again a few seconds later
    assert crawl.fetched.count(page) == 1
    assert set(outcomes) == {"a1", "b1"}, outcomes
    assert all('"o": "fetched"' in outcomes[b] for b in ("a1", "b1")), outcomes
    assert crawl.d.index() == [page]  # only its recrawl is left: the revisit joined the first


def test_a_batch_asking_for_a_url_being_fetched_waits_and_is_answered_from_its_row():
    page = f"https://{HOST}/busy"
    crawl = Crawl([CrawlRequest(page, batches=("a1",), client="a")])
    while crawl.state().lease is None or not crawl.state().lease.entries:
        crawl.step()
    crawl.submit([CrawlRequest(page, batches=("b1",), client="b")])  # the lease is out
    outcome = ""
    for _ in range(400):
        cells = crawl.d.store.read_row(BATCHES_TABLE, "b1") or {}
        outcome = cells.get("u", {}).get(page, "")
        if outcome:
            break
        crawl.step()
        crawl.now += 1.0
    assert crawl.fetched.count(page) == 1
    assert '"o": "cached"' in outcome, outcome
