"""HostCore: the frontier's per-host decisions, driven by hand with an injected clock."""

from __future__ import annotations

import dataclasses
import gzip
import logging

import pytest

from transforms.bloom import ScalableBloomFilter
from transforms.fetch import FetchConfig, LeaseOutcome, RobotsResponse
from transforms.hostcore import LOST_LEASE_GRACE, FrontierConfig, HostCore, HostState
from transforms.policy import HostPolicy, Policy
from transforms.records import CrawlRequest, FetchResult
from transforms.schedule import FrontierQueue

HOST = "site.example"
CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=1.0, max_pages_per_host=50)),
                        lease_seconds=5.0, max_lease_urls=32, queue_capacity=4,
                        robots_agent="beam-crawler", retry_delay=2.0,
                        fetch=FetchConfig(total_timeout=30.0))


def _core(config: FrontierConfig = CONFIG) -> HostCore:
    return HostCore(config, HostState(HOST), FrontierQueue(config.queue_capacity),
                    config.new_seen())


def _req(path: str) -> CrawlRequest:
    return CrawlRequest(f"https://{HOST}/{path}")


def _done(outcome: LeaseOutcome):
    return lambda lease_id: ("done", outcome)


def _running(lease_id: str):
    return "running", None


def _robots(core: HostCore, now: float, body: bytes | None, status: int | None = 200,
            encoding: str | None = None):
    decision = core.on_timer(_running, now)
    lease = decision.lease
    assert lease is not None and lease.robots_url == f"https://{HOST}/robots.txt"
    outcome = LeaseOutcome(lease.lease_id, (), (), RobotsResponse(
        status, body, now + 0.1, content_encoding=encoding), (now,), now + 0.1, now + 0.1)
    return core.on_timer(_done(outcome), now + 0.2)


def _finish(core: HostCore, start: float, end: float, results=(), unfinished=()):
    lease = core.state.lease
    assert lease is not None
    outcome = LeaseOutcome(lease.lease_id, tuple(results), tuple(unfinished), None,
                           (start,), end, end)
    return core.on_timer(_done(outcome), end)


def test_accept_dedups_bounds_the_queue_and_asks_for_a_timer():
    core = _core()
    outcomes, wake = core.accept([_req(str(i)) for i in range(6)] + [_req("0")], now=100.0)
    assert [o.outcome for o in outcomes] == ["queued"] * 4 + ["queue_overflow"] * 2
    assert wake == 100.0
    assert core.counters["dedup_dropped"] == 1 and core.counters["queue_overflow"] == 2
    assert core.stats(100.0).queued == 4


def test_first_lease_is_robots_then_urls_keep_the_crawl_delay_from_the_last_end():
    core = _core()
    core.accept([_req("a"), _req("private/x"), _req("b")], now=0.0)
    decision = _robots(core, 0.0, b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\n")
    assert core.delay() == 2.0
    assert decision.lease is None and decision.wake_at == 0.1 + 2.0  # robots ended at 0.1
    decision = core.on_timer(_running, 2.1)
    lease = decision.lease
    assert lease is not None and [r.url for r in lease.requests] == [_req("a").url, _req("b").url]
    assert lease.delay == 2.0 and len(lease.requests) == 2  # k = 5 s / 2 s
    assert [o.outcome for o in decision.outcomes] == ["robots_blocked"]
    decision = _finish(core, 2.1, 4.6)
    assert core.state.lease is None and len(core.queue) == 0 and decision.wake_at is None


def test_known_robots_rules_block_at_acceptance():
    core = _core()
    core.accept([_req("a")], now=0.0)
    _robots(core, 0.0, b"User-agent: *\nDisallow: /private\n")
    outcomes, _ = core.accept([_req("private/y")], now=1.0)
    assert [o.outcome for o in outcomes] == ["robots_blocked"]


def test_a_running_lease_is_polled_with_backoff_and_a_lost_one_is_given_back():
    core = _core()
    core.accept([_req("a")], now=0.0)
    _robots(core, 0.0, b"")
    lease = core.on_timer(_running, 1.1).lease
    assert lease is not None
    polls = [core.on_timer(_running, 1.2 + i).wake_at for i in range(3)]
    assert all(p is not None for p in polls)
    lost = core.on_timer(lambda _: ("unknown", None), lease.deadline + LOST_LEASE_GRACE + 1)
    assert core.counters["leases_lost"] == 1
    assert lost.lease is None and len(core.queue) == 1  # back in the queue, retried after d


def test_unfinished_requests_go_back_first_and_results_are_emitted():
    core = _core()
    core.accept([_req("a"), _req("b")], now=0.0)
    _robots(core, 0.0, b"")
    lease = core.on_timer(_running, 1.1).lease
    assert lease is not None
    done = FetchResult(lease.requests[0], HOST, 1.2, lease.requests[0].url, status=200)
    decision = _finish(core, 1.1, 1.3, results=[done], unfinished=[lease.requests[1]])
    # The result comes out with its next fetch time: the policy's default interval.
    interval = CONFIG.policy.defaults.recrawl.default_interval
    assert decision.results == [dataclasses.replace(done, next_fetch_at=1.3 + interval)]
    assert len(core.queue) == 1
    assert decision.wake_at == 1.3 + 1.0
    assert core.stats(1.3).fetched == 1


def test_unreachable_robots_is_retried_then_fails_every_queued_url():
    core = _core()
    core.accept([_req("a"), _req("b")], now=0.0)
    now, outcomes, attempts = 0.0, [], []
    for _ in range(CONFIG.robots_max_attempts):
        attempts.append(now)
        decision = _robots(core, now, None, status=None)
        outcomes += decision.outcomes
        now = max(now + 0.3, core.state.robots_retry_at)
    assert attempts == [0.0, 0.2 + 2.0, 2.4 + 4.0]  # exponential back-off from retry_delay
    assert sorted(o.outcome for o in outcomes) == ["error", "error"]
    assert all(o.detail.startswith("robots_unavailable") for o in outcomes)
    late, _ = core.accept([_req("c")], now=attempts[-1] + 1)
    assert [o.outcome for o in late] == ["error"]  # fails fast during the error TTL


def test_a_gzip_robots_txt_is_obeyed_and_shown_in_the_host_stats():
    core = _core()
    core.accept([_req("a"), _req("genindex-A")], now=0.0)
    body = gzip.compress(b"User-agent: *\nDisallow: /genindex-\nCrawl-delay: 0.5\n")
    _robots(core, 0.0, body, encoding="gzip")
    assert core.delay() == 1.0  # our min_delay, larger than the site's Crawl-delay
    decision = core.on_timer(_running, 1.1)
    assert decision.lease is not None
    assert [r.url for r in decision.lease.requests] == [_req("a").url]
    assert [o.outcome for o in decision.outcomes] == ["robots_blocked"]
    stats = core.stats(1.1)
    assert (stats.robots_status, stats.robots_rules, stats.crawl_delay) == ("parsed", 1, 0.5)


def test_an_undecodable_robots_txt_is_retried_like_an_unreachable_one_and_says_why():
    core = _core()
    core.accept([_req("a")], now=0.0)
    decision = _robots(core, 0.0, b"\x1b\x3a\x00\xf8", encoding="br")
    assert decision.lease is None and core.state.robots is not None
    assert core.state.robots.mode == "disallow_all" and core.state.robots_attempts == 1
    assert core.state.last_error == "robots.txt not decodable: unknown content-encoding 'br'"
    assert core.counters["robots_undecodable"] == 1
    assert core.state.robots_retry_at == 0.2 + CONFIG.retry_delay  # tried again later
    assert core.stats(0.2).robots_status == "disallow_all" and len(core.queue) == 1


def test_robots_txt_with_content_and_no_rule_is_logged_as_a_warning(caplog):
    core = _core()
    core.accept([_req("a")], now=0.0)
    with caplog.at_level(logging.WARNING, logger="transforms.hostcore"):
        _robots(core, 0.0, b"<html><body>Welcome!</body></html>")
    (record,) = [r for r in caplog.records if "no Allow/Disallow rule" in r.getMessage()]
    assert record.__dict__["host"] == HOST and core.counters["robots_without_rules"] == 1
    caplog.clear()
    other = _core()
    other.accept([_req("a")], now=0.0)
    with caplog.at_level(logging.WARNING, logger="transforms.hostcore"):
        _robots(other, 0.0, b"# nothing to say\n")  # no content: no warning
    assert not caplog.records and other.counters["robots_without_rules"] == 0


def _result(request: CrawlRequest, status: int | None, error: str | None = None,
            headers: tuple[tuple[str, str], ...] = ()) -> FetchResult:
    return FetchResult(request, HOST, 0.0, request.url, status=status, error=error,
                       headers=headers, outcome="error" if error else "not_stored")


def _lease_now(core: HostCore, now: float):
    decision = core.on_timer(_running, now)
    assert decision.lease is not None, decision
    return decision.lease


def test_transient_failures_are_retried_three_times_and_slow_the_whole_host():
    import random

    core = HostCore(CONFIG, HostState(HOST), FrontierQueue(10), CONFIG.new_seen(),
                    rng=random.Random(7))
    core.accept([_req("flaky")], now=0.0)
    _robots(core, 0.0, b"")
    now = 1.1
    seen_attempts = []
    for attempt in range(3):
        (flaky,) = _lease_now(core, now).requests
        seen_attempts.append(flaky.attempt)
        decision = _finish(core, now, now + 0.1, results=[_result(
            flaky, 503, headers=(("Retry-After", "10"),))])
        assert core.state.backoff.consecutive_failures == attempt + 1
        assert core.state.next_allowed_at >= now + 0.1 + 10  # Retry-After honoured host-wide
        now = core.state.next_allowed_at
    assert seen_attempts == [0, 1, 2]
    assert [o.outcome for o in decision.outcomes] == []  # the third failure is final
    assert [r.status for r in decision.results] == [503]
    assert core.counters["retries"] == 2 and core.state.counters["errors"] == 1


def test_a_500_pauses_the_host_before_the_retry_without_slowing_its_pace():
    import random

    core = HostCore(CONFIG, HostState(HOST), FrontierQueue(10), CONFIG.new_seen(),
                    rng=random.Random(3))
    core.accept([_req("broken"), _req("fine")], now=0.0)
    _robots(core, 0.0, b"")
    broken, fine = _lease_now(core, 1.1).requests
    # The lease stopped at the 500 (run_lease), so "fine" comes back unfinished.
    decision = _finish(core, 1.1, 1.2, results=[_result(broken, 500, headers=(
        ("Retry-After", "7"),))], unfinished=[fine])
    assert [o.outcome for o in decision.outcomes] == ["retry_scheduled"]
    assert core.state.backoff.factor == 1.0 and core.state.backoff.consecutive_failures == 0
    assert core.state.next_allowed_at >= 1.2 + 7  # Retry-After honoured by the host's pause
    assert core.counters["host_pauses"] == 1 and core.counters["host_backoffs"] == 0
    lease = _lease_now(core, core.state.next_allowed_at)
    assert {r.url: r.attempt for r in lease.requests} == {broken.url: 1, fine.url: 0}
    assert lease.delay == CONFIG.policy.defaults.min_delay


def test_a_host_that_answers_again_recovers_its_delay():
    core = _core()
    core.accept([_req("a"), _req("b"), _req("c")], now=0.0)
    _robots(core, 0.0, b"")
    lease = _lease_now(core, 1.1)
    a, b, c = lease.requests
    _finish(core, 1.1, 1.2, results=[_result(a, None, "timeout")], unfinished=[b, c])
    slowed = core.delay(core.state.next_allowed_at)
    assert slowed > CONFIG.policy.defaults.min_delay
    lease = _lease_now(core, core.state.next_allowed_at)
    ok = [_result(r, 200) for r in lease.requests]
    _finish(core, core.state.next_allowed_at, core.state.next_allowed_at + 0.1, results=ok)
    assert core.state.backoff.consecutive_failures == 0
    assert core.delay(1e9) < slowed


def test_client_errors_are_final_at_once():
    core = _core()
    core.accept([_req("gone")], now=0.0)
    _robots(core, 0.0, b"")
    (gone,) = _lease_now(core, 1.1).requests
    decision = _finish(core, 1.1, 1.2, results=[_result(gone, 404)])
    assert [r.status for r in decision.results] == [404] and not decision.outcomes
    assert core.state.backoff.consecutive_failures == 0


def test_policy_filters_budget_and_boost_are_applied_at_acceptance():
    policy = Policy(HostPolicy(min_delay=0.5, max_pages_per_host=3, max_depth=2,
                               priority_boost=4, deny_url_patterns=(r"/logout",),
                               user_agent="OtherBot/2.0"))
    config = FrontierConfig(policy=policy, queue_capacity=10, robots_agent="beam-crawler")
    core = _core(config)
    requests = [_req("logout"), CrawlRequest(f"https://{HOST}/deep", depth=3),
                _req("img/a.png"), _req("a"), _req("b"), _req("c"), _req("d")]
    outcomes, _ = core.accept(requests, now=0.0)
    got = [(o.outcome, o.detail.split(":")[0]) for o in outcomes]
    assert got == [("filtered", "url_pattern_denied"), ("filtered", "too_deep"),
                   ("filtered", "media_extension"), ("queued", ""), ("queued", ""),
                   ("queued", ""), ("budget_exceeded", "max_pages_per_host 3")]
    assert core.counters["filtered_too_deep"] == 1 and core.counters["budget_exceeded"] == 1
    lease = core.on_timer(_running, 0.0).lease
    assert lease is not None and lease.user_agent == "OtherBot/2.0"
    _robots_done = LeaseOutcome(lease.lease_id, (), (), RobotsResponse(
        200, b"User-agent: OtherBot\nCrawl-delay: 3\n", 0.1), (0.0,), 0.1, 0.1)
    core.on_timer(_done(_robots_done), 0.2)
    assert core.delay() == 3.0  # the host's own agent's group is the one that applies


def test_ftp_urls_are_leased_without_robots_txt_and_http_ones_wait_for_it():
    core = _core()
    core.accept([CrawlRequest(f"ftp://{HOST}/pub/a.html"), _req("page")], now=0.0)
    first = core.on_timer(_running, 0.0).lease
    assert first is not None and first.robots_url is None
    assert [r.url for r in first.requests] == [f"ftp://{HOST}/pub/a.html"]
    _finish(core, 0.0, 0.1)
    second = core.on_timer(_running, 1.2).lease
    assert second is not None and second.robots_url == f"https://{HOST}/robots.txt"


def test_a_sitemap_named_by_robots_txt_is_remembered_across_state_round_trips():
    """The timer that parses robots.txt queues its sitemaps and must persist them as seen, so
    that the same URL arriving later as a link (or from another shard) is not fetched again."""
    stored: dict[str, bytes] = {}

    def core_from_state(state: HostState, queue: FrontierQueue) -> HostCore:
        raw = stored.get("seen")
        return HostCore(CONFIG, state, queue, None, seen_loader=lambda: (
            ScalableBloomFilter.from_bytes(raw) if raw else None))

    def persist(core: HostCore) -> None:
        if core.seen_changed:
            stored["seen"] = core.seen.to_bytes()

    state, queue = HostState(HOST), FrontierQueue(CONFIG.queue_capacity)
    first = core_from_state(state, queue)
    first.accept([_req("a")], now=100.0)
    persist(first)
    timer = core_from_state(state, queue)
    _robots(timer, 100.0, f"User-agent: *\nSitemap: https://{HOST}/sitemap.xml\n".encode())
    assert timer.counters["sitemaps_queued"] == 1 and timer.seen_changed
    persist(timer)
    later = core_from_state(state, queue)
    outcomes, _ = later.accept([CrawlRequest(f"https://{HOST}/sitemap.xml", 1, 0,
                                             f"https://{HOST}/a")], now=101.0)
    assert outcomes == [] and later.counters["dedup_dropped"] == 1


def test_a_timer_that_only_polls_a_running_lease_never_reads_the_seen_filter():
    core = _core()
    core.accept([_req("a")], now=100.0)
    lease_timer = HostCore(CONFIG, core.state, core.queue, None,
                           seen_loader=lambda: pytest.fail("seen filter read"))
    decision = lease_timer.on_timer(_running, 100.0)  # starts the robots.txt lease
    assert decision.lease is not None
    assert lease_timer.on_timer(_running, 100.1).lease is None  # polls it
    assert not lease_timer.seen_loaded and not lease_timer.seen_changed
