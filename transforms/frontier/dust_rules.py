"""A key's DUST rules in the frontier (pure): evidence in, rules adopted, URLs rewritten.

Evidence comes from exact-duplicate detection through the loop (``FrontierWork.rules``): a
rule and the content digest that showed it. ``transforms.core.dust.add_evidence`` adopts a rule
once enough distinct contents showed it; the adopted rules are saved in the hosts table
(``h:url_rules``, written with the step) and read back by a rebuild.

Adopted rules apply to URLs not yet fetched:

* at admission, a discovered link is rewritten before it is looked up in the seen filter, so
  its parameter-order twins are one URL;
* at leasing, a URL queued before the rule was learned whose rewrite differs is recorded
  ``filtered`` (``f:detail`` ``dust: <rewritten URL>``, its index entry deleted) and its
  rewrite is admitted instead (dropped there if already seen).

Seeds, client batch URLs, sitemaps and revisits of known URLs are never rewritten: someone asked
for exactly that URL, or it has a row already.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from transforms.core.dust import add_evidence, adopted_rules, rewrite
from transforms.core.records import SITEMAP_KINDS, CrawlRequest, UrlRule
from transforms.formats.rows import url_rules_host_row
from transforms.frontier.context import HostContext

_LOG = logging.getLogger(__name__)


def take_evidence(ctx: HostContext, evidence: Sequence[tuple[UrlRule, str]], now: float) -> None:
    """Adds the evidence to the key's state; saves the rules when one is adopted."""
    hs = ctx.state
    learned = []
    for rule, digest in evidence:
        if add_evidence(hs.rule_evidence, hs.url_rules, rule, digest):
            learned.append(rule)
    if evidence:
        ctx.effects.changed = True
        ctx.counters["dust_evidence"] += len(evidence)
    if learned:
        ctx.counters["dust_rules_learned"] += len(learned)
        ctx.effects.writes.host_rows.append(url_rules_host_row(hs.host, hs.url_rules, now))
        _LOG.info("dust rule learned", extra={"key": hs.host, "rules": hs.url_rules})


def merge_saved_rules(ctx: HostContext, saved: Sequence[str]) -> None:
    """Rules read back from the hosts table join any learned meanwhile (a rebuild)."""
    hs = ctx.state
    hs.url_rules = list(dict.fromkeys([*saved, *hs.url_rules]))


def rewritten(ctx: HostContext, request: CrawlRequest) -> CrawlRequest | None:
    """``request`` with the key's rules applied, or None when they leave it unchanged or it
    must not be rewritten (see the module docstring)."""
    hs = ctx.state
    if (not hs.url_rules or request.batches or request.discovered_from is None
            or request.kind in SITEMAP_KINDS or request.revisit):
        return None
    url = rewrite(request.url, adopted_rules(hs.url_rules))
    return dataclasses.replace(request, url=url) if url != request.url else None
