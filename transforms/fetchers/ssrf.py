"""The SSRF guard: the crawler never connects to loopback, private, link-local, multicast,
reserved or cloud-metadata addresses unless ``allow_private_networks`` says so.

A crawler follows links that anyone can write, so a page (or a redirect) pointing at
``http://169.254.169.254/`` or ``http://localhost:6379/`` must not make the crawler connect there.
The guard has three layers, because aiohttp treats host names and IP literals differently:

* ``GuardedResolver`` wraps aiohttp's resolver and drops every forbidden address from a DNS
  answer (failing with ``ForbiddenAddress`` when none is left). The connector connects to exactly
  the addresses the resolver returned and caches only those, so a name cannot be resolved once for
  the check and again for the connection (DNS rebinding).
* aiohttp does **not** call the resolver for an IP-literal host (``http://127.0.0.1/``,
  ``http://[::1]/``): ``TCPConnector._resolve_host`` returns the literal itself, after rejecting the
  legacy numeric IPv4 spellings (``127.1``, ``2130706433``) as invalid URLs. So the fetcher calls
  ``check_url_target`` before every request and every redirect hop, which also catches metadata
  host names and the numeric spellings before any network work, and
* ``guarded_socket_factory`` is the last line: given to ``TCPConnector(socket_factory=...)`` it
  sees the address of every socket aiohttp opens, literal or resolved, and refuses forbidden ones.

Errors: ``ForbiddenAddress`` is an ``OSError``, so aiohttp surfaces it the way it surfaces a DNS or
connect failure: wrapped in ``ClientConnectorDNSError`` (from the resolver) or
``ClientConnectorError`` (from the socket factory), both with the original in ``os_error`` and
``__cause__``. ``is_ssrf_error`` finds it through that wrapping; the crawler records it as
``SSRF_ERROR_KIND`` and never retries it.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import string
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

# One getaddrinfo() result as the connector passes it: (family, type, proto, name, sockaddr).
AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]
_LOG = logging.getLogger(__name__)

SSRF_ERROR_KIND = "ssrf_blocked"

# Reasons returned by ``is_forbidden_ip`` and ``check_host``.
REASON_LOOPBACK = "loopback"
REASON_PRIVATE = "private"
REASON_LINK_LOCAL = "link_local"
REASON_MULTICAST = "multicast"
REASON_RESERVED = "reserved"
REASON_UNSPECIFIED = "unspecified"
REASON_METADATA = "metadata"
REASON_CGNAT = "cgnat"
REASON_INVALID_IP = "invalid_ip"  # a host spelled like a number that is not a valid address

# Names of cloud instance-metadata services (GCP, AWS). They resolve to link-local addresses
# that the address check blocks anyway; naming them gives a clearer reason and no DNS query.
FORBIDDEN_HOSTNAMES = frozenset({
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
})

_Net = ipaddress.IPv4Network | ipaddress.IPv6Network
_Addr = ipaddress.IPv4Address | ipaddress.IPv6Address


def _nets(*pairs: tuple[str, str]) -> tuple[tuple[_Net, str], ...]:
    return tuple((ipaddress.ip_network(net), reason) for net, reason in pairs)


# First match wins, so the specific entries come before the ranges that contain them. The tables
# are explicit (not ``ipaddress``'s ``is_private`` & co.) because those properties changed between
# Python patch releases, and a security decision should not.
_IPV4_RULES = _nets(
    ("169.254.169.254/32", REASON_METADATA),  # AWS, GCP, Azure, OpenStack, Oracle
    ("100.100.100.200/32", REASON_METADATA),  # Alibaba Cloud
    ("0.0.0.0/32", REASON_UNSPECIFIED),
    ("0.0.0.0/8", REASON_RESERVED),  # "this network": Linux connects 0.x.y.z to the local host
    ("127.0.0.0/8", REASON_LOOPBACK),
    ("10.0.0.0/8", REASON_PRIVATE),
    ("172.16.0.0/12", REASON_PRIVATE),
    ("192.168.0.0/16", REASON_PRIVATE),
    ("100.64.0.0/10", REASON_CGNAT),  # RFC 6598 shared address space
    ("169.254.0.0/16", REASON_LINK_LOCAL),
    ("192.0.0.0/24", REASON_RESERVED),  # IETF protocol assignments
    ("192.0.2.0/24", REASON_RESERVED),  # documentation (TEST-NET-1..3)
    ("198.51.100.0/24", REASON_RESERVED),
    ("203.0.113.0/24", REASON_RESERVED),
    ("192.88.99.0/24", REASON_RESERVED),  # deprecated 6to4 relay anycast
    ("198.18.0.0/15", REASON_RESERVED),  # benchmarking
    ("224.0.0.0/4", REASON_MULTICAST),
    ("240.0.0.0/4", REASON_RESERVED),  # includes the broadcast address
)
_IPV6_RULES = _nets(
    ("fd00:ec2::254/128", REASON_METADATA),  # AWS metadata over IPv6
    ("::/128", REASON_UNSPECIFIED),
    ("::1/128", REASON_LOOPBACK),
    ("::/96", REASON_RESERVED),  # deprecated IPv4-compatible addresses
    ("64:ff9b:1::/48", REASON_PRIVATE),  # local-use NAT64
    ("100::/64", REASON_RESERVED),  # discard-only
    ("2001::/23", REASON_RESERVED),  # IETF protocol assignments (Teredo, ORCHID, ...)
    ("2001:db8::/32", REASON_RESERVED),  # documentation
    ("fc00::/7", REASON_PRIVATE),  # unique local
    ("fe80::/10", REASON_LINK_LOCAL),
    ("fec0::/10", REASON_PRIVATE),  # deprecated site-local
    ("ff00::/8", REASON_MULTICAST),
)
_IPV6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
# IPv6 ranges whose last (or, for 6to4, second and third) 32 bits are an IPv4 address that the
# packet effectively reaches: judged by that IPv4 address.
_IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class ForbiddenAddress(OSError):
    """A connection the SSRF guard refused: ``host`` and every address it had are forbidden.

    An ``OSError`` so that aiohttp reports it like any DNS or connect failure (wrapped in
    ``ClientConnectorDNSError`` / ``ClientConnectorError``); ``is_ssrf_error`` recognizes it.

    Attributes:
        host: the host name or literal that was refused.
        reason: why (``"loopback"``, ``"metadata"``, ...; the first address's reason).
        addresses: the refused addresses, when the host was resolved.
    """

    def __init__(self, host: str, reason: str, addresses: tuple[str, ...] = ()) -> None:
        detail = f" ({', '.join(addresses)})" if addresses and addresses != (host,) else ""
        super().__init__(errno.EACCES, f"ssrf guard: {host}{detail} is {reason}")
        self.host = host
        self.reason = reason
        self.addresses = addresses

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.host, self.reason, self.addresses)


def is_forbidden_ip(ip: str | _Addr) -> str | None:
    """Why the crawler must not connect to ``ip``, or None when it is a public address.

    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-translated, NAT64 (``64:ff9b::/96``) and 6to4
    (``2002::/16``) addresses are judged by the IPv4 address they carry, so
    ``::ffff:127.0.0.1`` is ``"loopback"``. IPv6 outside global unicast (``2000::/3``) is
    ``"reserved"``. A zone index (``fe80::1%eth0``) is allowed in the string.

    Args:
        ip: an IPv4 or IPv6 address.

    Returns:
        One of ``"loopback"``, ``"private"``, ``"link_local"``, ``"multicast"``, ``"reserved"``,
        ``"unspecified"``, ``"metadata"``, ``"cgnat"``, or None.

    Raises:
        ValueError: ``ip`` is not an IP address.
    """
    addr = ip if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address) else (
        ipaddress.ip_address(ip))
    if isinstance(addr, ipaddress.IPv4Address):
        return _first_match(addr, _IPV4_RULES)
    embedded = _embedded_ipv4(addr)
    if embedded is not None:
        return _first_match(embedded, _IPV4_RULES)
    reason = _first_match(addr, _IPV6_RULES)
    if reason is None and addr not in _IPV6_GLOBAL_UNICAST:
        return REASON_RESERVED
    return reason


def _first_match(addr: _Addr, rules: tuple[tuple[_Net, str], ...]) -> str | None:
    for net, reason in rules:
        if addr in net:
            return reason
    return None


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if addr in _IPV4_MAPPED or addr in _IPV4_TRANSLATED or addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return addr.sixtofour


def check_host(hostname: str) -> str | None:
    """Why ``hostname`` is forbidden before any resolution, or None when only DNS can tell.

    Catches metadata host names (``FORBIDDEN_HOSTNAMES``), ``localhost`` and ``*.localhost``
    (RFC 6761: always loopback), and IP literals, including bracketed IPv6 with a zone
    (``[fe80::1%25eth0]``) and the legacy numeric IPv4 spellings that ``inet_aton`` accepts
    (``127.1``, ``0x7f.0.0.1``, ``0177.0.0.1``, ``2130706433``), judged by the address they
    denote. A host whose last label is numeric but that is no valid address is ``"invalid_ip"``.

    Args:
        hostname: a host as it appears in a URL (any case, optional trailing dot).

    Returns:
        A reason as in ``is_forbidden_ip`` (``"loopback"`` for localhost names), or None.
    """
    host = unquote(hostname).strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.rstrip(".")
    if not host:
        return REASON_INVALID_IP
    if host in FORBIDDEN_HOSTNAMES:
        return REASON_METADATA
    if host == "localhost" or host.endswith(".localhost"):
        return REASON_LOOPBACK
    if ":" in host:
        try:
            return is_forbidden_ip(host)
        except ValueError:
            return REASON_INVALID_IP
    if not _ends_in_number(host):
        return None
    number = _legacy_ipv4(host)
    if number is None:
        return REASON_INVALID_IP
    return is_forbidden_ip(ipaddress.IPv4Address(number))


def _ends_in_number(host: str) -> bool:
    """WHATWG's "ends in a number": the last label is decimal digits or ``0x`` and hex digits."""
    last = host.split(".")[-1]
    if last.startswith("0x"):
        return all(c in string.hexdigits for c in last[2:])
    return last.isdigit()


def _legacy_ipv4(host: str) -> int | None:
    """The address ``inet_aton`` would read from ``host`` (1 to 4 parts, each decimal, octal with
    a leading 0, or hex with 0x; the last part fills the remaining bytes), or None."""
    parts = host.split(".")
    if len(parts) > 4 or not host.isascii():
        return None
    values: list[int] = []
    for part in parts:
        try:
            if part.startswith("0x"):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part[1:], 8))
            elif part.isascii() and part.isdigit():
                values.append(int(part))
            else:
                return None
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for i, value in enumerate(head):
        number |= value << (8 * (3 - i))
    return number


def check_url_target(url: str, *, allow_private_networks: bool = False) -> str | None:
    """Why the fetcher must not request ``url``, or None.

    The fetcher calls this before every request and every redirect hop: aiohttp does not pass IP
    literals through the resolver, so ``GuardedResolver`` alone never sees ``http://10.0.0.1/``.

    Args:
        url: an absolute URL (http, https, ftp, ...).
        allow_private_networks: when True nothing is refused.

    Returns:
        A reason as in ``check_host``, ``"invalid_ip"`` for a URL without a host, or None.
    """
    if allow_private_networks:
        return None
    try:
        host = urlsplit(url).hostname  # lowercased, brackets and userinfo removed
    except ValueError:
        return REASON_INVALID_IP
    if not host:
        return REASON_INVALID_IP
    return check_host(host)


def is_ssrf_error(exc: BaseException) -> bool:
    """True when ``exc`` is, wraps or was caused by a ``ForbiddenAddress``.

    Follows aiohttp's ``ClientConnectorError.os_error`` and the ``__cause__``/``__context__``
    chain, so it recognizes the guard behind ``ClientConnectorDNSError`` and
    ``ClientConnectorError``. The crawler's ``classify_error`` asks this first.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ForbiddenAddress):
            return True
        if isinstance(current, aiohttp.ClientConnectorError):
            todo.append(current.os_error)
        todo.extend((current.__cause__, current.__context__))
    return False


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that removes forbidden addresses from every answer.

    Give it to ``aiohttp.TCPConnector(resolver=...)``. The connector then connects only to the
    addresses returned here and caches only those (``ttl_dns_cache``); when nothing is left the
    lookup fails with ``ForbiddenAddress``, which the connector wraps in
    ``ClientConnectorDNSError``. IP-literal hosts never reach a resolver (see the module
    docstring): pair it with ``check_url_target`` and ``guarded_socket_factory``.

    A connector does not close a resolver it was given: close this one when the session ends
    (a no-op for the threaded resolver, needed for aiodns).

    Args:
        allow_private_networks: when True, answers are returned unchanged.
        resolver: the resolver that does the lookups; aiohttp's ``DefaultResolver`` (threaded
            ``getaddrinfo``, or aiodns when installed), created on first use, when None.
    """

    def __init__(self, *, allow_private_networks: bool = False,
                 resolver: AbstractResolver | None = None) -> None:
        self.allow_private_networks = allow_private_networks
        self._resolver = resolver

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """Resolves ``host`` and returns only permitted addresses.

        Raises:
            ForbiddenAddress: the name is forbidden, or every address it resolved to is.
            OSError: the lookup itself failed (as raised by the wrapped resolver).
        """
        if not self.allow_private_networks:
            reason = check_host(host)
            if reason is not None:
                raise ForbiddenAddress(host, reason)
        if self._resolver is None:
            self._resolver = DefaultResolver()
        answers = await self._resolver.resolve(host, port, family)
        if self.allow_private_networks:
            return answers
        kept: list[ResolveResult] = []
        refused: list[tuple[str, str]] = []
        for answer in answers:
            reason = _address_reason(answer["host"])
            if reason is None:
                kept.append(answer)
            else:
                refused.append((answer["host"], reason))
        if not kept:
            if not refused:  # an empty answer is a lookup failure, not the guard's doing
                raise OSError(errno.ENOENT, f"no addresses for {host}")
            raise ForbiddenAddress(host, refused[0][1], tuple(addr for addr, _ in refused))
        if refused:
            _LOG.info("ssrf guard: dropped %s from the addresses of %s", refused, host)
        return kept

    async def close(self) -> None:
        if self._resolver is not None:
            await self._resolver.close()


def _address_reason(address: str) -> str | None:
    try:
        return is_forbidden_ip(address)
    except ValueError:  # a resolver answer that is no address: never connect to it
        return REASON_INVALID_IP


def guarded_socket_factory(*, allow_private_networks: bool = False,
                           ) -> Callable[[AddrInfo], socket.socket]:
    """A ``TCPConnector(socket_factory=...)`` that refuses sockets to forbidden addresses.

    It sees every address aiohttp connects to, IP literals included, so it holds even where a
    caller forgot ``check_url_target``. Its ``ForbiddenAddress`` reaches the caller inside a
    ``ClientConnectorError`` when the host had one address (always the case for a literal; a
    resolved name has been filtered by ``GuardedResolver`` already). Should several addresses
    fail, aiohappyeyeballs merges the errors into a plain ``OSError`` and the type is lost.

    Args:
        allow_private_networks: when True every socket is created.
    """

    def create(addr_info: AddrInfo) -> socket.socket:
        family, type_, proto, _, address = addr_info
        if not allow_private_networks:
            host = str(address[0])
            reason = _address_reason(host)
            if reason is not None:
                raise ForbiddenAddress(host, reason, (host,))
        return socket.socket(family=family, type=type_, proto=proto)

    return create
