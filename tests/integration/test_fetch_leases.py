"""Leases against real HTTP servers on 127.0.0.1: politeness, deadlines, robots.txt and polling.

Politeness is asserted from the servers' own request logs (arrival and completion times), the
way a site operator would see it. The servers and helpers are ``test_fetch``'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from itertools import pairwise

import aiohttp
import pytest

from pipeline.demo.coding import encode_body
from pipeline.demo.log import max_concurrency
from tests.integration.test_fetch import (
    CONFIG,
    RoutedSite,
    make_lease,
    page,
    redirect,
    refused_url,
    run_leases,
    serving,
)
from transforms.core.extraction import extract
from transforms.core.records import OUTCOME_FETCHED, OUTCOME_REDIRECT, ParsedPage
from transforms.fetchers.http import FetchConfig, Lease, LeaseOutcome
from transforms.fetchers.service import FetchService, run_lease, shared_fetch_service
from transforms.formats.schema import DEDUP_TABLE
from transforms.frontier.copies import CopyCheck, RecentContent
from transforms.stores.memory import MemoryFrontierStore

TOLERANCE = 0.02  # clock and socket noise between our timestamps and the server's
ROBOTS = b"User-agent: *\nDisallow: /private\n"
ROBOTS_GZ = encode_body(ROBOTS, "gzip")  # as the servers send it: text, over 20 bytes


@pytest.fixture
def serve() -> Iterator[Callable[..., RoutedSite]]:
    """Starts ``RoutedSite``s on demand (``test_fetch.serving``); all stop after the test."""
    with serving() as start:
        yield start


def site(serve, n: int = 5, delay: float = 0.0) -> RoutedSite:
    """A server with pages ``/p0`` ... ``/p{n-1}``, each answered after ``delay`` seconds."""
    return serve({f"/p{i}": page(f"<p>{i}</p>".encode(), delay=delay) for i in range(n)})


def run_direct(lease: Lease, config: FetchConfig = CONFIG, **kw) -> LeaseOutcome:
    """Runs one lease with ``run_lease`` on a session set up like ``FetchService``'s."""
    async def go() -> LeaseOutcome:
        connector = aiohttp.TCPConnector(limit_per_host=1)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                         headers={"User-Agent": config.user_agent}) as session:
            return await run_lease(session, lease, config, **kw)
    return asyncio.run(go())


def test_lease_requests_are_sequential_and_spaced(serve):
    d = 0.2
    server = site(serve)
    lease = make_lease([server.url(f"/p{i}") for i in range(5)], delay=d)
    (outcome,) = run_leases([lease])
    assert [r.outcome for r in outcome.results] == [OUTCOME_FETCHED] * 5
    assert [r.body for r in outcome.results] == [f"<p>{i}</p>".encode() for i in range(5)]
    assert outcome.unfinished == () and len(outcome.request_starts) == 5
    hits = server.hits
    assert [h.path for h in hits] == [f"/p{i}" for i in range(5)]
    assert max_concurrency(hits) == 1
    for before, after in pairwise(hits):
        assert after.start >= before.end + d - TOLERANCE
        assert after.start - before.start >= d - TOLERANCE
    assert outcome.last_end is not None and outcome.last_end >= hits[-1].end - TOLERANCE


def test_delay_counts_from_the_end_of_a_slow_response(serve):
    d = 0.2
    server = serve({"/fast": page(b"a"), "/slow": page(b"b", delay=0.3), "/next": page(b"c")})
    lease = make_lease([server.url(p) for p in ("/fast", "/slow", "/next")], delay=d)
    run_leases([lease])
    _, slow, after = server.hits
    assert slow.end - slow.start >= 0.3 - TOLERANCE
    assert after.start >= slow.end + d - TOLERANCE
    assert after.start - slow.start >= 0.3 + d - TOLERANCE


def test_first_request_waits_for_the_lease_start(serve):
    server = site(serve, n=1)
    lease = make_lease([server.url("/p0")], start_in=0.3)
    (outcome,) = run_leases([lease])
    assert server.hits[0].start >= lease.start_at - TOLERANCE
    assert outcome.request_starts[0] >= lease.start_at


def test_redirect_hops_are_spaced_like_requests(serve):
    d = 0.15
    server = serve({"/a": redirect("/b"), "/b": redirect("/c"), "/c": page(b"c")})
    (outcome,) = run_leases([make_lease([server.url("/a")], delay=d)])
    assert outcome.results[0].final_url == server.url("/c")
    for before, after in pairwise(server.hits):
        assert after.start >= before.end + d - TOLERANCE


def test_requests_past_the_deadline_are_returned_unfinished(serve):
    # Starts at about 0, 0.3 and 0.6 s; the fourth would start at 0.9 s, inside the 0.25 s
    # window before the 1 s deadline, so it and the fifth are handed back untouched.
    config = dataclasses.replace(CONFIG, min_request_window=0.25)
    server = site(serve)
    lease = make_lease([server.url(f"/p{i}") for i in range(5)], delay=0.3, deadline_in=1.0)
    (outcome,) = run_leases([lease], config)
    assert len(outcome.results) == 3 and outcome.unfinished == lease.requests[3:]
    assert [r.request for r in outcome.results] == list(lease.requests[:3])
    assert [h.path for h in server.hits] == ["/p0", "/p1", "/p2"]
    assert all(h.start <= lease.deadline - config.min_request_window for h in server.hits)
    assert outcome.finished_at < lease.deadline


def test_lease_past_its_deadline_starts_nothing(serve):
    server = site(serve, n=2)
    lease = make_lease([server.url("/p0"), server.url("/p1")], deadline_in=0.05)
    (outcome,) = run_leases([lease])
    assert outcome.results == () and outcome.unfinished == lease.requests
    assert outcome.request_starts == () and outcome.last_end is None
    time.sleep(0.05)
    assert server.hits == []


def test_request_timeout_is_clamped_to_the_deadline(serve):
    server = serve({"/hang": page(b"late", delay=3.0)})
    lease = make_lease([server.url("/hang")], deadline_in=0.8)
    (outcome,) = run_leases([lease])
    assert outcome.results[0].error == "timeout"
    assert outcome.finished_at <= lease.deadline + 0.1


def test_redirect_hops_cut_by_the_deadline_still_make_progress(serve):
    # Hops at about 0 and 0.3 s; the third would start at 0.6 s, after the 0.5 s deadline.
    server = serve({f"/h{i}": redirect(f"/h{i + 1}") for i in range(5)})
    lease = make_lease([server.url("/h0")], delay=0.3, deadline_in=0.5)
    (outcome,) = run_leases([lease])
    assert len(server.hits) >= 1
    assert outcome.unfinished == ()
    (result,) = outcome.results
    assert result.outcome == OUTCOME_REDIRECT
    assert result.redirect_to == server.url(f"/h{len(server.hits)}")


def test_elapsed_does_not_count_the_politeness_wait(serve):
    server = site(serve, n=2)
    lease = make_lease([server.url("/p0"), server.url("/p1")], delay=0.4)
    (outcome,) = run_leases([lease])
    assert outcome.results[1].elapsed < 0.2


def test_robots_lease_follows_a_same_host_redirect_then_fetches(serve):
    d = 0.15
    server = serve({"/robots.txt": redirect("/real-robots.txt", 301),
                    "/real-robots.txt": page(ROBOTS, ctype="text/plain"), "/p": page(b"p")})
    lease = make_lease([server.url("/p")], delay=d, robots_url=server.url("/robots.txt"))
    (outcome,) = run_leases([lease])
    assert outcome.robots is not None
    assert (outcome.robots.status, outcome.robots.body, outcome.robots.error) == (
        200, ROBOTS_GZ, "")
    assert outcome.robots.content_encoding == "gzip"
    assert [r.outcome for r in outcome.results] == [OUTCOME_FETCHED]
    hits = server.hits
    assert [h.path for h in hits] == ["/robots.txt", "/real-robots.txt", "/p"]
    for before, after in pairwise(hits):
        assert after.start >= before.end + d - TOLERANCE


def test_robots_cross_host_redirect_counts_as_not_found(serve):
    other = serve({"/robots.txt": page(ROBOTS, ctype="text/plain")}, "127.0.0.2")
    server = serve({"/robots.txt": redirect(other.url("/robots.txt"))})
    (outcome,) = run_leases([make_lease([], robots_url=server.url("/robots.txt"))])
    assert outcome.robots is not None
    assert (outcome.robots.status, outcome.robots.body) == (404, None)
    assert outcome.robots.error == "cross-host redirect"
    time.sleep(0.05)
    assert other.hits == []


def test_robots_refused_connection_has_no_status():
    (outcome,) = run_leases([make_lease([], robots_url=refused_url() + "robots.txt")])
    assert outcome.robots is not None and outcome.robots.status is None
    assert outcome.robots.body is None and outcome.robots.error.startswith("connection")


def test_robots_redirect_loop_and_size_cap_with_run_lease(serve):
    config = dataclasses.replace(CONFIG, max_robots_bytes=10)
    server = serve({"/robots.txt": redirect("/robots.txt"), "/r2": page(ROBOTS, status=503)})
    looped = run_direct(make_lease([], robots_url=server.url("/robots.txt")), config)
    assert looped.robots is not None
    assert (looped.robots.status, looped.robots.error) == (404, "too many redirects")
    assert len(server.hits) == 6  # the first request and five redirects (RFC 9309 2.3.1.2)
    capped = run_direct(make_lease([], robots_url=server.url("/r2")), config)
    assert capped.robots is not None and (capped.robots.status, capped.robots.body) == (
        503, ROBOTS_GZ[:10])  # the cap counts bytes on the wire


def test_poll_reports_running_then_done_once_then_unknown(serve):
    service = FetchService(CONFIG)
    server = site(serve, n=1, delay=0.4)
    lease = make_lease([server.url("/p0")])
    assert service.poll(lease.lease_id) == ("unknown", None)
    service.submit(lease)
    assert service.poll(lease.lease_id) == ("running", None)
    assert service.in_flight == 1
    limit = time.monotonic() + 5.0
    while (polled := service.poll(lease.lease_id))[0] == "running":
        assert time.monotonic() < limit, "lease not done in time"
        time.sleep(0.01)
    status, outcome = polled
    assert status == "done" and outcome is not None and outcome.lease_id == lease.lease_id
    assert outcome.results[0].outcome == OUTCOME_FETCHED
    assert service.poll(lease.lease_id) == ("unknown", None)
    assert service.in_flight == 0


def test_hosts_run_concurrently_and_each_stays_sequential(serve):
    servers = [site(serve, n=2, delay=0.5) for _ in range(5)]
    leases = [make_lease([s.url("/p0"), s.url("/p1")], delay=0.1) for s in servers]
    started = time.monotonic()
    outcomes = run_leases(leases)
    took = time.monotonic() - started
    # Each host needs 0.5 + 0.1 + 0.5 s; one after the other the five would need 5.5 s.
    assert took < 1.8
    assert all(len(o.results) == 2 and o.unfinished == () for o in outcomes)
    for server in servers:
        hits = server.hits
        assert max_concurrency(hits) == 1
        assert hits[1].start >= hits[0].end + 0.1 - TOLERANCE
    assert max_concurrency([s.hits[0] for s in servers]) == 5


def test_shared_service_is_one_per_config():
    config = dataclasses.replace(CONFIG, user_agent="fetch-test/shared")
    service = shared_fetch_service(config)
    assert shared_fetch_service(dataclasses.replace(config)) is service
    assert shared_fetch_service(CONFIG) is not service and service.config == config


def test_pages_are_extracted_next_to_their_fetch_and_copies_are_found(serve):
    """A lease's pages come back parsed (links canonical, one level deeper), and a page whose
    text another URL of the lease had first is named a copy."""
    body = b"<html><title>T</title><p>the same words on two pages</p><a href=/p1>1</a></html>"
    routes = {"/a": page(body), "/b": page(body), "/c": page(b"<p>other words</p>"),
              "/gone": page(b"no", status=404)}
    server = serve(routes)
    urls = [server.url(p) for p in ("/a", "/b", "/c", "/gone")]
    recent = RecentContent(100)
    check = CopyCheck(MemoryFrontierStore(), DEDUP_TABLE, recent)
    outcome = run_direct(make_lease(urls), extract=lambda r: extract(r, "beam-crawler"),
                         copies=check)
    by_url = dict(outcome.extracted)
    assert set(by_url) == set(urls)  # final results, pages or not
    first = by_url[urls[0]].discovered
    assert isinstance(first.item, ParsedPage) and first.item.title == "T"
    assert [(r.url, r.depth) for r in first.links] == [(server.url("/p1"), 1)]
    assert outcome.copies == ((urls[1], urls[0]),)  # /a had the text first
    assert len(recent) == 2  # two contents seen: /a's (and /b's), /c's
    assert not isinstance(by_url[urls[3]].discovered.item, ParsedPage)  # a 404 is not a page


def test_a_chained_lease_starts_a_delay_after_the_one_before_it_ends(serve):
    server = site(serve, n=6, delay=0.05)
    first = make_lease([server.url(f"/p{i}") for i in range(3)], delay=0.2)
    second = dataclasses.replace(make_lease([server.url(f"/p{i}") for i in range(3, 6)],
                                            delay=0.2, deadline_in=20.0),
                                 after=first.lease_id)
    a, b = run_leases([first, second])
    assert not a.cancelled and not b.cancelled and len(b.results) == 3
    hits = server.hits
    assert [h.path for h in hits] == [f"/p{i}" for i in range(6)]  # one after the other
    assert max_concurrency(hits) == 1
    assert hits[3].start - hits[2].end >= 0.2 - TOLERANCE  # the delay across the two leases
    assert b.last_end is not None and b.request_starts[0] >= a.last_end + 0.2 - TOLERANCE


def test_a_lease_chained_after_one_that_stopped_early_fetches_nothing(serve):
    server = serve({"/busy": page(b"later", status=503), "/p1": page(b"<p>1</p>"),
                    "/q0": page(b"<p>q</p>")})
    first = make_lease([server.url("/busy"), server.url("/p1")])
    second = dataclasses.replace(make_lease([server.url("/q0")]), after=first.lease_id)
    unknown = dataclasses.replace(make_lease([server.url("/q0")]), after="no-such-lease")
    a, b, c = run_leases([first, second, unknown])
    assert a.stopped_early and [r.url for r in a.unfinished] == [server.url("/p1")]
    assert b.cancelled and [r.url for r in b.unfinished] == [server.url("/q0")]
    assert c.cancelled and c.results == ()
    assert [h.path for h in server.hits] == ["/busy"]  # nothing after the 503
