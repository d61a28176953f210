"""The trap site and the faults site of the end-to-end policy tests, and a helper that crawls them.

Both sites are ``pipeline.demo.server`` sites on loopback addresses, which log every request
they answer (request-target as sent, start and end time, status, what was sent) and compress
text responses as a stock nginx does, so the tests assert from the servers' side what the
crawler did.

* :class:`TrapSite` (one host): about twenty normal pages and the classic infinite URL spaces:
  an endless calendar (``/calendar/YYYY/MM`` and ``/calendar?year=&month=``, each month linking
  to the neighbouring months and years), ever-deeper paths (``/deep/a/a/...`` and
  ``/d/1/2/3/...``), a query that grows a parameter per page (``/facets?a=1&b=2&...``), and
  near-identical pages (``/similar/N``: one body with a changing visitor counter, each linking
  to three more). Every link of every response carries a session id that changes per response
  (``;jsessionid=``, ``?sid=`` or ``?PHPSESSID=``).
* :class:`FaultsSite` (one loopback address per fault, so each is its own politeness key): 503
  twice then 200, 429 with ``Retry-After`` then 200, a response slower than the fetch timeout,
  a 500 that never recovers, a 404, a redirect loop, a redirect to another (private) address,
  a large ``image/png``, and a page linking to an FTP file served by pyftpdlib.

:func:`crawl` runs the pipeline against the session's local stack in an isolated topic,
subscription, Bigtable instance and WARC prefix, and reads the tables back.
"""

from __future__ import annotations

import contextlib
import functools
import html
import io
import itertools
import logging
import re
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from google.cloud import bigtable
from pyftpdlib.authorizers import DummyAuthorizer  # type: ignore[import-untyped]
from pyftpdlib.handlers import FTPHandler  # type: ignore[import-untyped]
from pyftpdlib.ioloop import IOLoop  # type: ignore[import-untyped]
from pyftpdlib.servers import FTPServer  # type: ignore[import-untyped]
from warcio.archiveiterator import ArchiveIterator

from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.server import LoggedServers
from pipeline.local.driver import RunSummary
from pipeline.local.stack import LocalStack
from pipeline.main import run
from pipeline.ops.resources import ensure_bigtable, ensure_subscription, ensure_topic
from pipeline.ops.seeding import publish_seeds
from tests.integration.ftp_server import polled_in_thread
from transforms.formats.rowkeys import url_from_row_key

SESSION_ID = re.compile(r"jsessionid|[?&;](?:sid|phpsessid)=", re.IGNORECASE)


def page(title: str, links: Sequence[str] = (), text: str = "") -> bytes:
    """A small HTML page: a title, a paragraph and a list of links."""
    items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(href)}</a></li>'
                    for href in links)
    return (f"<!doctype html><html><head><title>{html.escape(title)}</title></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{text}</p><ul>{items}</ul></body></html>"
            ).encode()


# -- the trap site ------------------------------------------------------------------------------

TRAP_NORMAL_PATHS = (
    "/about", "/contact", "/team", "/news", "/jobs", "/privacy",
    "/articles/1", "/articles/2", "/articles/3", "/articles/4", "/articles/5", "/articles/6",
    "/blog/2019/05/spring-update",  # an old permalink: a date followed by more path is no calendar
    "/blog/2019/06/summer-update",
    "/docs/guide/install/linux",
    "/docs/ref/api/v1/models/page/index.html",  # 7 segments: deep, but within the limit
    "/search?q=beam&page=2",
    "/shop/shoes?color=red&size=9&sort=price",
    "/help/faq.html",
    "/sitemap-page",
)


class TrapSite:
    """One host full of infinite URL spaces, with about twenty normal pages among them.

    ``today`` (year, month) is where the calendar starts; it defaults to the current UTC month so
    the calendar rule (a window around the current year) sees the same site every year.
    """

    def __init__(self, address: str = "127.0.0.1", today: tuple[int, int] | None = None) -> None:
        now = datetime.now(UTC)
        self.today = today or (now.year, now.month)
        self._address = address
        self._servers = LoggedServers()
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self.base = ""

    def start(self) -> TrapSite:
        self.base = self._servers.serve(self._address, self._respond)
        return self

    def stop(self) -> None:
        self._servers.stop()

    def __enter__(self) -> TrapSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def normal_paths(self) -> tuple[str, ...]:
        """The home page and the normal pages: a correct crawl fetches each exactly once."""
        return ("/", *TRAP_NORMAL_PATHS)

    def trap_entries(self) -> list[str]:
        """Where the home page enters each trap."""
        year, month = self.today
        return [f"/calendar/{year}/{month:02d}", f"/calendar?year={year}&month={month}",
                "/deep/a/", "/d/1/2/3/4/", "/facets?a=1&b=2", "/similar/1"]

    def requests(self) -> list[Hit]:
        return self._servers.hits()

    def _tick(self) -> int:
        with self._lock:
            return next(self._counter)

    def _respond(self, request: RequestView) -> Reply:
        path, query = _without_session(request.target)
        if path == "/robots.txt":
            return Reply(body=b"User-agent: *\nAllow: /\n", content_type="text/plain")
        title, links, text = self._content(path, query)
        if title is None:
            return Reply(404, page("Not found"))
        token = f"{self._tick():05d}{secrets.token_hex(5).upper()}"  # new on every response
        links = [_with_session(href, token, i) for i, href in enumerate(links)]
        return Reply(body=page(title, links, text))

    def _content(self, path: str, query: dict[str, str]
                 ) -> tuple[str | None, list[str], str]:
        home_and_normal = list(self.normal_paths)
        full = path + (f"?{urlencode(query)}" if query else "")
        if path == "/":
            return "Home", home_and_normal[1:] + self.trap_entries(), "Welcome."
        if full in TRAP_NORMAL_PATHS:
            return f"Page {full}", home_and_normal, "A normal page."
        if m := re.fullmatch(r"/calendar/(\d{4})/(\d{2})", path):
            year, month = int(m[1]), int(m[2])
            return f"Calendar {year}-{month:02d}", ["/"] + [
                f"/calendar/{y}/{mo:02d}" for y, mo in _neighbours(year, month)], ""
        if path == "/calendar" and query.get("year", "").isdigit() and query.get(
                "month", "").isdigit():
            year, month = int(query["year"]), int(query["month"])
            return f"Calendar {year}-{month}", ["/"] + [
                f"/calendar?year={y}&month={mo}" for y, mo in _neighbours(year, month)], ""
        if re.fullmatch(r"/deep(/a)+/", path):
            return "Deeper", ["/", "a/"], "Relative links on a page that answers every path."
        if m := re.fullmatch(r"/d((?:/\d+)+)/", path):
            return "Deeper still", ["/", f"{int(m[1].rsplit('/', 1)[1]) + 1}/"], ""
        if path == "/facets" and query:
            letter = "abcdefghijklmnopqrstuvwxyz"[len(query) % 26]
            return "Facets", ["/", f"{full}&{letter}={len(query) + 1}"], ""
        if m := re.fullmatch(r"/similar/(\d+)", path):
            n = int(m[1])
            return "Similar", ["/"] + [f"/similar/{3 * n + i}" for i in (1, 2, 3)], (
                f"The same page again. You are visitor number {self._tick()}.")
        return None, [], ""


def _neighbours(year: int, month: int) -> list[tuple[int, int]]:
    """Previous and next month, same month of the previous and next year."""
    prev = (year - 1, 12) if month == 1 else (year, month - 1)
    nxt = (year + 1, 1) if month == 12 else (year, month + 1)
    return [prev, nxt, (year - 1, month), (year + 1, month)]


def _with_session(href: str, token: str, i: int) -> str:
    """``href`` with a session id, as servlet and PHP sites append them; the kind rotates."""
    path, sep, query = href.partition("?")
    kind = i % 3
    if kind == 0:
        return f"{path};jsessionid={token}{sep}{query}"
    name = "sid" if kind == 1 else "PHPSESSID"
    return f"{path}?{query + '&' if query else ''}{name}={token}"


def _without_session(target: str) -> tuple[str, dict[str, str]]:
    """The path and query of a request-target, session ids dropped (the site accepts them)."""
    parts = urlsplit(target)
    path = re.sub(r";jsessionid=[^/;]*", "", parts.path, flags=re.IGNORECASE)
    query = {k: v for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k.lower() not in ("sid", "phpsessid")}
    return path, query


# -- the faults site ----------------------------------------------------------------------------

Route = Callable[[str], Reply]  # a fault's answer, given "<fault name><request-target>"
MEDIA_BYTES = 8 * 1024 * 1024  # below --max_body_bytes: if stored, it would be stored whole
FTP_FILE = "file.html"
FTP_BODY = (b"<!doctype html><html><head><title>FTP page</title></head>"
            b"<body>served over FTP</body></html>\n")


@dataclass(frozen=True)
class FtpCommand:
    at: float
    command: str
    arg: str


@dataclass
class FaultsSite:
    """One fault per loopback address (so per politeness key), plus an FTP server.

    Attributes (base URLs, set by ``start``):
        flaky: ``/flaky`` answers 503 to its first ``flaky_failures`` requests, then 200.
        throttled: ``/limited`` answers 429 with ``Retry-After: retry_after`` once, then 200;
            ``/after-1``.. ``/after-3`` are plain pages of the same host.
        slow: ``/slow`` answers after ``slow_seconds``.
        broken: ``/broken`` always answers 500; ``/missing`` is 404.
        looping: ``/loop`` redirects to ``/loop2``, which redirects back.
        misc: ``/to-private`` redirects to ``private`` (another loopback address, so "private"
            to the SSRF guard); ``/media`` is a large ``image/png``; ``/ftp-links.html`` links to
            ``ftp_url``.
        private: ``/secret``, the private redirect target.
    """

    flaky_failures: int = 2
    retry_after: int = 2
    slow_seconds: float = 2.5
    flaky: str = ""
    throttled: str = ""
    slow: str = ""
    broken: str = ""
    looping: str = ""
    misc: str = ""
    private: str = ""
    ftp_url: str = ""
    _servers: LoggedServers = field(default_factory=LoggedServers)
    _counts: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ftp: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _ftp_log: list[FtpCommand] = field(default_factory=list)

    def start(self, ftp_root: Path) -> FaultsSite:
        self.ftp_url = self._ftp.enter_context(self._serve_ftp(ftp_root, "127.0.0.17"))
        serve = self._servers.serve
        self.flaky = serve("127.0.0.11", self._route("flaky", {"/flaky": self._flaky}))
        self.throttled = serve("127.0.0.12", self._route("throttled", {
            "/limited": self._limited, **{f"/after-{i}": self._plain for i in (1, 2, 3)}}))
        self.slow = serve("127.0.0.13", self._route("slow", {"/slow": self._slow}))
        self.broken = serve("127.0.0.14", self._route("broken", {
            "/broken": lambda _: Reply(500, page("Internal Server Error"))}))
        self.looping = serve("127.0.0.15", self._route("looping", {
            "/loop": lambda _: _redirect("/loop2"), "/loop2": lambda _: _redirect("/loop")}))
        self.private = serve("127.0.0.18", self._route("private", {"/secret": self._plain}))
        self.misc = serve("127.0.0.16", self._route("misc", {
            "/to-private": lambda _: _redirect(self.private + "/secret"),
            "/media": lambda _: Reply(body=_png(MEDIA_BYTES), content_type="image/png"),
            "/ftp-links.html": lambda _: Reply(body=page("Files", [self.ftp_url]))}))
        return self

    def stop(self) -> None:
        self._servers.stop()
        self._ftp.close()

    def seed_urls(self) -> list[str]:
        """Every fault, directly (order matters within a host: it is the lease order)."""
        return [self.flaky + "/flaky",
                *(self.throttled + p for p in ("/limited", "/after-1", "/after-2", "/after-3")),
                self.slow + "/slow", self.broken + "/broken", self.broken + "/missing",
                self.looping + "/loop",
                *(self.misc + p for p in ("/to-private", "/media", "/ftp-links.html"))]

    def hits(self, base: str | None = None, path: str | None = None) -> list[Hit]:
        return self._servers.hits(base, path)

    def ftp_commands(self) -> list[FtpCommand]:
        with self._lock:
            return list(self._ftp_log)

    def _count(self, host: str, path: str) -> int:
        with self._lock:
            n = self._counts[host, path] = self._counts.get((host, path), 0) + 1
            return n

    def _route(self, name: str, routes: dict[str, Route]) -> Callable[[RequestView], Reply]:
        def respond(request: RequestView) -> Reply:
            handler = routes.get(request.target)
            if handler is None:  # robots.txt included: 404 means "allow all"
                return Reply(404, page("Not found"))
            return handler(f"{name}{request.target}")
        return respond

    def _plain(self, key: str) -> Reply:
        return Reply(body=page(key))

    def _flaky(self, key: str) -> Reply:
        if self._count("flaky", "/flaky") <= self.flaky_failures:
            return Reply(503, page("Service Unavailable"))
        return Reply(body=page("Flaky, but up now"))

    def _limited(self, key: str) -> Reply:
        if self._count("throttled", "/limited") == 1:
            return Reply(429, page("Too Many Requests"),
                         headers=(("Retry-After", str(self.retry_after)),))
        return Reply(body=page("Limited, but up now"))

    def _slow(self, key: str) -> Reply:
        return Reply(body=page("Slow"), delay=self.slow_seconds)

    @contextlib.contextmanager
    def _serve_ftp(self, root: Path, address: str) -> Iterator[str]:
        """pyftpdlib serving ``root`` read-only to anonymous users; every command is logged."""
        (root / FTP_FILE).write_bytes(FTP_BODY)
        authorizer = DummyAuthorizer()
        authorizer.add_anonymous(str(root))
        log, lock = self._ftp_log, self._lock

        class LoggingHandler(FTPHandler):
            def pre_process_command(self, line: str, cmd: str, arg: str) -> Any:
                with lock:
                    log.append(FtpCommand(time.time(), cmd, arg))
                return super().pre_process_command(line, cmd, arg)

        LoggingHandler.authorizer = authorizer
        logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
        server = FTPServer((address, 0), LoggingHandler, ioloop=IOLoop())
        with polled_in_thread(server, "site-ftp"):
            yield f"ftp://{address}:{server.address[1]}/{FTP_FILE}"


@functools.cache
def _png(size: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes(size - 8)


def _redirect(location: str) -> Reply:
    return Reply(302, page("Moved"), headers=(("Location", location),))


# -- one crawl on the local stack ---------------------------------------------------------------

Rows = dict[str, dict[str, dict[str, str]]]  # key -> family -> column -> latest value


@dataclass
class Crawl:
    """A finished crawl: the driver's summary and output, and the tables read back."""

    summary: RunSummary
    out: str
    wall: float
    rows: Rows  # by canonical URL
    hosts: dict[str, dict[str, str]]  # politeness key -> h: column -> value
    warc_prefix: str


def warc_records(prefix: str, types: tuple[str, ...] | None = None) -> Counter[str]:
    """WARC records per WARC-Target-URI in every file under ``prefix`` (of ``types`` only, if
    given, e.g. ``("response", "resource")``)."""
    counts: Counter[str] = Counter()
    for match in FileSystems.match([prefix + "/**"])[0].metadata_list:
        with FileSystems.open(match.path,
                              compression_type=CompressionTypes.UNCOMPRESSED) as warc:
            data = warc.read()
        for record in ArchiveIterator(io.BytesIO(data)):
            uri = record.rec_headers.get_header("WARC-Target-URI")
            if uri and (types is None or record.rec_type in types):
                counts[uri] += 1
    return counts


def read_table(project: str, instance: str, table: str) -> Rows:
    """Every row of a table, the newest value of each cell, decoded."""
    rows = bigtable.Client(project=project).instance(instance).table(table).read_rows()
    return {row.row_key.decode(): {family: {c.decode(): v[0].value.decode("utf-8", "replace")
                                            for c, v in columns.items()}
                                   for family, columns in row.cells.items()}
            for row in rows}


def crawl(stack: LocalStack, seeds: list[str], flags: list[str],
          later: tuple[float, list[str]] | None = None) -> Crawl:
    """Runs one crawl of ``seeds`` in a topic, subscription, instance and WARC prefix of its own.

    Args:
        stack: the session's local stack.
        seeds: URLs to publish before the run.
        flags: pipeline flags on top of the isolated resources.
        later: ``(seconds, urls)``: URLs to publish again that long after the run started, as
            a client submitting URLs to a running crawl would.
    """
    suffix = uuid.uuid4().hex[:8]
    topic, subscription, instance = f"pol-{suffix}", f"pol-{suffix}-sub", f"pol-{suffix}"
    ensure_topic(stack.project, topic)
    ensure_subscription(stack.project, topic, subscription)
    ensure_bigtable(stack.project, instance)
    publish_seeds(seeds, stack.project, topic)
    warc_prefix = f"gs://{stack.bucket}/{suffix}"
    argv = stack.pipeline_args([
        f"--input_subscription=projects/{stack.project}/subscriptions/{subscription}",
        f"--frontier_topic=projects/{stack.project}/topics/{topic}",
        f"--bigtable_instance={instance}", f"--warc_prefix={warc_prefix}", *flags])
    out = io.StringIO()
    started = time.monotonic()
    resubmit = None
    if later is not None:
        resubmit = threading.Timer(later[0], publish_seeds, (later[1], stack.project, topic))
        resubmit.start()
    summary = run(argv, out=out)
    wall = time.monotonic() - started
    if resubmit is not None:
        resubmit.cancel()
    assert isinstance(summary, RunSummary)
    rows = {url_from_row_key(key): cells
            for key, cells in read_table(stack.project, instance, "webtable").items()}
    hosts = {key: cells.get("h", {})
             for key, cells in read_table(stack.project, instance, "hosts").items()}
    return Crawl(summary, out.getvalue(), wall, rows, hosts, warc_prefix)
