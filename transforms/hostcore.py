"""``HostCore``: every per-host decision of the frontier, as plain Python with an injected clock.

The stateful DoFn in ``transforms.frontier`` loads a host's state, calls one of the three entry
points below and writes the state back; everything it decides is here and unit-testable without
Beam:

- ``accept(requests, now)``: dedup, robots.txt (when known), queue bound; returns the outcomes to
  record and whether the host's timer must be armed;
- ``on_timer(poll, now)``: harvests a finished lease (results, robots.txt rules, requeues) and
  plans the next step: a robots.txt lease, a lease of up to ``k`` URLs, or a wait;
- ``stats(now)``: the host's counters for the hosts table.

Decisions are counted in ``counters`` (a ``collections.Counter``) which the DoFn turns into Beam
Metrics, so the logic carries no Beam dependency.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from transforms import recrawl, retry, schedule
from transforms.bloom import ScalableBloomFilter
from transforms.content import header
from transforms.fetch import FetchConfig, Lease, LeaseOutcome
from transforms.filters import first_rejection
from transforms.policy import DEFAULT_POLICY, HostPolicy, Policy
from transforms.records import (
    OUTCOME_BUDGET,
    OUTCOME_ERROR,
    OUTCOME_FILTERED,
    OUTCOME_FRESH,
    OUTCOME_QUEUE_OVERFLOW,
    OUTCOME_QUEUED,
    OUTCOME_RETRY,
    OUTCOME_ROBOTS_BLOCKED,
    CrawlRequest,
    FetchResult,
    HostStats,
    UrlOutcome,
)
from transforms.recrawl_book import RecrawlBook
from transforms.robots import (
    RobotsRules,
    has_content,
    product_token,
    rule_count,
    rules_from_response,
)
from transforms.rows import iso as iso_time
from transforms.sharding import host_of_key, shard_budget, shard_delay, shard_key
from transforms.sitemap_links import robots_sitemap_requests
from transforms.urls import politeness_key, robots_url, url_fingerprint
from transforms.warc import payload_checksum

_LOG = logging.getLogger(__name__)
LOST_LEASE_GRACE = 2.0
# robots.txt (RFC 9309) governs http and https; other schemes (ftp) are leased without it.
NO_ROBOTS = RobotsRules("allow_all", "", None, 0.0, "no robots.txt for this scheme")


def needs_robots(url: str) -> bool:
    return url.startswith(("http://", "https://"))
Poll = Callable[[str], tuple[str, LeaseOutcome | None]]


@dataclass(frozen=True)
class FrontierConfig:
    """Settings of the host frontier (see ``pipeline.options.CrawlerOptions`` for the flags).

    Per-host settings (delay, budget, depth, filters, priority boost, user agent) come from
    ``policy``; ``robots_agent`` is the product token of the pipeline's user agent.
    """

    policy: Policy = DEFAULT_POLICY
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

    def new_seen(self) -> ScalableBloomFilter:
        return ScalableBloomFilter(initial_capacity=self.seen_initial,
                                   error_rate=self.seen_error_rate, max_capacity=self.max_seen)


@dataclass
class ActiveLease:
    lease_id: str
    requests: tuple[CrawlRequest, ...]
    deadline: float
    robots: bool
    polls: int = 0
    robots_url: str | None = None  # the robots.txt URL of a robots lease


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
    backoff: retry.HostBackoff = field(default_factory=retry.HostBackoff)
    # The earliest next fetch time in the host's RecrawlBook (kept here so that an idle host's
    # timer is planned without loading the book), or None when nothing is due later.
    next_recrawl_at: float | None = None

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n


@dataclass
class TimerDecision:
    """What the DoFn does after a timer firing: emit, submit a lease, re-arm."""

    results: list[FetchResult] = field(default_factory=list)
    outcomes: list[UrlOutcome] = field(default_factory=list)
    lease: Lease | None = None
    wake_at: float | None = None
    changed: bool = False
    discovered: list[CrawlRequest] = field(default_factory=list)  # for other hosts' frontiers


class HostCore:
    """The decisions of one host's frontier over its state, queue and seen-filter (mutated)."""

    def __init__(self, config: FrontierConfig, state: HostState,
                 queue: schedule.FrontierQueue, seen: ScalableBloomFilter | None,
                 rng: random.Random | None = None,
                 book_loader: Callable[[], RecrawlBook | None] | None = None,
                 seen_loader: Callable[[], ScalableBloomFilter | None] | None = None) -> None:
        """``seen`` may be None with a ``seen_loader``: the filter is then read on first use
        (a timer firing rarely needs it, and it is the largest piece of state)."""
        self.config = config
        host_policy = config.policy.for_host(host_of_key(state.host))
        # A shard of a sharded host gets its share of the budget (and, in delay(), N times the
        # delay), so the host as a whole keeps the policy's limits.
        self.shards = host_policy.shards
        self.policy: HostPolicy = dataclasses.replace(
            host_policy, max_pages_per_host=shard_budget(host_policy.max_pages_per_host,
                                                         host_policy.shards))
        self.agent = (product_token(self.policy.user_agent) if self.policy.user_agent
                      else config.robots_agent)
        self.rng = rng or random.Random()
        self.state = state
        self.queue = queue
        self._seen = seen
        self._seen_loader = seen_loader
        self.seen_changed = False
        self.counters: Counter[str] = Counter()
        self._book_loader = book_loader
        self._book: RecrawlBook | None = None
        self.book_changed = False

    @property
    def seen(self) -> ScalableBloomFilter:
        """The host's seen-URL filter, loaded on first use when built with a loader."""
        if self._seen is None:
            loaded = self._seen_loader() if self._seen_loader is not None else None
            self._seen = loaded if loaded is not None else self.config.new_seen()
        return self._seen

    @property
    def seen_loaded(self) -> bool:
        return self._seen is not None

    @property
    def book(self) -> RecrawlBook:
        """The host's recrawl book, loaded from state on first use (most calls never need it)."""
        if self._book is None:
            loaded = self._book_loader() if self._book_loader is not None else None
            self._book = loaded if loaded is not None else RecrawlBook(self.book_capacity)
        return self._book

    @property
    def book_capacity(self) -> int:
        return max(1, min(self.policy.max_pages_per_host, self.config.max_seen))

    # -- politeness ------------------------------------------------------------------------

    def delay(self, now: float | None = None) -> float:
        """Seconds between requests: ours or the site's Crawl-delay, stretched while the host is
        backing off after failures (``transforms.retry.HostBackoff``)."""
        robots = self.state.robots
        crawl_delay = None
        if robots is not None and robots.mode == "parsed":
            crawl_delay = robots.crawl_delay(self.agent)
        base = shard_delay(schedule.politeness_delay(self.policy.min_delay, crawl_delay),
                           self.shards)
        if now is None:
            return base
        return retry.effective_delay(self.state.backoff, base, now)

    def fresh_robots(self, now: float) -> RobotsRules | None:
        """The host's robots rules if they may be applied now, else None (fetch them first)."""
        robots = self.state.robots
        if (robots is not None and robots.mode != "disallow_all"
                and now < robots.fetched_at + self.config.robots_ttl):
            return robots
        return None

    # -- new URLs --------------------------------------------------------------------------

    def accept(self, requests: Iterable[CrawlRequest], now: float) -> tuple[list[UrlOutcome],
                                                                             float | None]:
        """Dedups, filters and queues requests. Returns the outcomes to record and when to arm
        the host's timer (None: leave it as it is).

        Order: robots.txt unavailable (fail fast) -> already seen (counted, no row: the URL has
        one) -> policy filters and traps -> page budget -> robots.txt rules -> queue bound.
        """
        hs, hp, outcomes = self.state, self.policy, []
        robots = self.fresh_robots(now)
        for request in requests:
            if hs.robots_failed_until > now:
                outcomes.append(self._error(request, now, f"robots_unavailable: {hs.last_error}"))
                continue
            fingerprint = url_fingerprint(request.url)
            if fingerprint in self.seen:
                resubmitted = self._resubmitted(request, fingerprint, now)
                if resubmitted is not None:
                    outcomes.append(resubmitted)
                    continue
                self._count("dedup_dropped")
                continue
            rejection = first_rejection(request.url, request.depth, hp, now)
            if rejection is not None:
                self._count("filtered", counter=f"filtered_{rejection.reason}")
                outcomes.append(self._outcome(request, OUTCOME_FILTERED, now,
                                              f"{rejection.reason}: {rejection.detail}"))
                continue
            if hs.counters.get("accepted", 0) >= hp.max_pages_per_host:
                self._count("budget_exceeded")
                outcomes.append(self._outcome(request, OUTCOME_BUDGET, now,
                                              f"max_pages_per_host {hp.max_pages_per_host}"))
                continue
            if (robots is not None and needs_robots(request.url)
                    and not robots.allows(request.url, self.agent)):
                self._remember(fingerprint)
                outcomes.append(self._blocked(request, now))
                continue
            if self.seen.full or not self.queue.push(request, now, hp.priority_boost):
                self._count("overflow", counter="queue_overflow")
                outcomes.append(self._outcome(
                    request, OUTCOME_QUEUE_OVERFLOW, now,
                    f"queue holds {len(self.queue)} of {self.config.queue_capacity}"))
                continue
            self._remember(fingerprint)
            self._count("accepted", counter="urls_accepted")
            outcomes.append(self._outcome(request, OUTCOME_QUEUED, now))
        wake = None
        if hs.lease is None and len(self.queue):
            wake = max(now, hs.next_allowed_at)
            # Keep a timer that will fire in time (setting it again costs a state write); a
            # stale one, or one set for a later recrawl, is moved to when the queue may start.
            if hs.timer_at is not None and now - 30 <= hs.timer_at <= wake:
                wake = None
        return outcomes, wake

    def _resubmitted(self, request: CrawlRequest, fingerprint: bytes,
                     now: float) -> UrlOutcome | None:
        """A seed (not a rediscovered link) for a URL the host already fetched: ``fresh`` before
        its next fetch time, queued as a conditional recrawl after it. A sitemap entry whose
        ``lastmod`` is after the URL's last fetch is queued at once. None: a plain duplicate
        (not fetched yet, or rediscovered), dropped by the caller."""
        seed = request.discovered_from is None
        if not seed and request.lastmod is None:
            return None
        entry = self.book.get(fingerprint)
        if entry is None or self.book.is_scheduled(fingerprint):
            return None
        changed = request.lastmod is not None and request.lastmod > entry.history.fetched_at
        if not changed and not seed:
            return None
        if not changed and recrawl.is_fresh(entry.history.next_fetch_at, now):
            self._count("fresh", counter="urls_fresh")
            return self._outcome(request, OUTCOME_FRESH, now,
                                 f"fetched {iso_time(entry.history.fetched_at)}, next fetch "
                                 f"{iso_time(entry.history.next_fetch_at)}")
        if not self.queue.push(entry.recrawl_request(), now, self.policy.priority_boost):
            return None
        self.book.mark_scheduled(fingerprint)
        self.book_changed = True
        self.counters["recrawls_scheduled"] += 1
        return self._outcome(request, OUTCOME_QUEUED, now,
                             "recrawl: sitemap lastmod after the last fetch" if changed
                             else "recrawl")

    # -- leases ----------------------------------------------------------------------------

    def on_timer(self, poll: Poll, now: float) -> TimerDecision:
        """Harvests the host's lease if it is done, then starts the next one or waits."""
        hs, decision = self.state, TimerDecision()
        hs.timer_at = None
        if hs.lease is not None:
            status, outcome = poll(hs.lease.lease_id)
            if outcome is not None:
                self._apply_outcome(outcome, now, decision)
                decision.changed = True
            elif now < hs.lease.deadline + LOST_LEASE_GRACE:
                wait = (schedule.next_poll_delay(hs.lease.polls) if status == "running"
                        else hs.lease.deadline + LOST_LEASE_GRACE - now)
                hs.lease.polls += 1
                decision.wake_at = now + wait
            else:  # the outcome is lost: put the URLs back; the deadline means no open request
                self.counters["leases_lost"] += 1
                self.counters["urls_requeued"] += len(hs.lease.requests)
                self.queue.push_front(hs.lease.requests)
                hs.lease = None
                hs.next_allowed_at = now + self.delay(now)
                decision.changed = True
        if hs.lease is None:
            self._plan(now, decision)
            decision.changed = True
        hs.timer_at = decision.wake_at
        return decision

    def _apply_outcome(self, outcome: LeaseOutcome, now: float,
                       decision: TimerDecision) -> None:
        hs = self.state
        robots_lease_url = hs.lease.robots_url if hs.lease is not None else None
        hs.lease = None
        if outcome.robots is not None:
            self._apply_robots(outcome, now, decision)
            if robots_lease_url is not None and hs.robots is not None:
                self._queue_sitemaps(hs.robots, robots_lease_url, now, decision)
        for result in outcome.results:
            self._apply_result(result, now, decision)
        if outcome.unfinished:
            self.counters["urls_requeued"] += len(outcome.unfinished)
            self.queue.push_front(outcome.unfinished)
        # A back-off pause (Retry-After) counts from when it was decided, not from the last
        # request's end, so it is a floor of its own.
        hs.next_allowed_at = max(schedule.next_lease_time(outcome.last_end, self.delay(now), now),
                                 hs.backoff.slow_until)

    def _apply_result(self, result: FetchResult, now: float, decision: TimerDecision) -> None:
        """Counts a fetch, retries transient failures (at most ``retry.MAX_ATTEMPTS`` attempts)
        and moves the host's back-off: failures that mean "slow down" stretch the delay for all
        of the host's URLs, an answer shrinks it again."""
        hs = self.state
        attempts = result.request.attempt + 1
        if retry.is_transient(result.status, result.error):
            retry_after = retry.parse_retry_after(header(result.headers, "Retry-After"), now)
            if retry.slows_host(result.status, result.error):
                hs.backoff = retry.on_failure(hs.backoff, now, retry_after,
                                              self.config.retry_delay, self.rng)
                self.counters["host_backoffs"] += 1
            else:  # one page's trouble: wait before the retry, at the normal pace afterwards
                wait = retry.retry_delay(attempts, self.config.retry_delay, retry_after, self.rng)
                hs.backoff = retry.pause(hs.backoff, now, wait)
                self.counters["host_pauses"] += 1
        elif result.status is not None:
            hs.backoff = retry.on_success(hs.backoff)
        if retry.should_retry(attempts, result.status, result.error):
            problem = result.error or f"HTTP {result.status}"
            hs.last_error = f"{problem}: {result.error_detail or ''}"[:200]
            self.counters["retries"] += 1
            self.queue.push_front([dataclasses.replace(result.request, attempt=attempts)])
            decision.outcomes.append(self._outcome(
                result.request, OUTCOME_RETRY, now,
                f"{problem} (attempt {attempts} of {retry.MAX_ATTEMPTS})"))
            return
        if result.status is not None:
            self._count("fetched", counter="pages_fetched")
            self._count("bytes", result.content_length, counter="bytes_fetched")
        if result.error or retry.is_transient(result.status, None):
            kind = result.error or f"http_{result.status}"
            self._count("errors", counter=f"fetch_error_{kind}")
            hs.last_error = f"{kind}: {result.error_detail or ''}"[:200]
        decision.results.append(self._record_fetch(result, now))

    def _apply_robots(self, outcome: LeaseOutcome, now: float, decision: TimerDecision) -> None:
        hs, cfg, response = self.state, self.config, outcome.robots
        assert response is not None
        rules = rules_from_response(response.status, response.body, response.fetched_at,
                                    response.error, response.content_encoding,
                                    response.truncated)
        hs.robots = rules
        self.counters["robots_fetched"] += 1
        if rules.mode == "parsed" and not rule_count(rules.text) and has_content(rules.text):
            # The one way a body that was never really read (an undecoded coding, an HTML
            # error page served as 200) shows up: rules the site has, and we do not.
            self.counters["robots_without_rules"] += 1
            _LOG.warning("robots.txt has content but no Allow/Disallow rule",
                         extra={"host": hs.host, "status": response.status,
                                "content_encoding": response.content_encoding,
                                "bytes": len(response.body or b"")})
        if rules.mode != "disallow_all":
            hs.robots_attempts = 0
            return
        hs.robots_attempts += 1
        hs.last_error = f"robots.txt {rules.error or response.status or response.error}"[:200]
        if rules.error and response.status is not None:
            self.counters["robots_undecodable"] += 1
        if hs.robots_attempts < cfg.robots_max_attempts:
            hs.robots_retry_at = now + schedule.retry_backoff(hs.robots_attempts, cfg.retry_delay)
            return
        # RFC 9309: an unreachable robots.txt means "disallow all". After the last attempt every
        # queued URL ends with an error; new URLs fail fast until the error TTL passes.
        hs.robots_attempts = 0
        hs.robots_failed_until = hs.robots_retry_at = now + cfg.robots_error_ttl
        for request in self.queue.drain():
            self.counters["robots_unavailable"] += 1
            decision.outcomes.append(self._error(request, now,
                                                 f"robots_unavailable: {hs.last_error}"))

    def _plan(self, now: float, decision: TimerDecision) -> None:
        """Chooses the next step of an idle host: nothing, wait, robots.txt, or a lease."""
        hs, cfg = self.state, self.config
        self._queue_due_recrawls(now)
        if not len(self.queue):
            decision.wake_at = hs.next_recrawl_at
            return
        start = max(now, hs.next_allowed_at)
        robots = self.fresh_robots(now)
        head = self.queue.peek()
        assert head is not None
        if robots is None and not needs_robots(head.url):
            robots = NO_ROBOTS  # an ftp URL first: lease the URLs that need no robots.txt
        if robots is None:
            start = max(start, hs.robots_retry_at)
            if start > now:
                decision.wake_at = start
                return
            self._start(Lease(Lease.new_id(), hs.host, (), now, 0.0,
                              now + cfg.fetch.total_timeout, robots_url(head.url),
                              user_agent=self.policy.user_agent), decision)
            return
        if start > now:
            decision.wake_at = start
            return
        delay = self.delay(now)
        k = schedule.lease_size(delay, cfg.lease_seconds, cfg.max_lease_urls)
        batch: list[CrawlRequest] = []
        later: list[CrawlRequest] = []  # http(s) URLs while robots.txt is still unknown
        while len(self.queue) and len(batch) < k:
            for request in self.queue.pop(k - len(batch)):
                if not needs_robots(request.url):
                    batch.append(request)
                elif robots is NO_ROBOTS:
                    later.append(request)
                elif robots.allows(request.url, self.agent):
                    batch.append(request)
                else:
                    decision.outcomes.append(self._blocked(request, now))
        self.queue.push_front(later)
        if not batch:
            decision.wake_at = now if later else None
            return
        deadline = schedule.lease_deadline(now, len(batch), delay, cfg.fetch.total_timeout)
        self._start(Lease(Lease.new_id(), hs.host, tuple(batch), now, delay, deadline,
                          user_agent=self.policy.user_agent), decision)

    def _queue_sitemaps(self, rules: RobotsRules, robots_txt_url: str, now: float,
                        decision: TimerDecision) -> None:
        """Queues the sitemaps a freshly parsed robots.txt names (``transforms.sitemap_links``);
        one on another host goes to that host's frontier through the crawl loop."""
        if rules.mode == "disallow_all" or not self.policy.sitemaps:
            return
        named = rules.sitemaps() if rules.mode == "parsed" else ()
        for request in robots_sitemap_requests(named, robots_txt_url,
                                               probe=self.policy.probe_sitemap_xml):
            # On another host, or in another shard of this one: that key's frontier owns it.
            key = shard_key(politeness_key(request.url), request.url, self.shards)
            if key != self.state.host:
                decision.discovered.append(request)
                self.counters["sitemaps_other_host"] += 1
                continue
            fingerprint = url_fingerprint(request.url)
            if fingerprint in self.seen or not self.queue.push(request, now):
                continue  # already known: a recrawl brings it back when it is due
            self._remember(fingerprint)
            self.counters["sitemaps_queued"] += 1

    def _queue_due_recrawls(self, now: float) -> None:
        """Moves the URLs whose next fetch time has come from the book into the queue, as
        conditional requests, as far as the queue has room."""
        hs = self.state
        if hs.next_recrawl_at is None or hs.next_recrawl_at > now:
            return
        room = self.config.queue_capacity - len(self.queue)
        due = self.book.pop_due(now, max(0, room))
        for entry in due:
            self.queue.push(entry.recrawl_request(), now, self.policy.priority_boost)
        self.counters["recrawls_scheduled"] += len(due)
        hs.next_recrawl_at = self.book.next_due()
        self.book_changed = True

    def _record_fetch(self, result: FetchResult, now: float) -> FetchResult:
        """Keeps the URL's fetch history (validators, checksum, interval) and returns the result
        with its next fetch time. A failure without a response keeps a known URL's history and
        tries again one interval later."""
        fingerprint = url_fingerprint(result.request.url)
        book = self.book
        self.book_changed = True
        if result.status is None:
            if book.reschedule(fingerprint, now):
                self._note_due()
            return result
        previous = book.get(fingerprint)
        checksum = payload_checksum(result.body) if result.body is not None else None
        history = recrawl.update_history(previous.history if previous else None, now,
                                         result.status, checksum, result.headers,
                                         self.policy.recrawl)
        if result.status == 304:
            self._count("not_modified", counter="pages_not_modified")
        base = previous.request if previous else dataclasses.replace(
            result.request, attempt=0, conditional=(), lastmod=None)
        if not book.record(fingerprint, base, history):
            self.counters["recrawl_book_full"] += 1
            return result
        self._note_due()
        return dataclasses.replace(result, next_fetch_at=history.next_fetch_at)

    def _note_due(self) -> None:
        self.state.next_recrawl_at = self.book.next_due()

    def _start(self, lease: Lease, decision: TimerDecision) -> None:
        self.counters["leases_started"] += 1
        self.state.lease = ActiveLease(lease.lease_id, lease.requests, lease.deadline,
                                       robots=lease.robots_url is not None,
                                       robots_url=lease.robots_url)
        decision.lease = lease
        decision.wake_at = schedule.expected_lease_end(lease.start_at, max(1, len(
            lease.requests)), lease.delay)

    # -- bookkeeping -----------------------------------------------------------------------

    def stats(self, now: float) -> HostStats:
        hs, c = self.state, self.state.counters
        return HostStats(
            host=hs.host, updated_at=now, fetched=c.get("fetched", 0),
            errors=c.get("errors", 0), bytes=c.get("bytes", 0),
            robots_blocked=c.get("robots_blocked", 0), dedup_dropped=c.get("dedup_dropped", 0),
            overflow=c.get("overflow", 0), filtered=c.get("filtered", 0),
            budget_exceeded=c.get("budget_exceeded", 0), accepted=c.get("accepted", 0),
            queued=len(self.queue),
            lease_active=hs.lease is not None, delay=self.delay(),
            robots_status=hs.robots.mode if hs.robots else "unknown", last_error=hs.last_error,
            robots_rules=rule_count(hs.robots.text) if hs.robots else 0,
            crawl_delay=hs.robots.crawl_delay(self.agent) if hs.robots else None)

    def _count(self, name: str, n: int = 1, counter: str | None = None) -> None:
        """Counts in the host's cumulative state and in this call's metrics."""
        self.state.count(name, n)
        self.counters[counter or name] += n

    def _remember(self, fingerprint: bytes) -> None:
        if not self.seen.full:
            self.seen.add(fingerprint)
            self.seen_changed = True

    def _outcome(self, request: CrawlRequest, outcome: str, now: float,
                 detail: str = "") -> UrlOutcome:
        return UrlOutcome(request, self.state.host, outcome, now, detail)

    def _blocked(self, request: CrawlRequest, now: float) -> UrlOutcome:
        self._count("robots_blocked")
        return self._outcome(request, OUTCOME_ROBOTS_BLOCKED, now, "robots.txt")

    def _error(self, request: CrawlRequest, now: float, detail: str) -> UrlOutcome:
        self._count("errors")
        return self._outcome(request, OUTCOME_ERROR, now, detail)
