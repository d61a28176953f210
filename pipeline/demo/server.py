"""Logged test HTTP servers that behave like production ones (aiohttp on loopback).

The demo site and every integration test serve through :class:`LoggedServers`: one asyncio
event loop in a daemon thread serves any number of sites, each on its own loopback address and
port, and a middleware logs every request the way an access log would (arrival, the moment the
response goes out, status, what was sent), so tests assert from the servers' own side.

The servers act like a stock nginx with ``gzip on``: text responses are compressed when the
client accepts it (``pipeline.demo.coding`` has the rules), compressed responses go out with
chunked transfer-encoding and no Content-Length, identity ones with a Content-Length;
connections are kept alive and every response carries ``Date`` and ``Server``.

A site is a ``respond`` callback: it gets a :class:`RequestView` and returns a :class:`Reply`,
or a :data:`RawHandler` for behaviour no well-behaved server shows (trickling a body, hanging
up, a short body), which writes through a :class:`Wire`. Callbacks run on the event loop: they
must not block (a :class:`Reply` has a ``delay`` for slow answers).
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlsplit

from aiohttp import web
from multidict import CIMultiDict

from pipeline.demo.coding import choose_coding, eligible, encode_body, has_body
from pipeline.demo.exchange import Hit, Reply, RequestView

SERVER = "LoggedServer/1.0"
_SHUTDOWN_GRACE = 0.05  # seconds a request in progress gets on stop before it is cancelled
_CALL_TIMEOUT = 10.0  # seconds to start or stop sites on the loop thread


@dataclass
class _Exchange:
    """One request's log entry while it is being answered."""

    start: float
    client_port: int
    headers: dict[str, str]
    status: int = 0
    content_encoding: str = ""
    sent: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha1)
    aborted: bool = False

    def count(self, data: bytes) -> None:
        self.sent += len(data)
        self.digest.update(data)

    def hit(self, netloc: str, request: web.Request) -> Hit:
        return Hit(netloc, request.raw_path, request.method, self.start, time.time(),
                   self.status, self.client_port, self.headers, self.content_encoding,
                   self.sent, self.digest.hexdigest(), self.aborted)


class _Log:
    """The request log of a group of sites, and how many requests are still being answered."""

    def __init__(self) -> None:
        self._hits: list[Hit] = []
        self._open = 0
        self._changed = threading.Condition()

    def begin(self) -> None:
        with self._changed:
            self._open += 1

    def record(self, hit: Hit) -> None:
        with self._changed:
            self._hits.append(hit)
            self._open -= 1
            self._changed.notify_all()

    def snapshot(self) -> list[Hit]:
        with self._changed:
            return list(self._hits)

    def clear(self) -> None:
        with self._changed:
            self._hits.clear()

    def settle(self, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._open == 0, timeout)


class Wire:
    """What a raw handler writes through: it starts the response and writes the body itself.

    Every byte goes through :meth:`write`, so the log knows what was sent; a write to a client
    that has gone raises ``ConnectionResetError``, which the server records as ``aborted``.
    """

    def __init__(self, request: web.Request, exchange: _Exchange, server: str) -> None:
        self.request = request
        self._exchange = exchange
        self._server = server
        self.response: web.StreamResponse | None = None

    @property
    def sent(self) -> int:
        """Body bytes written so far."""
        return self._exchange.sent

    async def start(self, status: int, headers: Sequence[tuple[str, str]],
                    length: int | None = None) -> None:
        """Writes the status line and headers; ``length`` is the Content-Length to announce
        (None: chunked)."""
        response = web.StreamResponse(status=status, headers=CIMultiDict(
            [("Server", self._server), *headers]))
        if length is not None:
            response.content_length = length
        self.response = response
        self._exchange.status = status
        await response.prepare(self.request)

    async def write(self, data: bytes) -> None:
        """Writes body bytes, waiting while the client does not read."""
        assert self.response is not None, "start() the response first"
        await self.response.write(data)
        self._exchange.count(data)

    def hang_up(self) -> None:
        """Closes the connection at once, whatever was written."""
        if self.request.transport is not None:
            self.request.transport.close()


RawHandler = Callable[[Wire], Awaitable[None]]
Respond = Callable[[RequestView], Reply | RawHandler]


@dataclass(frozen=True)
class _Site:
    netloc: str
    respond: Respond
    coding: str | None
    server: str
    log: _Log


_SITE = web.AppKey("site", _Site)
_EXCHANGE = web.RequestKey("exchange", _Exchange)


@web.middleware
async def _log_exchange(request: web.Request,
                        handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                        ) -> web.StreamResponse:
    """Times and logs every request: the entry is written when the handler returns, which for a
    :class:`Reply` is before aiohttp writes the response."""
    site = request.app[_SITE]
    peer = request.transport.get_extra_info("peername") if request.transport else None
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    exchange = _Exchange(time.time(), int(peer[1]) if peer else 0, headers)
    request[_EXCHANGE] = exchange
    site.log.begin()
    try:
        return await handler(request)
    except asyncio.CancelledError:  # the server is stopping
        exchange.aborted = True
        raise
    except Exception:
        exchange.status = exchange.status or 500  # aiohttp answers 500 to a failing callback
        raise
    finally:
        site.log.record(exchange.hit(site.netloc, request))


async def _answer(request: web.Request) -> web.StreamResponse:
    """The one route of every site: asks the site's callback and sends what it says."""
    site, exchange = request.app[_SITE], request[_EXCHANGE]
    answer = site.respond(RequestView(request.raw_path, request.method, exchange.headers))
    if isinstance(answer, Reply):
        if answer.delay > 0:
            await asyncio.sleep(answer.delay)
        return _render(answer, request, exchange, site)
    wire = Wire(request, exchange, site.server)
    try:
        await answer(wire)
    except ConnectionError:
        exchange.aborted = True
    if wire.response is None:  # hung up: aiohttp fails to write this to the closed transport
        wire.hang_up()
        return web.Response()
    return wire.response


def _render(reply: Reply, request: web.Request, exchange: _Exchange, site: _Site
            ) -> web.Response:
    """The response for ``reply``, content-coded per the site and the request (nginx's gzip
    filter), with what will be sent noted in ``exchange``."""
    headers = CIMultiDict([("Content-Type", reply.content_type), *reply.headers])
    headers.setdefault("Server", site.server)
    may = eligible(request.method, reply.status, reply.content_type, reply.body,
                   headers.get("Content-Encoding"), reply.compress)
    coding, vary = choose_coding(site.coding, exchange.headers.get("accept-encoding"),
                                 request.version >= (1, 1), may)
    body = encode_body(reply.body, coding)
    if vary:
        headers.add("Vary", "Accept-Encoding")
    if coding:
        headers["Content-Encoding"] = coding
    response = web.Response(status=reply.status, body=body, headers=headers)
    if coding:
        response.enable_chunked_encoding()  # nginx streams its gzip filter's output
    exchange.status, exchange.content_encoding = reply.status, coding
    if has_body(request.method, reply.status):
        exchange.count(body)
    exchange.aborted = request.transport is None or request.transport.is_closing()
    return response


class LoggedServers:
    """Running sites, one event loop thread for all of them, and their shared request log.

    Example::

        with LoggedServers() as servers:
            base = servers.serve("127.0.0.5", lambda view: Reply(body=b"<p>hello</p>"))
            ...  # requests to base
            assert [h.path for h in servers.hits(base)] == ["/"]
    """

    def __init__(self) -> None:
        self._log = _Log()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runners: list[web.AppRunner] = []
        self._stopped = False

    def serve(self, address: str, respond: Respond, *, port: int = 0,
              coding: str | None = "gzip", server: str = SERVER) -> str:
        """Starts a site on ``address:port`` (0: a free port); returns its base URL.

        Args:
            address: the loopback address to bind (Linux routes all of 127/8 to ``lo``).
            respond: answers each request; runs on the event loop, so it must not block.
            port: the port to bind; 0 picks a free one.
            coding: ``"gzip"`` (the default), ``"deflate"`` or None (no compression).
            server: the ``Server`` header.

        Raises:
            RuntimeError: the servers were stopped.
            OSError: the address or port cannot be bound.
        """
        if self._stopped:
            raise RuntimeError("these servers were stopped; create new ones")
        # Bound here, before the site exists, so the callback knows its netloc from the start.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
        except OSError:
            sock.close()
            raise
        netloc = f"{address}:{sock.getsockname()[1]}"
        site = _Site(netloc, respond, coding, server, self._log)
        started = asyncio.run_coroutine_threadsafe(self._start_site(sock, site),
                                                   self._running_loop())
        try:
            started.result(_CALL_TIMEOUT)
        except BaseException:
            sock.close()
            raise
        return f"http://{netloc}"

    def hits(self, base: str | None = None, path: str | None = None) -> list[Hit]:
        """Logged requests (of one site: its base URL or netloc; of one request-target),
        ordered by start."""
        netloc = urlsplit(base).netloc if base and "://" in base else base
        hits = self._log.snapshot()
        return sorted((h for h in hits if (netloc is None or h.host == netloc)
                       and (path is None or h.path == path)), key=lambda h: h.start)

    def clear(self) -> None:
        """Forgets the requests logged so far."""
        self._log.clear()

    def settle(self, timeout: float = 2.0) -> bool:
        """Waits until no request is being answered (a raw handler may still be writing after
        its client gave up); False if some still were after ``timeout`` seconds."""
        return self._log.settle(timeout)

    def stop(self) -> None:
        """Stops every site and cuts open connections, kept-alive ones included (idempotent);
        the log stays. A request still being answered is cancelled and logged as aborted."""
        self._stopped = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        runners, self._runners = self._runners, []
        asyncio.run_coroutine_threadsafe(_cleanup(runners), loop).result(_CALL_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_CALL_TIMEOUT)
        loop.close()

    def __enter__(self) -> LoggedServers:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="logged-servers",
                                      daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    async def _start_site(self, sock: socket.socket, site: _Site) -> None:
        app = web.Application(middlewares=[_log_exchange])
        app[_SITE] = site
        app.router.add_route("*", "/{tail:.*}", _answer)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE)
        await runner.setup()
        self._runners.append(runner)
        await web.SockSite(runner, sock).start()


async def _cleanup(runners: Sequence[web.AppRunner]) -> None:
    await asyncio.gather(*(runner.cleanup() for runner in runners))
