"""A URL that errored, answered 404 or was robots-blocked, submitted again (a plain seed, or a
client batch), is tried again: it used to be dropped silently (the seen filter knew it and its
``s:next_fetch`` made it look fresh). A URL fetched successfully and still fresh is not."""

from __future__ import annotations

from tests.unit.frontier.test_batch_fairness import HOST, Crawl
from transforms.core.records import CrawlRequest
from transforms.formats.rowkeys import row_key


def _until(crawl: Crawl, predicate, steps: int = 200) -> None:
    for _ in range(steps):
        if predicate():
            return
        crawl.step()
        crawl.now += 1.0
    raise AssertionError("not reached")


def test_an_errored_or_404_url_sent_again_as_a_seed_is_fetched_again_a_fresh_page_is_not():
    broken, missing, good = (f"https://{HOST}/{p}" for p in ("broken", "missing", "good"))
    crawl = Crawl([CrawlRequest(broken), CrawlRequest(missing), CrawlRequest(good)])
    answers = {broken: None, missing: 404, good: 200}
    original_answer = crawl.d.answer

    def answer(statuses=None, **kw):
        return original_answer({**answers, **(statuses or {})}, **kw)

    crawl.d.answer = answer  # type: ignore[method-assign]
    _until(crawl, lambda: {broken, missing, good} <= set(crawl.fetched)
           and crawl.d.store.status(broken) == "error")
    before = list(crawl.fetched)
    answers[broken] = 200
    crawl.submit([CrawlRequest(broken), CrawlRequest(missing), CrawlRequest(good)])
    _until(crawl, lambda: crawl.d.store.status(good) == "fresh"
           and crawl.fetched.count(missing) > before.count(missing)
           and crawl.d.store.status(broken) == "fetched")
    assert crawl.fetched.count(good) == before.count(good)  # still fresh: not fetched again


def test_a_robots_blocked_url_sent_again_gets_an_outcome_again_and_is_not_fetched():
    blocked = f"https://{HOST}/private/x"
    crawl = Crawl([CrawlRequest(blocked)], robots=b"User-agent: *\nDisallow: /private/\n")
    _until(crawl, lambda: crawl.d.store.status(blocked) == "robots_blocked")
    first = crawl.d.store.latest(crawl.d.store.webtable, row_key(blocked))["f"]["outcome_at"]
    crawl.now += 5.0
    crawl.submit([CrawlRequest(blocked, batches=("b1",), client="b")])
    _until(crawl, lambda: (crawl.d.store.read_row("batches", "b1") or {}).get("u"))
    again = crawl.d.store.latest(crawl.d.store.webtable, row_key(blocked))["f"]["outcome_at"]
    assert again > first and crawl.d.store.status(blocked) == "robots_blocked"
    assert blocked not in crawl.fetched
