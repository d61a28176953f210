"""Leasing: what an idle key does next, and keeping its head filled (pure).

Called from the key's timer once its lease (if any) is harvested. In this order:

1. URLs accepted since the last firing (``arrivals``) join the head; what does not fit in
   ``head_size`` stays in the index only (nothing is dropped: a refill reads it back);
2. a refill is started when the head is below a quarter and the index may hold more (its
   result joins the head at a later firing); due recrawls are index entries too, so a refill
   after their time brings them in;
3. with work in the head: robots.txt first when the key has no fresh rules (a robots lease),
   else a lease of up to ``k`` URLs (``transforms.core.schedule.lease_size``) that robots.txt
   allows; a URL it disallows now is recorded ``robots_blocked`` and its entry deleted;
4. otherwise the key waits: for a read in flight, for its next allowed start, for the next
   scheduled recrawl, or for nothing (an idle key with no timer).
"""

from __future__ import annotations

import dataclasses
import uuid

from transforms.core import schedule
from transforms.core.records import OUTCOME_FILTERED, OUTCOME_ROBOTS_BLOCKED
from transforms.core.robots import RobotsRules
from transforms.core.url_keys import robots_url
from transforms.frontier.admission import admit, needs_robots
from transforms.frontier.context import HostContext, IoRequest
from transforms.frontier.dust_rules import rewritten
from transforms.frontier.head import merge_head, push_front
from transforms.frontier.leases import Lease
from transforms.frontier.state import (
    JOB_REFILL,
    ActiveLease,
    HeadEntry,
    IoJob,
)

# ftp URLs need no robots.txt: with no rules known they may still be leased.
NO_ROBOTS = RobotsRules("allow_all", "", None, 0.0, "no robots.txt for this scheme")
NOT_ALLOWED_RECHECK = 0.5  # seconds before a key that may not lease looks again


def merge_arrivals(ctx: HostContext, arrivals: list[HeadEntry]) -> None:
    """Step 1: accepted URLs join the head; the overflow stays in the index."""
    hs = ctx.state
    hs.arrivals = 0
    ctx.arrivals_merged = True
    if not arrivals:
        return
    arrivals = _join_batches(ctx, arrivals)
    head, dropped = merge_head(ctx.head, arrivals, ctx.config.head_size)
    ctx.set_head(head)
    if dropped:
        hs.spilled += dropped
        reopen_index(ctx)
        ctx.counters["urls_spilled"] += dropped
        if hs.io is not None and hs.io.kind == JOB_REFILL:
            # A refill out now read the index before these entries: its page must not tell
            # the key that the index is exhausted (the key would sleep with work in it).
            hs.io.stale = True


def _join_batches(ctx: HostContext, arrivals: list[HeadEntry]) -> list[HeadEntry]:
    """A client batch's revisit of a URL whose entry is in the head already (or arrives with
    it) joins that entry (its ``batches`` grow; the entry is written again and the revisit's
    deleted), so the URL is fetched once and its outcome goes to every batch that asked for
    it. The head keeps one entry per URL; without this the revisit would wait in the index
    for no one."""
    head = ctx.head
    in_head = {e.request.url: i for i, e in enumerate(head)}
    rest: list[HeadEntry] = []
    in_rest: dict[str, int] = {}
    joined = False
    for entry in arrivals:
        url = entry.request.url
        where = (head, in_head[url]) if url in in_head else (
            (rest, in_rest[url]) if url in in_rest else None)
        if where is None or not (entry.request.batches and entry.request.revisit):
            in_rest.setdefault(url, len(rest))
            rest.append(entry)
            continue
        entries, i = where
        first = entries[i]
        batches = tuple(dict.fromkeys(first.request.batches + entry.request.batches))
        merged = dataclasses.replace(first.request, batches=batches,
                                     client=first.request.client or entry.request.client)
        entries[i] = first._replace(request=merged)
        ctx.effects.writes.index_puts.append(ctx.index_entry(merged, 0.0, same_as=first))
        ctx.effects.writes.index_deletes.append(ctx.entry_key(entry))
        ctx.counters["batch_revisits_joined"] += 1
        joined = joined or entries is head
    if joined:
        ctx.set_head(head)
    return rest


def reopen_index(ctx: HostContext) -> None:
    """Work may have been added to the key's index that its head does not hold (URLs the head
    could not take, a recrawl come due): the next refill reads the index from its start."""
    ctx.state.index_exhausted = False
    ctx.state.refill_after = None


def maybe_refill(ctx: HostContext, now: float) -> None:
    """Step 2: starts a read of the index when the head runs low (one read at a time),
    continuing after the last read's window when that held nothing more
    (``HostState.refill_after``)."""
    hs = ctx.state
    if hs.next_eligible_at is not None and hs.next_eligible_at <= now:
        reopen_index(ctx)  # a scheduled recrawl is due
    if hs.io is not None:
        return
    if hs.index_exhausted or len(ctx.head) >= ctx.config.refill_below:
        return
    start_io(ctx, IoRequest(uuid.uuid4().hex, JOB_REFILL, skip=ctx.fingerprints_in_flight(),
                            incarnation=hs.incarnation, after=hs.refill_after), now)


def start_io(ctx: HostContext, request: IoRequest, now: float) -> None:
    after = request.after if request.kind == JOB_REFILL else None
    ctx.state.io = IoJob(request.job_id, request.kind, now + ctx.config.io_timeout,
                         after=after)
    ctx.effects.io = request
    ctx.effects.wake(now + schedule.next_poll_delay(0, base=0.02))
    ctx.counters[f"io_{request.kind}"] += 1


def plan(ctx: HostContext, now: float, allowed: bool = True) -> None:
    """Steps 3 and 4 for a key with no lease out; with ``allowed`` False (the process is
    stopping, or its backlog is full) no lease starts and the key looks again in
    ``NOT_ALLOWED_RECHECK`` seconds."""
    hs, cfg, fx = ctx.state, ctx.config, ctx.effects
    if not allowed:  # the head's size is in the host cell: no need to decode the head
        if hs.head_size > 0:
            fx.wake(now + NOT_ALLOWED_RECHECK)
        return
    if not ctx.head:
        if hs.io is None and hs.index_exhausted:
            fx.wake(hs.next_eligible_at)
        return
    start = max(now, hs.next_allowed_at)
    robots = ctx.fresh_robots(now)
    if robots is None and not needs_robots(ctx.head[0].request.url):
        robots = NO_ROBOTS  # an ftp URL first: lease the URLs that need no robots.txt
    if robots is None:
        start = max(start, hs.robots_retry_at)
        if start > now:
            fx.wake(start)
            return
        lease = Lease(Lease.new_id(), hs.host, (), now, 0.0, now + cfg.fetch.total_timeout,
                      robots_url(ctx.head[0].request.url), user_agent=ctx.policy.user_agent)
        _start(ctx, lease, ())
        return
    if start > now:
        fx.wake(start)
        return
    delay = ctx.delay(now)
    k = _lease_size(ctx, delay)
    if robots is not NO_ROBOTS and allowed and hs.backoff.slow_until <= now:
        # A short head is split between this lease and one chained after it, so the host
        # fetches the second half while the first half's links are harvested.
        k = min(k, max(1, (len(ctx.head) + 1) // 2))
    batch = _take_batch(ctx, now, robots, k)
    if not batch:
        if ctx.head:
            fx.wake(now)
        return
    deadline = schedule.lease_deadline(now, len(batch), delay, cfg.fetch.total_timeout)
    lease = Lease(Lease.new_id(), hs.host, tuple(e.request for e in batch), now, delay, deadline,
                  user_agent=ctx.policy.user_agent)
    _start(ctx, lease, tuple(batch))
    plan_successor(ctx, now, allowed)


def plan_successor(ctx: HostContext, now: float, allowed: bool = True) -> None:
    """Step 3, with a lease out: the next lease from the head, handed to the fetch service now
    and chained there after the one out (``Lease.after``: its first request goes ``delay``
    after the other's last one ends; if that one stopped early, a failure or its deadline, it
    fetches nothing and its URLs come back). The host then never waits for a harvest while its
    head has work: the lease's results, the links it found, the writes that make them durable
    and the key's next timer firing all happen while the next lease fetches.

    At most two leases per key are out, and they fetch one after the other on one connection,
    so the politeness invariant is unchanged. None is chained after a robots lease, while
    robots.txt is not known, or while the host is backing off."""
    hs, cfg = ctx.state, ctx.config
    current = hs.lease
    if (not allowed or current is None or current.robots or hs.next_lease is not None
            or not ctx.head or hs.backoff.slow_until > now):
        return
    robots = ctx.fresh_robots(now)
    if robots is None:
        return
    delay = ctx.delay(now)
    batch = _take_batch(ctx, now, robots, _lease_size(ctx, delay))
    if not batch:
        return
    # It starts once the lease out has ended (by its deadline at the latest) and a delay more.
    deadline = schedule.lease_deadline(current.deadline + delay, len(batch), delay,
                                       cfg.fetch.total_timeout)
    lease = Lease(Lease.new_id(), hs.host, tuple(e.request for e in batch), now, delay, deadline,
                  user_agent=ctx.policy.user_agent, after=current.lease_id)
    _start(ctx, lease, tuple(batch), successor=True)


def _lease_size(ctx: HostContext, delay: float) -> int:
    return schedule.lease_size(delay, ctx.config.lease_seconds, ctx.config.max_lease_urls,
                               ctx.state.request_seconds or schedule.DEFAULT_REQUEST_SECONDS)


def _take_batch(ctx: HostContext, now: float, robots: RobotsRules, k: int) -> list[HeadEntry]:
    """Up to ``k`` URLs from the head that robots.txt allows, in order; a URL it disallows now
    is recorded ``robots_blocked``, one queued before a DUST rule that rewrites it is recorded
    ``filtered`` and its rewrite admitted, and http(s) URLs wait while robots.txt is unknown
    (``NO_ROBOTS``: an ftp lease)."""
    hs, fx = ctx.state, ctx.effects
    batch: list[HeadEntry] = []
    later: list[HeadEntry] = []  # http(s) URLs while robots.txt is still unknown
    head = list(ctx.head)
    taken = 0
    while taken < len(head) and len(batch) < k:
        entry = head[taken]
        taken += 1
        url = entry.request.url
        moved = rewritten(ctx, entry.request)
        if moved is not None:  # queued before the key learned a rule that rewrites it
            ctx.count("filtered", counter="filtered_dust")
            ctx.outcome(entry.request, OUTCOME_FILTERED, now, f"dust: {moved.url}")
            fx.writes.index_deletes.append(ctx.entry_key(entry))
            admit(ctx, [moved], now)
            continue
        if not needs_robots(url):
            batch.append(entry)
        elif robots is NO_ROBOTS:
            later.append(entry)
        elif robots.allows(url, ctx.agent):
            batch.append(entry)
        else:
            ctx.count("robots_blocked")
            ctx.outcome(entry.request, OUTCOME_ROBOTS_BLOCKED, now, "robots.txt")
            fx.writes.index_deletes.append(ctx.entry_key(entry))
    ctx.set_head(later + head[taken:])
    if batch:
        top = max(e.rank for e in batch)
        hs.vclock = top if hs.vclock is None else max(hs.vclock, top)
    return batch


def _start(ctx: HostContext, lease: Lease, entries: tuple[HeadEntry, ...], *,
           successor: bool = False) -> None:
    ctx.counters["leases_chained" if successor else "leases_started"] += 1
    active = ActiveLease(lease.lease_id, entries, lease.deadline,
                         robots=lease.robots_url is not None, robots_url=lease.robots_url)
    ctx.effects.leases.append(lease)
    ctx.effects.changed = True
    if successor:
        ctx.state.next_lease = active
        return
    ctx.state.lease = active
    ctx.effects.wake(schedule.expected_lease_end(
        lease.start_at, max(1, len(lease.requests)), lease.delay,
        ctx.state.request_seconds or schedule.DEFAULT_REQUEST_SECONDS))


def give_back(ctx: HostContext, entries: tuple[HeadEntry, ...] | list[HeadEntry]) -> None:
    """Requests a lease did not get to (or must retry) go back ahead of the head."""
    if entries:
        ctx.set_head(push_front(ctx.head, entries))
