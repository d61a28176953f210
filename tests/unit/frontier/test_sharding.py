"""Hot-host sharding: keys, delays, budgets, the policy field, and a shard's HostCore."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.frontier.driver import FrontierDriver
from transforms.core.policy import HostPolicy, Policy, PolicyError
from transforms.core.policy_file import parse_policy
from transforms.core.records import CrawlRequest
from transforms.core.sharding import (
    MAX_SHARDS,
    host_of_key,
    shard_budget,
    shard_delay,
    shard_key,
    shard_of,
)
from transforms.fetchers.http import FetchConfig
from transforms.frontier.context import FrontierConfig

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


def _shard(shards: int, key: str) -> FrontierDriver:
    policy = Policy(HostPolicy(min_delay=1.0, max_pages_per_host=10, shards=shards))
    config = FrontierConfig(policy=policy, robots_agent="beam-crawler",
                            fetch=FetchConfig(total_timeout=30.0))
    return FrontierDriver(config, key)


def _robots(d: FrontierDriver, body: bytes):
    d.element([CrawlRequest(URLS[0] if d.key.endswith("#1") or "#" not in d.key else
                            next(u for u in URLS if shard_key("big.example", u, 4) == d.key))],
              now=0.0)
    d.settle(0.01)
    assert d.lease.robots_url == "https://big.example/robots.txt"
    d.answer_robots(body, at=0.1)
    return d.timer(0.2)


def test_a_shard_waits_n_times_the_delay_and_the_crawl_delay():
    d = _shard(4, "big.example#1")
    _robots(d, b"User-agent: *\nCrawl-delay: 2\n")
    assert d.cells().core(d.config, d.key).ctx.delay() == 8.0
    plain = _shard(1, "big.example")
    assert plain.cells().core(plain.config, plain.key).ctx.delay() == 1.0


def test_a_shard_gets_its_share_of_the_budget():
    d = _shard(2, "big.example#0")
    mine = [u for u in URLS if shard_key("big.example", u, 2) == "big.example#0"][:8]
    d.element([CrawlRequest(u) for u in mine], now=0.0)
    fx = d.timer(0.01)  # the rebuild is back: the URLs are admitted
    assert [o.outcome for o in fx.outcomes].count("queued") == 5  # ceil(10 / 2)
    assert [o.outcome for o in fx.outcomes].count("budget_exceeded") == 3


def test_a_sitemap_of_another_shard_goes_to_that_shard():
    d = _shard(4, "big.example#0")
    sitemaps = [f"https://big.example/sitemap-{i}.xml" for i in range(12)]
    body = b"User-agent: *\n" + "".join(f"Sitemap: {u}\n" for u in sitemaps).encode()
    fx = _robots(d, body)
    routed = {r.url for r in fx.discovered}
    for url in sitemaps:
        assert (url in routed) == (shard_key("big.example", url, 4) != "big.example#0"), url
    assert routed
