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
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from transforms.fetch import FetchConfig, Lease, LeaseOutcome, shared_fetch_service
from transforms.records import (
    OUTCOME_ERROR,
    OUTCOME_QUEUE_OVERFLOW,
    OUTCOME_QUEUED,
    OUTCOME_ROBOTS_BLOCKED,
    CrawlRequest,
    FetchResult,
    HostStats,
    UrlOutcome,
)
from transforms.robots import RobotsRules, rules_from_response
from transforms.urls import robots_url, url_fingerprint

METRICS_NAMESPACE = "crawler"
OUTCOMES_TAG = "outcomes"
STATS_TAG = "stats"
_LOST_LEASE_GRACE = 2.0


@dataclass(frozen=True)
class FrontierConfig:
    """Settings of the host frontier (see ``pipeline.options.CrawlerOptions`` for the flags)."""

    min_delay: float = 1.0
    lease_seconds: float = 10.0
    max_lease_urls: int = 32
    queue_capacity: int = 100_000
    seen_initial: int = 1024
    seen_error_rate: float = 1e-6
    max_seen: int = 1_000_000
    robots_ttl: float = 24 * 3600.0
    robots_error_ttl: float = 600.0
    robots_max_attempts: int = 3
    retry_delay: float = 5.0
    robots_agent: str = "beam-crawler"
    fetch: FetchConfig = field(default_factory=FetchConfig)


@dataclass
class ActiveLease:
    lease_id: str
    requests: tuple[CrawlRequest, ...]
    deadline: float
    robots: bool
    polls: int = 0


@dataclass
class HostState:
    """Everything the frontier keeps about one host besides its queue and seen-filter."""

    host: str
    robots: RobotsRules | None = None
    robots_attempts: int = 0
    robots_retry_at: float = 0.0
    robots_failed_until: float = 0.0
    next_allowed_at: float = 0.0
    lease: ActiveLease | None = None
    timer_at: float | None = None
    counters: dict[str, int] = field(default_factory=dict)
    last_error: str = ""

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def delay(self, config: FrontierConfig) -> float:
        crawl_delay = None
        if self.robots is not None and self.robots.mode == "parsed":
            crawl_delay = self.robots.crawl_delay(config.robots_agent)
        return schedule.politeness_delay(config.min_delay, crawl_delay)

    def fresh_robots(self, config: FrontierConfig, now: float) -> RobotsRules | None:
        """The host's robots rules if they may be applied now, else None (fetch them first)."""
        robots = self.robots
        if (robots is not None and robots.mode != "disallow_all"
                and now < robots.fetched_at + config.robots_ttl):
            return robots
        return None

    def stats(self, queued: int, config: FrontierConfig, now: float) -> HostStats:
        c = self.counters
        return HostStats(
            host=self.host, updated_at=now, fetched=c.get("fetched", 0),
            errors=c.get("errors", 0), bytes=c.get("bytes", 0),
            robots_blocked=c.get("robots_blocked", 0), dedup_dropped=c.get("dedup_dropped", 0),
            overflow=c.get("overflow", 0), accepted=c.get("accepted", 0), queued=queued,
            lease_active=self.lease is not None, delay=self.delay(config),
            robots_status=self.robots.mode if self.robots else "unknown",
            last_error=self.last_error)


class _Counters:
    """Beam Metrics of the frontier, one counter per decision."""

    def __init__(self) -> None:
        c = lambda name: Metrics.counter(METRICS_NAMESPACE, name)  # noqa: E731
        self.accepted = c("urls_accepted")
        self.dedup = c("dedup_dropped")
        self.overflow = c("queue_overflow")
        self.robots_blocked = c("robots_blocked")
        self.robots_unavailable = c("robots_unavailable")
        self.robots_fetched = c("robots_fetched")
        self.leases = c("leases_started")
        self.leases_lost = c("leases_lost")
        self.requeued = c("urls_requeued")
        self.pages = c("pages_fetched")
        self.bytes = c("bytes_fetched")
        self.lease_size = Metrics.distribution(METRICS_NAMESPACE, "lease_size")
        self.errors: dict[str, Any] = {}

    def error(self, kind: str) -> None:
        if kind not in self.errors:
            self.errors[kind] = Metrics.counter(METRICS_NAMESPACE, f"fetch_error_{kind}")
        self.errors[kind].inc()


class _HostFrontierFn(beam.DoFn):
    """Keyed by host. Input: (host, requests). Outputs: FetchResult (main), UrlOutcome, HostStats.

    Invariant: at most one lease per host is out, and a lease starts no earlier than the last
    request start of the previous one plus the host's delay.
    """

    HOST_STATE = ReadModifyWriteStateSpec("host", PickleCoder())
    QUEUE_STATE = ReadModifyWriteStateSpec("queue", PickleCoder())
    SEEN_STATE = ReadModifyWriteStateSpec("seen", BytesCoder())
    LEASE_TIMER = TimerSpec("lease", TimeDomain.REAL_TIME)

    def __init__(self, config: FrontierConfig) -> None:
        self._config = config

    def setup(self) -> None:
        self._service = shared_fetch_service(self._config.fetch)
        self._metrics = _Counters()

    def process(self, element: tuple[str, tuple[CrawlRequest, ...]],
                host_state=beam.DoFn.StateParam(HOST_STATE),
                queue_state=beam.DoFn.StateParam(QUEUE_STATE),
                seen_state=beam.DoFn.StateParam(SEEN_STATE),
                timer=beam.DoFn.TimerParam(LEASE_TIMER)) -> Iterator[Any]:
        host, requests = element
        now = time.time()
        cfg = self._config
        hs: HostState = host_state.read() or HostState(host)
        queue: schedule.FrontierQueue = queue_state.read() or schedule.FrontierQueue(
            cfg.queue_capacity)
        raw_seen = seen_state.read()
        seen = (ScalableBloomFilter.from_bytes(raw_seen) if raw_seen else ScalableBloomFilter(
            initial_capacity=cfg.seen_initial, error_rate=cfg.seen_error_rate,
            max_capacity=cfg.max_seen))
        seen_changed = False
        for request in requests:
            if hs.robots_failed_until > now:
                yield self._outcome(request, host, OUTCOME_ERROR, now,
                                    f"robots_unavailable: {hs.last_error}")
                hs.count("errors")
                continue
            fingerprint = url_fingerprint(request.url)
            if fingerprint in seen:
                hs.count("dedup_dropped")
                self._metrics.dedup.inc()
                continue
            robots = hs.fresh_robots(cfg, now)
            if robots is not None and not robots.allows(request.url, cfg.robots_agent):
                if not seen.full:
                    seen.add(fingerprint)
                    seen_changed = True
                hs.count("robots_blocked")
                self._metrics.robots_blocked.inc()
                yield self._outcome(request, host, OUTCOME_ROBOTS_BLOCKED, now, "robots.txt")
                continue
            if seen.full or not queue.push(request):
                hs.count("overflow")
                self._metrics.overflow.inc()
                yield self._outcome(request, host, OUTCOME_QUEUE_OVERFLOW, now,
                                    f"queue holds {len(queue)} of {cfg.queue_capacity}")
                continue
            seen.add(fingerprint)
            seen_changed = True
            hs.count("accepted")
            self._metrics.accepted.inc()
            yield self._outcome(request, host, OUTCOME_QUEUED, now)
        if hs.lease is None and len(queue) and (hs.timer_at is None or hs.timer_at < now - 30):
            self._arm(timer, hs, max(now, hs.next_allowed_at))
        if seen_changed:
            seen_state.write(seen.to_bytes())
        queue_state.write(queue)
        host_state.write(hs)
        yield beam.pvalue.TaggedOutput(STATS_TAG, hs.stats(len(queue), cfg, now))

    @on_timer(LEASE_TIMER)
    def on_lease_timer(self, key=beam.DoFn.KeyParam,
                       host_state=beam.DoFn.StateParam(HOST_STATE),
                       queue_state=beam.DoFn.StateParam(QUEUE_STATE),
                       timer=beam.DoFn.TimerParam(LEASE_TIMER)) -> Iterator[Any]:
        now = time.time()
        cfg = self._config
        hs: HostState = host_state.read() or HostState(key)
        queue: schedule.FrontierQueue = queue_state.read() or schedule.FrontierQueue(
            cfg.queue_capacity)
        hs.timer_at = None
        changed = False
        if hs.lease is not None:
            status, outcome = self._service.poll(hs.lease.lease_id)
            if outcome is not None:
                yield from self._apply_outcome(hs, queue, outcome, now)
                changed = True
            elif now < hs.lease.deadline + _LOST_LEASE_GRACE:
                wait = (schedule.next_poll_delay(hs.lease.polls) if status == "running"
                        else hs.lease.deadline + _LOST_LEASE_GRACE - now)
                hs.lease.polls += 1
                self._arm(timer, hs, now + wait)
            else:  # the outcome is lost: put the URLs back, the deadline guarantees no open request
                self._metrics.leases_lost.inc()
                self._metrics.requeued.inc(len(hs.lease.requests))
                queue.push_front(hs.lease.requests)
                hs.lease = None
                hs.next_allowed_at = now + hs.delay(cfg)
                changed = True
        if hs.lease is None:
            yield from self._maybe_start_lease(hs, queue, timer, now)
            changed = True
        queue_state.write(queue)
        host_state.write(hs)
        if changed:
            yield beam.pvalue.TaggedOutput(STATS_TAG, hs.stats(len(queue), cfg, now))

    def _apply_outcome(self, hs: HostState, queue: schedule.FrontierQueue,
                       outcome: LeaseOutcome, now: float) -> Iterator[Any]:
        cfg = self._config
        lease = hs.lease
        assert lease is not None
        hs.lease = None
        if outcome.robots is not None:
            yield from self._apply_robots(hs, queue, outcome, now)
        for result in outcome.results:
            if result.status is not None:
                hs.count("fetched")
                hs.count("bytes", result.content_length)
                self._metrics.pages.inc()
                self._metrics.bytes.inc(result.content_length)
            if result.error:
                hs.count("errors")
                hs.last_error = f"{result.error}: {result.error_detail or ''}"[:200]
                self._metrics.error(result.error)
            yield result
        if outcome.unfinished:
            self._metrics.requeued.inc(len(outcome.unfinished))
            queue.push_front(outcome.unfinished)
        hs.next_allowed_at = schedule.next_lease_time(outcome.last_end, hs.delay(cfg), now)

    def _apply_robots(self, hs: HostState, queue: schedule.FrontierQueue,
                      outcome: LeaseOutcome, now: float) -> Iterator[Any]:
        cfg = self._config
        response = outcome.robots
        assert response is not None
        rules = rules_from_response(response.status, response.body, response.fetched_at,
                                    response.error)
        hs.robots = rules
        self._metrics.robots_fetched.inc()
        if rules.mode != "disallow_all":
            hs.robots_attempts = 0
            return
        hs.robots_attempts += 1
        hs.last_error = f"robots.txt {response.status or response.error}"
        if hs.robots_attempts < cfg.robots_max_attempts:
            hs.robots_retry_at = now + schedule.retry_backoff(hs.robots_attempts, cfg.retry_delay)
            return
        # RFC 9309: an unreachable robots.txt means "disallow all". After the last attempt every
        # queued URL ends with an error; new URLs fail fast until the error TTL passes.
        hs.robots_attempts = 0
        hs.robots_failed_until = now + cfg.robots_error_ttl
        hs.robots_retry_at = hs.robots_failed_until
        for request in queue.drain():
            hs.count("errors")
            self._metrics.robots_unavailable.inc()
            yield self._outcome(request, hs.host, OUTCOME_ERROR, now,
                                f"robots_unavailable: {hs.last_error}")

    def _maybe_start_lease(self, hs: HostState, queue: schedule.FrontierQueue, timer,
                           now: float) -> Iterator[Any]:
        cfg = self._config
        if not len(queue):
            return
        start = max(now, hs.next_allowed_at)
        robots = hs.fresh_robots(cfg, now)
        if robots is None:
            start = max(start, hs.robots_retry_at)
            if start > now:
                self._arm(timer, hs, start)
                return
            head = queue.peek()
            assert head is not None
            self._submit(hs, timer, Lease(Lease.new_id(), hs.host, (), now, 0.0,
                                          now + cfg.fetch.total_timeout, robots_url(head.url)))
            return
        if start > now:
            self._arm(timer, hs, start)
            return
        delay = hs.delay(cfg)
        k = schedule.lease_size(delay, cfg.lease_seconds, cfg.max_lease_urls)
        batch: list[CrawlRequest] = []
        while len(queue) and len(batch) < k:
            for request in queue.pop(k - len(batch)):
                if robots.allows(request.url, cfg.robots_agent):
                    batch.append(request)
                else:
                    hs.count("robots_blocked")
                    self._metrics.robots_blocked.inc()
                    yield self._outcome(request, hs.host, OUTCOME_ROBOTS_BLOCKED, now,
                                        "robots.txt")
        if not batch:
            return
        deadline = schedule.lease_deadline(now, len(batch), delay, cfg.fetch.total_timeout)
        self._metrics.lease_size.update(len(batch))
        self._submit(hs, timer, Lease(Lease.new_id(), hs.host, tuple(batch), now, delay,
                                      deadline))

    def _submit(self, hs: HostState, timer, lease: Lease) -> None:
        self._service.submit(lease)
        self._metrics.leases.inc()
        hs.lease = ActiveLease(lease.lease_id, lease.requests, lease.deadline,
                               robots=lease.robots_url is not None)
        self._arm(timer, hs, schedule.expected_lease_end(lease.start_at, max(1, len(
            lease.requests)), lease.delay))

    @staticmethod
    def _arm(timer, hs: HostState, at: float) -> None:
        timer.set(Timestamp(at))
        hs.timer_at = at

    @staticmethod
    def _outcome(request: CrawlRequest, host: str, outcome: str, now: float,
                 detail: str = "") -> beam.pvalue.TaggedOutput:
        return beam.pvalue.TaggedOutput(OUTCOMES_TAG, UrlOutcome(request, host, outcome, now,
                                                                 detail))


class FrontierOutputs(NamedTuple):
    fetched: beam.PCollection  # FetchResult
    outcomes: beam.PCollection  # UrlOutcome (queued, robots_blocked, overflow, errors)
    stats: beam.PCollection  # HostStats


class HostFrontier(beam.PTransform):
    """Schedules and fetches each host's URLs politely. Input: (host, tuple[CrawlRequest])."""

    def __init__(self, config: FrontierConfig) -> None:
        super().__init__()
        self._config = config

    def expand(self, keyed_requests: beam.PCollection) -> FrontierOutputs:
        outputs = keyed_requests | "ScheduleAndFetch" >> beam.ParDo(
            _HostFrontierFn(self._config)).with_outputs(OUTCOMES_TAG, STATS_TAG, main="fetched")
        return FrontierOutputs(outputs.fetched, outputs[OUTCOMES_TAG], outputs[STATS_TAG])


__all__ = ["FetchResult", "FrontierConfig", "FrontierOutputs", "HostFrontier", "HostState"]
