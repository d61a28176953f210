"""A harvested page's links to its own key join the key's queue at once, through the same
admission as any URL (dedup, filters and depth, the page budget, robots.txt), with their
``queued`` rows and index entries; links to other keys (other hosts, a hot host's other
shards) go on with the result to the loop; pages whose content is a copy keep their links for
the duplicate judgement; the crawl's scope drops links where they are found."""

from __future__ import annotations

import dataclasses

from tests.unit.frontier.driver import FrontierDriver
from transforms.core.policy import HostPolicy, Policy
from transforms.core.records import CrawlRequest, Discovered, ParsedPage
from transforms.core.scope import SCOPE_DOMAIN, SCOPE_HOST
from transforms.frontier.context import Effects, FrontierConfig

HOST = "site.example"
ROBOTS = b"User-agent: *\nDisallow: /private\n"


def config(**policy) -> FrontierConfig:
    return FrontierConfig(policy=Policy(HostPolicy(**{"min_delay": 0.0, **policy})),
                          max_lease_urls=8, head_size=64, refill_size=32)


def url(path: str, host: str = HOST) -> str:
    return f"https://{host}/{path}"


def html(*hrefs: str, title: str = "page") -> bytes:
    links = "".join(f'<a href="{h}">{h}</a> ' for h in hrefs)
    return (f"<html><head><title>{title}</title></head><body><p>{title} text with a few "
            f"words</p>{links}</body></html>").encode()


def start(cfg: FrontierConfig, *paths: str, depth: int = 0) -> FrontierDriver:
    """A key with ``paths`` queued and robots.txt read, its first lease out."""
    d = FrontierDriver(cfg, HOST)
    d.element([CrawlRequest(url(p), depth=depth) for p in paths], now=0.0)
    d.timer(0.01)
    d.answer_robots(ROBOTS, at=0.02)
    d.timer(0.03)
    assert d.state.lease is not None and d.lease.robots_url is None
    return d


def harvest(d: FrontierDriver, at: float, bodies: dict[str, bytes],
            copies: tuple[tuple[str, str], ...] = ()) -> Effects:
    """The lease out (and one chained after it) answered with ``bodies`` and harvested: the
    effects of the harvests, their results together."""
    fx = Effects()
    for i in range(2 if d.state.next_lease is not None else 1):
        d.answer(at=at + i / 100, bodies=bodies, copies=copies)
        step = d.timer(at + i / 100 + 0.005)
        fx.results += step.results
    return fx


def test_own_links_are_queued_at_harvest_and_leased_next_without_the_loop():
    d = start(config(), "")
    fx = harvest(d, 1.0, {url(""): html("/a", "/b", "https://other.example/x")})
    # a and b: queued rows and index entries written with this firing, no element needed
    assert d.store.status(url("a")) == "queued" and d.store.status(url("b")) == "queued"
    assert {url("a"), url("b")} <= set(d.index())
    found = fx.results[0]
    assert isinstance(found, Discovered) and isinstance(found.item, ParsedPage)
    assert [r.url for r in found.links] == ["https://other.example/x"]  # only these: the loop
    assert found.item.outlinks == (url("a"), url("b"), "https://other.example/x")
    assert found.item.fetch.index_key is not None  # settled by the row sink, as before
    # The arrivals joined the head in the same firing, and the next leases took them: a,
    # and b chained after it.
    out = [r for lease in d.leases[-2:] for r in lease.requests]
    assert [r.url for r in out] == [url("a"), url("b")] and {r.depth for r in out} == {1}


def test_a_result_that_comes_without_its_extraction_is_extracted_at_harvest():
    d = start(config(), "")
    outcome = d.answer(at=1.0, bodies={url(""): html("/a", "https://other.example/x")})
    d.jobs[outcome.lease_id] = dataclasses.replace(outcome, extracted=())
    fx = d.timer(1.01)
    assert d.store.status(url("a")) == "queued"
    assert [r.url for r in fx.results[0].links] == ["https://other.example/x"]


def test_own_links_pass_dedup_filters_depth_budget_and_robots():
    d = start(config(max_depth=1, max_pages_per_host=3), "")
    page = html("/", "/a", "/a#frag", "/private/x", "/img.png", "/b", "/c")
    harvest(d, 1.0, {url(""): page})
    statuses = {p: d.store.status(url(p)) for p in ("a", "private/x", "img.png", "b", "c")}
    assert statuses == {"a": "queued", "private/x": "robots_blocked", "img.png": "filtered",
                        "b": "queued", "c": "budget_exceeded"}  # "" + a + b: the budget of 3
    counters = d.state.counters
    assert counters["dedup_dropped"] == 1  # the page's link to itself (a#frag is a once)
    d.timer(1.1)
    harvest(d, 2.0, {url("a"): html("/deeper"), url("b"): html("/")})
    assert d.store.status(url("deeper")) == "filtered"  # depth 2 > max_depth 1


def test_links_of_a_copy_wait_for_the_duplicate_judgement():
    d = start(config(), "", "mirror")
    fx = harvest(d, 1.0, {url(""): html("/a"), url("mirror"): html("/m")},
                 copies=((url("mirror"), url("")),))
    assert d.store.status(url("a")) == "queued"
    assert d.store.status(url("m")) is None  # not queued here: its page is a copy
    by_url = {r.item.fetch.request.url: r for r in fx.results}
    assert [r.url for r in by_url[url("mirror")].links] == [url("m")]
    assert by_url[url("").rstrip("/") + "/"].links == ()


def test_following_duplicate_links_admits_a_copys_links_too():
    cfg = FrontierConfig(policy=config().policy, max_lease_urls=8, head_size=64,
                         refill_size=32, follow_duplicate_links=True)
    d = start(cfg, "mirror")
    harvest(d, 1.0, {url("mirror"): html("/m")}, copies=((url("mirror"), url("")),))
    assert d.store.status(url("m")) == "queued"


def test_a_hot_hosts_links_to_its_other_shards_take_the_loop():
    cfg = config(shards=2)
    key = f"{HOST}#0"
    d = FrontierDriver(cfg, key)
    from transforms.core.sharding import shard_key

    paths = [f"p{i}" for i in range(20)]
    mine = [p for p in paths if shard_key(HOST, url(p), 2) == key]
    theirs = [p for p in paths if shard_key(HOST, url(p), 2) != key]
    assert mine and theirs
    first = mine[0]
    d.element([CrawlRequest(url(first))], now=0.0)
    d.timer(0.01)
    d.answer_robots(ROBOTS, at=0.02)
    d.timer(0.03)
    fx = harvest(d, 1.0, {url(first): html(*(f"/{p}" for p in paths))})
    assert {r.url for r in fx.results[0].links} == {url(p) for p in theirs}
    assert all(d.store.status(url(p)) == "queued" for p in mine[1:])


def test_scope_host_drops_other_hosts_where_they_are_found_and_counts_them():
    cfg = FrontierConfig(policy=config().policy, max_lease_urls=8, head_size=64,
                         refill_size=32, scope=SCOPE_HOST)
    d = start(cfg, "")
    fx = harvest(d, 1.0, {url(""): html("/a", "https://www.site.example/b",
                                       "https://elsewhere.example/c")})
    assert fx.results[0].links == ()
    assert d.store.status(url("a")) == "queued"
    assert d.state.counters["out_of_scope"] == 2
    assert d.cells().core(d.config, HOST).stats(2.0).out_of_scope == 2


def test_scope_domain_keeps_the_registered_domain_and_sends_it_through_the_loop():
    cfg = FrontierConfig(policy=config().policy, max_lease_urls=8, head_size=64,
                         refill_size=32, scope=SCOPE_DOMAIN)
    d = start(cfg, "")
    fx = harvest(d, 1.0, {url(""): html("https://docs.site.example/b",
                                       "https://elsewhere.example/c")})
    assert [r.url for r in fx.results[0].links] == ["https://docs.site.example/b"]
    assert d.state.counters["out_of_scope"] == 1


def test_links_from_the_loop_count_their_latency_in_the_hosts_row():
    d = start(config(), "")
    d.element([CrawlRequest(url("x"), 1), CrawlRequest(url("y"), 1)], now=5.0,
              discovered_at=4.85)  # 150 ms on the way
    d.element([CrawlRequest(url("z"), 1)], now=6.0)  # a seed: no latency to count
    stats = d.cells().core(d.config, HOST).stats(6.0)
    assert stats.loop_latency == "200:2"
