"""The URL filters: whether a canonical URL may enter a host's queue, and if not, why (pure).

Each filter is a named rule with one stable rejection reason (a metrics counter and the value
recorded on the URL's row). They run in this order, cheapest and most decisive first:

==========================  =========================  ==========================================
filter                      reason                     rejects
==========================  =========================  ==========================================
``scheme``                  ``scheme_not_allowed``     a scheme outside ``allowed_schemes``
``domain_allow``            ``domain_not_allowed``     a host under none of ``allow_domains``
``domain_deny``             ``domain_denied``          a host under one of ``deny_domains``
``url_length``              ``url_too_long``           more than ``max_url_length`` characters
``url_pattern``             ``url_pattern_denied``     a ``deny_url_patterns`` regex found in it
``depth``                   ``too_deep``               link depth above ``max_depth``
``extension``               ``media_extension``        a last path segment ending ``.<ext>`` with
                                                       ext in ``skip_extensions`` (any case)
``trap_path_depth``         ``trap_path_depth``        more path segments than ``max_path_depth``
``trap_repeated_segment``   ``trap_repeated_segment``  a segment occurring more than
                                                       ``max_repeated_segments`` times
``trap_query_params``       ``trap_query_params``      more than ``max_query_params`` parameters
``trap_calendar``           ``trap_calendar``          a calendar date far from the current year
==========================  =========================  ==========================================

Domains match as suffixes on label boundaries: ``example.com`` (or ``.example.com``) matches
``example.com`` and ``a.example.com``, never ``badexample.com``. Path segments are the parts
between slashes, so ``/`` has none, ``/a/b/`` two (a trailing slash adds no segment) and
``/a//b`` three. The page budget is not here: it needs the host's count, which the frontier holds.

**Calendar rule.** A date is ``YYYY/MM`` or ``YYYY/MM/DD`` (whole path segments, or in a query
value), ``YYYY-MM-DD`` or ``YYYYMMDD`` (a valid month 01-12 and day 01-31, no adjacent digits),
or a ``year=YYYY`` (or ``yr=YYYY``) query parameter (month and day parameters next to it add
nothing to the decision). With ``w = calendar_window_years`` and ``Y`` the UTC year of ``now``,
a URL is rejected when it holds a date whose year is

* after ``Y + w`` anywhere: no real page is dated years ahead, while an endless calendar's
  "next month" link keeps going forever; or
* before ``Y - w`` in the query, or at the end of the path (only an optional ``/``,
  ``/index`` or extension after it): a month or day view far in the past.

A past date followed by more path (``/2015/03/my-post``) is a permalink, not a calendar view,
and passes: blogs and news sites keep their old articles there. Starting today, an endless
"next month" calendar therefore yields at most ``12 * (w + 1)`` URLs that pass.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from transforms.core.policy import HostPolicy

REASON_SCHEME = "scheme_not_allowed"
REASON_DOMAIN_NOT_ALLOWED = "domain_not_allowed"
REASON_DOMAIN_DENIED = "domain_denied"
REASON_TOO_LONG = "url_too_long"
REASON_PATTERN = "url_pattern_denied"
REASON_TOO_DEEP = "too_deep"
REASON_MEDIA = "media_extension"
REASON_PATH_DEPTH = "trap_path_depth"
REASON_REPEATED_SEGMENT = "trap_repeated_segment"
REASON_QUERY_PARAMS = "trap_query_params"
REASON_CALENDAR = "trap_calendar"


@dataclass(frozen=True)
class FilterResult:
    """One filter's decision on one URL.

    Attributes:
        name: the filter (``scheme``, ``trap_calendar``, ...; see ``FILTER_NAMES``).
        passed: whether the URL got through this filter.
        reason: the stable rejection reason (``""`` when passed).
        detail: what triggered the rejection, for people (the pattern, the segment ...).
    """

    name: str
    passed: bool
    reason: str = ""
    detail: str = ""


class _Url(NamedTuple):
    scheme: str
    host: str  # without userinfo and port
    path: str
    query: str


# A filter returns None when the URL passes, else (reason, detail).
_Filter = Callable[[str, _Url, int, HostPolicy, float], tuple[str, str] | None]


def check_url(url: str, depth: int, policy: HostPolicy, now: float) -> list[FilterResult]:
    """Runs every filter on ``url`` and returns all decisions, in ``FILTER_NAMES`` order.

    This is what ``crawler explain`` shows; the pipeline uses :func:`first_rejection`.

    Args:
        url: a canonical URL (``transforms.core.urls.canonicalize_url``).
        depth: its link depth (seeds are 0).
        policy: the policy of the URL's host (``Policy.for_host``).
        now: the current time in seconds since the epoch (the calendar rule's "today").
    """
    parts = _split(url)
    results = []
    for name, rule in _FILTERS:
        rejection = rule(url, parts, depth, policy, now)
        results.append(FilterResult(name, True) if rejection is None
                       else FilterResult(name, False, *rejection))
    return results


def first_rejection(url: str, depth: int, policy: HostPolicy, now: float
                    ) -> FilterResult | None:
    """The first failing filter of :func:`check_url`, or None when ``url`` passes them all.

    The hot path: it stops at the first rejection and builds no results for passing filters.
    """
    parts = _split(url)
    for name, rule in _FILTERS:
        rejection = rule(url, parts, depth, policy, now)
        if rejection is not None:
            return FilterResult(name, False, *rejection)
    return None


def domain_matches(host: str, suffixes: tuple[str, ...]) -> str | None:
    """The first of ``suffixes`` (lowercase, no leading dot) that ``host`` is or is under."""
    for suffix in suffixes:
        if host.endswith(suffix) and (len(host) == len(suffix)
                                      or host[-len(suffix) - 1] == "."):
            return suffix
    return None


def _split(url: str) -> _Url:
    # The URL is canonical (scheme://authority/path?query), but a malformed one must not raise.
    start = url.find("://") + 3
    if start < 3:
        return _Url(url.partition(":")[0].lower(), "", "", "")
    end = url.find("/", start)
    query_start = url.find("?", start, None if end < 0 else end)
    end = query_start if query_start >= 0 else len(url) if end < 0 else end
    hostport = url[start:end]
    if "@" in hostport:
        hostport = hostport.rpartition("@")[2]
    if hostport.startswith("["):
        host = hostport[:hostport.find("]") + 1]
    else:
        host = hostport.partition(":")[0]
    path, _, query = url[end:].partition("#")[0].partition("?")
    return _Url(url[:start - 3].lower(), host.lower(), path, query)


def _scheme(url: str, u: _Url, depth: int, p: HostPolicy, now: float) -> tuple[str, str] | None:
    return None if u.scheme in p.allowed_schemes else (REASON_SCHEME, u.scheme)


def _domain_allow(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                  ) -> tuple[str, str] | None:
    if not p.allow_domains or domain_matches(u.host, p.allow_domains) is not None:
        return None
    return REASON_DOMAIN_NOT_ALLOWED, u.host


def _domain_deny(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                 ) -> tuple[str, str] | None:
    suffix = domain_matches(u.host, p.deny_domains) if p.deny_domains else None
    return None if suffix is None else (REASON_DOMAIN_DENIED, suffix)


def _url_length(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                ) -> tuple[str, str] | None:
    if len(url) <= p.max_url_length:
        return None
    return REASON_TOO_LONG, f"{len(url)} > {p.max_url_length} characters"


def _url_pattern(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                 ) -> tuple[str, str] | None:
    for regex in _compiled(p.deny_url_patterns):
        if regex.search(url):
            return REASON_PATTERN, regex.pattern
    return None


@functools.lru_cache(maxsize=1024)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    # Keyed by the patterns, not the HostPolicy: a tuple of strings hashes cheaply.
    return tuple(re.compile(p) for p in patterns)


def _depth(url: str, u: _Url, depth: int, p: HostPolicy, now: float) -> tuple[str, str] | None:
    if p.max_depth is None or depth <= p.max_depth:
        return None
    return REASON_TOO_DEEP, f"depth {depth} > {p.max_depth}"


def _extension(url: str, u: _Url, depth: int, p: HostPolicy, now: float
               ) -> tuple[str, str] | None:
    segment = u.path[u.path.rfind("/") + 1:].partition(";")[0]  # ";" starts path parameters
    dot = segment.rfind(".")
    if dot <= 0:
        return None
    extension = segment[dot + 1:].lower()
    return (REASON_MEDIA, extension) if extension in p.skip_extensions else None


def _path_depth(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                ) -> tuple[str, str] | None:
    segments = u.path.count("/") - u.path.endswith("/")
    if segments <= p.traps.max_path_depth:
        return None
    return REASON_PATH_DEPTH, f"{segments} segments > {p.traps.max_path_depth}"


def _repeated_segment(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                      ) -> tuple[str, str] | None:
    limit = p.traps.max_repeated_segments
    if u.path.count("/") <= limit:
        return None
    segments = u.path.split("/")
    empty = segments.count("")
    if len(set(segments)) - (empty > 0) == len(segments) - empty:  # no segment repeats at all
        return None
    counts: dict[str, int] = {}
    for segment in segments:
        if segment:
            count = counts[segment] = counts.get(segment, 0) + 1
            if count > limit:
                return REASON_REPEATED_SEGMENT, f"{segment!r} more than {limit} times"
    return None


def _query_params(url: str, u: _Url, depth: int, p: HostPolicy, now: float
                  ) -> tuple[str, str] | None:
    limit = p.traps.max_query_params
    if not u.query or u.query.count("&") < limit:
        return None
    params = sum(1 for param in u.query.split("&") if param)
    return None if params <= limit else (REASON_QUERY_PARAMS, f"{params} parameters > {limit}")


# YYYY-MM-DD or YYYYMMDD (the separator must repeat), or YYYY/MM[/DD] as whole segments/values.
_DATE = re.compile(
    r"(?<![0-9])(?P<y>[0-9]{4})(?P<sep>-?)(?P<m>[0-9]{2})(?P=sep)(?P<d>[0-9]{2})(?![0-9])"
    r"|(?<![^/=&])(?P<y2>[0-9]{4})/(?P<m2>[0-9]{1,2})(?:/(?P<d2>[0-9]{1,2}))?(?=[/&.;]|$)")
_YEAR_PARAM = re.compile(r"(?:^|&)(?:year|yr)=(?P<y>[0-9]{4})(?=&|$)", re.IGNORECASE)
# What may follow a date at the end of a path for it to be a calendar view, not a permalink.
_PATH_END = re.compile(r"(?:/index)?(?:\.[A-Za-z0-9]{1,5})?/?")
_FOUR_DIGITS = re.compile(r"[0-9]{4}")


def _calendar(url: str, u: _Url, depth: int, p: HostPolicy, now: float
              ) -> tuple[str, str] | None:
    window = p.traps.calendar_window_years
    if not window or not (_FOUR_DIGITS.search(u.path) or _FOUR_DIGITS.search(u.query)):
        return None
    year = _utc_year(int(now // 3600))
    low, high = year - window, year + window
    for match in _DATE.finditer(u.path):
        found = _date_year(match)
        if found is None or low <= found <= high:
            continue
        if found > high or _PATH_END.fullmatch(u.path, _date_end(match)):
            return REASON_CALENDAR, f"{match.group()} in the path, outside {low}-{high}"
    if u.query:
        dates = [m.group("y") for m in _YEAR_PARAM.finditer(u.query)]
        dates += [m.group() for m in _DATE.finditer(u.query) if _date_year(m) is not None]
        for date in dates:
            if not low <= int(date[:4]) <= high:
                return REASON_CALENDAR, f"{date} in the query, outside {low}-{high}"
    return None


@functools.lru_cache(maxsize=16)
def _utc_year(hour: int) -> int:
    return time.gmtime(hour * 3600).tm_year


def _date_year(match: re.Match[str]) -> int | None:
    """The year of a ``_DATE`` match, or None when its month or day is impossible."""
    year, month, day = match.group("y", "m", "d") if match.group("y") else match.group(
        "y2", "m2", "d2")
    if not 1 <= int(month) <= 12:
        return None
    if day is not None and match.group("y") and not 1 <= int(day) <= 31:
        return None
    return int(year)


def _date_end(match: re.Match[str]) -> int:
    """Where a date ends; an impossible ``/DD`` is not part of the date but the next segment."""
    day = match.group("d2")
    if match.group("y2") and day is not None and not 1 <= int(day) <= 31:
        return match.end("m2")
    return match.end()


_FILTERS: tuple[tuple[str, _Filter], ...] = (
    ("scheme", _scheme),
    ("domain_allow", _domain_allow),
    ("domain_deny", _domain_deny),
    ("url_length", _url_length),
    ("url_pattern", _url_pattern),
    ("depth", _depth),
    ("extension", _extension),
    ("trap_path_depth", _path_depth),
    ("trap_repeated_segment", _repeated_segment),
    ("trap_query_params", _query_params),
    ("trap_calendar", _calendar),
)
FILTER_NAMES: tuple[str, ...] = tuple(name for name, _ in _FILTERS)
REJECTION_REASONS: tuple[str, ...] = (
    REASON_SCHEME, REASON_DOMAIN_NOT_ALLOWED, REASON_DOMAIN_DENIED, REASON_TOO_LONG,
    REASON_PATTERN, REASON_TOO_DEEP, REASON_MEDIA, REASON_PATH_DEPTH, REASON_REPEATED_SEGMENT,
    REASON_QUERY_PARAMS, REASON_CALENDAR,
)
