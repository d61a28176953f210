"""Hot-host sharding: keys, delays, budgets, the policy field, and a shard's HostCore."""

from __future__ import annotations

from collections import Counter

import pytest

from transforms.fetch import FetchConfig, LeaseOutcome, RobotsResponse
from transforms.hostcore import FrontierConfig, HostCore, HostState
from transforms.policy import HostPolicy, Policy, PolicyError, parse_policy
from transforms.records import CrawlRequest
from transforms.schedule import FrontierQueue
from transforms.sharding import (
    MAX_SHARDS,
    host_of_key,
    shard_budget,
    shard_delay,
    shard_key,
    shard_of,
)

URLS = [f"https://big.example/page/{i}" for i in range(3000)]


def test_an_unsharded_host_keeps_its_own_key():
    assert shard_key("big.example", URLS[0], 1) == "big.example"
    assert host_of_key("big.example") == "big.example"
    assert host_of_key("127.0.0.2:8081") == "127.0.0.2:8081"


def test_shards_are_stable_in_range_and_spread_evenly():
    counts = Counter(shard_of(u, 4) for u in URLS)
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) > 0.8 * len(URLS) / 4
    assert [shard_of(u, 4) for u in URLS[:50]] == [shard_of(u, 4) for u in URLS[:50]]
    # Known values: the shard must not depend on the process (Python's hash is salted).
    assert shard_key("big.example", "https://big.example/", 4) == \
        f"big.example#{shard_of('https://big.example/', 4)}"


def test_a_shard_key_maps_back_to_its_host():
    for url in URLS[:20]:
        key = shard_key("127.0.0.2:8081", url, 8)
        assert key.startswith("127.0.0.2:8081#") and host_of_key(key) == "127.0.0.2:8081"


def test_n_shards_each_wait_n_times_the_delay_and_share_the_budget():
    assert shard_delay(0.5, 4) == 2.0 and shard_delay(0.5, 1) == 0.5
    assert shard_budget(10_000, 3) == 3334 and shard_budget(10, 1) == 10
    assert 3 * shard_budget(10_000, 3) >= 10_000


def test_the_policy_field_is_validated():
    policy = parse_policy({"hosts": {"big.example": {"shards": 4}}})
    assert policy.for_host("big.example").shards == 4
    assert policy.for_host("small.example").shards == 1
    for bad in (0, MAX_SHARDS + 1):
        with pytest.raises(PolicyError, match="shards"):
            HostPolicy(shards=bad)
    with pytest.raises(PolicyError, match="shards"):
        parse_policy({"defaults": {"shards": "4"}})


def _shard_core(shards: int, key: str) -> HostCore:
    policy = Policy(HostPolicy(min_delay=1.0, max_pages_per_host=10, shards=shards))
    config = FrontierConfig(policy=policy, queue_capacity=100, robots_agent="beam-crawler",
                            fetch=FetchConfig(total_timeout=30.0))
    return HostCore(config, HostState(key), FrontierQueue(100), config.new_seen())


def _robots(core: HostCore, body: bytes) -> None:
    lease = core.on_timer(lambda _: ("running", None), 0.0).lease
    assert lease is not None and lease.robots_url == "https://big.example/robots.txt"
    outcome = LeaseOutcome(lease.lease_id, (), (), RobotsResponse(200, body, 0.1), (0.0,), 0.1,
                           0.1)
    core.on_timer(lambda _: ("done", outcome), 0.2)


def test_a_shard_waits_n_times_the_delay_and_the_crawl_delay():
    core = _shard_core(4, "big.example#1")
    core.accept([CrawlRequest(URLS[0])], now=0.0)
    _robots(core, b"User-agent: *\nCrawl-delay: 2\n")
    assert core.delay() == 8.0
    assert _shard_core(1, "big.example").delay() == 1.0


def test_a_shard_gets_its_share_of_the_budget():
    core = _shard_core(2, "big.example#0")
    mine = [u for u in URLS if shard_key("big.example", u, 2) == "big.example#0"][:8]
    outcomes, _ = core.accept([CrawlRequest(u) for u in mine], now=0.0)
    assert [o.outcome for o in outcomes].count("queued") == 5  # ceil(10 / 2)
    assert [o.outcome for o in outcomes].count("budget_exceeded") == 3


def test_a_sitemap_of_another_shard_goes_to_that_shard():
    core = _shard_core(4, "big.example#0")
    core.accept([CrawlRequest(URLS[0])], now=0.0)
    sitemaps = [f"https://big.example/sitemap-{i}.xml" for i in range(12)]
    body = "".join(f"Sitemap: {u}\n" for u in sitemaps).encode()
    lease = core.on_timer(lambda _: ("running", None), 0.0).lease
    assert lease is not None
    outcome = LeaseOutcome(lease.lease_id, (), (), RobotsResponse(200, b"User-agent: *\n" + body,
                                                                  0.1), (0.0,), 0.1, 0.1)
    decision = core.on_timer(lambda _: ("done", outcome), 0.2)
    routed = {r.url for r in decision.discovered}
    for url in sitemaps:
        assert (url in routed) == (shard_key("big.example", url, 4) != "big.example#0"), url
    assert routed
