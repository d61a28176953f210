"""The HTTP layer of the demo site: one loopback server per demo host.

A :class:`DemoServer` is a ``ThreadingHTTPServer`` that answers GET and HEAD from a fixed
response table after an artificial per-request latency, reports every request it answered, and
can cut its kept-alive connections on stop. What it serves, how long it waits and where the
report goes are the business of its :class:`HostContent`, which ``pipeline.demo_site`` provides
(with the request log and the crawl ground truth); this module knows nothing about pages.

Also here: :func:`latency_for`, the deterministic latency model, and :func:`find_unused_port`,
which picks a port nothing listens on for the demo's unreachable link.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, cast

from pipeline.demo_pages import DemoResponse

# Ports below Linux's ephemeral range (32768+) are never handed out to client sockets, so a
# connection to the unreachable port cannot accidentally self-connect.
UNREACHABLE_PORT_RANGE = (20_000, 32_000)

_log = logging.getLogger(__name__)


class HostContent(Protocol):
    """What one :class:`DemoServer` serves, and where it reports the requests it answered."""

    def response(self, path: str) -> DemoResponse:
        """The response to a request-target (path plus ``?query``)."""
        ...

    def delay(self, path: str) -> float:
        """Seconds to wait before answering a request-target."""
        ...

    def record(self, path: str, method: str, start: float, end: float, status: int,
               client_port: int) -> None:
        """Logs one answered request; called just before the response is written."""
        ...


def find_unused_port(address: str = "127.0.0.1", avoid: Sequence[int] = ()) -> int:
    """The first port in ``UNREACHABLE_PORT_RANGE`` nothing is bound to on ``address``.

    The port is probed with a bind and released without listening, so connecting to it is
    refused. Deterministic as long as the same ports are free.

    Raises:
        RuntimeError: every port in the range is taken.
    """
    for port in range(*UNREACHABLE_PORT_RANGE):
        if port in avoid:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no unused port on {address} in {UNREACHABLE_PORT_RANGE}")


def latency_for(seed: int, name: str, path: str, latency: tuple[float, float]) -> float:
    """The artificial delay for one request: fixed per (seed, host name, path), in ``latency``."""
    low, high = latency
    digest = hashlib.sha256(f"{seed}:{name}:{path}".encode()).digest()
    return low + (high - low) * int.from_bytes(digest[:8], "big") / 2**64


class DemoServer(ThreadingHTTPServer):
    """One host's server; it tracks open connections so ``stop`` can cut kept-alive ones.

    It binds on construction; set ``state`` before starting ``serve_forever`` (the content
    usually depends on the ports every host got).
    """

    daemon_threads = True
    state: HostContent

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _DemoHandler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the peer closed it meanwhile

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the FQDN of the address, which can stall on a
        # misconfigured resolver; the name is never needed here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _DemoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "DemoSite/1.0"
    timeout = 30  # seconds an idle kept-alive connection is held open
    disable_nagle_algorithm = True  # headers and body are separate writes; avoid 40 ms stalls

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("%s %s", self.address_string(), format % args)

    def _respond(self, *, send_body: bool) -> None:
        state = cast(DemoServer, self.server).state
        start = time.time()
        response = state.response(self.path)
        delay = state.delay(self.path)
        if delay > 0:
            time.sleep(delay)
        # Recorded before the response goes out, so a client that has read a response always
        # finds its request in the log.
        state.record(self.path, self.command, start, time.time(), response.status,
                     self.client_address[1])
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        if response.location is not None:
            self.send_header("Location", response.location)
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)
