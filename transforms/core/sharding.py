"""Hot-host sharding (pure): one huge host split over ``N`` keys, each ``N`` times as slow.

One host is one key of the frontier's stateful DoFn, so one worker at a time serves it. A policy
can mark a host ``shards: N``: its URLs are then keyed ``host#i`` with ``i`` a stable hash of the
URL modulo ``N``, so ``N`` workers can hold its state and leases. Each shard waits ``N`` times
the host's delay between its requests (and gets ``1/N`` of its page budget), so the host as a
whole still sees at most one request per delay on average, whichever workers the shards land on.
Each shard keeps its own robots.txt copy and back-off.

    example.com, shards: 4, min_delay 1 s
      -> keys example.com#0 .. example.com#3, each 4 s between requests: 1 request/s in all
"""

from __future__ import annotations

import hashlib
import math

SHARD_SEPARATOR = "#"
MAX_SHARDS = 256


def shard_of(url: str, shards: int) -> int:
    """The shard of ``url`` (stable across processes and runs: not Python's ``hash``)."""
    if shards <= 1:
        return 0
    digest = hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def shard_key(host: str, url: str, shards: int) -> str:
    """The frontier key of ``url`` on ``host`` (a politeness key): the host itself when the
    host is not sharded, else ``host#i``."""
    return host if shards <= 1 else f"{host}{SHARD_SEPARATOR}{shard_of(url, shards)}"


def host_of_key(key: str) -> str:
    """The politeness key (host) of a frontier key: ``example.com#3`` -> ``example.com``."""
    return key.split(SHARD_SEPARATOR, 1)[0]


def shard_delay(delay: float, shards: int) -> float:
    """Seconds between one shard's requests so that ``shards`` shards keep ``delay`` overall."""
    return delay * max(1, shards)


def shard_budget(budget: int, shards: int) -> int:
    """One shard's share of the host's page budget (rounded up, so the host gets at least it)."""
    return math.ceil(budget / max(1, shards))
