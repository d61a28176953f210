"""The webtable row key: how a canonical URL is spelled as a Bigtable row key, and back.

The webtable has one row per canonical URL (:func:`transforms.core.urls.canonicalize_url`). Bigtable
stores rows sorted by key and reads contiguous key ranges cheaply, so the key is chosen to make
the scans the crawler needs into prefix scans: the host comes first with its labels reversed
(``www.example.com`` -> ``com.example.www``), so all rows of a host are contiguous and a domain
sorts next to its subdomains (``com.example:``, ``com.example.www:``), then the scheme, the port
when explicit, the path and query, and the userinfo last. Reading the rows of one politeness key
(``crawler ls``) is then a scan of :func:`host_row_prefixes`, and :func:`url_from_row_key`
turns any key back into its URL, so the URL needs no cell of its own.

Keys are plain ASCII (canonical URLs are ASCII). A string that is not a row key raises
:class:`~transforms.core.urls.InvalidUrl` with reason ``bad_row_key``.
"""

from __future__ import annotations

import re

from transforms.core.urls import DEFAULT_SCHEMES, REASON_BAD_ROW_KEY, InvalidUrl, url_parts

# The RFC 3986 scheme grammar (as in transforms.core.urls).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
_PORT_DIGITS = re.compile(r"[0-9]{1,5}")


def row_key(url: str) -> str:
    """Return the webtable row key of ``url``.

    The key is the host with its labels reversed (so the rows of a domain and its subdomains
    sort together), ``:`` and the scheme, ``:port`` when explicit, the path, ``?query`` when
    there is one, and ``#userinfo`` when there is one (``#`` never occurs in a canonical URL,
    so it is an unambiguous separator). IPv4 addresses and IPv6 literals are not reversed.
    E.g. ``https://www.example.com/a/b?q=1`` -> ``com.example.www:https/a/b?q=1`` and
    ``http://127.0.0.2:8081/x`` -> ``127.0.0.2:http:8081/x``.

    Raises:
        InvalidUrl: when ``url`` cannot be canonicalized.
    """
    scheme, userinfo, host, port, path, query = url_parts(url)
    key = f"{_reverse_host(host)}:{scheme}"
    if port is not None:
        key += f":{port}"
    key += path
    if query:
        key += "?" + query
    if userinfo:
        key += "#" + userinfo
    return key


def url_from_row_key(key: str) -> str:
    """Return the canonical URL whose :func:`row_key` is ``key`` (the exact inverse).

    Raises:
        InvalidUrl: with reason ``bad_row_key`` when ``key`` is not a row key.
    """
    host, scheme, port, rest = _split_row_key(key)
    rest, _, userinfo = rest.partition("#")
    authority = f"{userinfo}@{host}" if userinfo else host
    if port is not None:
        authority += f":{port}"
    return f"{scheme}://{authority}{rest}"


def host_row_prefix(key_or_host: str) -> str:
    """Return the row-key prefix shared by every row of a host, e.g. ``com.example:``.

    Given a politeness key with a port (``127.0.0.2:8081``) the prefix is that of the host
    name (``127.0.0.2:``): the scheme sits between host and port in a row key, so no single
    prefix selects one port of a host across both schemes. Even for a key without a port the
    prefix also covers the host's rows on explicit ports. Scan with this prefix and keep rows
    with :func:`row_key_matches_host`, or scan the exact prefixes of :func:`host_row_prefixes`.
    """
    host, _ = _split_politeness_key(key_or_host)
    return _reverse_host(host) + ":"


def host_row_prefixes(
    key: str, schemes: tuple[str, ...] = tuple(sorted(DEFAULT_SCHEMES))
) -> tuple[str, ...]:
    """Return row-key prefixes that together select exactly the rows of one politeness key.

    One prefix per scheme, e.g. ``("com.example:http/", "com.example:https/")`` for
    ``example.com`` or ``("127.0.0.2:http:8081/", "127.0.0.2:https:8081/")`` for
    ``127.0.0.2:8081``; a Bigtable read takes them as one row set.

    Args:
        key: a politeness key (:func:`politeness_key`) or a bare host.
        schemes: the schemes whose rows to select.
    """
    host, port = _split_politeness_key(key)
    suffix = "" if port is None else f":{port}"
    reversed_host = _reverse_host(host)
    return tuple(f"{reversed_host}:{scheme}{suffix}/" for scheme in schemes)


def row_key_matches_host(row_key: str, politeness_key: str) -> bool:
    """Return True if the row ``row_key`` belongs to the politeness key ``politeness_key``.

    Malformed row keys match nothing.
    """
    try:
        host, _, port, _ = _split_row_key(row_key)
    except InvalidUrl:
        return False
    return (host if port is None else f"{host}:{port}") == politeness_key.strip().lower()


def _reverse_host(host: str) -> str:
    # Being a dotted quad is symmetric under label reversal, so the inverse uses the same test.
    if host.startswith("[") or _IPV4.fullmatch(host):
        return host
    return ".".join(reversed(host.split(".")))


def _split_politeness_key(key: str) -> tuple[str, str | None]:
    key = key.strip().lower()
    if key.startswith("["):
        end = key.find("]") + 1
        host, rest = key[:end], key[end:]
        return host, rest[1:] if rest.startswith(":") else None
    host, colon, port = key.partition(":")
    return host, port if colon else None


def _split_row_key(key: str) -> tuple[str, str, int | None, str]:
    """Split a row key into (host, scheme, port, path?query#userinfo)."""
    if key.startswith("["):
        end = key.find("]") + 1
        if end <= 0 or key[end : end + 1] != ":":
            raise InvalidUrl(REASON_BAD_ROW_KEY, key)
        host, rest = key[:end], key[end + 1 :]
    else:
        reversed_host, colon, rest = key.partition(":")
        if not colon or not reversed_host:
            raise InvalidUrl(REASON_BAD_ROW_KEY, key)
        host = _reverse_host(reversed_host)
    slash = rest.find("/")
    if slash < 0:
        raise InvalidUrl(REASON_BAD_ROW_KEY, key)
    scheme, colon, port_text = rest[:slash].partition(":")
    if not _SCHEME.fullmatch(scheme) or (colon and not _PORT_DIGITS.fullmatch(port_text)):
        raise InvalidUrl(REASON_BAD_ROW_KEY, key)
    return host, scheme, int(port_text) if colon else None, rest[slash:]
