"""The recrawl site of the end-to-end freshness tests: one loopback host whose pages answer
conditional GETs, and a log of every request with its conditional headers.

Pages (all linked from ``/``):

* ``/etag``: ``ETag: "e1"``; a request with ``If-None-Match: "e1"`` gets ``304``;
* ``/lastmod``: a fixed ``Last-Modified``; a request whose ``If-Modified-Since`` is that date
  gets ``304``;
* ``/changing``: a new body at every request, no validators;
* ``/cached``: ``Cache-Control: max-age=`` :data:`CACHED_MAX_AGE`, far beyond the test
  policy's default interval, so it is not due again during the run;
* ``/``: static, without validators.
"""

from __future__ import annotations

import html
import itertools
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

ETAG = '"e1"'
LAST_MODIFIED = "Tue, 01 Oct 2024 10:00:00 GMT"
CACHED_MAX_AGE = 600
PAGES = ("/etag", "/lastmod", "/changing", "/cached")


@dataclass(frozen=True)
class ConditionalHit:
    """One request the site answered, with the conditional headers it carried."""

    path: str
    start: float
    status: int
    if_none_match: str | None
    if_modified_since: str | None


def _page(title: str, links: tuple[str, ...] = (), text: str = "") -> bytes:
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(h)}</a></li>' for h in links)
    return (f"<!doctype html><html><head><title>{html.escape(title)}</title></head><body>"
            f"<p>{html.escape(text)}</p><ul>{items}</ul></body></html>").encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    site: RecrawlSite

    def server_bind(self) -> None:  # no FQDN lookup
        super(ThreadingHTTPServer, self).server_bind()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        site = cast(_Server, self.server).site
        start = time.time()
        status, headers, body = site.answer(self.path, self.headers.get("If-None-Match"),
                                            self.headers.get("If-Modified-Since"))
        site.record(ConditionalHit(self.path, start, status, self.headers.get("If-None-Match"),
                                   self.headers.get("If-Modified-Since")))
        self.send_response(status)
        for name, value in (("Content-Type", "text/html; charset=utf-8"),
                            ("Content-Length", str(len(body))), *headers):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@dataclass
class RecrawlSite:
    """The site on ``address`` (a free port); use as a context manager."""

    address: str = "127.0.0.21"
    base: str = ""
    _log: list[ConditionalHit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _versions: itertools.count = field(default_factory=itertools.count)
    _server: _Server | None = None

    def __enter__(self) -> RecrawlSite:
        server = _Server((self.address, 0), _Handler)
        server.site = self
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self._server = server
        self.base = f"http://{self.address}:{server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def record(self, hit: ConditionalHit) -> None:
        with self._lock:
            self._log.append(hit)

    def hits(self, path: str | None = None) -> list[ConditionalHit]:
        with self._lock:
            return [h for h in self._log if path is None or h.path == path]

    def answer(self, path: str, if_none_match: str | None, if_modified_since: str | None
               ) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
        """Status, extra headers and body for a request."""
        if path == "/robots.txt":
            return 404, (), b""
        if path == "/":
            return 200, (), _page("Home", PAGES)
        if path == "/etag":
            if if_none_match == ETAG:
                return 304, (("ETag", ETAG),), b""
            return 200, (("ETag", ETAG),), _page("ETag", text="stable")
        if path == "/lastmod":
            if if_modified_since == LAST_MODIFIED:
                return 304, (), b""
            return 200, (("Last-Modified", LAST_MODIFIED),), _page("Dated", text="stable")
        if path == "/changing":
            return 200, (), _page("News", text=f"version {next(self._versions)}")
        if path == "/cached":
            return 200, (("Cache-Control", f"max-age={CACHED_MAX_AGE}"),), _page("Cached")
        return 404, (), b""
