"""Harvest: what a finished lease changes for its key (pure).

* a robots lease: the rules (``transforms.core.robots.rules_from_response``) go to state and are
  saved in the hosts table, so a rebuild reads them back while they are fresh; an unreachable
  or undecodable robots.txt is retried with back-off, and after ``robots_max_attempts`` the
  key's head is recorded as ``error`` and new URLs fail fast for ``robots_error_ttl``; the
  sitemaps it names are admitted (those of other keys go through the loop);
* URLs the lease did not fetch because their rows were terminal already (a replay) lose their
  index entry; resubmitted URLs still fresh are recorded ``fresh``;
* each result: a transient failure is retried (at most ``retry.MAX_ATTEMPTS`` attempts) from
  the front of the head, with its index entry rewritten and a ``retry_scheduled`` row, and it
  moves the host's back-off; anything else is final. A final result carries its index row key
  (``FetchResult.index_key``): the row sink deletes the entry once the URL's terminal row is
  durable. A result with a response gets its next fetch time from its fetch history (read from
  the URL's row by the lease) and a new index entry for then: its recrawl;
* each final result's extraction (``transforms.frontier.found_links``): the page's links to
  this key are admitted now, through the same admission as any other URL (canonicalized by
  the host's policy, dedup, filters, budget, depth, robots.txt, priority, ``queued`` rows and
  index entries written at the end of the bundle), unless the page's content was seen under
  another URL (``transforms.frontier.copies``: its links wait for the duplicate judgement);
  the result goes on with its links to other keys, which take the loop;
* a lease chained after this one (``leasing.plan_successor``) is the one out now;
* requests the lease did not start go back to the front of the head.
"""

from __future__ import annotations

import dataclasses
import logging

from transforms.core import recrawl, retry, schedule
from transforms.core.content import header
from transforms.core.digests import digest_of
from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FRESH,
    OUTCOME_RETRY,
    REVISIT_RECRAWL,
    CrawlRequest,
    FetchResult,
)
from transforms.core.robots import has_content, rule_count, rules_from_response
from transforms.core.sharding import shard_key
from transforms.core.sitemap_links import robots_sitemap_requests
from transforms.core.url_keys import politeness_key, url_fingerprint
from transforms.formats.rows import iso as iso_time
from transforms.formats.rows import robots_host_row
from transforms.frontier.admission import admit
from transforms.frontier.context import HostContext
from transforms.frontier.found_links import emit
from transforms.frontier.leases import LeaseOutcome
from transforms.frontier.leasing import give_back
from transforms.frontier.state import (
    JOB_REFILL,
    PHASE_READY,
    REFILL_PASSED_CAP,
    HeadEntry,
    InboxBatch,
)
from transforms.frontier.store import REVISIT_RETRY_SECONDS

_LOG = logging.getLogger(__name__)


def harvest(ctx: HostContext, outcome: LeaseOutcome, now: float) -> None:
    hs = ctx.state
    lease = hs.lease
    assert lease is not None
    hs.lease = None
    ctx.effects.changed = True
    note_passed_during_refill(ctx, lease.entries)
    if outcome.robots is not None:
        _apply_robots(ctx, outcome, now)
        if lease.robots_url is not None and ctx.robots is not None:
            _queue_sitemaps(ctx, lease.robots_url, now)
    if outcome.verify_error:
        ctx.counters["lease_rows_unreadable"] += 1
        hs.last_error = f"rows unreadable: {outcome.verify_error}"[:200]
    fx = ctx.effects
    for request, why in outcome.skipped:
        entry = entry_of_request(lease.entries, request)
        if entry is not None:
            fx.writes.index_deletes.append(ctx.entry_key(entry))
        ctx.counters["lease_skipped_done"] += 1
        _LOG.debug("not fetched again", extra={"url": request.url, "why": why})
    for request, record in outcome.fresh:
        entry = entry_of_request(lease.entries, request)
        ctx.count("fresh", counter="urls_fresh")
        ctx.outcome(request, OUTCOME_FRESH, now,
                    f"fetched {iso_time(record.fetched_at or 0.0)}, next fetch "
                    f"{iso_time(record.next_fetch_at or 0.0)}",
                    http_status=record.http_status, fetched_at=record.fetched_at)
        if entry is not None:
            fx.writes.index_deletes.append(ctx.entry_key(entry))
    for request in outcome.deferred:
        _defer(ctx, request, entry_of_request(lease.entries, request), now)
    retries: list[HeadEntry] = []
    for result in outcome.results:
        entry = entry_of_lease(lease.entries, result.request.url)
        retried = _apply_result(ctx, result, entry, outcome, now)
        if retried is not None:
            retries.append(retried)
    hs.request_seconds = schedule.request_seconds_estimate(
        hs.request_seconds, [r.elapsed for r in outcome.results if r.status is not None])
    unfinished = [e for e in (entry_of_lease(lease.entries, r.url) for r in outcome.unfinished)
                  if e is not None]
    if unfinished:
        ctx.counters["urls_requeued"] += len(unfinished)
    give_back(ctx, retries + unfinished)
    # A back-off pause (Retry-After) counts from when it was decided, not from the last
    # request's end, so it is a floor of its own.
    delay = ctx.delay(now)
    hs.next_allowed_at = max(schedule.next_lease_time(outcome.last_end, delay, now),
                             hs.backoff.slow_until)
    if hs.next_lease is not None:  # the lease chained after this one is the one out now
        hs.lease, hs.next_lease = hs.next_lease, None
        # It started when this one ended (the service chains them), not at this harvest.
        start = outcome.last_end + delay if outcome.last_end else now
        ctx.effects.wake(schedule.expected_lease_end(
            start, max(1, len(hs.lease.entries)), delay,
            hs.request_seconds or schedule.DEFAULT_REQUEST_SECONDS))


def _defer(ctx: HostContext, request: CrawlRequest, entry: HeadEntry | None,
           now: float) -> None:
    """A batch's revisit of a URL whose first entry has not fetched it yet: its entry moves
    ``REVISIT_RETRY_SECONDS`` later (the URL is fetched once; the batch then gets the row's
    answer)."""
    fx = ctx.effects
    if entry is not None:
        fx.writes.index_deletes.append(ctx.entry_key(entry))
    due = now + REVISIT_RETRY_SECONDS
    fx.writes.index_puts.append(ctx.index_entry(request, due))
    ctx.state.next_eligible_at = _earliest(ctx.state.next_eligible_at, due)
    ctx.counters["batch_revisits_deferred"] += 1


def note_passed_during_refill(ctx: HostContext, entries: tuple[HeadEntry, ...]) -> None:
    """Remembers a harvested lease's URLs on the refill read in flight, if any: the read may
    have returned their entries before they were held (``frontier_state.IoJob``)."""
    job = ctx.state.io
    if job is None or job.kind != JOB_REFILL or job.stale or not entries:
        return
    job.passed.extend(url_fingerprint(e.request.url).hex() for e in entries)
    if len(job.passed) > REFILL_PASSED_CAP:
        job.passed, job.stale = [], True


def entry_of_request(entries: tuple[HeadEntry, ...], request: CrawlRequest
                     ) -> HeadEntry | None:
    """The lease entry of ``request`` itself: a lease may hold a URL twice (its first entry
    and a client batch's revisit of it), which the URL alone does not tell apart."""
    for entry in entries:
        if entry.request == request:
            return entry
    return entry_of_lease(entries, request.url)


def entry_of_lease(entries: tuple[HeadEntry, ...], url: str) -> HeadEntry | None:
    for entry in entries:
        if entry.request.url == url:
            return entry
    return None


def _apply_result(ctx: HostContext, result: FetchResult, entry: HeadEntry | None,
                  outcome: LeaseOutcome, now: float) -> HeadEntry | None:
    """Counts a fetch, retries a transient failure (returns the entry to retry) and moves the
    host's back-off: failures that mean "slow down" stretch the delay for all of its URLs, an
    answer shrinks it again. Final results are emitted with their next fetch time."""
    hs, fx = ctx.state, ctx.effects
    attempts = result.request.attempt + 1
    if retry.is_transient(result.status, result.error):
        retry_after = retry.parse_retry_after(header(result.headers, "Retry-After"), now)
        if retry.slows_host(result.status, result.error):
            hs.backoff = retry.on_failure(hs.backoff, now, retry_after,
                                          ctx.config.retry_delay, ctx.rng)
            ctx.counters["host_backoffs"] += 1
        else:  # one page's trouble: wait before the retry, at the normal pace afterwards
            wait = retry.retry_delay(attempts, ctx.config.retry_delay, retry_after, ctx.rng)
            hs.backoff = retry.pause(hs.backoff, now, wait)
            ctx.counters["host_pauses"] += 1
    elif result.status is not None:
        hs.backoff = retry.on_success(hs.backoff)
    if entry is not None and retry.should_retry(attempts, result.status, result.error):
        problem = result.error or f"HTTP {result.status}"
        hs.last_error = f"{problem}: {result.error_detail or ''}"[:200]
        ctx.counters["retries"] += 1
        again = HeadEntry(entry.rank, dataclasses.replace(result.request, attempt=attempts),
                          entry.front, entry.seq)
        fx.writes.index_puts.append(ctx.index_entry(again.request, now, same_as=entry))
        ctx.outcome(result.request, OUTCOME_RETRY, now,
                    f"{problem} (attempt {attempts} of {retry.MAX_ATTEMPTS})")
        return again
    if result.status is not None:
        ctx.count("fetched", counter="pages_fetched")
        ctx.count("bytes", result.content_length, counter="bytes_fetched")
    if result.error or retry.is_transient(result.status, None):
        kind = result.error or f"http_{result.status}"
        ctx.count("errors", counter=f"fetch_error_{kind}")
        hs.last_error = f"{kind}: {result.error_detail or ''}"[:200]
    if result.status == 304:
        ctx.count("not_modified", counter="pages_not_modified")
    emit(ctx, _schedule_next(ctx, result, entry, outcome, now), outcome, now)
    return None


def _schedule_next(ctx: HostContext, result: FetchResult, entry: HeadEntry | None,
                   outcome: LeaseOutcome, now: float) -> FetchResult:
    """The result with its next fetch time and its index entry to delete; the recrawl's entry
    goes into the index now. A failure without a response keeps a known URL's history and is
    tried again one interval later."""
    record = outcome.record_of(result.request.url)
    previous = record.history() if record is not None else None
    index_key = None
    if entry is not None:
        # Held until the row sink has the URL's row and deletes the entry (frontier_index).
        index_key = ctx.entry_key(entry)
        held = ctx.index_entry(entry.request, now, same_as=entry)
        ctx.effects.writes.index_puts.append(dataclasses.replace(
            held, held_by=ctx.state.incarnation, held_until=now + ctx.config.hold_seconds))
    base = dataclasses.replace(result.request.crawl_only(), attempt=0, conditional=(),
                               lastmod=None, revisit=REVISIT_RECRAWL)
    if result.status is None:
        if previous is None:
            return dataclasses.replace(result, index_key=index_key)
        due = now + previous.interval
        ctx.effects.writes.index_puts.append(ctx.index_entry(base, due))
        ctx.state.next_eligible_at = _earliest(ctx.state.next_eligible_at, due)
        return dataclasses.replace(result, index_key=index_key)
    checksum = digest_of(result)
    history = recrawl.update_history(previous, now, result.status, checksum, result.headers,
                                     ctx.policy.recrawl)
    ctx.effects.writes.index_puts.append(ctx.index_entry(base, history.next_fetch_at))
    ctx.state.next_eligible_at = _earliest(ctx.state.next_eligible_at, history.next_fetch_at)
    ctx.counters["recrawls_scheduled"] += 1
    return dataclasses.replace(result, next_fetch_at=history.next_fetch_at, index_key=index_key)


def _earliest(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)


def _apply_robots(ctx: HostContext, outcome: LeaseOutcome, now: float) -> None:
    hs, cfg, response = ctx.state, ctx.config, outcome.robots
    assert response is not None
    rules = rules_from_response(response.status, response.body, response.fetched_at,
                                response.error, response.content_encoding, response.truncated)
    ctx.set_robots(rules)
    ctx.effects.writes.host_rows.append(robots_host_row(hs.host, rules, now))
    hs.robots_saved_at = rules.fetched_at
    ctx.counters["robots_fetched"] += 1
    if rules.mode == "parsed" and not rule_count(rules.text) and has_content(rules.text):
        # The one way a body that was never really read (an undecoded coding, an HTML error
        # page served as 200) shows up: rules the site has, and we do not.
        ctx.counters["robots_without_rules"] += 1
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
        ctx.counters["robots_undecodable"] += 1
    if hs.robots_attempts < cfg.robots_max_attempts:
        hs.robots_retry_at = now + schedule.retry_backoff(hs.robots_attempts, cfg.retry_delay)
        return
    # RFC 9309: an unreachable robots.txt means "disallow all". After the last attempt every
    # URL in the head ends with an error (its entry deleted); new URLs fail fast until the
    # error TTL passes; the rest of the index waits for it.
    hs.robots_attempts = 0
    hs.robots_failed_until = hs.robots_retry_at = now + cfg.robots_error_ttl
    for entry in ctx.head:
        ctx.counters["robots_unavailable"] += 1
        ctx.count("errors")
        ctx.outcome(entry.request, OUTCOME_ERROR, now, f"robots_unavailable: {hs.last_error}")
        ctx.effects.writes.index_deletes.append(ctx.entry_key(entry))
    ctx.set_head([])


def _queue_sitemaps(ctx: HostContext, robots_txt_url: str, now: float) -> None:
    """Admits the sitemaps a freshly parsed robots.txt names (``transforms.core.sitemap_links``);
    one of another key goes to that key's frontier through the crawl loop."""
    rules = ctx.robots
    if rules is None or rules.mode == "disallow_all" or not ctx.policy.sitemaps:
        return
    named = rules.sitemaps() if rules.mode == "parsed" else ()
    own = []
    for request in robots_sitemap_requests(named, robots_txt_url,
                                           probe=ctx.policy.probe_sitemap_xml):
        key = shard_key(politeness_key(request.url), request.url, ctx.shards)
        if key != ctx.state.host:
            ctx.effects.discovered.append(request)
            ctx.counters["sitemaps_other_host"] += 1
        else:
            own.append(request)
    if not own:
        return
    if ctx.state.phase != PHASE_READY:  # the seen filter is not complete yet: wait for it
        ctx.effects.inbox.append(InboxBatch(tuple(own)))
        ctx.state.inbox += 1
        return
    ctx.counters["sitemaps_queued"] += admit(ctx, own, now)


__all__ = ["entry_of_lease", "harvest", "note_passed_during_refill"]
