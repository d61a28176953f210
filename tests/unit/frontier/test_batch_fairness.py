"""Client batches in one host's queue, driven through HostCore with a real in-memory store
(``tests.unit.frontier.driver``): a small batch that arrives behind a big one is served within
a few leases, a client's batches share one client's turn, and a batch URL that robots.txt
refuses at lease time gets its batch outcome (event and ``batches`` table cell)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

import pytest

from tests.unit.frontier.driver import FrontierDriver
from transforms.core.policy import HostPolicy, Policy
from transforms.core.records import BatchEvent, CrawlRequest
from transforms.formats.rowkeys import row_key
from transforms.formats.schema import BATCH_URL_FAMILY, BATCHES_TABLE, URL_BATCH_FAMILY, WEBTABLE
from transforms.frontier.context import FrontierConfig
from transforms.frontier.state import HostState

HOST = "site.example"
LEASE_URLS = 4
CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=10_000)),
                        max_lease_urls=LEASE_URLS, head_size=64, refill_size=32)


def url(path: str) -> str:
    return f"https://{HOST}/{path}"


def batch(client: str, batch_id: str, n: int, prefix: str | None = None,
          **kw) -> list[CrawlRequest]:
    """``n`` URLs of a client's batch (``client`` "" gives plain seeds, no batch)."""
    return [CrawlRequest(url(f"{prefix or batch_id}/{i}"), batches=(batch_id,) if client else (),
                         client=client, **kw) for i in range(n)]


class Crawl:
    """A key brought to its first lease, then leases answered 200 one step at a time."""

    def __init__(self, *first: Sequence[CrawlRequest], robots: bytes | None = None) -> None:
        self.d = FrontierDriver(CONFIG, HOST)
        self.now = 0.0
        self.fetched: list[str] = []
        self.leases = 0
        for requests in first:
            self.d.element(list(requests), self.now)
        self.d.settle(0.01)
        if self.state().lease is None:
            self.d.timer(0.02)
        assert self.d.lease.robots_url is not None  # robots.txt first
        self.d.answer_robots(robots, status=200 if robots is not None else 404, at=0.05)
        self.now = 0.1

    def state(self) -> HostState:
        state = self.d.state
        assert state is not None
        return state

    def submit(self, requests: Sequence[CrawlRequest]) -> None:
        self.d.element(list(requests), self.now)

    def step(self) -> None:
        d = self.d
        if self.state().lease is not None and d.current_lease.lease_id not in d.jobs:
            d.answer(at=self.now)
        fx = d.timer(self.now)
        self.fetched += [r.request.url for r in fx.fetches]
        if fx.lease is not None and fx.lease.requests:
            self.leases += 1
        d.sink(fx)
        self.now += 0.1

    def run_until(self, done, limit: int = 500) -> None:
        for _ in range(limit):
            if done():
                return
            self.step()
        raise AssertionError(f"not done after {limit} steps; fetched {len(self.fetched)}")

    def count(self, part: str) -> int:
        return sum(1 for u in self.fetched if f"/{part}/" in u)


def late_small_batch(client_a: str, client_b: str) -> tuple[int, int, Crawl]:
    """A submits 300 URLs, a few leases run, then B submits 20. Returns the URLs and the
    leases fetched from B's arrival to B's last URL."""
    crawl = Crawl(batch(client_a, "a1", 300))
    crawl.run_until(lambda: crawl.leases >= 5)
    assert crawl.count("a1") >= 4 * LEASE_URLS and crawl.count("b1") == 0
    before, leases_before = len(crawl.fetched), crawl.leases
    crawl.submit(batch(client_b, "b1", 20))
    crawl.run_until(lambda: crawl.count("b1") == 20)
    last_b = max(i for i, u in enumerate(crawl.fetched) if "/b1/" in u)
    return last_b + 1 - before, crawl.leases - leases_before, crawl


def test_a_late_small_batch_is_served_within_a_few_leases_of_a_big_backlog():
    urls, leases, crawl = late_small_batch("a", "b")
    # B's 20 alternate with A's: about 40 URLs, plus the lease that was out when B came.
    assert urls <= 2 * 20 + 2 * LEASE_URLS, urls
    assert leases <= urls // LEASE_URLS + 2, leases
    assert crawl.count("a1") < 100  # A's backlog is mostly still waiting
    assert len(set(crawl.fetched)) == len(crawl.fetched)  # nothing fetched twice


def test_without_client_batches_the_late_urls_wait_behind_the_backlog():
    urls, leases, crawl = late_small_batch("", "")
    assert urls >= 250, urls  # queued by time: B waits for most of A's 300
    assert leases >= 60
    assert crawl.count("a1") == 300


def test_the_fair_run_serves_b_many_times_sooner_than_the_plain_one():
    fair, _, _ = late_small_batch("a", "b")
    plain, _, _ = late_small_batch("", "")
    assert fair * 5 < plain


def test_two_late_batches_of_different_clients_both_start_at_once():
    crawl = Crawl(batch("a", "a1", 200))
    crawl.run_until(lambda: crawl.leases >= 3)
    before = len(crawl.fetched)
    crawl.submit(batch("b", "b1", 10))
    crawl.submit(batch("c", "c1", 10))
    crawl.run_until(lambda: crawl.count("b1") == 10 and crawl.count("c1") == 10)
    # The lease out, and the one chained after it, were taken before B and C came.
    assert len(crawl.fetched) - before <= 3 * 10 + 3 * LEASE_URLS


def shares(first: Sequence[Sequence[CrawlRequest]], window: int) -> Counter[str]:
    crawl = Crawl(*first)
    crawl.run_until(lambda: len(crawl.fetched) >= window)
    return Counter(u.split("/")[3][0] for u in crawl.fetched[:window])  # client: a or b


@pytest.mark.parametrize("order", ["a_first", "b_first"])
def test_a_client_with_two_batches_gets_about_one_client_share(order):
    a = [batch("a", "a1", 100), batch("a", "a2", 100)]
    b = [batch("b", "b1", 200)]
    # 160 URLs: every batch still has backlog (a1, the first to run out, has 100)
    counts = shares(a + b if order == "a_first" else b + a, 160)
    assert counts["a"] + counts["b"] == 160
    ratio = counts["a"] / counts["b"]
    # Each batch on its own turn would give A two shares (ratio 2).
    assert 0.6 <= ratio <= 1.6, counts


def test_two_clients_with_one_batch_each_share_equally():
    counts = shares([batch("a", "a1", 100), batch("b", "b1", 100)], 120)
    assert abs(counts["a"] - counts["b"]) <= LEASE_URLS, counts


# -- batch outcomes decided by the frontier ------------------------------------------------------


def events(d: FrontierDriver) -> list[BatchEvent]:
    return [e for fx in d.effects for e in fx.batch_events]


def test_a_batch_url_refused_by_robots_at_lease_time_gets_its_batch_outcome():
    requests = [CrawlRequest(url(p), batches=("a1",), client="a")
                for p in ("open/1", "private/x", "open/2")]
    crawl = Crawl(requests, robots=b"User-agent: *\nDisallow: /private\n")
    crawl.step()  # robots.txt harvested: the lease refuses private/x, leases the others
    blocked = url("private/x")
    assert [(e.batch_id, e.url, e.outcome) for e in events(crawl.d)] == [
        ("a1", blocked, "robots_blocked")]
    assert crawl.d.store.status(blocked) == "robots_blocked"
    cells = crawl.d.store.read_row(BATCHES_TABLE, "a1")
    assert cells is not None
    assert json.loads(cells[BATCH_URL_FAMILY][blocked])["o"] == "robots_blocked"
    assert set(cells[BATCH_URL_FAMILY]) == {blocked}  # the others are not decided yet
    row = crawl.d.store.read_row(WEBTABLE, row_key(blocked))
    assert row is not None and row[URL_BATCH_FAMILY] == {"a1": "robots_blocked"}
    assert [r.url for r in crawl.d.lease.requests] == [url("open/1"), url("open/2")]


def test_a_batch_url_refused_by_known_robots_rules_at_admission_gets_its_outcome():
    crawl = Crawl(batch("a", "a1", 2, prefix="open"),
                  robots=b"User-agent: *\nDisallow: /private\n")
    crawl.run_until(lambda: crawl.count("open") == 2)
    crawl.submit([CrawlRequest(url("private/y"), batches=("a2",), client="a")])
    assert [(e.batch_id, e.outcome) for e in events(crawl.d)] == [("a2", "robots_blocked")]
    cells = crawl.d.store.read_row(BATCHES_TABLE, "a2")
    assert cells is not None and url("private/y") in cells[BATCH_URL_FAMILY]


def test_a_batch_asking_again_for_a_recent_page_is_answered_cached():
    crawl = Crawl(batch("", "seed", 1))
    crawl.run_until(lambda: crawl.count("seed") == 1)  # its row is written with it
    again = CrawlRequest(url("seed/0"), batches=("b1",), client="b", cache_hours=24.0)
    crawl.submit([again])
    crawl.run_until(lambda: any(e.batch_id == "b1" for e in events(crawl.d)), limit=20)
    (event,) = [e for e in events(crawl.d) if e.batch_id == "b1"]
    assert (event.url, event.outcome, event.http_status) == (url("seed/0"), "cached", 200)
    assert crawl.count("seed") == 1  # answered from the row, not fetched again
    cells = crawl.d.store.read_row(BATCHES_TABLE, "b1")
    assert cells is not None
    assert json.loads(cells[BATCH_URL_FAMILY][url("seed/0")])["o"] == "cached"
