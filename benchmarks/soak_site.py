"""The soak benchmark's test bed: generated hosts with traps and dead links, and a faults host.

* ``hosts`` generated hosts on ``127.0.3.1``.. (one politeness key each): page ``/p/N`` (N from
  0 to ``pages_per_host - 1``) has about 2 KB of text that no other page shares, links to its
  ``fanout`` children in a tree, one link back to its parent carrying a session id that changes
  per response (``?sid=``), a calendar month (``/cal/YYYY/MM``, each month linking to the next:
  an endless space the crawler's trap rules must cut) and a link to one of ``dead_hosts`` dead
  hosts (loopback addresses where nothing listens, so each is a key whose every fetch fails).
* The project's own trap site (``tests.integration.sites.TrapSite``) on ``127.0.4.1``.
* A faults host on ``127.0.4.2``: two large bodies of ``large_body_bytes`` (``/large/1``,
  ``/large/2``: the crawler must cut them at ``--max_body_bytes``), a gzip bomb (``/bomb``: a few
  hundred KB that inflate to 1 GiB of zeros), a response slower than the fetch timeout
  (``/slow``), one that never answers (``/hang``), a redirect loop (``/loop`` <-> ``/loop2``) and
  a 500 (``/broken``), all linked from its home page.

Every page is computed from its path on request; nothing per page is kept but the servers' request
logs, which ``fetches()`` counts.
"""

from __future__ import annotations

import functools
import hashlib
import html
import zlib
from collections.abc import Sequence

from pipeline.demo.exchange import Reply, RequestView
from pipeline.demo.server import LoggedServers
from pipeline.demo.site import find_unused_port
from tests.integration.sites import TrapSite

WORDS = ("crawler frontier politeness shard webtable harvest lease robots sitemap window "
         "timer bundle runner watermark digest shingle signature export parquet archive record "
         "header status budget depth scope canonical fragment query anchor text title").split()
GZIP_BOMB_INFLATED = 1 << 30


def _words(seed: str, n: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    out: list[str] = []
    while len(out) < n:
        digest = hashlib.sha256(digest).digest()
        out.extend(WORDS[b % len(WORDS)] for b in digest)
    return " ".join(out[:n])


def _page(title: str, links: Sequence[str], text: str) -> bytes:
    anchors = "".join(f'<li><a href="{html.escape(h)}">{html.escape(h)}</a></li>' for h in links)
    return (f"<!doctype html><html lang=en><head><title>{html.escape(title)}</title></head>"
            f"<body><nav><a href=/>home</a></nav><main><h1>{html.escape(title)}</h1>"
            f"<p>{html.escape(text)}</p><ul>{anchors}</ul></main></body></html>").encode()


@functools.cache
def gzip_bomb() -> bytes:
    """1 GiB of zeros, gzip-compressed (about 1 MB)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [squeeze.compress(chunk) for _ in range(GZIP_BOMB_INFLATED >> 20)]
    return b"".join(parts) + squeeze.flush()


class SoakSite:
    """The soak test bed (see the module docstring); ``start`` serves it, ``stop`` ends it."""

    def __init__(self, hosts: int = 6, pages_per_host: int = 9_000, fanout: int = 6,
                 dead_hosts: int = 400, large_body_bytes: int = 50 * 1024 * 1024) -> None:
        self.n_hosts = hosts
        self.pages_per_host = pages_per_host
        self.fanout = fanout
        self.n_dead = dead_hosts
        self.large_body_bytes = large_body_bytes
        self._servers = LoggedServers()
        self._trap: TrapSite | None = None
        self.bases: list[str] = []
        self.faults_base = ""
        self.trap_base = ""
        self._dead_port = 0

    def start(self) -> SoakSite:
        self._dead_port = find_unused_port("127.0.5.1")
        for i in range(self.n_hosts):
            self.bases.append(self._servers.serve(f"127.0.3.{i + 1}", self._generated))
        self.faults_base = self._servers.serve("127.0.4.2", self._faults)
        trap = TrapSite("127.0.4.1").start()
        self._trap = trap
        self.trap_base = trap.base
        return self

    def stop(self) -> None:
        self._servers.stop()
        if self._trap is not None:
            self._trap.stop()

    def __enter__(self) -> SoakSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def seed_urls(self) -> list[str]:
        return [f"{b}/p/0" for b in self.bases] + [f"{self.trap_base}/", f"{self.faults_base}/"]

    def fetches(self) -> int:
        """GET requests answered so far by every host of the bed (robots.txt included)."""
        own = sum(1 for h in self._servers.hits() if h.method == "GET")
        trap = self._trap.requests() if self._trap is not None else []
        return own + sum(1 for h in trap if h.method == "GET")

    def dead_url(self, n: int) -> str:
        i = n % self.n_dead
        return f"http://127.0.{5 + i // 250}.{i % 250 + 1}:{self._dead_port}/p/{n}"

    def _generated(self, request: RequestView) -> Reply:
        path = request.target.split("?", 1)[0]
        if path == "/robots.txt":
            return Reply(body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        if path.startswith("/cal/"):
            parts = path.split("/")
            if len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit():
                year, month = int(parts[2]), int(parts[3])
                nxt = (year + month // 12, month % 12 + 1)
                return Reply(body=_page(f"Calendar {year}-{month:02d}",
                                        ["/p/0", f"/cal/{nxt[0]}/{nxt[1]:02d}"], ""))
        if path.startswith("/p/") and path[3:].isdigit():
            n = int(path[3:])
            if n < self.pages_per_host:
                children = [f"/p/{c}" for c in range(n * self.fanout + 1, n * self.fanout
                                                      + self.fanout + 1)
                            if c < self.pages_per_host]
                links = [*children, f"/p/{max(0, (n - 1) // self.fanout)}?sid={n:x}{id(request):x}",
                         f"/cal/{2000 + n % 40}/{n % 12 + 1:02d}", self.dead_url(n)]
                return Reply(body=_page(f"Page {n}", links, _words(f"{request.headers.get('host')}"
                                                                    f"/{n}", 300)))
        return Reply(404, _page("Not found", [], ""))

    def _faults(self, request: RequestView) -> Reply:
        path = request.target.split("?", 1)[0]
        if path == "/robots.txt":
            return Reply(404, b"", content_type="text/plain")
        if path == "/":
            return Reply(body=_page("Faults", ["/large/1", "/large/2", "/bomb", "/slow", "/hang",
                                               "/loop", "/broken"], "Faults."))
        if path in ("/large/1", "/large/2"):
            return Reply(body=_large_body(self.large_body_bytes, path), compress=False,
                         content_type="text/html")
        if path == "/bomb":
            return Reply(body=gzip_bomb(), compress=False, content_type="text/html",
                         headers=(("Content-Encoding", "gzip"),))
        if path == "/slow":
            return Reply(body=_page("Slow", [], "late"), delay=40.0)
        if path == "/hang":
            return Reply(body=_page("Hang", [], "never"), delay=3600.0)
        if path in ("/loop", "/loop2"):
            target = "/loop2" if path == "/loop" else "/loop"
            return Reply(302, b"", headers=(("Location", target),))
        if path == "/broken":
            return Reply(500, _page("Broken", [], "error"))
        return Reply(404, _page("Not found", [], ""))


@functools.cache
def _large_body(size: int, path: str) -> bytes:
    unit = _page(f"Large {path}", [], _words(path, 2000))
    return (unit * (size // len(unit) + 1))[:size]
