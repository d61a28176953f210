"""``HostCore``: one key's frontier step, as plain Python with an injected clock.

The stateful DoFn in ``transforms.host_frontier`` loads the key's ``HostState`` (the other state
cells load lazily through ``HostContext``), calls :meth:`HostCore.on_element` or
:meth:`HostCore.on_timer`, and carries out the returned ``Effects``. The decisions live in
modules split by concern, all pure and unit-tested without Beam:

* ``transforms.frontier.admission``: whether a URL enters the key's pending work;
* ``transforms.frontier.leasing``: the head, refills from the index, the next lease or wait;
* ``transforms.frontier.harvest``: what a finished lease changes (robots.txt, results, retries,
  back-off, recrawls);
* ``transforms.frontier.rebuild``: a key found with empty state reads its rows back first.

Decisions are counted in ``HostContext.counters`` (a ``collections.Counter``), which the DoFn
turns into Beam Metrics, so the logic carries no Beam dependency.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from transforms.core import latency, schedule
from transforms.core.bloom import ScalableBloomFilter
from transforms.core.records import AckToken, CrawlRequest, HostStats, UrlRule
from transforms.core.robots import RobotsRules, rule_count
from transforms.formats.rows import pending_host_row
from transforms.frontier.admission import admit
from transforms.frontier.context import Effects, FrontierConfig, HostContext, IoRequest
from transforms.frontier.dust_rules import take_evidence
from transforms.frontier.harvest import harvest
from transforms.frontier.leases import LeaseOutcome
from transforms.frontier.leasing import (
    give_back,
    maybe_refill,
    merge_arrivals,
    plan,
    plan_successor,
    start_io,
)
from transforms.frontier.rebuild import apply_index_page, apply_rebuild_page, start_rebuild
from transforms.frontier.state import (
    JOB_REBUILD,
    JOB_REFILL,
    PHASE_READY,
    HeadEntry,
    HostState,
    InboxBatch,
)
from transforms.frontier.store import IndexPage, RebuildPage

LOST_LEASE_GRACE = 2.0
Poll = Callable[[str], tuple[str, Any]]


class HostCore:
    """One step of one key's frontier over its state (mutated in place).

    Args:
        config: the frontier's settings.
        state: the key's ``HostState``, or None when the key has no state (it then rebuilds
            from the tables before admitting anything).
        key: the frontier key.
        head, robots, seen, arrivals, inbox: loaders of the other state cells.
        rng: randomness for retry jitter.
    """

    def __init__(self, config: FrontierConfig, state: HostState | None, key: str, *,
                 head: Callable[[], list[HeadEntry]] | None = None,
                 robots: Callable[[], RobotsRules | None] | None = None,
                 seen: Callable[[], ScalableBloomFilter | None] | None = None,
                 arrivals: Callable[[], list[HeadEntry]] | None = None,
                 inbox: Callable[[], list[InboxBatch]] | None = None,
                 rng: random.Random | None = None) -> None:
        self.new_state = state is None
        self.ctx = HostContext(config, state if state is not None else HostState(key),
                               head=head, robots=robots, seen=seen, arrivals=arrivals,
                               inbox=inbox, rng=rng)

    @property
    def state(self) -> HostState:
        return self.ctx.state

    @property
    def effects(self) -> Effects:
        return self.ctx.effects

    # -- an element: requests for this key ---------------------------------------------------

    def on_element(self, requests: Sequence[CrawlRequest], tokens: Sequence[AckToken],
                   now: float, rules: Sequence[tuple[UrlRule, str]] = (),
                   discovered_at: float | None = None) -> Effects:
        """Admits ``requests`` (or keeps them until the key is rebuilt). ``tokens`` are the
        acknowledgements the requests' messages wait for: released once admitted. ``rules``:
        DUST evidence for the key (``transforms.frontier.dust_rules``). ``discovered_at``:
        when links that came through the loop were discovered; their loop latency is counted
        (``transforms.core.latency``)."""
        ctx, hs, fx = self.ctx, self.ctx.state, self.ctx.effects
        if self.new_state:
            start_rebuild(ctx, now)
        if discovered_at is not None and requests:
            hs.count(latency.counter_name(1000.0 * max(0.0, now - discovered_at)),
                     len(requests))
        take_evidence(ctx, rules, now)
        if hs.phase != PHASE_READY:
            if requests or tokens:
                fx.inbox.append(InboxBatch(tuple(requests), tuple(tokens)))
                hs.inbox += len(requests)
                fx.changed = True
        else:
            admit(ctx, requests, now)
            fx.tokens.extend(tokens)
            if hs.lease is None and hs.io is None and hs.arrivals:
                fx.wake(max(now, hs.next_allowed_at))
        self._finish(now, timer=False)
        return fx

    # -- the key's timer -------------------------------------------------------------------

    def on_timer(self, poll: Poll, now: float, leases_allowed: bool = True) -> Effects:
        """Collects finished reads and leases, then starts the next step or waits (no new
        lease when ``leases_allowed`` is False: the process is stopping)."""
        ctx, hs, fx = self.ctx, self.ctx.state, self.ctx.effects
        hs.timer_at = None
        if hs.arrivals:
            merge_arrivals(ctx, ctx.load_arrivals())
        if hs.io is not None:
            self._poll_io(poll, now)
        if hs.lease is not None:
            self._poll_lease(poll, now)
        if fx.arrivals:  # admitted during this firing (a rebuild's inbox, sitemaps)
            arrivals, fx.arrivals = fx.arrivals, []
            merge_arrivals(ctx, arrivals)
        if hs.lease is None or hs.next_lease is None:
            maybe_refill(ctx, now)
        if hs.lease is None:
            plan(ctx, now, leases_allowed)
        else:
            plan_successor(ctx, now, leases_allowed)
        self._finish(now, timer=True)
        return fx

    def _poll_io(self, poll: Poll, now: float) -> None:
        ctx, hs = self.ctx, self.ctx.state
        job = hs.io
        assert job is not None
        state, result = poll(job.job_id)
        if result is not None:
            hs.io = None
            if job.kind == JOB_REBUILD:
                assert isinstance(result, RebuildPage)
                apply_rebuild_page(ctx, result, now)
            else:
                assert isinstance(result, IndexPage)
                apply_index_page(ctx, result, now, frozenset(job.passed), job.stale,
                                 continued=job.after is not None)
            return
        if state == "running" and now < job.deadline:
            job.polls += 1
            ctx.effects.wake(now + schedule.next_poll_delay(job.polls, base=0.02))
            return
        # Lost (the key moved, or the process restarted) or too slow: ask again; reads are
        # idempotent.
        ctx.counters["io_retried"] += 1
        hs.io = None
        if job.kind == JOB_REBUILD:
            start_io(ctx, IoRequest(job.job_id + "+", JOB_REBUILD, after=hs.scan_after,
                                    first=hs.scan_after is None), now)
        else:
            start_io(ctx, IoRequest(job.job_id + "+", JOB_REFILL,
                                    skip=ctx.fingerprints_in_flight(),
                                    incarnation=hs.incarnation, after=job.after), now)

    def _poll_lease(self, poll: Poll, now: float) -> None:
        ctx, hs = self.ctx, self.ctx.state
        lease = hs.lease
        assert lease is not None
        state, outcome = poll(lease.lease_id)
        # No request of the lease, or of one chained after it (its deadline is later), is open
        # past ``limit``; a lease still extracting its pages gets the reads' time on top.
        limit = max(lease.deadline, hs.next_lease.deadline if hs.next_lease else 0.0) \
            + LOST_LEASE_GRACE
        if outcome is not None:
            assert isinstance(outcome, LeaseOutcome)
            harvest(ctx, outcome, now)
        elif now < limit or (state == "running" and now < limit + ctx.config.io_timeout):
            wait = (schedule.next_poll_delay(lease.polls, base=schedule.LEASE_POLL_BASE,
                                             cap=schedule.LEASE_POLL_CAP)
                    if state == "running" else limit - now)
            lease.polls += 1
            ctx.effects.wake(now + wait)
        else:  # the outcomes are lost: put the URLs back; the deadlines mean no open request
            lost = lease.entries + (hs.next_lease.entries if hs.next_lease else ())
            ctx.counters["leases_lost"] += 1 + (hs.next_lease is not None)
            ctx.counters["urls_requeued"] += len(lost)
            hs.lease = hs.next_lease = None
            give_back(ctx, lost)
            hs.next_allowed_at = now + ctx.delay(now)
            ctx.effects.changed = True

    # -- bookkeeping -----------------------------------------------------------------------

    def _finish(self, now: float, *, timer: bool) -> None:
        """Arms the timer when needed and keeps the hosts table's ``pending`` mark current."""
        hs, fx = self.ctx.state, self.ctx.effects
        wake = fx.wake_at
        if wake is not None:
            # Keep a timer that fires in time (setting it again costs a state write); a stale
            # one, or one set for later, is moved.
            if not timer and hs.timer_at is not None and now - 30 <= hs.timer_at <= wake:
                fx.wakes = []
            else:
                hs.timer_at = wake
        pending = self.pending()
        if pending != hs.marked_pending:
            hs.marked_pending = pending
            fx.writes.host_rows.append(pending_host_row(hs.host, pending, now))
            fx.changed = True

    def pending(self) -> bool:
        """Whether the key has anything to do now or later (the hosts table's ``h:pending``:
        a new job wakes these keys)."""
        hs = self.ctx.state
        return bool(hs.phase != PHASE_READY or hs.head_size or hs.arrivals or hs.inbox
                    or hs.lease is not None or hs.next_lease is not None or hs.io is not None
                    or not hs.index_exhausted or hs.next_eligible_at is not None)

    def stats(self, now: float) -> HostStats:
        ctx, hs, c = self.ctx, self.ctx.state, self.ctx.state.counters
        lease_urls = sum(len(lease.entries) for lease in (hs.lease, hs.next_lease)
                         if lease is not None)
        robots = ctx.robots if hs.robots_mode is not None else None
        return HostStats(
            host=hs.host, updated_at=now, fetched=c.get("fetched", 0),
            errors=c.get("errors", 0), bytes=c.get("bytes", 0),
            robots_blocked=c.get("robots_blocked", 0), dedup_dropped=c.get("dedup_dropped", 0),
            filtered=c.get("filtered", 0), budget_exceeded=c.get("budget_exceeded", 0),
            accepted=c.get("accepted", 0),
            queued=hs.head_size + hs.arrivals + hs.inbox + lease_urls + hs.spilled,
            lease_active=hs.lease is not None, delay=ctx.delay(),
            robots_status=hs.robots_mode or "unknown", last_error=hs.last_error,
            robots_rules=rule_count(robots.text) if robots is not None else 0,
            crawl_delay=robots.crawl_delay(ctx.agent) if robots is not None else None,
            pending=self.pending(), next_recrawl_at=hs.next_eligible_at, phase=hs.phase,
            state_bytes=c.get("state_bytes", 0), out_of_scope=c.get("out_of_scope", 0),
            loop_latency=latency.histogram_text(c))


__all__ = ["LOST_LEASE_GRACE", "FrontierConfig", "HostCore", "HostState"]
