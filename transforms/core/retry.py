"""Failures, retries and host-owned backoff: which failures are retried, when, and how a host slows.

Pure logic, no Beam import; time is injected (``now``) and randomness too (a ``random.Random``),
so tests are deterministic. Two levels act together:

* **per URL** (:func:`should_retry`, :func:`retry_delay`): a transient failure is retried up to
  :data:`MAX_ATTEMPTS` attempts in all, after an exponentially growing, jittered delay that is
  never shorter than the server's ``Retry-After``; then the URL is recorded with its error. A
  final failure (4xx other than 429, a malformed URL, ...) is recorded at once;
* **per host** (:class:`HostBackoff`, kept in the host's state, not the URL's): every transient
  failure pauses the host for the retry's delay (:func:`pause`), so the retry waits without a
  per-URL timer; failures that say the host itself is struggling (:func:`slows_host`) also
  stretch its pace for every URL, and successes bring it back to normal step by step. A lease
  ends at its first transient failure (``transforms.fetchers.service.run_lease``), so no further
  request reaches the host before the pause is decided.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace

from transforms.core.recrawl import parse_http_date

# Retried statuses. 429 Too Many Requests and 503 Service Unavailable ask the client to come
# back later (often with Retry-After); 500, 502 and 504 are usually passing server or gateway
# trouble. 501 Not Implemented and 505 HTTP Version Not Supported describe what the server can
# do, which a retry will not change, and every other 4xx (408 included) is about the request:
# they are recorded at once.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})

# Retried error kinds from ``transforms.fetchers.http.classify_error``: the network or the server
# broke the exchange, and the next attempt may well succeed. ``invalid_url``, ``protocol`` (a
# response that does not parse), ``client``, ``internal``, ``too_many_redirects`` and
# ``bad_redirect`` would fail the same way again.
TRANSIENT_ERRORS = frozenset({"timeout", "connection", "disconnected", "payload"})

# The subset of failures that slow the whole host: it says it is overloaded (429, 503), its
# gateway cannot reach or wait for it (502, 504), or it does not answer in time or at all. A 500
# or a truncated body is more often one broken page than a struggling host, so it is retried
# per URL but does not slow the host's other URLs.
HOST_SLOWDOWN_STATUSES = frozenset({429, 502, 503, 504})
HOST_SLOWDOWN_ERRORS = frozenset({"timeout", "connection", "disconnected"})

MAX_ATTEMPTS = 3
MAX_RETRY_AFTER = 86_400.0  # a server cannot park a URL (or a host) for more than a day
MAX_HOST_FACTOR = 32.0  # a failing host is slowed to at most 32x its politeness delay
_MAX_EXPONENT = 60  # 2**60 * any sane base is far beyond every cap; avoids float overflow

_INTEGER = re.compile(r"^[+-]?\d+$")


def is_transient(status: int | None, error: str | None) -> bool:
    """Whether a failed attempt may succeed if tried again.

    Args:
        status: The HTTP status received, or None when no response arrived.
        error: The error kind from ``classify_error``, or None.

    Returns:
        True for a status in :data:`TRANSIENT_STATUSES` or an error in
        :data:`TRANSIENT_ERRORS`. A 4xx other than 429 is final even if reading its body failed.
    """
    if status is not None and 400 <= status < 500 and status != 429:
        return False
    return status in TRANSIENT_STATUSES or error in TRANSIENT_ERRORS


def should_retry(attempt: int, status: int | None, error: str | None,
                 max_attempts: int = MAX_ATTEMPTS) -> bool:
    """Whether to try a URL again after a failed attempt.

    Args:
        attempt: Attempts already made, this one included (1 after the first failure).
        status: The HTTP status received, or None.
        error: The error kind, or None.
        max_attempts: Attempts allowed in all (the issue's policy: 3).

    Returns:
        True if the failure is transient and fewer than ``max_attempts`` attempts were made.
    """
    return attempt < max_attempts and is_transient(status, error)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header (RFC 9110 10.2.3).

    Both forms are read: delta-seconds (``120``) and an HTTP-date. A date in the past or a
    negative number means "now" (0). The result is capped at :data:`MAX_RETRY_AFTER` (one day):
    the header is a request, and a misconfigured server must not stall a host for weeks.

    Args:
        value: The header value, or None.
        now: The current time (seconds since the epoch), to turn a date into a delay.

    Returns:
        The delay in seconds, or None when the header is missing or not understood.
    """
    if value is None:
        return None
    text = value.strip()
    if _INTEGER.match(text):
        delay = float(max(0, min(int(text), int(MAX_RETRY_AFTER))))
    else:
        when = parse_http_date(text)
        if when is None:
            return None
        delay = max(0.0, when - now)
    return min(delay, MAX_RETRY_AFTER)


def retry_delay(attempt: int, base: float, retry_after: float | None, rng: random.Random,
                cap: float = 3600.0) -> float:
    """The delay before the next attempt: exponential backoff with full jitter.

    The delay is drawn uniformly from ``[0, min(cap, base * 2 ** (attempt - 1))]`` ("full
    jitter"): URLs that failed together (a host that went down) spread their retries over the
    whole window instead of coming back in a burst. Full rather than decorrelated jitter because
    it needs no memory of the previous delay, so nothing more is kept per URL. Politeness still
    applies on top: a retry goes through the host's lease like any request.

    ``Retry-After`` is a lower bound: the result is never shorter than it, even above ``cap``
    (:func:`parse_retry_after` already capped it at a day).

    Args:
        attempt: Attempts already made (1 after the first failure); below 1 counts as 1.
        base: The backoff unit in seconds (the first window's width).
        retry_after: The server's ``Retry-After`` in seconds, or None.
        rng: The source of jitter (seeded in tests).
        cap: The widest window, in seconds.

    Returns:
        Seconds to wait before the next attempt.
    """
    exponent = min(max(attempt, 1) - 1, _MAX_EXPONENT)
    window = min(cap, max(0.0, base) * 2.0**exponent)
    delay = rng.uniform(0.0, window)
    if retry_after is not None and retry_after > delay:
        return retry_after
    return delay


def slows_host(status: int | None, error: str | None) -> bool:
    """Whether a failure should slow down every URL of the host (see the module constants)."""
    return status in HOST_SLOWDOWN_STATUSES or error in HOST_SLOWDOWN_ERRORS


@dataclass(frozen=True)
class HostBackoff:
    """How much a host is slowed down because of its recent failures; kept in the host's state.

    Attributes:
        consecutive_failures: Host-slowing failures since the last success.
        slow_until: No request to the host starts before this time (seconds since the epoch).
        factor: The host's politeness delay is multiplied by this (1 to ``MAX_HOST_FACTOR``).

    Transitions (all pure, see :func:`on_failure`, :func:`on_success`, :func:`effective_delay`):
    a failure doubles ``factor`` (up to the cap) and pushes ``slow_until`` to ``now`` plus a
    jittered exponential delay, or the ``Retry-After``, whichever is later (it never moves
    back); a success resets the failure count and halves ``factor`` toward 1, so a host recovers
    step by step instead of being hit at full speed at once. ``slow_until`` is kept on success:
    a pause the server asked for is honored even if a request already in flight succeeded.

    Timeline for a host with politeness delay d = 1 s and backoff base 5 s::

        t=0    503                     -> failures 1, factor 2,  slow_until 0 + U(0, 5)
        t=4    timeout                 -> failures 2, factor 4,  slow_until 4 + U(0, 10)
        t=15   429, Retry-After: 60    -> failures 3, factor 8,  slow_until 75
               next request at 75 (not before the Retry-After), then 8 s apart
        t=75   200                     -> failures 0, factor 4:  next request 4 s later
        t=79   200                     -> factor 2: next 2 s later
        t=81   200                     -> factor 1: back to the 1 s politeness delay
    """

    consecutive_failures: int = 0
    slow_until: float = 0.0
    factor: float = 1.0


def on_failure(hb: HostBackoff, now: float, retry_after: float | None, base: float,
               rng: random.Random) -> HostBackoff:
    """The host's backoff after a failure that slows the host (:func:`slows_host`).

    Args:
        hb: The host's backoff before the failure.
        now: When the failure was observed.
        retry_after: The server's ``Retry-After`` in seconds, or None.
        base: The backoff unit in seconds, as in :func:`retry_delay`.
        rng: The source of jitter.

    Returns:
        The new backoff: one more failure, twice the factor (capped), a later ``slow_until``.
    """
    failures = hb.consecutive_failures + 1
    delay = retry_delay(failures, base, retry_after, rng)
    return HostBackoff(consecutive_failures=failures,
                       slow_until=max(hb.slow_until, now + delay),
                       factor=min(MAX_HOST_FACTOR, hb.factor * 2))


def pause(hb: HostBackoff, now: float, delay: float) -> HostBackoff:
    """The host's backoff after a transient failure that does not slow the host (a 500): no
    request starts for ``delay`` seconds (the retry's :func:`retry_delay`), and the pace after
    that is unchanged.

    Args:
        hb: The host's backoff before the failure.
        now: When the failure was observed.
        delay: Seconds to wait, e.g. ``retry_delay(attempt, base, retry_after, rng)``.

    Returns:
        The same backoff with ``slow_until`` at least ``now + delay``.
    """
    return replace(hb, slow_until=max(hb.slow_until, now + max(0.0, delay)))


def on_success(hb: HostBackoff) -> HostBackoff:
    """The host's backoff after a response that shows it is answering again.

    Args:
        hb: The host's backoff before the success.

    Returns:
        No consecutive failures, half the factor (never below 1), the same ``slow_until``.
    """
    return replace(hb, consecutive_failures=0, factor=max(1.0, hb.factor / 2))


def effective_delay(hb: HostBackoff, base_delay: float, now: float) -> float:
    """Seconds from ``now`` until the host's next request may start.

    Args:
        hb: The host's backoff.
        base_delay: The host's politeness delay in seconds (policy and ``Crawl-delay``).
        now: The current time.

    Returns:
        ``base_delay * factor``, or the time left until ``slow_until`` if that is longer.
    """
    return max(base_delay * hb.factor, hb.slow_until - now, 0.0)
