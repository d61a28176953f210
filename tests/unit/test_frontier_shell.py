"""The frontier DoFn's shell with its state in fakes: what the timer learns reaches state."""

from __future__ import annotations

from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms.fetch import LeaseOutcome, RobotsResponse
from transforms.frontier import OUTCOMES_TAG, _HostFrontierFn
from transforms.hostcore import FrontierConfig
from transforms.policy import HostPolicy, Policy
from transforms.records import CrawlRequest

HOST = "site.example"


class FakeState:
    def __init__(self) -> None:
        self.value: Any = None

    def read(self) -> Any:
        return self.value

    def write(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class FakeTimer:
    def set(self, timestamp: Any) -> None:
        self.at = timestamp


class FakeService:
    """Robots leases answer with a robots.txt that names a sitemap."""

    def __init__(self) -> None:
        self.leases: dict[str, Any] = {}

    def submit(self, lease: Any) -> None:
        self.leases[lease.lease_id] = lease

    def poll(self, lease_id: str) -> tuple[str, LeaseOutcome | None]:
        lease = self.leases[lease_id]
        body = f"User-agent: *\nSitemap: https://{HOST}/sitemap.xml\n".encode()
        robots = RobotsResponse(200, body, lease.start_at) if lease.robots_url else None
        return "done", LeaseOutcome(lease_id, (), (), robots, (lease.start_at,),
                                    lease.start_at, lease.start_at)


def test_a_sitemap_queued_by_the_timer_is_seen_when_it_comes_back_as_a_link():
    fn = _HostFrontierFn(FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0))))
    fn._service = FakeService()  # what setup() would start: the asyncio fetch service
    fn._metrics = {}
    fn._lease_size = Metrics.distribution("test", "lease_size")
    states = {name: FakeState() for name in ("host", "queue", "seen", "book")}
    timer = FakeTimer()

    def process(*requests: CrawlRequest) -> list[Any]:
        return list(fn.process((HOST, requests), host_state=states["host"],
                               queue_state=states["queue"], seen_state=states["seen"],
                               book_state=states["book"], timer=timer))

    def fire() -> list[Any]:
        return list(fn.on_lease_timer(key=HOST, host_state=states["host"],
                                      queue_state=states["queue"], book_state=states["book"],
                                      seen_state=states["seen"], timer=timer))

    process(CrawlRequest(f"https://{HOST}/a"))
    fire()  # submits the robots.txt lease
    fire()  # harvests it: rules parsed, the named sitemap queued, the next lease started
    again = process(CrawlRequest(f"https://{HOST}/sitemap.xml", 1, 0, f"https://{HOST}/a"))
    queued = [o.value for o in again if isinstance(o, beam.pvalue.TaggedOutput)
              and o.tag == OUTCOMES_TAG]
    assert queued == []  # dropped as already seen, not queued a second time
    leased = [r.url for lease in fn._service.leases.values() for r in lease.requests]
    assert f"https://{HOST}/sitemap.xml" in leased  # the timer queued it, and it was leased
