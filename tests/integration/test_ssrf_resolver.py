"""The SSRF guard inside a real aiohttp session against a real server on 127.0.0.1.

Shows what the fetcher relies on: a name resolving to loopback is refused after resolution
(``GuardedResolver``) and the server never sees a request; aiohttp does not consult the resolver
for an IP literal, so the literal is refused by ``check_url_target`` (before the request) and by
``guarded_socket_factory`` (at connect); the errors aiohttp raises are recognized by
``is_ssrf_error`` whatever wraps them; ``allow_private_networks=True`` lets everything through.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from transforms.fetchers.ssrf import (
    ForbiddenAddress,
    GuardedResolver,
    check_url_target,
    guarded_socket_factory,
    is_ssrf_error,
)


@dataclass
class _Server:
    port: int
    hits: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def _serving() -> AsyncIterator[_Server]:
    """An aiohttp server on 127.0.0.1 (free port) that records every request path."""
    server = _Server(port=0)

    async def page(request: web.Request) -> web.Response:
        server.hits.append(request.path)
        return web.Response(text="private page", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        await runner.cleanup()


class _LocalhostAlias(AbstractResolver):
    """Resolves any name with the system's real answer for ``localhost`` (getaddrinfo), so a
    name the guard cannot judge by itself reaches the address check; records the names asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._system = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        answers = await self._system.resolve("localhost", port, family)
        return [ResolveResult(hostname=host, host=a["host"], port=a["port"], family=a["family"],
                              proto=a["proto"], flags=a["flags"]) for a in answers]

    async def close(self) -> None:
        await self._system.close()


async def _get(url: str, *, allow: bool = False, resolver: AbstractResolver | None = None,
               socket_guard: bool = True) -> tuple[int | None, BaseException | None]:
    """GETs ``url`` through a guarded connector: (status, None) or (None, the exception)."""
    guarded = GuardedResolver(allow_private_networks=allow, resolver=resolver)
    connector = aiohttp.TCPConnector(
        resolver=guarded,
        socket_factory=guarded_socket_factory(allow_private_networks=allow) if socket_guard
        else None)
    try:
        async with aiohttp.ClientSession(connector=connector) as session, session.get(
                url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
            await resp.read()
            return resp.status, None
    except (aiohttp.ClientError, OSError) as exc:
        return None, exc
    finally:
        await guarded.close()


def _run(test: Callable[[_Server], Awaitable[None]]) -> None:
    async def main() -> None:
        async with _serving() as server:
            await test(server)

    asyncio.run(main())


def test_localhost_is_refused_by_default_and_the_server_sees_nothing() -> None:
    async def test(server: _Server) -> None:
        status, exc = await _get(f"http://localhost:{server.port}/secret")
        assert status is None
        assert isinstance(exc, aiohttp.ClientConnectorDNSError)  # how aiohttp wraps it
        assert isinstance(exc.os_error, ForbiddenAddress)
        assert exc.os_error.reason == "loopback"
        assert is_ssrf_error(exc)
        assert server.hits == []

    _run(test)


def test_a_name_resolving_to_loopback_is_refused_after_resolution() -> None:
    async def test(server: _Server) -> None:
        alias = _LocalhostAlias()
        status, exc = await _get(f"http://intranet.example:{server.port}/", resolver=alias)
        assert alias.asked == ["intranet.example"]  # the name really was resolved
        assert status is None and exc is not None and is_ssrf_error(exc)
        assert isinstance(exc, aiohttp.ClientConnectorDNSError)
        assert isinstance(exc.os_error, ForbiddenAddress)
        assert "127.0.0.1" in exc.os_error.addresses
        assert server.hits == []

        status, exc = await _get(f"http://intranet.example:{server.port}/", allow=True,
                                 resolver=_LocalhostAlias())
        assert (status, exc) == (200, None)
        assert server.hits == ["/"]

    _run(test)


def test_allow_private_networks_lets_names_and_literals_through() -> None:
    async def test(server: _Server) -> None:
        for host in ("localhost", "127.0.0.1"):
            url = f"http://{host}:{server.port}/{host}"
            assert check_url_target(url, allow_private_networks=True) is None
            assert await _get(url, allow=True) == (200, None)
        assert server.hits == ["/localhost", "/127.0.0.1"]

    _run(test)


def test_ip_literals_bypass_the_resolver_so_the_fetcher_must_check_them() -> None:
    """aiohttp connects to a literal host without asking the resolver: with the resolver alone
    the request goes through. This is why the fetcher calls ``check_url_target`` on every hop."""

    async def test(server: _Server) -> None:
        url = f"http://127.0.0.1:{server.port}/literal"
        alias = _LocalhostAlias()
        assert await _get(url, resolver=alias, socket_guard=False) == (200, None)
        assert alias.asked == []
        assert server.hits == ["/literal"]
        assert check_url_target(url) == "loopback"

    _run(test)


def test_the_socket_factory_refuses_ip_literals_at_connect() -> None:
    async def test(server: _Server) -> None:
        status, exc = await _get(f"http://127.0.0.1:{server.port}/literal")
        assert status is None and exc is not None
        assert isinstance(exc, aiohttp.ClientConnectorError)
        assert not isinstance(exc, aiohttp.ClientConnectorDNSError)
        assert is_ssrf_error(exc)
        # The factory refuses before any socket exists, so no IPv6 stack is needed for this.
        status, exc = await _get(f"http://[::1]:{server.port}/v6")
        assert status is None and exc is not None and is_ssrf_error(exc)
        assert server.hits == []

    _run(test)


def test_legacy_numeric_hosts_never_reach_the_server() -> None:
    async def test(server: _Server) -> None:
        # Not a literal to aiohttp (it has letters): resolved, and refused by the guard.
        url = f"http://0x7f.1:{server.port}/"
        assert check_url_target(url) == "loopback"
        status, exc = await _get(url)
        assert status is None and exc is not None and is_ssrf_error(exc)
        # A literal to aiohttp, which rejects the non-canonical spelling as an invalid URL.
        url = f"http://127.1:{server.port}/"
        assert check_url_target(url) == "loopback"
        status, exc = await _get(url)
        assert isinstance(exc, aiohttp.InvalidURL) and not is_ssrf_error(exc)
        assert server.hits == []

    _run(test)


def test_ordinary_connection_errors_are_not_ssrf_errors() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more: a plain refused connection, guard permitting.
    status, exc = asyncio.run(_get(f"http://127.0.0.1:{port}/", allow=True))
    assert status is None
    assert isinstance(exc, aiohttp.ClientConnectorError)
    assert not is_ssrf_error(exc)


@pytest.mark.parametrize("allow", [False, True])
def test_resolved_addresses_are_cached_only_when_permitted(allow: bool) -> None:
    """With the DNS cache on (as in the fetcher), a refused name is looked up again next time
    rather than served from a cache that would bypass the guard."""

    async def test(server: _Server) -> None:
        alias = _LocalhostAlias()
        guarded = GuardedResolver(allow_private_networks=allow, resolver=alias)
        connector = aiohttp.TCPConnector(resolver=guarded, ttl_dns_cache=300, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            for _ in range(2):
                with contextlib.suppress(aiohttp.ClientConnectorError):
                    async with session.get(f"http://cached.example:{server.port}/") as resp:
                        await resp.read()
        assert alias.asked == (["cached.example"] if allow else ["cached.example"] * 2)
        assert len(server.hits) == (2 if allow else 0)

    _run(test)
