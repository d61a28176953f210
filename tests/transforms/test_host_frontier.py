"""HostFrontier on the DirectRunner with TestStream: dedup (Pub/Sub redelivery), the bounded
queue, robots.txt first and obeyed, against a real local HTTP server.

TestStream drives REAL_TIME timers with a test clock that starts at 0. The frontier schedules in
wall-clock time, so the stream first moves the test clock to now and then ticks it forward; each
tick fires the due timers, and the frontier re-checks the wall clock itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window

from pipeline.demo.exchange import Reply, RequestView
from pipeline.demo.server import LoggedServers
from transforms.core.policy import HostPolicy, Policy
from transforms.core.records import CrawlRequest
from transforms.core.url_keys import politeness_key
from transforms.fetchers.http import FetchConfig
from transforms.frontier.context import FrontierConfig, fetch_of
from transforms.host_frontier import HostFrontier
from transforms.stores.memory import MemoryStoreSpec, memory_store

ROBOTS = b"User-agent: *\nDisallow: /private\n"


def _respond(request: RequestView) -> Reply:
    if request.target == "/robots.txt":
        return Reply(body=ROBOTS, content_type="text/plain")  # gzip on the wire, like nginx
    return Reply(body=f"<html><title>{request.target}</title></html>".encode())


@pytest.fixture()
def server() -> Iterator[tuple[str, LoggedServers]]:
    """A loopback site (``pipeline.demo.server``) and its request log."""
    with LoggedServers() as servers:
        yield servers.serve("127.0.0.1", _respond), servers


def _stream(host: str, batches: list[tuple[CrawlRequest, ...]], ticks: int = 150) -> TestStream:
    stream = TestStream().advance_processing_time(round(time.time(), 3))
    for batch in batches:
        stream = stream.add_elements([(host, batch)])
    for _ in range(ticks):
        stream = stream.advance_processing_time(0.05)
    return stream.advance_watermark_to_infinity()


def test_frontier_dedups_keeps_a_bounded_head_and_obeys_robots(server):
    base, servers = server
    urls = [f"{base}/{p}" for p in ("a", "b", "private/x", "c", "d")]
    first = tuple(CrawlRequest(u, 1, 0, f"{base}/") for u in urls)  # links of a page
    redelivered = first[:2]  # the same message again, as Pub/Sub may redeliver it
    host = politeness_key(urls[0])
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0)), head_size=2,
                            refill_size=2, robots_agent="beam-crawler",
                            fetch=FetchConfig(total_timeout=5.0, allow_private_networks=True))
    store = MemoryStoreSpec(f"frontier-test-{uuid.uuid4().hex}")
    with TestPipeline() as p:
        out = p | _stream(host, [first, redelivered]) | HostFrontier(config, store)
        fetched, outcomes, stats, discovered, acks, _ = (
            pcoll | f"Window{i}" >> beam.WindowInto(window.GlobalWindows(),
                                                    trigger=trigger.AfterWatermark(),
                                                    accumulation_mode=trigger.AccumulationMode
                                                    .DISCARDING)
            for i, pcoll in enumerate(out))
        # Two URLs fit in the head; the rest waited in the index and were read back.
        assert_that(fetched | beam.Map(fetch_of) | beam.Map(lambda r: (r.request.url, r.status)),
                    equal_to([(u, 200) for u in urls if "private" not in u]), label="fetched")
        assert_that(outcomes | beam.Map(lambda o: (o.outcome, o.request.url)), equal_to(
            [("queued", u) for u in urls] + [("robots_blocked", urls[2])]), label="outcomes")
        final = (stats
                 | beam.Map(lambda s: ("max", (s.updated_at, s.dedup_dropped, s.fetched)))
                 | beam.CombinePerKey(max) | beam.Map(lambda kv: kv[1][1:]))
        assert_that(final, equal_to([(2, 4)]), label="stats")
        assert_that(discovered, equal_to([]), label="discovered")  # no sitemaps elsewhere
        assert_that(acks, equal_to([]), label="acks")  # these elements carried no tokens
    requested = [h.path for h in servers.hits()]
    assert requested[0] == "/robots.txt" and servers.hits()[0].content_encoding == "gzip"
    assert sorted(requested) == ["/a", "/b", "/c", "/d", "/robots.txt"]
    tables = memory_store(store.name)
    assert {tables.status(u) for u in urls} == {"queued", "robots_blocked"}  # no row sink here
    assert tables.pending_keys() == [host]  # recrawls are scheduled: a new job wakes it
