"""What a harvested fetch gives its key besides its outcome (pure): its extraction, its own
links admitted, DUST evidence, and the result on its way with the links for other keys.

Called by ``transforms.frontier.harvest`` for each final result of a lease:

* the extraction made next to the fetch (``LeaseOutcome.extraction_of``), or made here when
  the result came without one (an extraction that raises leaves the result bare: the extract
  stage tries again, and its error shows there);
* links out of the crawl's ``--scope`` were dropped by the extraction and are counted;
* the page's links to this key are admitted at once, through the usual admission (the key's
  host policy canonicalizes them first), unless the page is a copy of another URL's content
  (``transforms.frontier.copies``), whose links wait for the duplicate judgement downstream;
  a copy whose first URL is of this key and differs only in its query is DUST evidence;
* the result goes on as a ``Discovered`` with the links for other keys (a hot host's sibling
  shards included) and its item stamped with the frontier's decisions (next fetch time, the
  index entry it settles).
"""

from __future__ import annotations

import dataclasses
import logging

from transforms.core.duplicates import content_key
from transforms.core.dust import MIN_EVIDENCE_WORDS, rule_between
from transforms.core.extraction import Extraction, extract
from transforms.core.records import CrawlRequest, Discovered, FetchResult, ParsedPage
from transforms.core.url_keys import keyed_request
from transforms.core.urls import InvalidUrl
from transforms.frontier.admission import admit
from transforms.frontier.context import HostContext
from transforms.frontier.dust_rules import take_evidence
from transforms.frontier.leases import LeaseOutcome

_LOG = logging.getLogger(__name__)


def emit(ctx: HostContext, result: FetchResult, outcome: LeaseOutcome, now: float) -> None:
    """A final result goes on with its extraction; its links to this key are admitted now
    (see the module docstring)."""
    fx, cfg = ctx.effects, ctx.config
    extraction = outcome.extraction_of(result.request.url)
    if extraction is None:
        try:
            extraction = extract(result, cfg.robots_agent, cfg.fetch.max_body_bytes, cfg.scope)
        except Exception as exc:  # the extract stage tries again, and its error shows there
            _LOG.warning("extraction failed at harvest", exc_info=exc,
                         extra={"url": result.request.url})
            ctx.counters["extractions_failed"] += 1
            fx.results.append(result)
            return
    found = extraction.discovered
    _count_scope(ctx, extraction)
    first = outcome.copy_of(result.request.url)
    if first:
        _dust_evidence(ctx, result.request.url, first, found.item, now)
    own, other = _split_by_key(ctx, found.links)
    if own and (cfg.follow_duplicate_links or first is None):
        ctx.counters["links_same_key"] += len(own)
        admit(ctx, own, now)
    elif own:
        ctx.counters["links_same_key_of_copies"] += len(own)
        other = list(found.links)
    fx.results.append(Discovered(tuple(other), _stamped(found.item, result)))


def _dust_evidence(ctx: HostContext, url: str, first: str,
                   item: ParsedPage | FetchResult | None, now: float) -> None:
    """A copy of a page of this key whose URL differs only in its query's order or in one
    parameter is DUST evidence (``transforms.frontier.copies``), taken at once."""
    if not isinstance(item, ParsedPage) or item.content is None \
            or item.content.word_count < MIN_EVIDENCE_WORDS:
        return
    rule = rule_between(first, url)
    if rule is None:
        return
    try:
        _, key = keyed_request(CrawlRequest(first), ctx.config.policy)
    except InvalidUrl:
        return
    if key == ctx.state.host:
        take_evidence(ctx, [(rule, content_key(item))], now)


def _count_scope(ctx: HostContext, extraction: Extraction) -> None:
    if extraction.out_of_scope:
        ctx.count("out_of_scope", extraction.out_of_scope, counter="links_out_of_scope")
    if extraction.sitemap_out_of_scope:
        ctx.counters["sitemap_out_of_scope"] += extraction.sitemap_out_of_scope


def _split_by_key(ctx: HostContext, links: tuple[CrawlRequest, ...]
                  ) -> tuple[list[CrawlRequest], list[CrawlRequest]]:
    """The links of this key (canonicalized by its host's policy, ready for admission) and
    the others as found (the loop's ingest canonicalizes them, or records why it cannot). A
    hot host's shards are different keys: their links to each other take the loop."""
    own: list[CrawlRequest] = []
    other: list[CrawlRequest] = []
    for request in links:
        try:
            keyed, key = keyed_request(request, ctx.config.policy)
        except InvalidUrl:
            other.append(request)
            continue
        if key == ctx.state.host:
            own.append(keyed)
        else:
            other.append(request)
    return own, other


def _stamped(item: ParsedPage | FetchResult | None, result: FetchResult
             ) -> ParsedPage | FetchResult | None:
    """The extraction's item with what the frontier decided about the fetch: its next fetch
    time and the index entry it settles."""
    if isinstance(item, ParsedPage):
        return dataclasses.replace(item, fetch=dataclasses.replace(
            item.fetch, next_fetch_at=result.next_fetch_at, index_key=result.index_key))
    if isinstance(item, FetchResult):
        return dataclasses.replace(item, next_fetch_at=result.next_fetch_at,
                                   index_key=result.index_key)
    return item


__all__ = ["emit"]
