"""Lease arithmetic and the per-host queue (pure, injected time)."""

import pytest

from transforms import schedule
from transforms.records import CrawlRequest


def test_politeness_delay_takes_the_larger_of_ours_and_crawl_delay():
    assert schedule.politeness_delay(1.0, None) == 1.0
    assert schedule.politeness_delay(1.0, 0.5) == 1.0
    assert schedule.politeness_delay(1.0, 4.0) == 4.0
    assert schedule.politeness_delay(0.2, float("nan")) == 0.2
    assert schedule.politeness_delay(0.2, -3) == 0.2


@pytest.mark.parametrize(("delay", "lease", "cap", "expected"), [
    (1.0, 10.0, 32, 10), (0.0, 10.0, 32, 32), (0.1, 10.0, 32, 32), (30.0, 10.0, 32, 1),
    (2.5, 10.0, 32, 4),
])
def test_lease_size(delay, lease, cap, expected):
    assert schedule.lease_size(delay, lease, cap) == expected


def test_lease_size_rejects_a_zero_cap():
    with pytest.raises(ValueError):
        schedule.lease_size(1.0, 10.0, 0)


def test_deadline_covers_every_slot_plus_one_timeout():
    assert schedule.lease_deadline(100.0, 10, 1.0, 30.0) == 100.0 + 9 + 30
    assert schedule.lease_deadline(100.0, 1, 5.0, 30.0) == 130.0


def test_next_lease_keeps_the_delay_after_the_last_request_start():
    assert schedule.next_lease_time(100.0, 1.0, now=100.4) == 101.0
    assert schedule.next_lease_time(100.0, 1.0, now=103.0) == 103.0
    assert schedule.next_lease_time(None, 1.0, now=7.0) == 7.0


def test_poll_and_retry_backoff_grow_and_cap():
    polls = [schedule.next_poll_delay(i) for i in range(8)]
    assert polls == sorted(polls) and polls[0] == 0.1 and polls[-1] == 1.0
    assert [schedule.retry_backoff(a, 5.0) for a in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert schedule.retry_backoff(40, 5.0, cap=60.0) == 60.0


def _r(url, depth=0, priority=0):
    return CrawlRequest(f"http://h/{url}", depth=depth, priority=priority)


def test_queue_orders_by_priority_then_depth_then_arrival():
    q = schedule.FrontierQueue(capacity=10)
    for req in (_r("d2", 2), _r("d1a", 1), _r("p5", 3, 5), _r("d1b", 1), _r("d0", 0)):
        assert q.push(req)
    assert [r.url.rsplit("/", 1)[1] for r in q.pop(10)] == ["p5", "d0", "d1a", "d1b", "d2"]


def test_queue_is_bounded_and_says_so():
    q = schedule.FrontierQueue(capacity=2)
    assert q.push(_r("a")) and q.push(_r("b"))
    assert not q.push(_r("c"))
    assert len(q) == 2


def test_returned_requests_go_first():
    q = schedule.FrontierQueue(capacity=5)
    q.push(_r("new", 0, 9))
    q.push_front([_r("back", 3)])
    assert q.pop(1)[0].url.endswith("back")
    assert q.peek().url.endswith("new")
    assert [r.url for r in q.drain()] == ["http://h/new"] and len(q) == 0


def test_aging_means_a_low_priority_url_is_never_starved():
    """High-priority URLs keep arriving (one a second, priority 10); the priority-0 URL that
    came first is still fetched, after about 10 priority points x aging_seconds."""
    q = schedule.FrontierQueue(capacity=10_000, aging_seconds=6.0)
    q.push(_r("low", 0, 0), now=0.0)
    fetched_at = None
    for second in range(1, 200):
        q.push(_r(f"high{second}", 0, 10), now=float(second))
        (head,) = q.pop(1)  # one fetch a second
        if head.url.endswith("/low"):
            fetched_at = second
            break
    assert fetched_at is not None and 55 <= fetched_at <= 65


def test_the_host_boost_moves_a_host_s_urls_ahead():
    q = schedule.FrontierQueue(capacity=10)
    q.push(_r("plain", 0, 0), now=0.0)
    q.push(_r("boosted", 0, 0), now=0.0, boost=3)
    assert q.pop(1)[0].url.endswith("boosted")
