"""Lease arithmetic and the per-host queue (pure, injected time)."""

import pytest

from transforms.core import schedule
from transforms.core.records import CrawlRequest
from transforms.frontier.head import merge_head, push_front
from transforms.frontier.state import HeadEntry


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


def test_a_lease_holds_about_40_urls_at_least_a_second_and_at_most_lease_seconds():
    assert schedule.lease_size(0.0, 10.0, 256, 0.004) == 250  # a second of a fast host
    assert schedule.lease_size(0.02, 10.0, 256, 0.003) == 43  # a second
    assert schedule.lease_size(0.25, 10.0, 256, 0.0) == 40
    assert schedule.lease_size(0.0, 10.0, 256, 0.5) == 20  # a slow host without a delay
    assert schedule.lease_size(1.0, 10.0, 256, 0.25) == 8  # 10 s of 1.25 s per URL


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


def test_a_lease_is_expected_after_its_requests_and_the_delays_between_them():
    assert schedule.expected_lease_end(100.0, 32, 0.0, 0.004) == pytest.approx(100.128)
    assert schedule.expected_lease_end(100.0, 10, 1.0, 0.05) == pytest.approx(109.5)
    assert schedule.expected_lease_end(100.0, 1, 0.0) == 100.0 + schedule.DEFAULT_REQUEST_SECONDS


def test_a_hosts_request_time_follows_its_leases():
    assert schedule.request_seconds_estimate(0.0, [0.002, 0.004]) == pytest.approx(0.003)
    assert schedule.request_seconds_estimate(0.003, [0.009]) == pytest.approx(0.006)
    assert schedule.request_seconds_estimate(0.003, []) == 0.003


def test_poll_and_retry_backoff_grow_and_cap():
    polls = [schedule.next_poll_delay(i) for i in range(8)]
    assert polls == sorted(polls) and polls[0] == 0.1 and polls[-1] == 1.0
    lease_polls = [schedule.next_poll_delay(i, base=schedule.LEASE_POLL_BASE,
                                            cap=schedule.LEASE_POLL_CAP) for i in range(8)]
    assert lease_polls[0] == 0.02 and lease_polls[-1] == 0.2
    assert [schedule.retry_backoff(a, 5.0) for a in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert schedule.retry_backoff(40, 5.0, cap=60.0) == 60.0


def _r(url, depth=0, priority=0):
    return CrawlRequest(f"http://h/{url}", depth=depth, priority=priority)


def _entry(name, depth=0, priority=0, now=0.0, boost=0, seq=0):
    request = _r(name, depth, priority)
    rank = schedule.queue_rank(priority + boost, depth, now, schedule.AGING_SECONDS)
    return HeadEntry(rank, request, False, seq)


def _names(entries):
    return [e.request.url.rsplit("/", 1)[1] for e in entries]


def test_the_head_orders_by_priority_then_depth_then_arrival():
    entries = [_entry("d2", 2, seq=1), _entry("d1a", 1, seq=2), _entry("p5", 3, 5, seq=3),
               _entry("d1b", 1, seq=4), _entry("d0", 0, seq=5)]
    head, dropped = merge_head([], entries, 10)
    assert _names(head) == ["p5", "d0", "d1a", "d1b", "d2"] and dropped == 0


def test_the_head_is_bounded_and_what_does_not_fit_is_counted():
    head, dropped = merge_head([_entry("a", seq=1)], [_entry("b", 1, seq=2),
                                                               _entry("c", 0, seq=3)], 2)
    assert _names(head) == ["a", "c"] and dropped == 1  # b stays in the index only
    again, _ = merge_head(head, [_entry("a", 5, seq=9)], 2)
    assert _names(again) == ["a", "c"] and again[0].seq == 1  # one entry per URL: the first


def test_returned_requests_go_first():
    head, _ = merge_head([], [_entry("new", 0, 9, seq=1)], 5)
    head = push_front(head, [_entry("back", 3, seq=2)])
    assert _names(head) == ["back", "new"] and head[0].front


def test_aging_means_a_low_priority_url_is_never_starved():
    """High-priority URLs keep arriving (one a second, priority 10); the priority-0 URL that
    came first is still fetched, after about 10 priority points x the aging time."""
    head, _ = merge_head([], [_entry("low", 0, 0, now=0.0)], 10_000)
    fetched_at = None
    for second in range(1, 1200):
        head, _ = merge_head(head, [_entry(f"high{second}", 0, 10, now=float(second),
                                                    seq=second)], 10_000)
        first, head = head[0], head[1:]  # one fetch a second
        if first.request.url.endswith("/low"):
            fetched_at = second
            break
    aging = schedule.AGING_SECONDS
    assert fetched_at is not None and 9 * aging <= fetched_at <= 11 * aging


def test_the_host_boost_moves_a_host_s_urls_ahead():
    head, _ = merge_head([], [_entry("plain", seq=1), _entry("boosted", boost=3,
                                                                       seq=2)], 10)
    assert _names(head)[0] == "boosted"
