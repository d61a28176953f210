"""When to fetch a URL again: validators, cache lifetimes and the adaptive recrawl interval.

Pure logic, no Beam import; every function that depends on the clock takes ``now`` (seconds
since the epoch) so tests drive time by hand. The frontier keeps one :class:`FetchHistory` per
fetched URL and calls :func:`update_history` after every successful fetch (2xx, 3xx, 4xx
recorded responses and 304; transport errors and retried statuses never reach here).

How the next fetch time of a URL is chosen (:func:`next_interval`):

1. start from the URL's previous interval, or, on its first fetch, from the server's cache
   lifetime if it sent one, else from the policy's ``default_interval``;
2. adapt to observed change: changed content halves the interval, unchanged content (a 304,
   or a 200 with the same checksum) multiplies it by 1.5; no evidence (first fetch, no
   checksum) leaves it alone;
3. a cache lifetime (``Cache-Control: max-age``, ``Expires``) is a floor: the server said the
   response stays valid that long, so fetching it earlier is wasted work;
4. clamp to ``[min_interval, max_interval]`` from the policy.

Why the lifetime is not simply used as the interval: many sites send the same ``max-age`` (or
``no-cache``) on every page whatever its change rate, so adaptation would never take effect and
every ``no-cache`` page would be refetched at ``min_interval`` forever. Used as the first
estimate and as a floor, it shortens the first recrawl of a page that declares a short life
and lengthens the recrawl of one that declares a long life, while observed change decides the
rest.

A URL submitted again before its next fetch time is "fresh" (:func:`is_fresh`): it is not
refetched, and that is its recorded outcome.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC
from typing import Protocol

Headers = Iterable[tuple[str, str]]

# RFC 9111 1.2.2: a delta-seconds value too large to represent is replaced by 2^31.
MAX_DELTA_SECONDS = 2**31

_LEAP_SECOND = re.compile(r"(\d{1,2}:\d{2}):60\b")
_DIRECTIVE = re.compile(r'\s*([^\s=,"]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^,]*))?\s*')
_DIGITS = re.compile(r"^\d+$")


class IntervalBounds(Protocol):
    """What :func:`next_interval` needs from a policy (e.g.
    ``transforms.core.policy.RecrawlBounds``).

    All three are seconds; ``min_interval <= default_interval <= max_interval`` is the policy's
    job to validate.
    """

    @property
    def default_interval(self) -> float: ...

    @property
    def min_interval(self) -> float: ...

    @property
    def max_interval(self) -> float: ...


@dataclass(frozen=True)
class Validators:
    """The validators of a stored response, sent back on the next fetch as a conditional GET.

    Attributes:
        etag: The ``ETag`` header verbatim (weak ``W/"..."`` tags included), or None.
        last_modified: The ``Last-Modified`` header verbatim, or None.
    """

    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class FetchHistory:
    """What the crawler remembers about a URL between fetches.

    Attributes:
        fetched_at: When the last fetch completed (seconds since the epoch).
        checksum: The checksum of the last body received, or None if unknown.
        validators: The validators to send on the next fetch.
        interval: The recrawl interval chosen after the last fetch (seconds).
        next_fetch_at: ``fetched_at + interval``: before this the URL is fresh.
    """

    fetched_at: float
    checksum: str | None
    validators: Validators
    interval: float
    next_fetch_at: float


def header_values(headers: Headers, name: str) -> list[str]:
    """Every value of the header ``name`` (case-insensitive), stripped, in order."""
    wanted = name.lower()
    return [v.strip() for k, v in headers if k.strip().lower() == wanted]


def _first_header(headers: Headers, name: str) -> str | None:
    for value in header_values(headers, name):
        if value:
            return value
    return None


def parse_http_date(value: str | None) -> float | None:
    """Parses an HTTP-date (RFC 9110 5.6.7) into seconds since the epoch, with the standard
    library's ``email.utils.parsedate_to_datetime``.

    It accepts the three forms recipients must accept (IMF-fixdate, RFC 850, asctime) and reads
    a two-digit RFC 850 year as 1969-2068; a date without a zone (asctime) is UTC, as HTTP-dates
    are. A leap second ``:60`` is read as ``:59``.

    Args:
        value: The header value, or None.

    Returns:
        The timestamp, or None when the value is missing or is not a valid HTTP-date.
    """
    if not value or not value.strip():
        return None
    text = _LEAP_SECOND.sub(r"\1:59", value.strip())
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def validators_from_headers(headers: Headers) -> Validators:
    """The ``ETag`` and ``Last-Modified`` of a response (first non-empty value of each)."""
    headers = tuple(headers)
    return Validators(etag=_first_header(headers, "etag"),
                      last_modified=_first_header(headers, "last-modified"))


def conditional_headers(v: Validators) -> dict[str, str]:
    """The request headers that make the next fetch conditional.

    Both are sent when both are known; a server that understands ``If-None-Match`` ignores
    ``If-Modified-Since`` (RFC 9110 13.1.3), and one that does not still gets the date.

    Args:
        v: The validators of the stored response.

    Returns:
        ``If-None-Match`` and/or ``If-Modified-Since``, or an empty dict.
    """
    out: dict[str, str] = {}
    if v.etag:
        out["If-None-Match"] = v.etag
    if v.last_modified:
        out["If-Modified-Since"] = v.last_modified
    return out


def cache_directives(headers: Headers) -> dict[str, str | None]:
    """The ``Cache-Control`` directives of a response, names lowercased.

    Every ``Cache-Control`` line is read (it is a list-valued field); quoted values are
    unquoted; when a directive repeats, its first occurrence wins (RFC 9111 4.2.1). Text that
    is not a directive is skipped up to the next comma.

    Args:
        headers: The response headers.

    Returns:
        A mapping of directive name to its value (None for a directive without ``=``).
    """
    out: dict[str, str | None] = {}
    for line in header_values(headers, "cache-control"):
        pos = 0
        while pos < len(line):
            m = _DIRECTIVE.match(line, pos)
            if m is None or m.end() == pos:
                pos = _next_comma(line, pos)
                continue
            name, raw = m.group(1).lower(), m.group(2)
            if raw is not None:
                raw = raw.strip()
                if len(raw) >= 2 and raw[0] == raw[-1] == '"':
                    raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
            pos = m.end()
            if pos < len(line) and line[pos] != ",":
                pos = _next_comma(line, pos)  # trailing garbage: the directive is malformed
                continue
            pos += 1
            out.setdefault(name, raw)
    return out


def _next_comma(line: str, pos: int) -> int:
    comma = line.find(",", pos)
    return len(line) if comma < 0 else comma + 1


def _delta_seconds(raw: str | None) -> float | None:
    if raw is None or not _DIGITS.match(raw):
        return None
    return float(min(int(raw), MAX_DELTA_SECONDS))


def parse_cache_lifetime(headers: Headers, now: float) -> float | None:
    """How long the server says a response stays valid, in seconds.

    The rules, in order of precedence:

    * ``no-store`` or unqualified ``no-cache`` -> 0: "fetch again as soon as the policy allows".
      ``no-cache="field"`` only restricts some fields, so it is ignored;
    * ``max-age=N`` -> N (RFC 9111 5.3: it overrides ``Expires``). ``s-maxage`` is ignored: it
      is addressed to shared caches that serve users (CDNs), and the crawler is not one;
    * ``Expires`` minus ``Date`` when the response has a valid ``Date`` (so the server's clock
      skew does not matter), else minus ``now``; never below 0.

    Malformed values are ignored, not read as "already expired" as RFC 9111 asks of caches:
    a bad header says nothing about how often the page changes.

    Args:
        headers: The response headers.
        now: The current time (seconds since the epoch), used when there is no ``Date``.

    Returns:
        The lifetime in seconds, or None when the response states none.
    """
    headers = tuple(headers)
    directives = cache_directives(headers)
    if "no-store" in directives or ("no-cache" in directives and directives["no-cache"] is None):
        return 0.0
    max_age = _delta_seconds(directives.get("max-age"))
    if max_age is not None:
        return max_age
    expires = parse_http_date(_first_header(headers, "expires"))
    if expires is None:
        return None
    date = parse_http_date(_first_header(headers, "date"))
    return max(0.0, expires - (date if date is not None else now))


def _clamp(value: float, bounds: IntervalBounds) -> float:
    return max(bounds.min_interval, min(bounds.max_interval, value))


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0


def next_interval(previous_interval: float | None, changed: bool | None,
                  cache_lifetime: float | None, bounds: IntervalBounds) -> float:
    """The recrawl interval after a fetch (the rule is in the module docstring).

    Args:
        previous_interval: The interval chosen after the previous fetch, or None on the first.
        changed: True if the content changed since the previous fetch, False if not (304 or
            same checksum), None if unknown.
        cache_lifetime: From :func:`parse_cache_lifetime`, or None.
        bounds: The policy's ``default_interval``, ``min_interval`` and ``max_interval``.

    Returns:
        Seconds until the URL should be fetched again, within the bounds.
    """
    lifetime = cache_lifetime if _usable(cache_lifetime) else None
    if previous_interval is not None and _usable(previous_interval) and previous_interval > 0:
        interval = previous_interval
    elif lifetime is not None:
        interval = lifetime
    else:
        interval = bounds.default_interval
    if changed is True:
        interval /= 2
    elif changed is False:
        interval *= 1.5
    if lifetime is not None:
        interval = max(interval, lifetime)
    return _clamp(interval, bounds)


def next_fetch_time(now: float, interval: float) -> float:
    """When a URL fetched at ``now`` is due again."""
    return now + interval


def is_fresh(next_fetch_at: float | None, now: float) -> bool:
    """Whether a URL submitted at ``now`` is still fresh, and so is not fetched again.

    Args:
        next_fetch_at: The URL's next fetch time, or None if it was never fetched.
        now: The time the URL is submitted again.

    Returns:
        True strictly before the next fetch time; False at or after it, or without history.
    """
    return next_fetch_at is not None and now < next_fetch_at


def _merge_validators(old: Validators, new: Validators) -> Validators:
    return Validators(etag=new.etag or old.etag,
                      last_modified=new.last_modified or old.last_modified)


def update_history(previous: FetchHistory | None, now: float, status: int,
                   checksum: str | None, headers: Headers,
                   bounds: IntervalBounds) -> FetchHistory:
    """The URL's history after a fetch that got a response.

    * 304 Not Modified: unchanged. The body was not sent, so the old checksum stays; the
      validators stay too, except those the 304 carries (RFC 9111 4.3.4 updates the stored
      response with the 304's headers). A 304 without history is treated as "unknown";
    * any other status is a full response: its validators replace the old ones (a response
      without an ``ETag`` means the old one no longer applies); it is unchanged if its
      checksum equals the previous one, changed if it differs, unknown if either is missing.

    A 304 without ``Cache-Control``/``Expires`` has no lifetime (the history keeps none), so only
    observed change moves the interval.

    Args:
        previous: The history before this fetch, or None on the first fetch.
        now: When the fetch completed.
        status: The HTTP status of the response.
        checksum: The checksum of the body received (None for a 304 or if not computed).
        headers: The response headers.
        bounds: The policy's interval bounds.

    Returns:
        The new history, with its next fetch time.
    """
    headers = tuple(headers)
    received = validators_from_headers(headers)
    changed: bool | None
    if status == 304 and previous is not None:
        changed = False
        checksum = previous.checksum
        validators = _merge_validators(previous.validators, received)
    else:
        validators = received
        if previous is None or previous.checksum is None or checksum is None:
            changed = None
        else:
            changed = checksum != previous.checksum
    interval = next_interval(previous.interval if previous else None, changed,
                             parse_cache_lifetime(headers, now), bounds)
    return FetchHistory(fetched_at=now, checksum=checksum, validators=validators,
                        interval=interval, next_fetch_at=next_fetch_time(now, interval))
