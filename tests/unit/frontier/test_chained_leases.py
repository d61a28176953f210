"""A key with a lease out chains the next one from its head (``leasing.plan_successor``): the
fetch service runs it right after, so the host does not wait for a harvest. Every URL is still
fetched once and in order, at most two leases are out, none is chained after a robots lease
or while the host backs off, and lost leases give all their URLs back after the later one's
deadline."""

from __future__ import annotations

from tests.unit.frontier.driver import FrontierDriver
from transforms.core.policy import HostPolicy, Policy
from transforms.core.records import CrawlRequest
from transforms.frontier.context import FrontierConfig
from transforms.frontier.hostcore import LOST_LEASE_GRACE

HOST = "site.example"
CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=1000)),
                        max_lease_urls=4, head_size=64, refill_size=32, retry_delay=2.0)


def url(i: int) -> str:
    return f"https://{HOST}/p{i:02d}"


def ready(n: int) -> FrontierDriver:
    d = FrontierDriver(CONFIG, HOST)
    d.element([CrawlRequest(url(i)) for i in range(n)], now=0.0)
    d.timer(0.01)
    assert d.lease.robots_url is not None
    assert d.state.next_lease is None  # nothing is chained after a robots lease
    d.timer(0.02)
    assert d.state.next_lease is None
    d.answer_robots(b"User-agent: *\nAllow: /\n", at=0.03)
    d.timer(0.04)
    return d


def test_the_next_lease_is_chained_while_one_is_out_and_every_url_comes_once_in_order():
    d = ready(12)
    first, second = d.leases[-2:]  # started together: the second chained after the first
    assert [r.url for r in first.requests] == [url(i) for i in range(4)]
    assert second.after == first.lease_id and d.state.next_lease.lease_id == second.lease_id
    assert [r.url for r in second.requests] == [url(i) for i in range(4, 8)]
    assert second.deadline > first.deadline
    assert d.cells().core(d.config, HOST).stats(0.05).queued == 12
    d.timer(0.06)
    assert len(d.leases) == 3  # the robots lease and two: no third while two are out
    fetched = [r.request.url for r in d.answer(at=0.1, lease=first).results]
    d.timer(0.11)  # harvests the first; the second is the one out; a third is chained
    assert d.state.lease.lease_id == second.lease_id
    third = d.lease
    assert third.after == second.lease_id
    fetched += [r.request.url for r in d.answer(at=0.2, lease=second).results]
    d.timer(0.21)
    fetched += [r.request.url for r in d.answer(at=0.3, lease=third).results]
    d.timer(0.31)
    assert fetched == [url(i) for i in range(12)]
    assert d.state.lease is None and d.state.next_lease is None


def test_a_short_head_is_split_between_a_lease_and_the_one_chained_after_it():
    d = ready(3)
    first, second = d.leases[-2:]
    assert [[r.url for r in lease.requests] for lease in (first, second)] == [
        [url(0), url(1)], [url(2)]]


def test_a_chained_lease_cancelled_after_a_failure_gives_its_urls_back():
    d = ready(8)
    first, second = d.leases[-2:]
    # A 503: the service stops the lease there (the rest unfinished) and the host backs off.
    d.answer({url(0): 503}, at=0.1, lease=first, unfinished=[url(1), url(2), url(3)])
    d.timer(0.11)
    assert d.state.lease.lease_id == second.lease_id and d.state.next_lease is None
    d.timer(0.12)
    assert d.state.next_lease is None  # none is chained while the host backs off
    d.answer(at=0.12, lease=second, cancelled="the lease before it stopped early")
    d.timer(0.13)
    assert d.state.lease is None
    head = [e.request.url for e in d.cells().core(d.config, HOST).ctx.head]
    assert set(head) == {url(i) for i in range(8)}  # nothing lost; the retry among them
    assert d.state.next_allowed_at >= d.state.backoff.slow_until > 0.13


def test_lost_leases_give_every_url_back_after_the_later_deadline():
    d = ready(8)
    first, second = d.leases[-2:]
    d.leases.clear()  # the service never heard of either (the key moved)
    d.timer(first.deadline + LOST_LEASE_GRACE + 0.1)
    assert d.state.lease is not None  # not yet: the chained one could still be fetching
    d.timer(second.deadline + LOST_LEASE_GRACE + 0.1)
    state = d.state
    assert state.lease.lease_id not in (first.lease_id, second.lease_id)  # a new one
    out = [e.request.url for lease in (state.lease, state.next_lease) if lease
           for e in lease.entries]
    head = [e.request.url for e in d.cells().core(d.config, HOST).ctx.head]
    assert sorted(out + head) == [url(i) for i in range(8)]  # every URL back, none twice
