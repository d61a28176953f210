"""End to end: a host the policy shards (``shards: 3``) is crawled by three frontier keys, each
three times as slow, and the host as a whole still sees no more than one request per delay.

Asserted from the demo server's own request log on the DirectRunner with the emulators.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import pytest

from pipeline.demo.log import crawlable_paths, min_start_gap
from pipeline.demo.pages import LANDING_PATH, MOVED_PATH, NEW_PATH, OLD_PATH
from pipeline.demo.site import DemoSite
from tests.integration.sites import Crawl, crawl
from transforms.core.policy import DEFAULT_POLICY
from transforms.core.sharding import shard_key
from transforms.core.urls import canonicalize_url

pytestmark = pytest.mark.integration

SHARDS = 3
MIN_DELAY = 0.15
CRAWL_DELAY = 0.2  # the demo host's robots.txt; larger than MIN_DELAY, so it sets the pace
TOLERANCE = 0.03
REDIRECT_SOURCES = {NEW_PATH: OLD_PATH, LANDING_PATH: MOVED_PATH}  # one host: both are same-host


class ShardedCrawl(NamedTuple):
    site: DemoSite
    host: str
    crawl: Crawl


@pytest.fixture(scope="module")
def sharded(local_stack, tmp_path_factory) -> ShardedCrawl:
    policy = tmp_path_factory.mktemp("policy") / "policy.yaml"
    policy.write_text(f"defaults: {{shards: {SHARDS}}}\n")
    site = DemoSite().start(n_hosts=1, pages_per_host=30, crawl_delay=CRAWL_DELAY)
    try:
        host = site.hosts[0]
        result = crawl(local_stack, site.seed_urls(), [
            f"--policy={policy}", f"--min_delay={MIN_DELAY}", "--idle_timeout=6",
            "--warc_roll_seconds=2", "--allow_private_networks"])
    finally:
        site.stop()
    return ShardedCrawl(site, host, result)


def _delay(s: ShardedCrawl) -> float:
    return max(MIN_DELAY, s.site.spec(s.host).crawl_delay or 0.0)


def _page_gets(s: ShardedCrawl):
    return [r for r in s.site.requests(s.host) if r.method == "GET" and r.path != "/robots.txt"]


def test_every_page_is_fetched_exactly_once(sharded):
    expected = crawlable_paths(sharded.host, sharded.site.expected_fetch_paths(sharded.host),
                               DEFAULT_POLICY.defaults, time.time()) - {"/robots.txt"}
    paths = [r.path for r in _page_gets(sharded)]
    assert len(paths) == len(set(paths)), sorted(p for p in paths if paths.count(p) > 1)
    assert set(paths) == expected, sharded.crawl.out


def test_the_host_is_served_by_every_shard_and_each_reports_n_times_the_delay(sharded):
    netloc = sharded.host.split("//", 1)[1]
    keys = {k for k in sharded.crawl.hosts if k.startswith(netloc)}
    assert keys == {f"{netloc}#{i}" for i in range(SHARDS)}, sorted(sharded.crawl.hosts)
    for key in keys:
        assert float(sharded.crawl.hosts[key]["delay"]) == pytest.approx(SHARDS * _delay(sharded))
        assert int(sharded.crawl.hosts[key]["fetched"]) > 0


def test_each_shard_keeps_n_times_the_delay(sharded):
    netloc = sharded.host.split("//", 1)[1]
    by_shard: dict[str, list] = {}
    for r in _page_gets(sharded):
        # A same-host redirect hop is fetched in the lease of the URL that redirected.
        path = REDIRECT_SOURCES.get(r.path, r.path)
        key = shard_key(netloc, canonicalize_url(sharded.host + path), SHARDS)
        by_shard.setdefault(key, []).append(r)
    assert len(by_shard) == SHARDS
    for key, requests in by_shard.items():
        gap = min_start_gap(requests)
        assert gap is not None and gap >= SHARDS * _delay(sharded) - TOLERANCE, (key, gap)


def test_the_whole_host_sees_at_most_one_request_per_delay(sharded):
    starts = sorted(r.start for r in sharded.site.requests(sharded.host) if r.method == "GET")
    window = SHARDS * _delay(sharded) - TOLERANCE
    # Each shard starts at most once in any window shorter than its own gap, robots.txt
    # included (each shard reads it once), so no window holds more than SHARDS starts.
    for i, t in enumerate(starts):
        in_window = sum(1 for u in starts[i:] if u - t < window)
        assert in_window <= SHARDS, (t, in_window)
    span = starts[-1] - starts[0]
    assert (len(starts) - SHARDS) / span <= 1 / _delay(sharded) + 0.5
