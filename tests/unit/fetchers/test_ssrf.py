"""The SSRF guard's decisions: address classification, host and URL checks, the error helpers,
and ``GuardedResolver``'s filtering over an in-memory resolver (no network). The guard inside a
real aiohttp session is in ``tests/integration/test_ssrf_resolver.py``."""

from __future__ import annotations

import asyncio
import errno
import pickle
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from transforms.fetchers.ssrf import (
    FORBIDDEN_HOSTNAMES,
    SSRF_ERROR_KIND,
    ForbiddenAddress,
    GuardedResolver,
    check_host,
    check_url_target,
    guarded_socket_factory,
    is_forbidden_ip,
    is_ssrf_error,
)


@pytest.mark.parametrize(("ip", "reason"), [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.1.1", "link_local"),
    ("169.254.169.254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("100.64.0.1", "cgnat"),
    ("100.127.255.255", "cgnat"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "reserved"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.10", "reserved"),
    ("198.18.0.1", "reserved"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link_local"),
    ("fe80::1%eth0", "link_local"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),
    ("ff02::1", "multicast"),
    ("fd00:ec2::254", "metadata"),
    ("2001:db8::1", "reserved"),
    ("2001::1", "reserved"),  # Teredo
    ("::127.0.0.1", "reserved"),  # deprecated IPv4-compatible
    ("3fff::1", None),  # inside 2000::/3
    ("4000::1", "reserved"),  # outside global unicast
    # IPv6 forms that carry an IPv4 address are judged by it.
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.1.2.3", "private"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:8.8.8.8", None),
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("64:ff9b::808:808", None),
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("2002:808:808::1", None),
    # Public addresses.
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("172.32.0.1", None),
    ("100.128.0.1", None),
    ("169.253.255.255", None),
    ("2001:4860::", None),
    ("2001:4860:4860::8888", None),
    ("2606:4700:4700::1111", None),
])
def test_is_forbidden_ip(ip: str, reason: str | None) -> None:
    assert is_forbidden_ip(ip) == reason


@pytest.mark.parametrize("text", ["", "localhost", "1.2.3", "256.1.1.1", "[::1]", "::g"])
def test_is_forbidden_ip_rejects_non_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        is_forbidden_ip(text)


@pytest.mark.parametrize(("host", "reason"), [
    ("metadata.google.internal", "metadata"),
    ("METADATA.Google.Internal.", "metadata"),
    ("metadata", "metadata"),
    ("instance-data.ec2.internal", "metadata"),
    ("localhost", "loopback"),
    ("LocalHost.", "loopback"),
    ("api.localhost", "loopback"),
    ("127.0.0.1", "loopback"),
    ("169.254.169.254", "metadata"),
    ("[::1]", "loopback"),
    ("::1", "loopback"),
    ("[::ffff:127.0.0.1]", "loopback"),
    ("[fe80::1%25eth0]", "link_local"),
    # Legacy numeric spellings, judged by the address inet_aton reads from them.
    ("127.1", "loopback"),
    ("2130706433", "loopback"),
    ("0x7f000001", "loopback"),
    ("0x7f.0.0.1", "loopback"),
    ("0177.0.0.1", "loopback"),
    ("10.1", "private"),
    ("0xa9.0xfe.0xa9.0xfe", "metadata"),
    ("134744072", None),  # 8.8.8.8
    # Spelled like a number but no address: never resolvable in public DNS.
    ("1.2.3.256", "invalid_ip"),
    ("1.2.3.4.5", "invalid_ip"),
    ("08.0.0.1", "invalid_ip"),
    ("[::g]", "invalid_ip"),
    # Names only DNS can judge.
    ("example.com", None),
    ("8.8.8.8.nip.io", None),
    ("0xdead.com", None),
    ("a.0xzz", None),
    ("metadata.example.com", None),
    ("localhost.example.com", None),
    ("8.8.8.8", None),
])
def test_check_host(host: str, reason: str | None) -> None:
    assert check_host(host) == reason


def test_forbidden_hostnames_name_the_cloud_metadata_services() -> None:
    assert {"metadata.google.internal", "metadata"} <= FORBIDDEN_HOSTNAMES


@pytest.mark.parametrize(("url", "reason"), [
    ("http://127.0.0.1:8080/", "loopback"),
    ("https://[::1]/x", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
    ("http://user:pw@10.0.0.5:6379/", "private"),
    ("ftp://anonymous@192.168.0.1/pub/", "private"),
    ("http://0x7f.1/", "loopback"),
    ("http://[fe80::1%25eth0]/", "link_local"),
    ("http:///path-only", "invalid_ip"),
    ("http://example.com/", None),
    ("https://8.8.8.8/", None),
    ("ftp://ftp.example.org/pub/file.txt", None),
])
def test_check_url_target(url: str, reason: str | None) -> None:
    assert check_url_target(url) == reason
    assert check_url_target(url, allow_private_networks=True) is None


def test_forbidden_address_is_an_os_error_that_survives_pickling() -> None:
    exc = ForbiddenAddress("intranet", "private", ("10.0.0.1", "10.0.0.2"))
    assert isinstance(exc, OSError)
    assert exc.errno == errno.EACCES
    assert "intranet" in str(exc) and "10.0.0.2" in str(exc) and "private" in str(exc)
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.host, copy.reason, copy.addresses) == (exc.host, exc.reason, exc.addresses)


def test_is_ssrf_error_follows_causes_and_contexts() -> None:
    guard = ForbiddenAddress("localhost", "loopback")
    assert is_ssrf_error(guard)
    try:
        try:
            raise guard
        except ForbiddenAddress as inner:
            raise OSError("wrapped") from inner
    except OSError as outer:
        assert is_ssrf_error(outer)
    try:
        try:
            raise guard
        except ForbiddenAddress:
            raise RuntimeError("during handling") from None
    except RuntimeError as suppressed:
        assert is_ssrf_error(suppressed)  # __context__ is kept even with "from None"
    assert not is_ssrf_error(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert not is_ssrf_error(TimeoutError())
    assert SSRF_ERROR_KIND == "ssrf_blocked"


class _StaticResolver(AbstractResolver):
    """An in-memory resolver: fixed answers per name; records the names it was asked for."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        return [ResolveResult(hostname=host, host=addr, port=port,
                              family=socket.AF_INET6 if ":" in addr else socket.AF_INET,
                              proto=0, flags=0)
                for addr in self.answers[host]]

    async def close(self) -> None:
        pass


_ANSWERS = {
    "mixed.example": ["10.0.0.1", "93.184.215.14", "::1", "2606:2800:21f::1"],
    "internal.example": ["10.0.0.1", "fd00::1"],
    "public.example": ["93.184.215.14"],
    "empty.example": [],
    "metadata.google.internal": ["169.254.169.254"],
}


def _resolve(host: str, *, allow: bool = False) -> tuple[list[str], _StaticResolver]:
    inner = _StaticResolver(_ANSWERS)
    resolver = GuardedResolver(allow_private_networks=allow, resolver=inner)
    answers = asyncio.run(resolver.resolve(host, 443))
    return [a["host"] for a in answers], inner


def test_guarded_resolver_drops_forbidden_addresses_and_keeps_public_ones() -> None:
    assert _resolve("mixed.example")[0] == ["93.184.215.14", "2606:2800:21f::1"]
    assert _resolve("public.example")[0] == ["93.184.215.14"]


def test_guarded_resolver_refuses_a_name_with_only_forbidden_addresses() -> None:
    with pytest.raises(ForbiddenAddress) as caught:
        _resolve("internal.example")
    assert caught.value.reason == "private"
    assert caught.value.addresses == ("10.0.0.1", "fd00::1")


def test_guarded_resolver_refuses_metadata_names_without_a_lookup() -> None:
    inner = _StaticResolver(_ANSWERS)
    resolver = GuardedResolver(resolver=inner)
    with pytest.raises(ForbiddenAddress) as caught:
        asyncio.run(resolver.resolve("metadata.google.internal", 80))
    assert caught.value.reason == "metadata"
    assert inner.asked == []


def test_guarded_resolver_reports_an_empty_answer_as_a_lookup_failure() -> None:
    with pytest.raises(OSError) as caught:
        _resolve("empty.example")
    assert not isinstance(caught.value, ForbiddenAddress)


def test_guarded_resolver_allowing_private_networks_changes_nothing() -> None:
    assert _resolve("internal.example", allow=True)[0] == ["10.0.0.1", "fd00::1"]
    assert _resolve("metadata.google.internal", allow=True)[0] == ["169.254.169.254"]


def test_guarded_socket_factory_refuses_forbidden_addresses_only() -> None:
    refuse = guarded_socket_factory()
    with pytest.raises(ForbiddenAddress) as caught:
        refuse((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 80)))
    assert caught.value.reason == "loopback"
    with pytest.raises(ForbiddenAddress):
        refuse((socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                ("fd00:ec2::254", 80, 0, 0)))
    # Creating a socket is not connecting: no traffic leaves the machine.
    with refuse((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 ("93.184.215.14", 80))) as sock:
        assert sock.family == socket.AF_INET
    allow = guarded_socket_factory(allow_private_networks=True)
    with allow((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                ("127.0.0.1", 80))) as sock:
        assert sock.type == socket.SOCK_STREAM
