"""URL canonicalization and the keys the crawler derives from a canonical URL.

Every URL enters the crawl through :func:`canonicalize_url`, so two spellings of one resource
become one string: that string is what the frontier deduplicates, what the webtable is keyed on
and what the fetcher requests. The rules are RFC 3986 section 6 normalizations plus a few that
crawlers conventionally add (fragment dropped, default port dropped, IDN hosts in punycode):

* surrounding C0 controls and spaces are stripped and embedded tab, CR and LF removed (as a
  browser does with an ``href``); the reference is then resolved against ``base`` (RFC 3986
  5.2, strict: ``http:foo`` is an absolute URL without a host, not a relative one);
* scheme and host are lowercased; a non-ASCII host is converted with Python's ``idna`` codec
  (IDNA 2003, so ``ß`` maps to ``ss``), a trailing dot is dropped, an IPv6 literal is written
  in its compressed form;
* the default port (80 http, 443 https, 21 ftp) and an empty one are dropped, any other must be
  1..65535;
* in path, query and userinfo (:mod:`transforms.core.url_params`), percent-escapes of unreserved
  characters are decoded, the others get uppercase hex, a ``%`` that starts no escape becomes
  ``%25``, and characters RFC 3986 does not allow there (spaces, other controls, non-ASCII,
  ``"<>\\^`{|}`` ...) are percent-encoded as UTF-8, as a browser does;
* session-id and tracking parameters (``DEFAULT_REMOVED_PARAMS``, configurable) are removed
  from the query and, as ``;jsessionid=...`` path parameters, from every path segment;
* dot segments are removed, an empty path becomes ``/``, an empty query and the fragment are
  dropped. The query is sorted only on request: parameter order can matter to the server.

Userinfo (``user:pass@``) is kept. Backslashes are encoded, not turned into slashes as a
browser would. Equivalences only the server can tell (RFC 3986 6.2.4: ``/data`` and
``/data/``) are not assumed. The result is idempotent for given options. A URL that is
canonical already, the common case, is recognized by one regular expression and returned as is.

The derived keys (``transforms.core.url_keys``: the politeness key, the fingerprint, the
robots.txt URL; and the webtable row key in :mod:`transforms.formats.rowkeys`) canonicalize any URL
with a host first (whatever its scheme) by the RFC 3986 rules only, removing and reordering no
parameter, so they agree for every spelling of a URL and keep a canonical URL as it is, whatever
options produced it.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Collection
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

from transforms.core import url_params
from transforms.core.url_params import DEFAULT_REMOVED_PARAMS

MAX_URL_LENGTH = 2048
DEFAULT_SCHEMES: frozenset[str] = frozenset({"http", "https"})
DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443, "ftp": 21}

# InvalidUrl reasons, one metrics counter each.
REASON_EMPTY = "empty"
REASON_RELATIVE = "relative"  # a relative reference and no (absolute) base to resolve it
REASON_UNSUPPORTED_SCHEME = "unsupported_scheme"
REASON_NO_HOST = "no_host"
REASON_BAD_HOST = "bad_host"
REASON_BAD_PORT = "bad_port"
REASON_TOO_LONG = "too_long"
REASON_INVALID = "invalid"  # not a Unicode string (lone surrogates)
REASON_BAD_ROW_KEY = "bad_row_key"  # raised by transforms.formats.rowkeys
INVALID_REASONS = (
    REASON_EMPTY, REASON_RELATIVE, REASON_UNSUPPORTED_SCHEME, REASON_NO_HOST, REASON_BAD_HOST,
    REASON_BAD_PORT, REASON_TOO_LONG, REASON_INVALID, REASON_BAD_ROW_KEY,
)

# Inputs longer than this are rejected before parsing so that a multi-megabyte data: URI or
# garbage attribute costs no more than a scan; no canonical URL can come from one in practice.
_MAX_INPUT_LENGTH = 16 * MAX_URL_LENGTH

# RFC 3986 appendix B; matches every string.
_REFERENCE = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#.*)?", re.S)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_HOST_NAME = re.compile(r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*")
_DIGITS = re.compile(r"[0-9]+")
_TAB_CR_LF = re.compile(r"[\t\r\n]")
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))
# A canonical URL but for its fragment, if _canonical_match also finds no dot segment, a host
# of at most 253 characters, an allowed scheme and a valid non-default port: lowercase scheme
# and host name, no userinfo, a path and a nonempty query that need no percent-encoding work
# (no "%"; no ";" in the path, so no path parameters). Query parameter rules are applied after.
_CANONICAL = re.compile(
    r"([a-z][a-z0-9+.-]*)://([a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*)(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,=:@/]*)(?:\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?]+))?"
    r"(#[^\ud800-\udfff]*)?"  # a lone surrogate makes the URL invalid (see _checked)
)
# Authorities are cached (hosts repeat, and IDNA conversion is slow) unless absurdly long.
_MAX_CACHED_AUTHORITY = 300


class InvalidUrl(ValueError):
    """A string that is not a crawlable URL.

    Attributes:
        reason: a short machine-readable reason, one of ``INVALID_REASONS``; the pipeline
            counts rejected URLs per reason.
        detail: the offending input or part of it, for logs (may be long).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail

    def __str__(self) -> str:
        detail = self.detail if len(self.detail) <= 200 else self.detail[:200] + "..."
        return f"{self.reason}: {detail!r}" if detail else self.reason


# (scheme, authority, path, query) of a URI reference; absent components are None.
_Split = tuple[str | None, str | None, str, str | None]


class UrlParts(NamedTuple):
    """The components of a canonical URL (port None when default or absent)."""

    scheme: str
    userinfo: str
    host: str
    port: int | None
    path: str
    query: str


def canonicalize_url(
    url: str,
    base: str | None = None,
    allowed_schemes: Collection[str] = DEFAULT_SCHEMES,
    remove_params: Collection[str] = DEFAULT_REMOVED_PARAMS,
    sort_query: bool = False,
) -> str:
    """Return the canonical form of ``url``, resolved against ``base`` when relative.

    Args:
        url: an absolute URL or a reference relative to ``base`` (e.g. an ``href``).
        base: the URL of the document the reference appears in, or None; an empty reference
            is the base itself.
        allowed_schemes: lowercase schemes to accept (e.g. ``{"http", "https", "ftp"}``);
            anything else (``mailto:``, ``javascript:``, ``data:`` ...) is rejected.
        remove_params: names of the query and path parameters to remove, compared
            case-insensitively, with ``fnmatch`` wildcards (``utm_*``); ``()`` keeps them all.
        sort_query: sort the query parameters by name, then value (stably, as encoded), and
            drop empty ones; off by default because some servers read parameters in order.

    Returns:
        The canonical URL, at most ``MAX_URL_LENGTH`` characters, always with a host and a path.

    Raises:
        InvalidUrl: for every string that cannot be canonicalized; never any other exception.
        TypeError: when ``remove_params`` is a string or holds a non-string (a programming
            error, whatever the URL).
    """
    params = url_params.param_filter(remove_params)
    match = _canonical_match(url, allowed_schemes)
    if match is not None:
        query = match.group(5)
        if query is not None:
            new_query = query if params is None else params.strip_query(query)
            if sort_query:
                new_query = url_params.sorted_query(new_query)
            if new_query != query:
                before_query = url[: match.start(5) - 1]
                return f"{before_query}?{new_query}" if new_query else before_query
        return url if match.group(6) is None else url[: match.start(6)]
    return _canonical(url, base, allowed_schemes, params, sort_query)[1]


@functools.lru_cache(maxsize=8192)
def url_parts(url: str) -> UrlParts:
    """Return the components of the canonical form of ``url`` (an absolute URL, any scheme),
    by the RFC 3986 rules only: no parameter is removed or reordered.

    This is what the derived keys are built from, here and in :mod:`transforms.formats.rowkeys`.

    Raises:
        InvalidUrl: when ``url`` cannot be canonicalized.
    """
    # The derived keys are usually computed one after another for the same URL.
    match = _canonical_match(url, None)
    if match is not None:
        scheme, host, port, path, query = match.group(1, 2, 3, 4, 5)
        return UrlParts(scheme, "", host, None if port is None else int(port), path, query or "")
    return _canonical(url, None, None, None, False)[0]


def _canonical_match(url: str, allowed_schemes: Collection[str] | None) -> re.Match[str] | None:
    """Return the match of ``url`` against ``_CANONICAL`` when ``url`` is canonical already
    (its fragment, parameter removal and sorting aside), else None."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        return None
    match = _CANONICAL.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path = match.group(1, 2, 3, 4)
    if "/." in path or len(host) > 253:
        return None
    if allowed_schemes is not None and scheme not in allowed_schemes:
        return None
    if port is not None and (int(port) > 65535 or int(port) == DEFAULT_PORTS.get(scheme)):
        return None
    return match


def _canonical(
    url: str,
    base: str | None,
    allowed_schemes: Collection[str] | None,
    params: url_params.ParamFilter | None,
    sort_query: bool,
) -> tuple[UrlParts, str]:
    """Canonicalize ``url`` the long way; return its components and its string."""
    cleaned = _checked(url, allowed_schemes)
    if not cleaned and base is None:  # with a base, "" is the base (RFC 3986 5.4.1)
        raise InvalidUrl(REASON_EMPTY, url)
    scheme, authority, path, query = _split(cleaned)
    if scheme is None:
        if base is None:
            raise InvalidUrl(REASON_RELATIVE, cleaned)
        if not isinstance(base, str):
            raise InvalidUrl(REASON_INVALID, repr(base))
        scheme, authority, path, query = _resolve(_split_base(base), authority, path, query)
        if scheme is None:
            raise InvalidUrl(REASON_RELATIVE, cleaned)
    scheme = scheme.lower()
    if allowed_schemes is not None and scheme not in allowed_schemes:
        raise InvalidUrl(REASON_UNSUPPORTED_SCHEME, cleaned)
    if not authority:
        raise InvalidUrl(REASON_NO_HOST, cleaned)

    if len(authority) > _MAX_CACHED_AUTHORITY:
        userinfo, host, port = _canonical_authority(authority, scheme)
    else:
        userinfo, host, port = _cached_authority(authority, scheme)
    path = url_params.normalize_path(path, params)
    query = url_params.normalize_query(query or "", params, sort_query)
    parts = UrlParts(scheme, userinfo, host, port, path, query)
    canonical = unparse(parts)
    if len(canonical) > MAX_URL_LENGTH:
        raise InvalidUrl(REASON_TOO_LONG, cleaned)
    return parts, canonical


def unparse(parts: UrlParts) -> str:
    """The URL string of canonical components (no fragment)."""
    scheme, userinfo, host, port, path, query = parts
    authority = f"{userinfo}@{host}" if userinfo else host
    if port is not None:
        authority += f":{port}"
    return f"{scheme}://{authority}{path}?{query}" if query else f"{scheme}://{authority}{path}"


def _checked(url: str, allowed_schemes: Collection[str] | None) -> str:
    """Return ``url`` without surrounding controls and spaces and embedded tab, CR and LF,
    after checking that it is a string of reasonable length."""
    if not isinstance(url, str):
        raise InvalidUrl(REASON_INVALID, repr(url))
    cleaned = url.strip(_C0_AND_SPACE)
    if "\t" in cleaned or "\n" in cleaned or "\r" in cleaned:
        cleaned = _TAB_CR_LF.sub("", cleaned)
    if len(cleaned) > _MAX_INPUT_LENGTH:
        prefix = _SCHEME_PREFIX.match(cleaned)
        scheme = prefix.group(1).lower() if prefix else ""
        if allowed_schemes is not None and scheme and scheme not in allowed_schemes:
            raise InvalidUrl(REASON_UNSUPPORTED_SCHEME, cleaned)
        raise InvalidUrl(REASON_TOO_LONG, cleaned)
    if not cleaned.isascii():
        try:
            cleaned.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidUrl(REASON_INVALID, cleaned) from e
    return cleaned


@functools.lru_cache(maxsize=64)
def _split_base(base: str) -> _Split:
    # One page's links share its URL as their base.
    return _split(_checked(base, None))


def _split(reference: str) -> _Split:
    """Split a reference into (scheme, authority, path, query); absent parts are None."""
    match = _REFERENCE.fullmatch(reference)
    assert match is not None  # the pattern matches every string
    scheme, authority, path, query = match.groups()
    if scheme is not None and not _SCHEME.fullmatch(scheme):
        # "1a:b" or "a b:c" is no scheme: read the whole reference as a relative one.
        match = _REFERENCE.fullmatch("./" + reference)
        assert match is not None
        _, authority, path, query = match.groups()
        scheme, path = None, path[2:]
    return scheme, authority, path, query


def _resolve(base: _Split, authority: str | None, path: str, query: str | None) -> _Split:
    """Resolve a relative reference against a split base (RFC 3986 5.2.2, without dot removal,
    which is done on the final path)."""
    base_scheme, base_authority, base_path, base_query = base
    if authority is not None:
        return base_scheme, authority, path, query
    if not path:
        return base_scheme, base_authority, base_path, query if query is not None else base_query
    if path.startswith("/"):
        return base_scheme, base_authority, path, query
    if base_authority is not None and not base_path:
        return base_scheme, base_authority, "/" + path, query
    return base_scheme, base_authority, base_path[: base_path.rfind("/") + 1] + path, query


def _canonical_authority(authority: str, scheme: str) -> tuple[str, str, int | None]:
    """Return the canonical (userinfo, host, port) of an authority."""
    userinfo, at, hostport = authority.rpartition("@")
    if at:
        userinfo = url_params.normalize_userinfo(userinfo)
    host, port = _canonical_host_port(hostport, scheme)
    return userinfo, host, port


_cached_authority = functools.lru_cache(maxsize=4096)(_canonical_authority)


def _canonical_host_port(hostport: str, scheme: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise InvalidUrl(REASON_BAD_HOST, hostport)
        host = _canonical_ipv6(hostport[1:end])
        rest = hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidUrl(REASON_BAD_HOST, hostport)
        port_text = rest[1:]
    else:
        raw_host, _, port_text = hostport.partition(":")
        host = _canonical_host_name(raw_host)
    return host, _canonical_port(port_text, scheme)


def _canonical_ipv6(text: str) -> str:
    if "%" in text:  # zone identifiers mean nothing off the local machine
        raise InvalidUrl(REASON_BAD_HOST, text)
    try:
        return f"[{ipaddress.IPv6Address(text).compressed}]"
    except ValueError as e:
        raise InvalidUrl(REASON_BAD_HOST, text) from e


def _canonical_host_name(raw: str) -> str:
    if not raw:
        raise InvalidUrl(REASON_NO_HOST, raw)
    host = raw
    if "%" in host:
        try:
            host = unquote_to_bytes(host).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidUrl(REASON_BAD_HOST, raw) from e
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as e:
            raise InvalidUrl(REASON_BAD_HOST, raw) from e
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if len(host) > 253 or not _HOST_NAME.fullmatch(host):
        raise InvalidUrl(REASON_BAD_HOST, raw)
    return host


def _canonical_port(text: str, scheme: str) -> int | None:
    if not text:
        return None
    digits = text.lstrip("0") or "0"
    if not _DIGITS.fullmatch(text) or len(digits) > 5:
        raise InvalidUrl(REASON_BAD_PORT, text)
    port = int(digits)
    if not 1 <= port <= 65535:
        raise InvalidUrl(REASON_BAD_PORT, text)
    return None if port == DEFAULT_PORTS.get(scheme) else port
