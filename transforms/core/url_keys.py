"""Keys derived from a URL: the politeness key (which frontier key, which host's delay), the
fingerprint (the seen filter, the index), and the robots.txt URL that governs it (pure).

Each canonicalizes the URL first by the RFC 3986 rules only (``transforms.core.urls.url_parts``:
no parameter removed or reordered), so every spelling of a URL gets the same keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict

from transforms.core.policy import SUPPORTED_SCHEMES, Policy
from transforms.core.records import CrawlRequest
from transforms.core.sharding import shard_key
from transforms.core.urls import InvalidUrl, canonicalize_url, unparse, url_parts


def politeness_key(url: str) -> str:
    """Return the key of the politeness queue ``url`` belongs to: its host, plus ``:port``
    when the port is explicit (not the scheme's default).

    The scheme is deliberately left out: ``http://h/`` and ``https://h/`` are served by the
    same machine, and separate queues would let the crawler hit it at twice the configured rate.
    An explicit port is kept because it usually is a different service (and the local test
    sites tell hosts apart by port), e.g. ``example.com`` or ``127.0.0.2:8081``.

    Raises:
        InvalidUrl: when ``url`` cannot be canonicalized.
    """
    parts = url_parts(url)
    return parts.host if parts.port is None else f"{parts.host}:{parts.port}"


def url_fingerprint(url: str) -> bytes:
    """Return the 16-byte BLAKE2b digest of the canonical form of ``url``.

    Raises:
        InvalidUrl: when ``url`` cannot be canonicalized.
    """
    canonical = unparse(url_parts(url))
    return hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).digest()


def robots_url(url: str) -> str:
    """Return the robots.txt URL governing ``url``: ``scheme://host[:port]/robots.txt``.

    Userinfo is not carried over: robots.txt is public by definition.

    Raises:
        InvalidUrl: when ``url`` cannot be canonicalized.
    """
    parts = url_parts(url)
    port = "" if parts.port is None else f":{parts.port}"
    return f"{parts.scheme}://{parts.host}{port}/robots.txt"


def canonical_for_host(url: str, policy: Policy) -> tuple[str, str]:
    """Canonicalizes ``url`` with its host's policy; returns (canonical URL, politeness key).

    The key comes from a first pass that keeps every parameter (it depends on scheme, host and
    port only); the host's ``remove_params`` and ``sort_query`` then apply.

    Raises:
        InvalidUrl: for a URL that cannot be crawled.
    """
    plain = canonicalize_url(url, allowed_schemes=SUPPORTED_SCHEMES, remove_params=())
    key = politeness_key(plain)
    hp = policy.for_host(key)
    return canonicalize_url(plain, allowed_schemes=SUPPORTED_SCHEMES,
                            remove_params=hp.remove_params, sort_query=hp.sort_query), key


def keyed_request(request: CrawlRequest, policy: Policy) -> tuple[CrawlRequest, str]:
    """The request canonicalized with its host's policy, and its frontier key (the host, or
    ``host#shard``).

    Raises:
        InvalidUrl: for a URL that cannot be crawled.
    """
    url, key = canonical_for_host(request.url, policy)
    if url != request.url:
        request = dataclasses.replace(request, url=url)
    return request, shard_key(key, url, policy.for_host(key).shards)


def key_requests(requests: list[CrawlRequest], policy: Policy
                 ) -> tuple[dict[str, list[CrawlRequest]], list[tuple[str, str]]]:
    """Canonicalizes requests with their host's policy and groups them by frontier key (the
    host, or ``host#shard``); returns the groups and the URLs refused, with the reason."""
    by_key: dict[str, list[CrawlRequest]] = defaultdict(list)
    invalid: list[tuple[str, str]] = []
    for request in requests:
        try:
            keyed, key = keyed_request(request, policy)
        except InvalidUrl as exc:
            invalid.append((request.url, f"{exc.reason}: {exc}"))
            continue
        by_key[key].append(keyed)
    return by_key, invalid
