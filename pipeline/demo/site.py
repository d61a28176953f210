"""The offline demo site: several generated websites on loopback addresses, with request logs.

``DemoSite().start()`` serves one site per host (``pipeline.demo.server``) on ``127.0.0.1``,
``127.0.0.2``, ... (Linux routes all of 127/8 to ``lo``), each on a free port and serving the
deterministic pages of ``pipeline.demo.pages``. It is both the demo the README crawls and the
test bed of the end-to-end tests, which assert from the servers' own request logs against the
ground truth this module computes.

Host roles repeat every three hosts: ``alpha`` is slow-polite (robots.txt with ``Crawl-delay``
and ``Disallow: /private/`` and ``/cgi-bin/``), ``beta`` has ``Disallow: /private/`` only, and
``gamma`` has no robots.txt (404). The first host's about page links to ``unreachable_url``.
Like production servers, the hosts compress text responses for clients that accept it:
``alpha`` and ``gamma`` with gzip, ``beta`` with deflate. ``page_body`` and ``response`` give the
content; what went on the wire is in the log (``Hit.content_encoding``, ``Hit.sent_sha1``).

What counts as a fetch (``expected_fetch_paths``): the request-target (path plus ``?query``) of
every GET a correct crawler sends when it starts from ``seed_urls()``, follows every ``<a href>``
of every 200 HTML page (honouring ``<base href>``, dropping fragments, ignoring ``mailto:`` and
``javascript:``), reads robots.txt once per host and obeys its Disallow rules, and follows each
redirect's Location as a new URL. Hence robots.txt (even when it answers 404), the PDF and PNG,
the linked 404 page and both redirect sources (``/old``, ``/moved``) count, and so do the
redirect targets (``/new-page.html``, ``/landing.html``) as separate fetches on their own hosts
(they are linked from nowhere else). Disallowed pages never count; they are
``disallowed_paths``. Each path is expected at least once; the set says nothing about order,
HEAD requests or retries.

Run ``python -m pipeline.demo.site --hosts 3 --pages 60`` to serve until Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import functools
import hashlib
import json
import logging
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from urllib.parse import urlsplit

from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.log import crawl_closure
from pipeline.demo.pages import (
    DEFAULT_PAGES_PER_HOST,
    DemoResponse,
    SiteSpec,
    build_responses,
    html_page_paths,
    not_found_response,
)
from pipeline.demo.server import LoggedServers

__all__ = ["DemoResponse", "DemoSite", "Hit", "SiteSpec", "default_specs", "find_unused_port",
           "latency_for", "main"]

DEFAULT_CRAWL_DELAY = 0.5
DEFAULT_LATENCY = (0.0, 0.02)
# Ports below Linux's ephemeral range (32768+) are never handed out to client sockets, so a
# connection to the unreachable port cannot accidentally self-connect.
UNREACHABLE_PORT_RANGE = (20_000, 32_000)
HOST_NAMES = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")

_log = logging.getLogger(__name__)


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


def default_specs(
    n_hosts: int = 3,
    pages_per_host: int = DEFAULT_PAGES_PER_HOST,
    crawl_delay: float = DEFAULT_CRAWL_DELAY,
) -> list[SiteSpec]:
    """The standard hosts: slow-polite, disallow-only and no-robots, repeating; the
    disallow-only ones compress with deflate, the others with gzip.

    Raises:
        ValueError: ``n_hosts`` is outside 1..254 or a spec is invalid.
    """
    if not 1 <= n_hosts <= 254:
        raise ValueError(f"n_hosts must be in 1..254, got {n_hosts}")
    specs = []
    for i in range(n_hosts):
        name = HOST_NAMES[i] if i < len(HOST_NAMES) else f"host{i}"
        if i % 3 == 0:
            spec = SiteSpec(name, pages_per_host, crawl_delay=crawl_delay,
                            disallow=("/private/", "/cgi-bin/"))
        elif i % 3 == 1:
            spec = SiteSpec(name, pages_per_host, disallow=("/private/",), coding="deflate")
        else:
            spec = SiteSpec(name, pages_per_host, has_robots=False)
        specs.append(spec)
    return specs


@dataclass(frozen=True)
class _HostState:
    """What one host answers: its responses and latency."""

    spec: SiteSpec
    netloc: str
    responses: dict[str, DemoResponse]
    seed: int
    latency: tuple[float, float]

    def response(self, path: str) -> DemoResponse:
        return self.responses.get(path) or not_found_response(path)

    def reply(self, request: RequestView) -> Reply:
        response = self.response(request.target)
        location = () if response.location is None else (("Location", response.location),)
        return Reply(response.status, response.body, response.content_type, location,
                     latency_for(self.seed, self.spec.name, request.target, self.latency))


class DemoSite:
    """A running set of demo hosts, their request logs and the crawl ground truth.

    Example::

        with DemoSite().start(n_hosts=3, pages_per_host=60) as site:
            crawl(site.seed_urls())
            for host in site.hosts:
                fetched = {r.path for r in site.requests(host) if r.method == "GET"}
                assert fetched == site.expected_fetch_paths(host)

    Methods taking ``host`` accept a base URL (``http://127.0.0.2:PORT``, any path ignored) or a
    netloc (``127.0.0.2:PORT``).
    """

    def __init__(self) -> None:
        self._states: dict[str, _HostState] = {}
        self._servers = LoggedServers()
        self._hosts: list[str] = []
        self._unreachable_url = ""
        self._fetched: dict[str, set[str]] = {}
        self._blocked: dict[str, set[str]] = {}

    def start(
        self,
        n_hosts: int = 3,
        pages_per_host: int = DEFAULT_PAGES_PER_HOST,
        *,
        crawl_delay: float = DEFAULT_CRAWL_DELAY,
        seed: int = 0,
        latency: tuple[float, float] = DEFAULT_LATENCY,
        port: int = 0,
        unreachable_port: int | None = None,
        specs: Sequence[SiteSpec] | None = None,
    ) -> DemoSite:
        """Binds and starts the servers; returns ``self``.

        Args:
            n_hosts: number of hosts when ``specs`` is None.
            pages_per_host: HTML pages per host when ``specs`` is None.
            crawl_delay: seconds in the slow-polite hosts' ``Crawl-delay`` (default 0.5).
            seed: seeds the generated text, link shapes and latencies.
            latency: (min, max) seconds of artificial delay per request (default 0-0.02 s).
            port: port every host binds (each has its own address, so one port fits all); 0
                picks a free port per host. A fixed port makes bodies identical across runs.
            unreachable_port: port of ``unreachable_url`` on 127.0.0.1; None takes the first
                unused port from ``UNREACHABLE_PORT_RANGE``. Nothing is ever bound to it.
            specs: explicit hosts; their ``other_hosts``, ``redirect_host`` and (for the first)
                ``unreachable_url`` are filled in here.

        Raises:
            RuntimeError: already started.
            ValueError: invalid sizes or latency.
            OSError: an address or port could not be bound.
        """
        if self._states:
            raise RuntimeError("a DemoSite starts once; create a new one")
        if not 0 <= latency[0] <= latency[1]:
            raise ValueError(f"latency must be (min, max) with 0 <= min <= max, got {latency}")
        specs = list(specs) if specs is not None else default_specs(n_hosts, pages_per_host,
                                                                     crawl_delay)
        if len({spec.name for spec in specs}) != len(specs) or not 1 <= len(specs) <= 254:
            raise ValueError("specs must hold 1..254 hosts with unique names")
        states: list[_HostState] = []  # filled once every host has its port
        for i, spec in enumerate(specs):
            address = f"127.0.0.{i + 1}"
            try:
                self._hosts.append(self._servers.serve(
                    address, functools.partial(_reply, states, i), port=port, coding=spec.coding,
                    server=f"DemoSite/1.0 ({spec.name})"))
            except OSError as error:
                self.stop()
                hint = " (only Linux routes all of 127/8 to lo)" * (
                    error.errno == errno.EADDRNOTAVAIL)
                raise OSError(error.errno, f"cannot bind {address}:{port}{hint}: "
                              f"{error.strerror}") from error
        if unreachable_port is None:
            unreachable_port = find_unused_port(
                "127.0.0.1", avoid=[urlsplit(self._hosts[0]).port or 0])
        self._unreachable_url = f"http://127.0.0.1:{unreachable_port}/"
        for i, spec in enumerate(specs):
            base = self._hosts[i]
            filled = dataclasses.replace(
                spec,
                other_hosts=tuple(h for h in self._hosts if h != base),
                redirect_host=self._hosts[(i + 1) % len(self._hosts)],
                unreachable_url=self._unreachable_url if i == 0 else spec.unreachable_url,
            )
            netloc = urlsplit(base).netloc
            state = _HostState(filled, netloc, build_responses(filled, base, seed), seed, latency)
            states.append(state)
            self._states[netloc] = state
        self._fetched, self._blocked = crawl_closure(
            {n: s.responses for n, s in self._states.items()},
            {n: s.spec.disallow for n, s in self._states.items()},
            self.seed_urls(),
        )
        return self

    def stop(self) -> None:
        """Stops the servers and cuts open connections (idempotent); logs and truth stay."""
        self._servers.stop()

    def __enter__(self) -> DemoSite:
        return self if self._states else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def hosts(self) -> list[str]:
        """Base URLs, ``http://127.0.0.1:PORT``, ``http://127.0.0.2:PORT``, ... in spec order."""
        return list(self._hosts)

    @property
    def specs(self) -> list[SiteSpec]:
        """The hosts' specs with links to the other hosts filled in, in ``hosts`` order."""
        return [state.spec for state in self._states.values()]

    @property
    def unreachable_url(self) -> str:
        """``http://127.0.0.1:<port>/``, linked from the first host, where nothing listens."""
        return self._unreachable_url

    def seed_urls(self) -> list[str]:
        """The home page of every host."""
        return [host + "/" for host in self._hosts]

    def spec(self, host: str) -> SiteSpec:
        return self._state(host).spec

    def requests(self, host: str) -> list[Hit]:
        """Requests the host answered so far, ordered by start time."""
        return self._servers.hits(self._state(host).netloc)

    def all_requests(self) -> list[Hit]:
        """Requests of all hosts, ordered by start time."""
        return self._servers.hits()

    def reset_log(self) -> None:
        """Forgets the requests recorded so far (to reuse one site across tests)."""
        self._servers.clear()

    def write_log(self, path: str | Path) -> None:
        """Writes ``all_requests()`` as JSON Lines, one ``Hit`` object per line."""
        with Path(path).open("w", encoding="utf-8") as out:
            for record in self.all_requests():
                out.write(json.dumps(dataclasses.asdict(record)) + "\n")

    def expected_fetch_paths(self, host: str) -> set[str]:
        """Request-targets a correct crawler GETs on ``host`` (see the module docstring)."""
        return set(self._fetched[self._state(host).netloc])

    def disallowed_paths(self, host: str) -> set[str]:
        """Request-targets on ``host`` that pages link to but its robots.txt forbids."""
        return set(self._blocked[self._state(host).netloc])

    def html_pages(self, host: str) -> set[str]:
        """The 200 HTML pages of ``host`` (``spec.pages`` of them; all are expected fetches)."""
        return set(html_page_paths(self._state(host).spec))

    def response(self, host: str, path: str) -> DemoResponse:
        """The response the server answers a request-target with (404 for unknown paths),
        before content-coding."""
        return self._state(host).response(path)

    def page_body(self, host: str, path: str) -> bytes:
        """The content of ``path``: the body a GET gets once its Content-Encoding is undone.

        On the wire it is compressed with the host's ``spec(host).coding`` when the client
        accepts that coding and the body is textual and at least 20 bytes long; each logged
        request tells what was sent (``Hit.content_encoding``, ``Hit.sent_sha1``), and
        ``pipeline.demo.coding.encode_body`` recomputes those bytes.
        """
        return self.response(host, path).body

    def _state(self, host: str) -> _HostState:
        netloc = urlsplit(host).netloc if "://" in host else host
        try:
            return self._states[netloc]
        except KeyError:
            raise KeyError(f"{host!r} is not a demo host; hosts are {self._hosts}") from None


def _reply(states: Sequence[_HostState], index: int, request: RequestView) -> Reply:
    """A host's answer; ``states`` is filled once every host is bound, before ``start`` returns
    the URLs (a request that comes sooner, from a port scan, gets a 503)."""
    if index >= len(states):
        return Reply(503, b"starting", "text/plain")
    return states[index].reply(request)


def main(argv: Sequence[str] | None = None) -> int:
    """Serves the demo site until Ctrl-C (or SIGTERM); prints one seed URL per line."""
    parser = argparse.ArgumentParser(prog="python -m pipeline.demo.site",
                                     description="Serve the offline demo site until Ctrl-C.")
    parser.add_argument("--hosts", type=int, default=3, help="number of hosts (default 3)")
    parser.add_argument("--pages", type=int, default=DEFAULT_PAGES_PER_HOST,
                        help=f"HTML pages per host (default {DEFAULT_PAGES_PER_HOST})")
    parser.add_argument("--crawl-delay", type=float, default=DEFAULT_CRAWL_DELAY,
                        help="Crawl-delay of the slow-polite hosts, seconds (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="content seed (default 0)")
    parser.add_argument("--port", type=int, default=0,
                        help="port for every host; 0 picks free ports (default 0)")
    parser.add_argument("--latency-max", type=float, default=DEFAULT_LATENCY[1],
                        help="max artificial latency per request, seconds (default 0.02)")
    parser.add_argument("--log", type=Path, help="write the request log here as JSONL on exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        site = DemoSite().start(args.hosts, args.pages, crawl_delay=args.crawl_delay,
                                seed=args.seed, port=args.port, latency=(0.0, args.latency_max))
    except ValueError as error:
        parser.error(str(error))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    for url in site.seed_urls():
        print(url, flush=True)
    _log.info("serving %d demo hosts (unreachable: %s); Ctrl-C to stop", len(site.hosts),
              site.unreachable_url)
    while not stop.wait(0.5):
        pass
    site.stop()
    if args.log is not None:
        site.write_log(args.log)
        _log.info("wrote %d requests to %s", len(site.all_requests()), args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())

