"""The path, query and userinfo of a canonical URL: percent-encoding and dot-segment
normalization (RFC 3986 6.2.2.2 and 6.2.2.3), session-id and tracking parameter removal, and
query sorting. :func:`transforms.core.urls.canonicalize_url` parses and resolves the URL, handles
the scheme and host, and hands the other components to the functions here.

Parameter rules run on the percent-encoding-normalized components (``utm%5Fsource`` has become
``utm_source`` by then) and never decode anything, so their result stays canonical. Parameters
are compared by name only, case-insensitively, against shell-style patterns (:mod:`fnmatch`:
``*``, ``?``, ``[seq]``). Query parameters are the ``&``-separated pieces of the query, named by
what precedes their first ``=``. Path parameters are the ``;``-separated pieces after the first
of a path segment (``/a;jsessionid=ABC/b``), where servlet containers put session ids.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Collection, Iterable

# Session ids of the common servlet, PHP, ASP and ColdFusion stacks, and the click and campaign
# tracking parameters of analytics, ad and mailing services: none selects different content.
DEFAULT_REMOVED_PARAMS: tuple[str, ...] = (
    "jsessionid", "phpsessid", "sid", "sessionid", "aspsessionid*", "cfid", "cftoken",
    "utm_*", "gclid", "fbclid", "msclkid", "mc_cid", "mc_eid",
)

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# The characters RFC 3986 allows unencoded in each component; anything else ("%" included)
# calls for percent-encoding normalization.
_PATH_CHARS = r"A-Za-z0-9\-._~!$&'()*+,;=:@/"
_QUERY_CHARS = _PATH_CHARS + "?"
_USERINFO_CHARS = r"A-Za-z0-9\-._~!$&'()*+,;=:"


def _work(chars: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Return a pattern telling whether a component needs work (a fast single-class search) and
    one finding the work: an escape, a run of characters not allowed, a "%" starting no escape."""
    return re.compile(f"[^{chars}]"), re.compile(f"%[0-9A-Fa-f]{{2}}|[^{chars}%]+|%")


_PATH_WORK = _work(_PATH_CHARS)
_QUERY_WORK = _work(_QUERY_CHARS)
_USERINFO_WORK = _work(_USERINFO_CHARS)
_WILDCARDS = re.compile(r"[*?\[]")


class ParamFilter:
    """Removes the query and path parameters whose name matches one of a set of patterns.

    Get one from :func:`param_filter`, which caches them: compiling the patterns is the
    expensive part, and a crawl uses one list throughout.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        if not self.patterns:
            raise ValueError("a ParamFilter needs at least one pattern")
        for pattern in self.patterns:
            if not isinstance(pattern, str):
                raise TypeError(f"parameter patterns must be strings, got {pattern!r}")
        # Names are compared in lowercase: plain ones in a set, the others with one regex.
        lowered = {pattern.lower() for pattern in self.patterns}
        self._plain = frozenset(p for p in lowered if not _WILDCARDS.search(p))
        globs = sorted(lowered - self._plain)
        self._globs = re.compile("|".join(map(fnmatch.translate, globs))) if globs else None
        # Every name a pattern matches starts with the pattern's literal prefix, so a component
        # with no prefix after a separator has nothing to remove, which one search tells (an
        # empty prefix matches everywhere: still correct, merely slower).
        prefixes = "|".join(re.escape(_WILDCARDS.split(p, 1)[0]) for p in self.patterns)
        self._query_hint = re.compile(rf"(?:^|&)(?:{prefixes})", re.I)
        self._path_hint = re.compile(rf";(?:{prefixes})", re.I)

    def matches(self, name: str) -> bool:
        """Whether a parameter called ``name`` is removed."""
        name = name.lower()
        return name in self._plain or (self._globs is not None and bool(self._globs.match(name)))

    def strip_query(self, query: str) -> str:
        """Return ``query`` without the matching parameters, the others in their order."""
        if not self._query_hint.search(query):
            return query
        return "&".join([p for p in query.split("&") if not self.matches(p.partition("=")[0])])

    def strip_path(self, path: str) -> str:
        """Return ``path`` without the matching path parameters (``/a;jsessionid=1/b`` ->
        ``/a/b``); the segments themselves are kept, even when empty."""
        if ";" not in path or not self._path_hint.search(path):
            return path
        segments = path.split("/")
        for i, segment in enumerate(segments):
            if ";" in segment:
                name, *params = segment.split(";")
                kept = [p for p in params if not self.matches(p.partition("=")[0])]
                segments[i] = ";".join([name, *kept])
        return "/".join(segments)


def param_filter(patterns: Collection[str]) -> ParamFilter | None:
    """Return the filter for ``patterns`` (cached), or None when there are none.

    Raises:
        TypeError: when ``patterns`` is a string rather than a collection of them, or holds
            something else than strings.
    """
    if patterns is DEFAULT_REMOVED_PARAMS:
        return _DEFAULT_FILTER
    if isinstance(patterns, str):
        raise TypeError(f"parameter patterns must be a collection of strings, got {patterns!r}")
    return _cached_filter(tuple(patterns))


@functools.lru_cache(maxsize=64)
def _cached_filter(patterns: tuple[str, ...]) -> ParamFilter | None:
    return ParamFilter(patterns) if patterns else None


_DEFAULT_FILTER = ParamFilter(DEFAULT_REMOVED_PARAMS)


def normalize_path(path: str, params: ParamFilter | None) -> str:
    """Return the canonical form of an absolute (or empty) path: escapes normalized, matching
    path parameters removed, dot segments removed, ``/`` when empty."""
    path = _normalize_escapes(_PATH_WORK, path)
    if params is not None:
        # Before dot segments go: "/a/..;jsessionid=1" is "/a/.." once the id is removed.
        path = params.strip_path(path)
    return remove_dot_segments(path) or "/"


def normalize_query(query: str, params: ParamFilter | None, sort: bool) -> str:
    """Return the canonical form of a query: escapes normalized, matching parameters removed,
    sorted with :func:`sorted_query` when ``sort``; empty when nothing is left."""
    query = _normalize_escapes(_QUERY_WORK, query)
    if query and params is not None:
        query = params.strip_query(query)
    if query and sort:
        query = sorted_query(query)
    return query


def normalize_userinfo(userinfo: str) -> str:
    """Return ``userinfo`` (``user:password``) with its escapes normalized."""
    return _normalize_escapes(_USERINFO_WORK, userinfo)


def sorted_query(query: str) -> str:
    """Return the parameters of ``query`` stably sorted by name, then value, as encoded.

    Empty parameters (``a=1&&b=2``) are dropped: once the order is given up they carry nothing.
    Sorting is idempotent; equal parameters keep their relative order.
    """
    params = [param for param in query.split("&") if param]
    if len(params) > 1:
        params.sort(key=_name_and_value)
    return "&".join(params)


def _name_and_value(param: str) -> tuple[str, str]:
    name, _, value = param.partition("=")
    return name, value


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute (or empty) path: ``/a/b/c/./../../g`` -> ``/a/g``."""
    if "/." not in path:  # every segment follows a "/"
        return path
    segments = path.split("/")
    output: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(output) > 1:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")
    result = "/".join(output)
    return result if result.startswith("/") else "/" + result


def _normalize_escapes(work: tuple[re.Pattern[str], re.Pattern[str]], text: str) -> str:
    needs_work, find_work = work
    return find_work.sub(_normalize_escape, text) if needs_work.search(text) else text


def _normalize_escape(match: re.Match[str]) -> str:
    """Decode an escape of an unreserved character, uppercase another, and percent-encode (as
    UTF-8) a run of characters not allowed, or a ``%`` that starts no escape."""
    text = match.group()
    if text[0] != "%":
        return "%" + text.encode("utf-8").hex("%").upper()
    if len(text) == 1:
        return "%25"
    decoded = chr(int(text[1:], 16))
    return decoded if decoded in _UNRESERVED else text.upper()
