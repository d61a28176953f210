"""Admission: whether a URL enters a key's pending work, and what is written when it does (pure).

For each request, in this order (the first that applies decides):

1. robots.txt has been unreachable for the key's last attempts: ``error`` at once (fail fast,
   until ``robots_error_ttl`` passes);
2. already seen (the key's Bloom filter): a rediscovered link is dropped (its row exists). A
   known URL sent again as a seed, or by a sitemap with a ``lastmod``, becomes a *revisit*: an
   index entry the lease decides about from the URL's row
   (``transforms.frontier.leases.plan_lease``);
3. the policy's filters and trap rules: ``filtered``, with the reason;
4. the page budget (URLs accepted so far, a shard's share of it): ``budget_exceeded``; so is a
   URL past the seen filter's capacity;
5. robots.txt, when the key has fresh rules: ``robots_blocked`` (remembered as seen);
6. accepted: the URL is remembered, its index entry and its ``queued`` row are written (index
   first, ``transforms.frontier.store.StoreBatch``), and it joins the head at the next timer
   firing (``arrivals``). Nothing refers to it before both writes are durable.

Sitemaps named by robots.txt skip the filters and the budget, as before: they are the site's
own list of its pages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from transforms.core.filters import first_rejection
from transforms.core.records import (
    OUTCOME_BUDGET,
    OUTCOME_ERROR,
    OUTCOME_FILTERED,
    OUTCOME_QUEUED,
    OUTCOME_ROBOTS_BLOCKED,
    REVISIT_LASTMOD,
    REVISIT_RESUBMIT,
    SITEMAP_KINDS,
    CrawlRequest,
)
from transforms.core.url_keys import url_fingerprint
from transforms.frontier.context import HostContext
from transforms.frontier.dust_rules import rewritten
from transforms.frontier.state import HeadEntry


def needs_robots(url: str) -> bool:
    """robots.txt (RFC 9309) governs http and https; other schemes (ftp) are leased without it."""
    return url.startswith(("http://", "https://"))


def admit(ctx: HostContext, requests: Iterable[CrawlRequest], now: float) -> int:
    """Decides each request (see the module docstring); returns how many were accepted."""
    hs, hp, fx = ctx.state, ctx.policy, ctx.effects
    robots = ctx.fresh_robots(now)
    accepted = 0
    for request in requests:
        moved = rewritten(ctx, request)
        if moved is not None:
            ctx.counters["dust_rewritten"] += 1
            request = moved
        if hs.robots_failed_until > now:
            ctx.count("errors")
            ctx.outcome(request, OUTCOME_ERROR, now, f"robots_unavailable: {hs.last_error}")
            continue
        fingerprint = url_fingerprint(request.url)
        sitemap = request.kind in SITEMAP_KINDS
        if fingerprint in ctx.seen:
            revisit = _revisit_of(request)
            if revisit:
                _enqueue(ctx, dataclasses.replace(request, revisit=revisit, attempt=0,
                                                  conditional=()), now, queued_row=False)
                ctx.counters["revisits_queued"] += 1
                accepted += 1
            else:
                ctx.count("dedup_dropped")
            continue
        if not sitemap:
            rejection = first_rejection(request.url, request.depth, hp, now)
            if rejection is not None:
                ctx.count("filtered", counter=f"filtered_{rejection.reason}")
                ctx.outcome(request, OUTCOME_FILTERED, now,
                            f"{rejection.reason}: {rejection.detail}")
                continue
            if hs.counters.get("accepted", 0) >= hp.max_pages_per_host:
                ctx.count("budget_exceeded")
                ctx.outcome(request, OUTCOME_BUDGET, now,
                            f"max_pages_per_host {hp.max_pages_per_host}")
                continue
        if ctx.seen.full:
            ctx.count("budget_exceeded", counter="seen_full")
            ctx.outcome(request, OUTCOME_BUDGET, now,
                        f"max_seen_per_host {ctx.config.max_seen}")
            continue
        if (robots is not None and needs_robots(request.url)
                and not robots.allows(request.url, ctx.agent)):
            ctx.remember(fingerprint)
            ctx.count("robots_blocked")
            ctx.outcome(request, OUTCOME_ROBOTS_BLOCKED, now, "robots.txt")
            continue
        ctx.remember(fingerprint)
        if not sitemap:
            ctx.count("accepted", counter="urls_accepted")
        _enqueue(ctx, request, now, queued_row=True)
        accepted += 1
    if accepted:
        fx.changed = True
    return accepted


def _revisit_of(request: CrawlRequest) -> str:
    """Why a known URL would be visited again: a seed sent again, or a sitemap lastmod."""
    if request.lastmod is not None:
        return REVISIT_LASTMOD
    if request.discovered_from is None and request.kind not in SITEMAP_KINDS:
        return REVISIT_RESUBMIT  # a client asked again: fetched unless it is still fresh
    return ""


def _enqueue(ctx: HostContext, request: CrawlRequest, now: float, *, queued_row: bool) -> None:
    """Writes the URL's index entry (and its ``queued`` row) and hands it to the head."""
    entry = ctx.index_entry(request, now)
    fx = ctx.effects
    fx.writes.index_puts.append(entry)
    if queued_row:
        ctx.outcome(request, OUTCOME_QUEUED, now)
    fx.arrivals.append(HeadEntry(entry.rank, request, False, entry.seq))
    ctx.state.arrivals += 1
