"""Rebuild: a key found with empty state reads what it needs back from the tables (pure).

A key's state is empty when a new job starts (a second ``crawler run``, a Dataflow
drain-and-replace, a new template launch), after a local run was killed, or when the runner
moved the key to a worker that has no state for it. The webtable and the frontier index hold
everything that matters, so the key rebuilds before it admits anything:

    element or wake-up arrives, state empty
      -> phase "rebuilding"; requests wait in the inbox; read 1 submitted    (no blocking:
    read 1: the hosts row (robots verdict), the index's first page, rows 1..n   the reads run
      -> robots rules if still fresh; the head; rows into the seen filter     in the fetch
         and the counters (accepted = the page budget used so far); a key     service's
         crawled before waits a whole delay before its first request
      -> leases may start now: the index is the work, the rows are the truth  threads, and
    read 2..m: rows n+1..                                                     the key's timer
      -> seen filter and counters                                             collects them)
    last page
      -> phase "ready": the inbox is admitted against the complete seen filter

Bounded and paged: ``rebuild_page`` rows per read, one read in flight per key. URLs fetched
before the restart are in the seen filter again, so they are not fetched twice; URLs whose
row says ``queued`` are still in the index, so they are not lost; a URL whose fetch was in
flight at the crash may be fetched again (at most one lease per key), unless its terminal row
made it to the table, which the lease checks first.
"""

from __future__ import annotations

import uuid

from transforms.core import status
from transforms.core.url_keys import url_fingerprint
from transforms.frontier.admission import admit
from transforms.frontier.context import HostContext, IoRequest
from transforms.frontier.dust_rules import merge_saved_rules
from transforms.frontier.head import merge_head
from transforms.frontier.leasing import start_io
from transforms.frontier.state import JOB_REBUILD, PHASE_READY, PHASE_REBUILDING, HeadEntry
from transforms.frontier.store import REVISIT_RETRY_SECONDS, IndexPage, RebuildPage


def start_rebuild(ctx: HostContext, now: float) -> None:
    """Puts a key with empty state into the rebuilding phase and asks for its first page."""
    ctx.state.phase = PHASE_REBUILDING
    ctx.state.incarnation = uuid.uuid4().hex
    ctx.set_seen(ctx.config.new_seen())
    ctx.counters["keys_rebuilt"] += 1
    start_io(ctx, IoRequest(uuid.uuid4().hex, JOB_REBUILD, first=True), now)


def apply_rebuild_page(ctx: HostContext, page: RebuildPage, now: float) -> None:
    """Takes one page in; asks for the next one, or finishes the rebuild."""
    hs = ctx.state
    if page.url_rules:
        merge_saved_rules(ctx, page.url_rules)
    if page.robots is not None:
        ctx.set_robots(page.robots)
        hs.robots_saved_at = page.robots.fetched_at
        ctx.robots_changed = True
    if page.index is not None:
        apply_index_page(ctx, page.index, now)
    if page.robots is not None or page.records or (page.index and page.index.entries):
        # The key was crawled before: when its last request was is unknown (it was in the
        # lost state), so the first one now waits a whole delay (its Crawl-delay included).
        hs.next_allowed_at = max(hs.next_allowed_at, now + ctx.delay())
    for record in page.records:
        fingerprint = url_fingerprint(record.url)
        if record.accepted or record.status == status.ROBOTS_BLOCKED:
            ctx.remember(fingerprint)
        if record.accepted:
            hs.count("accepted")
        if record.status in status.RESPONDED:
            hs.count("fetched")
            hs.count("bytes", record.length)
        counter = {status.ERROR: "errors", status.ROBOTS_BLOCKED: "robots_blocked",
                   status.FILTERED: "filtered", status.BUDGET_EXCEEDED: "budget_exceeded",
                   status.FRESH: "fresh"}.get(record.status or "")
        if counter:
            hs.count(counter)
        if status.is_pending(record.status):
            hs.spilled += 1
    ctx.counters["rows_rebuilt"] += len(page.records)
    hs.scan_after = page.after
    if page.after is not None:
        start_io(ctx, IoRequest(uuid.uuid4().hex, JOB_REBUILD, after=page.after), now)
        return
    hs.phase = PHASE_READY
    hs.spilled = max(0, hs.spilled - len(ctx.head))
    inbox = ctx.load_inbox()
    ctx.effects.clear_inbox = True
    hs.inbox = 0
    for batch in inbox:
        admit(ctx, batch.requests, now)
        ctx.effects.tokens.extend(batch.tokens)
    ctx.effects.changed = True


def apply_index_page(ctx: HostContext, page: IndexPage, now: float,
                     passed: frozenset[str] = frozenset(), stale: bool = False, *,
                     continued: bool = False) -> None:
    """A refill: eligible index entries join the head (in rank order, bounded), except those
    of URLs the key is fetching (its lease) or fetched while the read was out (``passed``,
    fingerprints in hex; see ``frontier_state.IoJob``): the read may predate their hold. A
    ``stale`` page is dropped whole and the index read again.

    A page that stopped before the end of the index leaves the next refill a place to go on
    from (``HostState.refill_after``), unless entries did not fit in the head (they lie
    somewhere in what was read). Without it, a window of entries in flight (URLs fetched and
    held until their rows are written, e.g. while the row sink lags) as long as a read would
    be read again and again, each read finding nothing, with the key's timer firing for each.
    ``continued``: the page continues the last one, so its ``next_eligible_at`` adds to
    theirs."""
    hs = ctx.state
    if stale:
        ctx.counters["refills_stale"] += 1
        hs.index_exhausted = False
        return
    busy = {e.request.url for lease in (hs.lease, hs.next_lease) if lease is not None
            for e in lease.entries}
    entries, waiting = [], False
    for e in page.entries:
        if e.request.url not in busy and url_fingerprint(e.request.url).hex() not in passed:
            entries.append(HeadEntry(e.rank, e.request, False, e.seq))
        elif e.request.batches and e.request.revisit:
            waiting = True  # a batch's revisit of a URL in flight: not the lease's to end
    if len(entries) < len(page.entries):
        ctx.counters["refill_entries_in_flight"] += len(page.entries) - len(entries)
    head, dropped = merge_head(ctx.head, entries, ctx.config.head_size)
    taken = len(entries) - dropped
    ctx.set_head(head)
    hs.spilled = max(0, hs.spilled - taken)
    # Entries left out are the lease's: it ends them (held, deleted) or gives them back to
    # the head, so they do not count as index work still to read.
    hs.index_exhausted = page.exhausted and not dropped
    hs.refill_after = page.last_key if not page.exhausted and not dropped else None
    if continued and hs.next_eligible_at is not None and page.next_eligible_at is not None:
        hs.next_eligible_at = min(hs.next_eligible_at, page.next_eligible_at)
    elif not continued or page.next_eligible_at is not None:
        hs.next_eligible_at = page.next_eligible_at
    if waiting:  # read the index again once the URL's first entry has had time to settle
        again = now + REVISIT_RETRY_SECONDS
        hs.next_eligible_at = min(again, hs.next_eligible_at or again)
    ctx.counters["urls_refilled"] += taken
    ctx.effects.changed = True
