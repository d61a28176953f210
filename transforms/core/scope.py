"""The crawl's scope: which discovered links stay in the crawl (pure).

``--scope`` says how far a crawl may wander from its seeds:

==========  ===================================================================================
scope       a link is kept when its host ...
==========  ===================================================================================
``any``     ... is anything (the default: the policy's filters decide, as before)
``host``    ... is the host of the page it was found on (so, by induction, a seed's host)
``domain``  ... has the registered domain of that page's host (``docs.example.co.uk`` and
            ``www.example.co.uk`` share ``example.co.uk``), from the Public Suffix List (the
            ``publicsuffixlist`` package, which ships the list: no download at run time; its
            private section counts too, so ``alice.github.io`` and ``bob.github.io`` are two
            sites)
==========  ===================================================================================

The rule is relative to the page a link is found on, not to a list of seeds: every page of a
scoped crawl is in its seed's scope because every link that led to it was, so the rule needs
no state, holds for seeds sent at any time by any client, and costs a string comparison per
link. Two exceptions keep real sites working: a redirect of a seed (depth 0, e.g.
``http://example.com/`` to ``https://www.example.com/``) is followed wherever it goes, and it
becomes the scope of what is found under it; seeds themselves are never out of scope. Hosts
compare without port and case; an IP address or a single-label host (``localhost``) is its own
registered domain.

Links out of scope are dropped where they are found and counted (``links_out_of_scope``); the
page's outlinks in the webtable and the exports still list them, so the link graph is whole.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from publicsuffixlist import PublicSuffixList

SCOPE_ANY = "any"
SCOPE_HOST = "host"
SCOPE_DOMAIN = "domain"
SCOPES = (SCOPE_ANY, SCOPE_HOST, SCOPE_DOMAIN)


@functools.cache
def _suffix_list() -> PublicSuffixList:
    return PublicSuffixList()  # parses the bundled list once per process (~30 ms)


def hostname(url: str) -> str:
    """The URL's host without port or userinfo, lower case (``""`` when it has none)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


@functools.lru_cache(maxsize=65_536)
def registered_domain(host: str) -> str:
    """The registrable domain of ``host`` (eTLD+1 by the Public Suffix List); an IP address,
    a single-label host or a public suffix itself is its own domain."""
    host = host.lower().strip(".")
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host
    except ValueError:
        pass
    if "." not in host:
        return host
    return _suffix_list().privatesuffix(host) or host


def scope_of(scope: str, url: str) -> str:
    """What a URL's links must share with it to stay in ``scope``: its host, its registered
    domain, or nothing (``""`` for ``any``)."""
    if scope == SCOPE_HOST:
        return hostname(url)
    if scope == SCOPE_DOMAIN:
        return registered_domain(hostname(url))
    return ""


def in_scope(scope: str, url: str, found_on: str) -> bool:
    """Whether a link to ``url`` found on the page ``found_on`` stays in the crawl."""
    if scope == SCOPE_ANY:
        return True
    return scope_of(scope, url) == scope_of(scope, found_on)


def split_scope(scope: str, urls: Sequence[str], found_on: str) -> tuple[list[bool], int]:
    """For each of a page's links, whether it stays in ``scope``; and how many do not. The
    page's own scope is computed once."""
    if scope == SCOPE_ANY:
        return [True] * len(urls), 0
    own = scope_of(scope, found_on)
    keep = [scope_of(scope, url) == own for url in urls]
    return keep, keep.count(False)


def check_scope(scope: str) -> str:
    """``scope`` if it is one of ``SCOPES``.

    Raises:
        ValueError: naming the scopes there are.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")
    return scope
