"""HostFrontier on the DirectRunner with TestStream: dedup (Pub/Sub redelivery), the bounded
queue, robots.txt first and obeyed, against a real local HTTP server.

TestStream drives REAL_TIME timers with a test clock that starts at 0. The frontier schedules in
wall-clock time, so the stream first moves the test clock to now and then ticks it forward; each
tick fires the due timers, and the frontier re-checks the wall clock itself.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window

from transforms.fetch import FetchConfig
from transforms.frontier import HostFrontier
from transforms.hostcore import FrontierConfig
from transforms.policy import HostPolicy, Policy
from transforms.records import CrawlRequest
from transforms.urls import politeness_key

ROBOTS = b"User-agent: *\nDisallow: /private\n"


class _Handler(BaseHTTPRequestHandler):
    log: list[str] = []

    def do_GET(self) -> None:
        type(self).log.append(self.path)
        body, ctype = (ROBOTS, "text/plain") if self.path == "/robots.txt" else (
            f"<html><title>{self.path}</title></html>".encode(), "text/html")
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server():
    _Handler.log = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


def _stream(host: str, batches: list[tuple[CrawlRequest, ...]], ticks: int = 150) -> TestStream:
    stream = TestStream().advance_processing_time(round(time.time(), 3))
    for batch in batches:
        stream = stream.add_elements([(host, batch)])
    for _ in range(ticks):
        stream = stream.advance_processing_time(0.05)
    return stream.advance_watermark_to_infinity()


def test_frontier_dedups_bounds_its_queue_and_obeys_robots(server):
    urls = [f"{server}/{p}" for p in ("a", "b", "private/x", "c", "d")]
    first = tuple(CrawlRequest(u) for u in urls)
    redelivered = first[:2]  # the same message again, as Pub/Sub may redeliver it
    host = politeness_key(urls[0])
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0)), queue_capacity=3,
                            robots_agent="beam-crawler",
                            fetch=FetchConfig(total_timeout=5.0, allow_private_networks=True))
    with TestPipeline() as p:
        out = p | _stream(host, [first, redelivered]) | HostFrontier(config)
        fetched, outcomes, stats, discovered = (
            pcoll | f"Window{i}" >> beam.WindowInto(window.GlobalWindows(),
                                                    trigger=trigger.AfterWatermark(),
                                                    accumulation_mode=trigger.AccumulationMode
                                                    .DISCARDING)
            for i, pcoll in enumerate(out))
        assert_that(fetched | beam.Map(lambda r: (r.request.url, r.status)),
                    equal_to([(urls[0], 200), (urls[1], 200)]), label="fetched")
        assert_that(outcomes | beam.Map(lambda o: (o.outcome, o.request.url)), equal_to(
            [("queued", urls[0]), ("queued", urls[1]), ("queued", urls[2]),
             ("queue_overflow", urls[3]), ("queue_overflow", urls[4]),
             ("robots_blocked", urls[2])]), label="outcomes")
        final = (stats
                 | beam.Map(lambda s: ("max", (s.updated_at, s.dedup_dropped, s.fetched)))
                 | beam.CombinePerKey(max) | beam.Map(lambda kv: kv[1][1:]))
        assert_that(final, equal_to([(2, 2)]), label="stats")
        assert_that(discovered, equal_to([]), label="discovered")  # no sitemaps elsewhere
    assert _Handler.log[0] == "/robots.txt"
    assert sorted(_Handler.log) == ["/a", "/b", "/robots.txt"]
