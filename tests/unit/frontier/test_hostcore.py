"""HostCore through its state cells, with a real in-memory store and a hand-driven clock:
rebuild, admission, robots.txt first, leases, the bounded head and the index behind it,
restarts, acknowledgements."""

from __future__ import annotations

import gzip
import logging

import pytest

from tests.unit.frontier.driver import FrontierDriver
from transforms.core.policy import HostPolicy, Policy
from transforms.core.records import AckToken, CrawlRequest
from transforms.core.url_keys import url_fingerprint
from transforms.formats.schema import HOST_FAMILY
from transforms.frontier.context import FrontierConfig
from transforms.frontier.hostcore import LOST_LEASE_GRACE
from transforms.frontier.leases import FetchConfig

HOST = "site.example"
CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=1.0, max_pages_per_host=50)),
                        lease_seconds=5.0, max_lease_urls=32, head_size=8, refill_size=4,
                        robots_agent="beam-crawler", retry_delay=2.0,
                        fetch=FetchConfig(total_timeout=30.0))
ROBOTS = b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\n"


def url(path: str) -> str:
    return f"https://{HOST}/{path}"


def req(path: str, **kw) -> CrawlRequest:
    return CrawlRequest(url(path), **kw)


def ready(driver: FrontierDriver, *requests: CrawlRequest, robots: bytes | None = ROBOTS,
          now: float = 0.0) -> None:
    """Brings a fresh key to its first URL lease: rebuild, admission, robots.txt."""
    driver.element(list(requests), now)
    driver.settle(now + 0.01)
    if driver.state.lease is None:
        driver.timer(now + 0.02)
    driver.answer_robots(robots, status=200 if robots is not None else 404, at=now + 0.05)
    driver.timer(now + 0.1)
    if driver.state.lease is None and driver.state.head_size:
        driver.timer(max(now + 0.1, driver.state.next_allowed_at))


def statuses(driver: FrontierDriver, *paths: str) -> list[str | None]:
    return [driver.store.status(url(p)) for p in paths]


# -- rebuild and admission -----------------------------------------------------------------------


def test_a_key_with_empty_state_rebuilds_before_it_admits_anything():
    d = FrontierDriver(CONFIG, HOST)
    fx = d.element([req("a"), req("b")], now=0.0, tokens=[AckToken("m1", 0, 1)])
    state = d.state
    assert state.phase == "rebuilding" and state.io is not None and state.inbox == 2
    assert fx.outcomes == [] and d.acks == []  # nothing admitted, nothing acknowledged yet
    d.timer(0.01)  # the rebuild read is back: the inbox is admitted
    assert d.state.phase == "ready"
    assert statuses(d, "a", "b") == ["queued", "queued"]
    assert d.index() == [url("a"), url("b")]  # durable work, in fetch order
    assert d.acks == [AckToken("m1", 0, 1)]  # released with the rows, not before
    assert d.lease.robots_url == url("robots.txt")  # robots.txt before any page


def test_robots_first_then_leases_keep_the_crawl_delay_and_skip_disallowed():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"), req("private/x"), req("b"))
    assert d.state.robots_mode == "parsed"
    lease = d.lease
    assert [r.url for r in lease.requests] == [url("a"), url("b")] and lease.delay == 2.0
    # private/x was blocked at admission? No: robots.txt was unknown then; it is blocked when
    # the lease is planned, recorded, and its index entry deleted.
    assert statuses(d, "private/x") == ["robots_blocked"]
    assert url("private/x") not in d.index()
    fx_out = d.answer(at=0.3)
    fx = d.timer(0.4)
    assert [r.request.url for r in fx.fetches] == [url("a"), url("b")]
    assert d.state.next_allowed_at == pytest.approx(0.3 + 2.0)
    assert fx_out.skipped == () and fx_out.fresh == ()  # rows were queued: both fetched
    d.sink(fx)  # the row sink writes the rows, then deletes their index entries
    assert statuses(d, "a", "b") == ["fetched", "fetched"]
    assert [u for u in d.index() if u in (url("a"), url("b"))] == [url("a"), url("b")]
    # ... the entries left for a and b are their recrawls, eligible at their next fetch time
    page = d.store.index_page(HOST, 10, frozenset(), 1.0, 100)
    assert page.entries == () and page.next_eligible_at is not None


def test_known_urls_are_dropped_and_known_robots_rules_block_at_admission():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"))
    fx = d.element([req("a", discovered_from=url("x")), req("private/y")], now=1.0)
    assert [o.outcome for o in fx.outcomes] == ["robots_blocked"]
    assert d.state.counters["dedup_dropped"] == 1


def test_a_gzip_robots_txt_is_obeyed_and_shown_in_the_host_stats():
    d = FrontierDriver(CONFIG, HOST)
    d.element([req("a"), req("genindex-A")], now=0.0)
    d.settle(0.01)
    body = gzip.compress(b"User-agent: *\nDisallow: /genindex-\nCrawl-delay: 0.5\n")
    d.answer_robots(body, at=0.05, encoding="gzip")
    fx = d.timer(1.1)
    assert [r.url for r in d.lease.requests] == [url("a")]
    assert [o.outcome for o in fx.outcomes] == ["robots_blocked"]
    cells = _core(d).stats(1.1)
    assert (cells.robots_status, cells.robots_rules, cells.crawl_delay) == ("parsed", 1, 0.5)


def test_an_undecodable_robots_txt_is_retried_like_an_unreachable_one_and_says_why():
    d = FrontierDriver(CONFIG, HOST)
    d.element([req("a")], now=0.0)
    d.settle(0.01)
    d.answer_robots(b"\x1b\x3a\x00\xf8", at=0.1, encoding="br")
    d.timer(0.2)
    state = d.state
    assert state.robots_mode == "disallow_all" and state.robots_attempts == 1
    assert state.last_error == "robots.txt not decodable: unknown content-encoding 'br'"
    assert state.robots_retry_at == 0.2 + CONFIG.retry_delay
    assert state.lease is None and state.head_size == 1


def test_robots_txt_with_content_and_no_rule_is_logged_as_a_warning(caplog):
    d = FrontierDriver(CONFIG, HOST)
    d.element([req("a")], now=0.0)
    d.settle(0.01)
    d.answer_robots(b"<html><body>Welcome!</body></html>", at=0.05)
    with caplog.at_level(logging.WARNING, logger="transforms.frontier.harvest"):
        d.timer(0.1)
    (record,) = [r for r in caplog.records if "no Allow/Disallow rule" in r.getMessage()]
    assert record.__dict__["host"] == HOST


def test_unreachable_robots_is_retried_then_fails_the_head_with_an_error():
    d = FrontierDriver(CONFIG, HOST)
    d.element([req("a"), req("b")], now=0.0)
    d.settle(0.01)
    now = 0.01
    for _ in range(CONFIG.robots_max_attempts):
        if d.state.lease is None:
            now = max(now, d.state.robots_retry_at)
            d.timer(now)
        d.answer_robots(None, status=None, at=now)
        now += 0.1
        d.timer(now)
    assert statuses(d, "a", "b") == ["error", "error"]
    assert d.index() == []  # their work is settled
    late = d.element([req("c")], now=now + 1)
    assert [o.outcome for o in late.outcomes] == ["error"]  # fails fast during the error TTL


# -- the head, the index and refills ---------------------------------------------------------------


def test_a_backlog_bigger_than_the_head_is_all_fetched_once_in_order():
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=1000)),
                            max_lease_urls=3, head_size=4, refill_size=4)
    d = FrontierDriver(config, HOST)
    paths = [f"p{i:02d}" for i in range(20)]
    ready(d, *[req(p) for p in paths], robots=None)
    assert d.state.head_size <= 4 and len(d.index()) == 20  # the rest waits in the index
    fetched: list[str] = []
    now = 1.0
    for _ in range(60):
        if d.state.lease is not None and d.current_lease.lease_id not in d.jobs:
            d.answer(at=now)
        fx = d.timer(now)
        fetched += [r.request.url for r in fx.fetches]
        d.sink(fx)
        now += 0.1
        if len(fetched) == 20 and d.state.lease is None:
            break
    assert fetched == [url(p) for p in paths]  # every URL once, breadth-first order kept
    assert not _core(d).pending() or d.state.next_eligible_at is not None


def test_state_written_per_element_does_not_grow_with_the_backlog():
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=100_000)),
                            head_size=50, refill_size=25)
    d = FrontierDriver(config, HOST)
    ready(d, req("seed"), robots=None)
    sizes = []
    for batch in range(40):
        before = sum(len(v.value or b"") for v in d.values.values()) + sum(
            len(b) for bag in d.bags.values() for b in bag.items)
        d.element([req(f"b{batch}/u{i}") for i in range(100)], now=2.0 + batch)
        after = sum(len(v.value or b"") for v in d.values.values()) + sum(
            len(b) for bag in d.bags.values() for b in bag.items)
        sizes.append(after - before)
        d.timer(2.5 + batch)  # arrivals join the head; the rest stays in the index
    # 4,000 URLs queued; what an element adds to state is its arrivals and at most one seen
    # stage, never the backlog.
    assert d.state.head_size <= 50 and len(d.index()) >= 4000
    assert max(sizes[-10:]) < 2 * max(sizes[:10]) + 10_000


def test_a_refill_goes_on_past_a_window_of_urls_waiting_for_their_rows():
    """The row sink lags (pages wait for their WARC files): the first index rows are all held
    by fetched URLs. A refill reads a bounded window (refill + head + lease rows); when it
    holds nothing to do, the next read continues after it instead of reading it again, so
    the key reaches the rest of its work (it used to re-read the window at every firing,
    the timer firing every 20 ms, and never fetched the rest)."""
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=1000)),
                            max_lease_urls=2, head_size=4, refill_size=2)
    d = FrontierDriver(config, HOST)
    paths = [f"p{i:02d}" for i in range(30)]
    ready(d, *[req(p) for p in paths], robots=None)
    fetched: list[str] = []
    now, firings = 1.0, 0
    while len(fetched) < 30 and firings < 400:
        if d.state.lease is not None and d.current_lease.lease_id not in d.jobs:
            d.answer(at=now)
        fx = d.timer(now)  # no sink: every fetched URL's entry stays held
        fetched += [r.request.url for r in fx.fetches]
        firings += 1
        now += 0.02
    assert fetched == [url(p) for p in paths]  # all of it, once, in order
    assert firings < 120, firings  # about a lease and a read per two URLs, no spinning


RACE_CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=1000)),
                             max_lease_urls=2, head_size=8, refill_size=4)


def _to_a_slow_refill(d: FrontierDriver) -> list[str]:
    """p0..p9 queued (two beyond the head), leased two by two until the head is empty and a
    refill read is out, held by the driver; then q0, q1 arrive and are leased (q0, and q1 in
    a lease chained after it) while the read is still out. Returns the URLs fetched so far."""
    d.element([req(f"p{i}") for i in range(10)], now=0.0)
    d.run_reads()
    d.timer(0.01)  # rebuilt: the inbox is admitted
    d.timer(0.02)  # arrivals join the head; the robots lease
    d.answer_robots(None, status=404, at=0.03)
    fetched: list[str] = []
    now = 0.1
    while d.state.io is None or d.state.lease is not None:
        fx = d.timer(now)
        fetched += [r.request.url for r in fx.fetches]
        d.sink(fx)
        if d.state.lease is not None and d.current_lease.lease_id not in d.jobs:
            d.answer(at=now)
        now += 0.1
    assert d.state.head_size == 0 and d.held_reads
    d.element([req("q0"), req("q1")], now=now)
    d.timer(now + 0.01)  # q0, q1 join the head and are leased; the read is still out
    out = [r.url for lease in d.leases[-2:] for r in lease.requests]
    assert out == [url("q0"), url("q1")] and d.state.next_lease is not None
    return fetched


def _harvest_both(d: FrontierDriver, fetched: list[str], at: float) -> None:
    """The lease out and the one chained after it end and are harvested, rows not yet
    written."""
    for i in range(2):
        d.answer(at=at + i / 100)
        fetched += [r.request.url for r in d.timer(at + i / 100 + 0.005).fetches]


def _finish(d: FrontierDriver, fetched: list[str], now: float, lag: int = 6) -> list[str]:
    """Runs the key to the end; a harvest's rows become durable ``lag`` steps later (a page
    waits for its WARC file), so a lease cannot count on them to skip a URL."""
    waiting = []
    for _ in range(40):
        if d.state.lease is not None and d.current_lease.lease_id not in d.jobs:
            d.answer(at=now)
        d.run_reads()
        fx = d.timer(now)
        fetched += [r.request.url for r in fx.fetches]
        waiting.append(fx)
        if len(waiting) > lag:
            d.sink(waiting.pop(0))
        now += 0.1
    for fx in waiting:
        d.sink(fx)
    return fetched


def test_a_refill_read_never_puts_a_url_of_the_lease_out_in_the_head_again():
    d = FrontierDriver(RACE_CONFIG, HOST, hold_reads=True)
    fetched = _to_a_slow_refill(d)
    d.run_reads()  # its snapshot has q0 and q1 as pending: their leases have not ended
    d.answer(at=2.0)
    fetched = _finish(d, fetched, 2.1)
    assert sorted(fetched) == sorted([url(f"p{i}") for i in range(10)] + [url("q0"), url("q1")])
    assert len(fetched) == len(set(fetched))


def test_a_refill_read_that_comes_back_after_a_harvest_drops_what_was_harvested():
    d = FrontierDriver(RACE_CONFIG, HOST, hold_reads=True)
    fetched = _to_a_slow_refill(d)
    d.run_reads(deliver=False)  # the snapshot is taken: q0 and q1 still pending in it
    _harvest_both(d, fetched, 2.0)  # harvested before the read comes back; no rows yet
    passed = set(d.state.io.passed)
    assert {url_fingerprint(url(q)).hex() for q in ("q0", "q1")} <= passed
    d.deliver_reads()
    fetched = _finish(d, fetched, 2.2)
    assert sorted(fetched) == sorted([url(f"p{i}") for i in range(10)] + [url("q0"), url("q1")])
    assert len(fetched) == len(set(fetched))


def test_a_refill_read_outlived_by_too_many_harvests_is_read_again(monkeypatch):
    import transforms.frontier.harvest

    monkeypatch.setattr(transforms.frontier.harvest, "REFILL_PASSED_CAP", 1)
    d = FrontierDriver(RACE_CONFIG, HOST, hold_reads=True)
    fetched = _to_a_slow_refill(d)
    d.run_reads(deliver=False)
    _harvest_both(d, fetched, 2.0)
    assert d.state.io.stale and not d.state.io.passed
    d.deliver_reads()
    d.timer(2.2)  # the stale page is dropped whole; a new read is started
    assert d.state.io is not None and d.state.head_size == 0
    fetched = _finish(d, fetched, 2.3)
    assert sorted(fetched) == sorted([url(f"p{i}") for i in range(10)] + [url("q0"), url("q1")])
    assert len(fetched) == len(set(fetched))


def test_a_lost_lease_gives_its_urls_back():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"))
    lease = d.lease
    d.leases.clear()  # the service never heard of it (the key moved to another worker)
    d.timer(lease.deadline + LOST_LEASE_GRACE + 1)
    assert d.state.lease is None and d.state.head_size == 1


def test_transient_failures_are_retried_with_the_entry_rewritten_then_recorded():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("flaky"))
    now = 0.2
    for attempt in range(1, 4):
        d.answer({url("flaky"): 503}, at=now)
        fx = d.timer(now + 0.1)
        d.sink(fx)
        if attempt < 3:
            assert statuses(d, "flaky") == ["retry_scheduled"]
            assert d.store.index_urls(HOST) == [url("flaky")]
            now = max(now + 0.2, d.state.next_allowed_at, d.state.backoff.slow_until) + 0.01
            d.timer(now)
            assert d.lease.requests[0].attempt == attempt
    assert statuses(d, "flaky") == ["not_stored"]  # the 503 is its final answer


# -- restarts, second jobs, revisits -------------------------------------------------------------


def test_a_restart_loses_nothing_and_fetches_nothing_twice():
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0)), max_lease_urls=2,
                            head_size=8, refill_size=4)
    d = FrontierDriver(config, HOST)
    ready(d, *[req(f"p{i}") for i in range(6)], robots=None)
    d.answer(at=0.2)
    d.sink(d.timer(0.3))  # p0, p1 fetched and recorded; the next lease (p2, p3) is out
    in_flight = [r.url for r in d.lease.requests]
    # The run is killed: state, leases and reads are gone; the tables stay.
    again = FrontierDriver(config, HOST, d.store)
    again.element([req("p0", discovered_from=url("x")), req("new")], now=1.0)
    again.settle(1.01)
    assert again.state.phase == "ready" and again.state.counters["dedup_dropped"] == 1
    fetched = []
    now = 1.1
    for _ in range(20):
        if again.state.lease is not None and again.current_lease.lease_id not in again.jobs:
            if again.lease.robots_url:
                again.answer_robots(None, status=404, at=now)
            else:
                again.answer(at=now)
        fx = again.timer(now)
        fetched += [r.request.url for r in fx.fetches]
        again.sink(fx)
        now += 0.1
    expected = [url(f"p{i}") for i in range(2, 6)] + [url("new")]
    assert sorted(fetched) == sorted(expected)  # p0, p1 not again; nothing lost
    assert set(in_flight) <= set(fetched)  # the lease out at the kill is done once more


def test_a_second_job_fetches_nothing_that_is_done_and_finds_its_robots_verdict():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"))
    d.answer(at=0.3)
    d.sink(d.timer(0.4))
    second = FrontierDriver(CONFIG, HOST, d.store)
    second.element([], now=1.0)  # woken by the new job (the hosts table marks it pending)
    second.settle(1.01)
    state = second.state
    assert state.robots_mode == "parsed"  # the saved verdict, still fresh: no new fetch
    assert state.counters["accepted"] == 1 and state.counters["fetched"] == 1
    second.timer(1.5)
    assert second.leases == []  # nothing due: a is fetched, its recrawl is a day away
    fx = second.element([req("a", discovered_from=url("x"))], now=2.0)
    assert fx.outcomes == [] and second.state.counters["dedup_dropped"] == 1


def test_pending_keys_are_marked_in_the_hosts_table_while_they_have_work():
    config = FrontierConfig(policy=Policy(HostPolicy(
        min_delay=0.0, recrawl=Policy().defaults.recrawl)), head_size=8)
    d = FrontierDriver(config, HOST)
    ready(d, req("a"), robots=None)
    assert d.store.pending_keys() == [HOST]
    d.answer(at=0.3)
    d.sink(d.timer(0.4))
    # a's recrawl is scheduled: the key stays pending (a new job must wake it) ...
    assert d.store.pending_keys() == [HOST]
    host_cells = d.store.latest(d.store.hosts, HOST)[HOST_FAMILY]
    assert host_cells["robots_mode"] == "allow_all"


def test_a_due_recrawl_is_fetched_conditionally_with_the_stored_validators():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"), robots=None)
    d.answer(at=0.3, headers={url("a"): (("ETag", '"v1"'), ("Cache-Control", "max-age=3600"))})
    fx = d.timer(0.4)
    d.store.write_rows("webtable", [])  # nothing else: the sink below writes a's row
    d.sink(fx)
    due = fx.fetches[0].next_fetch_at
    assert due is not None and due >= 3600
    d.timer(due + 1)  # the recrawl is eligible: a refill finds it ...
    d.timer(due + 1.1)  # ... and a lease takes it, conditional on the stored ETag
    lease = d.lease
    assert lease.requests[0].revisit == "recrawl"
    d.answer({url("a"): 304}, at=due + 2)
    assert d.jobs[lease.lease_id].results[0].request.conditional == (("If-None-Match", '"v1"'),)


def test_a_seed_sent_again_is_fresh_before_its_next_fetch_and_refetched_after():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"), robots=None)
    d.answer(at=0.3)
    d.sink(d.timer(0.4))
    d.element([req("a")], now=10.0)  # a client asks again: a revisit entry
    d.timer(11.0)
    assert d.lease.requests[0].revisit == "resubmit"
    outcome = d.answer(at=11.1)
    assert [r.url for r, _ in outcome.fresh] == [url("a")] and outcome.results == ()
    d.timer(11.2)
    assert statuses(d, "a") == ["fresh"]


def test_acknowledgements_of_admitted_requests_are_released_with_their_rows():
    d = FrontierDriver(CONFIG, HOST)
    ready(d, req("a"))
    d.element([req("b")], now=1.0, tokens=[AckToken("m2", 1, 2)])
    assert d.acks[-1] == AckToken("m2", 1, 2) and d.store.status(url("b")) == "queued"


def _core(d: FrontierDriver):
    return d.cells().core(d.config, d.key)
