"""The recrawl site of the end-to-end freshness tests: one loopback host whose pages answer
conditional GETs, and a log of every request with its headers (the conditional ones included).

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
from dataclasses import dataclass, field

from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.server import LoggedServers

ETAG = '"e1"'
LAST_MODIFIED = "Tue, 01 Oct 2024 10:00:00 GMT"
CACHED_MAX_AGE = 600
PAGES = ("/etag", "/lastmod", "/changing", "/cached")


def _page(title: str, links: tuple[str, ...] = (), text: str = "") -> bytes:
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(h)}</a></li>' for h in links)
    return (f"<!doctype html><html><head><title>{html.escape(title)}</title></head><body>"
            f"<p>{html.escape(text)}</p><ul>{items}</ul></body></html>").encode()


@dataclass
class RecrawlSite:
    """The site on ``address`` (a free port); use as a context manager. Its log keeps every
    request's headers, so the conditional ones (``if-none-match``, ``if-modified-since``)."""

    address: str = "127.0.0.21"
    base: str = ""
    _servers: LoggedServers = field(default_factory=LoggedServers)
    _versions: itertools.count = field(default_factory=itertools.count)

    def __enter__(self) -> RecrawlSite:
        self.base = self._servers.serve(self.address, self.answer)
        return self

    def __exit__(self, *exc: object) -> None:
        self._servers.stop()

    def hits(self, path: str | None = None) -> list[Hit]:
        return self._servers.hits(path=path)

    def answer(self, request: RequestView) -> Reply:
        """The reply to a request: a 304 when its conditional headers match."""
        path = request.target
        if_none_match = request.headers.get("if-none-match")
        if_modified_since = request.headers.get("if-modified-since")
        if path == "/":
            return Reply(body=_page("Home", PAGES))
        if path == "/etag":
            if if_none_match == ETAG:
                return Reply(304, headers=(("ETag", ETAG),))
            return Reply(body=_page("ETag", text="stable"), headers=(("ETag", ETAG),))
        if path == "/lastmod":
            if if_modified_since == LAST_MODIFIED:
                return Reply(304)
            return Reply(body=_page("Dated", text="stable"),
                         headers=(("Last-Modified", LAST_MODIFIED),))
        if path == "/changing":
            return Reply(body=_page("News", text=f"version {next(self._versions)}"))
        if path == "/cached":
            return Reply(body=_page("Cached"),
                         headers=(("Cache-Control", f"max-age={CACHED_MAX_AGE}"),))
        return Reply(404)  # robots.txt included: allow all
