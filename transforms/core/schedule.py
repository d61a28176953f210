"""Pure scheduling logic of the host frontier: the per-host queue and the lease arithmetic.

No Beam import here; the stateful DoFn in ``transforms.host_frontier`` is a thin shell around these.
Every function takes ``now`` explicitly so tests drive time by hand.

Lease arithmetic, for a host with politeness delay ``d`` (seconds between request starts):

- a lease carries ``k = clamp(lease_seconds / d, 1, max_lease_urls)`` URLs (``d == 0``: the
  cap);
- request ``i`` of a lease starts no earlier than ``d`` after request ``i-1`` ended (so request
  starts are at least ``d`` apart as the server sees them, and strictly sequential);
- the lease's deadline is ``start + (k - 1) * d + fetch_timeout``: every request's timeout is
  clamped to it, so by the deadline the lease holds no open connection; a request that would
  start after ``deadline - min_request_window`` is not started and goes back to the queue;
- the next lease of the host starts no earlier than ``last_request_end + d``.
"""

from __future__ import annotations

import math


def politeness_delay(min_delay: float, crawl_delay: float | None) -> float:
    """The delay between request starts to a host: ours, or the site's ``Crawl-delay`` if larger."""
    if crawl_delay is None or not math.isfinite(crawl_delay) or crawl_delay < 0:
        return min_delay
    return max(min_delay, crawl_delay)


MIN_LEASE_SECONDS = 1.0  # the least work a lease holds (a lease chained after it must
# still be running when it is harvested)
LEASE_URLS = 40  # ... and otherwise about this many URLs


def lease_size(delay: float, lease_seconds: float, max_lease_urls: int,
               request_seconds: float = 0.0) -> int:
    """How many URLs one lease carries (at least 1, at most ``max_lease_urls``): about
    ``LEASE_URLS``, a request of ``request_seconds`` (the host's recent average) and a
    ``delay`` each, but at least ``MIN_LEASE_SECONDS`` of work (a fast host's lease) and at
    most ``lease_seconds`` (a slow host's)."""
    if max_lease_urls < 1:
        raise ValueError("max_lease_urls must be at least 1")
    per_url = max(0.0, delay) + max(0.0, request_seconds)
    if per_url <= 0:
        return max_lease_urls
    target = min(lease_seconds, max(MIN_LEASE_SECONDS, LEASE_URLS * per_url))
    return max(1, min(max_lease_urls, int(target / per_url + 1e-9)))


def lease_deadline(start: float, k: int, delay: float, fetch_timeout: float) -> float:
    """The time by which every request of a ``k``-URL lease started at ``start`` is closed."""
    return start + max(0, k - 1) * delay + fetch_timeout


DEFAULT_REQUEST_SECONDS = 0.02  # a request's expected time before a host has a history
LEASE_POLL_BASE = 0.02  # seconds: the first back-off step after a lease's expected end ...
LEASE_POLL_CAP = 0.2  # ... and the longest: a lease chained after it runs meanwhile


def expected_lease_end(start: float, k: int, delay: float,
                       request_seconds: float = DEFAULT_REQUEST_SECONDS) -> float:
    """When a lease of ``k`` requests is expected to be done: ``k`` requests of
    ``request_seconds`` (the host's recent average) with ``delay`` between them. The key's
    first poll of the lease: a lease that ends between polls waits for the next one, so the
    estimate matters most where requests are fast and leases follow each other."""
    return start + max(0, k - 1) * delay + k * max(0.0, request_seconds)


def request_seconds_estimate(previous: float, elapsed: list[float]) -> float:
    """The host's average request time after a lease whose requests took ``elapsed``: an
    even mix of the previous estimate (0: none) and this lease's mean."""
    if not elapsed:
        return previous
    mean = sum(elapsed) / len(elapsed)
    return mean if previous <= 0 else (previous + mean) / 2


def next_lease_time(last_request_end: float | None, delay: float, now: float) -> float:
    """The earliest start of a host's next lease: ``delay`` after the last request ended."""
    if last_request_end is None:
        return now
    return max(now, last_request_end + delay)


def next_poll_delay(polls_so_far: int, base: float = 0.1, cap: float = 1.0) -> float:
    """Back-off between polls: ``base``, twice that, ... capped at ``cap`` s."""
    return min(cap, base * (2 ** min(polls_so_far, 10)))


def retry_backoff(attempt: int, base: float, cap: float = 3600.0) -> float:
    """Exponential back-off before attempt ``attempt + 1`` (``attempt`` >= 1)."""
    return min(cap, base * (2 ** max(0, attempt - 1)))


def queue_rank(priority: int, depth: int, enqueued_at: float, aging_seconds: float) -> float:
    """A request's place in its host's queue: lower is fetched first.

    ``depth - priority + enqueued_at / aging_seconds``: breadth-first by default (one depth level
    weighs one priority point), a higher priority jumps ahead, and waiting ``aging_seconds`` is
    worth one priority point, so a low-priority URL is overtaken by at most
    ``(priority gap) * aging_seconds`` seconds of later arrivals and never starves.
    """
    return depth - priority + enqueued_at / aging_seconds


AGING_SECONDS = 60.0  # waiting this long is worth one priority point (queue_rank)
