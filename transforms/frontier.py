"""``HostFrontier``: per-host politeness, robots.txt, dedup and queueing, with leases that fetch.

One key per host (the politeness key, ``transforms.urls.politeness_key``). The stateful DoFn owns
everything about its host and is the only one that ever contacts it, so the politeness invariant
needs no coordination:

    at most one request to a host is open at any time, and request starts to a host are at least
    ``delay = max(--min-delay, robots Crawl-delay)`` apart.

Why the fetch runs inside the frontier's lease. The design in DESIGN.md releases a lease (k URLs)
to a separate fetch stage. On the DirectRunner every transform runs on one thread, and a Beam graph
is acyclic, so a separate fetch stage either blocks that thread for the whole lease or has to send
"lease done" and robots.txt results back to the frontier through Pub/Sub (a second of latency per
lease and per new host). Here the frontier hands the lease to ``FetchService`` (an asyncio loop in
a background thread, many hosts in flight) and collects the outcome from its own REAL_TIME timer.
One timer firing per lease both harvests the finished lease and releases the next, robots.txt rules
land directly in state, and page bodies never enter state (they go from the fetcher to the output).

Timeline of one host (delay d, lease size k = lease_seconds / d):

    t0        URLs arrive (a Pub/Sub message carries many)  -> dedup, queue, timer at t0
    t0        timer: no robots yet -> robots lease submitted    timer at t0 + 0.05 (poll)
    t0+0.05   timer: robots outcome -> rules, delay d           next lease allowed at t0 + d
    t0+d      timer: lease of k URLs submitted, starts d apart  timer at t0 + d + (k-1)d + 0.05
    t0+kd     timer: outcome -> k results emitted, stats row    next lease at last start + d
    ...       queue empty -> no timer; the host is idle until new URLs arrive

State is bounded: the queue holds at most ``queue_capacity`` requests (overflow is recorded per URL
with outcome ``queue_overflow``); ``seen`` is a scalable Bloom filter capped at ``max_seen`` URLs
(``transforms.bloom`` documents its size and false-positive rate); robots.txt text is capped at
500 KiB. A lease whose outcome never comes (the key moved to another worker) is given up after its
deadline and its URLs go back to the queue.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.coders import BytesCoder, PickleCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (
    ReadModifyWriteStateSpec,
    TimerSpec,
    on_timer,
)
from apache_beam.utils.timestamp import Timestamp

from transforms import schedule
from transforms.bloom import ScalableBloomFilter
from transforms.fetch_service import shared_fetch_service
from transforms.hostcore import FrontierConfig, HostCore, HostState
from transforms.records import CrawlRequest

METRICS_NAMESPACE = "crawler"
OUTCOMES_TAG = "outcomes"
STATS_TAG = "stats"
DISCOVERED_TAG = "discovered"


class _HostFrontierFn(beam.DoFn):
    """Keyed by host. Input: (host, requests). Outputs: FetchResult (main), UrlOutcome, HostStats,
    and CrawlRequests for other hosts (sitemaps that a robots.txt names elsewhere).

    A thin shell: state and timer in, ``HostCore`` decides, outputs and metrics out.
    Invariant: at most one lease per host is out, and a lease starts no earlier than the previous
    lease's last request end plus the host's delay.
    """

    HOST_STATE = ReadModifyWriteStateSpec("host", PickleCoder())
    QUEUE_STATE = ReadModifyWriteStateSpec("queue", PickleCoder())
    SEEN_STATE = ReadModifyWriteStateSpec("seen", BytesCoder())
    BOOK_STATE = ReadModifyWriteStateSpec("recrawl", PickleCoder())
    LEASE_TIMER = TimerSpec("lease", TimeDomain.REAL_TIME)

    def __init__(self, config: FrontierConfig) -> None:
        self._config = config

    def setup(self) -> None:
        self._service = shared_fetch_service(self._config.fetch)
        self._metrics: dict[str, Any] = {}
        self._lease_size = Metrics.distribution(METRICS_NAMESPACE, "lease_size")

    def _core(self, host: str, host_state, queue_state, book_state, seen_state) -> HostCore:
        cfg = self._config

        def load_seen() -> ScalableBloomFilter | None:
            raw = seen_state.read()
            return ScalableBloomFilter.from_bytes(raw) if raw else None

        return HostCore(cfg, host_state.read() or HostState(host),
                        queue_state.read() or schedule.FrontierQueue(cfg.queue_capacity), None,
                        book_loader=book_state.read, seen_loader=load_seen)

    def process(self, element: tuple[str, tuple[CrawlRequest, ...]],
                host_state=beam.DoFn.StateParam(HOST_STATE),
                queue_state=beam.DoFn.StateParam(QUEUE_STATE),
                seen_state=beam.DoFn.StateParam(SEEN_STATE),
                book_state=beam.DoFn.StateParam(BOOK_STATE),
                timer=beam.DoFn.TimerParam(LEASE_TIMER)) -> Iterator[Any]:
        host, requests = element
        now = time.time()
        core = self._core(host, host_state, queue_state, book_state, seen_state)
        outcomes, wake_at = core.accept(requests, now)
        if wake_at is not None:
            timer.set(Timestamp(wake_at))
            core.state.timer_at = wake_at
        if core.seen_changed:
            seen_state.write(core.seen.to_bytes())
        if core.book_changed:
            book_state.write(core.book)
        queue_state.write(core.queue)
        host_state.write(core.state)
        self._flush_metrics(core.counters)
        for outcome in outcomes:
            yield beam.pvalue.TaggedOutput(OUTCOMES_TAG, outcome)
        yield beam.pvalue.TaggedOutput(STATS_TAG, core.stats(now))

    @on_timer(LEASE_TIMER)
    def on_lease_timer(self, key=beam.DoFn.KeyParam,
                       host_state=beam.DoFn.StateParam(HOST_STATE),
                       queue_state=beam.DoFn.StateParam(QUEUE_STATE),
                       book_state=beam.DoFn.StateParam(BOOK_STATE),
                       seen_state=beam.DoFn.StateParam(SEEN_STATE),
                       timer=beam.DoFn.TimerParam(LEASE_TIMER)) -> Iterator[Any]:
        now = time.time()
        # The seen filter is read only if the timer needs it: sitemaps a fresh robots.txt names
        # are remembered in it, so that a later link to them is not fetched again.
        core = self._core(key, host_state, queue_state, book_state, seen_state)
        decision = core.on_timer(self._service.poll, now)
        if decision.lease is not None:
            self._service.submit(decision.lease)
            self._lease_size.update(len(decision.lease.requests))
        if decision.wake_at is not None:
            timer.set(Timestamp(decision.wake_at))
        if core.seen_changed:
            seen_state.write(core.seen.to_bytes())
        if core.book_changed:
            book_state.write(core.book)
        queue_state.write(core.queue)
        host_state.write(core.state)
        self._flush_metrics(core.counters)
        yield from decision.results
        for outcome in decision.outcomes:
            yield beam.pvalue.TaggedOutput(OUTCOMES_TAG, outcome)
        for request in decision.discovered:
            yield beam.pvalue.TaggedOutput(DISCOVERED_TAG, request)
        if decision.changed:
            yield beam.pvalue.TaggedOutput(STATS_TAG, core.stats(now))

    def _flush_metrics(self, counters: Counter[str]) -> None:
        for name, n in counters.items():
            if name not in self._metrics:
                self._metrics[name] = Metrics.counter(METRICS_NAMESPACE, name)
            self._metrics[name].inc(n)


class FrontierOutputs(NamedTuple):
    fetched: beam.PCollection  # FetchResult
    outcomes: beam.PCollection  # UrlOutcome (queued, robots_blocked, overflow, errors)
    stats: beam.PCollection  # HostStats
    discovered: beam.PCollection  # CrawlRequest for other hosts (sitemaps named in robots.txt)


class HostFrontier(beam.PTransform):
    """Schedules and fetches each host's URLs politely. Input: (host, tuple[CrawlRequest])."""

    def __init__(self, config: FrontierConfig) -> None:
        super().__init__()
        self._config = config

    def expand(self, keyed_requests: beam.PCollection) -> FrontierOutputs:
        outputs = keyed_requests | "ScheduleAndFetch" >> beam.ParDo(
            _HostFrontierFn(self._config)).with_outputs(OUTCOMES_TAG, STATS_TAG, DISCOVERED_TAG,
                                                        main="fetched")
        return FrontierOutputs(outputs.fetched, outputs[OUTCOMES_TAG], outputs[STATS_TAG],
                               outputs[DISCOVERED_TAG])


__all__ = ["FrontierOutputs", "HostFrontier"]
