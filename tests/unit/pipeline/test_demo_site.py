"""Tests of the demo site: its ground truth against a tiny reference crawler, and its servers."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import pytest

from pipeline.demo.pages import MIN_PAGES, SiteSpec
from pipeline.demo.site import DemoSite, find_unused_port, latency_for

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def site() -> Iterator[DemoSite]:
    """A fresh default site, for tests that read the request log."""
    with DemoSite().start(latency=(0.0, 0.0)) as running:
        yield running


@pytest.fixture(scope="module")
def demo() -> Iterator[DemoSite]:
    """One default site for the tests that never look at the request log."""
    with DemoSite().start(latency=(0.0, 0.0)) as running:
        yield running


# --- a tiny sequential reference crawler: urllib + html.parser + urljoin + robotparser ---------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


# No proxies: environment proxy settings must not capture loopback traffic.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)


def _get(url: str) -> tuple[int, http.client.HTTPMessage, bytes]:
    try:
        with _OPENER.open(url, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        href = values.get("href")
        if tag == "base" and self.base is None and href:
            self.base = href
        elif tag == "a" and href is not None:
            self.hrefs.append(href)


def _parse(body: bytes) -> _LinkParser:
    parser = _LinkParser()
    parser.feed(body.decode("utf-8"))
    parser.close()
    return parser


@dataclass
class _CrawlReport:
    blocked: dict[str, set[str]] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)


def _reference_crawl(seeds: list[str]) -> _CrawlReport:
    """Breadth-first crawl following every link and redirect, obeying robots.txt."""
    report = _CrawlReport()
    robots: dict[str, RobotFileParser | None] = {}
    queue, seen = list(seeds), set()
    while queue:
        url = urldefrag(queue.pop(0)).url
        parts = urlsplit(url)
        if url in seen or parts.scheme != "http":
            continue
        seen.add(url)
        if parts.netloc not in robots:
            try:
                status, _, body = _get(f"http://{parts.netloc}/robots.txt")
            except urllib.error.URLError:
                robots[parts.netloc] = None
            else:
                parser = RobotFileParser()
                parser.parse(body.decode().splitlines() if status == 200 else [])
                robots[parts.netloc] = parser
        rules = robots[parts.netloc]
        if rules is None:
            report.unreachable.add(url)
            continue
        if not rules.can_fetch("demo-test", url):
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            report.blocked.setdefault(parts.netloc, set()).add(path)
            continue
        status, headers, body = _get(url)
        if 300 <= status < 400:
            queue.append(urljoin(url, headers["Location"]))
        elif status == 200 and headers.get_content_type() == "text/html":
            links = _parse(body)
            base = urljoin(url, links.base) if links.base else url
            queue.extend(urljoin(base, href) for href in links.hrefs)
    return report


def _netloc(host: str) -> str:
    return urlsplit(host).netloc


# --- ground truth ------------------------------------------------------------------------------


def test_reference_crawl_fetches_exactly_the_expected_paths(site: DemoSite) -> None:
    report = _reference_crawl(site.seed_urls())

    for host in site.hosts:
        requested = {r.path for r in site.requests(host) if r.method == "GET"}
        assert requested == site.expected_fetch_paths(host)
        assert requested.isdisjoint(site.disallowed_paths(host))
        assert report.blocked.get(_netloc(host), set()) == site.disallowed_paths(host)
        for record in site.requests(host):
            assert record.status == site.response(host, record.path).status
    assert report.unreachable == {site.unreachable_url}


def test_default_sizes_and_counts(demo: DemoSite) -> None:
    alpha, beta, gamma = demo.hosts

    for host in demo.hosts:
        assert len(demo.html_pages(host)) == 60
        assert len(demo.expected_fetch_paths(host)) == 66
        assert demo.html_pages(host) <= demo.expected_fetch_paths(host)
        assert demo.expected_fetch_paths(host) - demo.html_pages(host) == {
            "/robots.txt", "/files/report.pdf", "/img/logo.png", "/missing.html", "/old",
            "/moved",
        }
    assert demo.disallowed_paths(alpha) == {"/private/members.html", "/cgi-bin/members.html"}
    assert demo.disallowed_paths(beta) == {"/private/members.html"}
    assert demo.disallowed_paths(gamma) == set()


def test_hosts_are_distinct_loopback_addresses(demo: DemoSite) -> None:
    addresses = [urlsplit(host).hostname for host in demo.hosts]

    assert addresses == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert demo.seed_urls() == [host + "/" for host in demo.hosts]


def test_robots_roles() -> None:
    with DemoSite().start(crawl_delay=1.25, latency=(0.0, 0.0)) as site:
        alpha, beta, gamma = site.hosts
        slow = site.page_body(alpha, "/robots.txt").decode()
        assert "Crawl-delay: 1.25\n" in slow
        assert "Disallow: /private/\n" in slow and "Disallow: /cgi-bin/\n" in slow
        disallow_only = site.page_body(beta, "/robots.txt").decode()
        assert "Crawl-delay" not in disallow_only and "Disallow: /private/\n" in disallow_only
        assert site.response(gamma, "/robots.txt").status == 404
        assert _get(gamma + "/robots.txt")[0] == 404


# --- served bytes ------------------------------------------------------------------------------


def test_served_responses_match_page_body_over_one_kept_alive_connection(site: DemoSite) -> None:
    for host in site.hosts:
        parts = urlsplit(host)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        paths = sorted(site.expected_fetch_paths(host) | site.disallowed_paths(host))
        for path in paths:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            expected = site.response(host, path)
            assert (response.status, body) == (expected.status, expected.body)
            assert response.getheader("Content-Type") == expected.content_type
            assert response.getheader("Content-Length") == str(len(body))
        connection.close()
        assert len({r.client_port for r in site.requests(host)}) == 1
        assert len(site.requests(host)) == len(paths)


_DECODE = {"gzip": gzip.decompress, "deflate": zlib.decompress, "": bytes}


def test_text_is_compressed_with_each_hosts_coding_for_clients_that_accept_it(
        site: DemoSite) -> None:
    codings = [site.spec(host).coding for host in site.hosts]
    assert codings == ["gzip", "deflate", "gzip"]
    for host, coding in zip(site.hosts, codings, strict=True):
        parts = urlsplit(host)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        sent: dict[str, tuple[str, bytes]] = {}
        for path in ("/robots.txt", "/", "/missing.html", "/old", "/img/logo.png",
                     "/files/report.pdf"):
            connection.request("GET", path, headers={"Accept-Encoding": "gzip, deflate"})
            response = connection.getresponse()
            raw = response.read()
            got = response.getheader("Content-Encoding") or ""
            assert _DECODE[got](raw) == site.page_body(host, path), (host, path)
            sent[path] = got, raw
        connection.close()
        # gamma's robots.txt is a 404 page, and /old's 301 has an HTML body too.
        textual = {"/robots.txt", "/", "/missing.html", "/old"}
        assert {p for p, (got, _) in sent.items() if got} == textual, host
        assert all(sent[p][0] == coding for p in textual), host
        for hit in site.requests(host):
            got, raw = sent[hit.path]
            assert (hit.content_encoding, hit.sent_sha1) == (
                got, hashlib.sha1(raw).hexdigest()), hit


def test_head_sends_headers_only(site: DemoSite) -> None:
    parts = urlsplit(site.hosts[0])
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.request("HEAD", "/")
    response = connection.getresponse()

    assert response.read() == b""
    assert response.getheader("Content-Length") == str(len(site.page_body(site.hosts[0], "/")))
    assert site.requests(site.hosts[0])[0].method == "HEAD"
    connection.close()


def test_redirects(demo: DemoSite) -> None:
    alpha, beta, _ = demo.hosts

    status, headers, _ = _get(alpha + "/old")
    assert (status, headers["Location"]) == (301, "/new-page.html")
    status, headers, _ = _get(alpha + "/moved")
    assert (status, headers["Location"]) == (302, beta + "/landing.html")
    assert _get(beta + "/landing.html")[0] == 200


def test_non_html_resources_and_404(demo: DemoSite) -> None:
    host = demo.hosts[1]

    status, headers, pdf = _get(host + "/files/report.pdf")
    assert (status, headers["Content-Type"]) == (200, "application/pdf")
    assert pdf.startswith(b"%PDF-1.4") and pdf.endswith(b"%%EOF\n")
    status, headers, png = _get(host + "/img/logo.png")
    assert (status, headers["Content-Type"]) == (200, "image/png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert _get(host + "/missing.html")[0] == 404
    assert _get(host + "/no/such/page")[0] == 404


def test_pages_are_realistic_html_of_a_few_kilobytes(demo: DemoSite) -> None:
    for host in demo.hosts:
        for path in demo.html_pages(host):
            body = demo.page_body(host, path)
            assert body.startswith(b"<!DOCTYPE html>")
            assert b'<meta charset="utf-8">' in body and b"<nav>" in body
            assert re.search(rb"<title>[^<]+</title>", body)
            assert 1500 < len(body) < 10_000


# --- link structure ----------------------------------------------------------------------------


def test_links_cover_every_shape(demo: DemoSite) -> None:
    hrefs: list[str] = []
    bases: list[str] = []
    pages_with_duplicate_targets = 0
    for host in demo.hosts:
        for path in demo.html_pages(host):
            parsed = _parse(demo.page_body(host, path))
            hrefs.extend(parsed.hrefs)
            bases.extend([parsed.base] if parsed.base else [])
            targets = [urldefrag(link).url for link in demo.response(host, path).links]
            pages_with_duplicate_targets += len(targets) != len(set(targets))

    def has(predicate: Callable[[str], object]) -> bool:
        return any(predicate(href) for href in hrefs)

    assert has(lambda h: h.startswith("../"))
    assert has(lambda h: h.startswith("./") and len(h) > 2)
    assert has(lambda h: re.fullmatch(r"[a-z][\w-]*\.html(#.*)?", h))
    assert has(lambda h: h.startswith("/") and not h.startswith("//"))
    assert has(lambda h: h.startswith("//"))
    assert has(lambda h: h.startswith("http://"))
    assert has(lambda h: h.startswith("?") and "&" in h)
    assert has(lambda h: h.startswith("?"))
    assert has(lambda h: "#section-" in h)
    assert has(lambda h: h.startswith("mailto:")) and has(lambda h: h.startswith("javascript:"))
    assert has(lambda h: urljoin("http:", h) == demo.unreachable_url)
    assert any(b.startswith("http://") for b in bases) and any(b.startswith("/") for b in bases)
    assert pages_with_duplicate_targets > 50


def test_every_page_links_home_and_is_reachable_within_its_host(demo: DemoSite) -> None:
    for host in demo.hosts:
        home = host + "/"
        reached, queue = set(), [home]
        while queue:
            url = urldefrag(queue.pop()).url
            if url in reached or not url.startswith(host + "/"):
                continue
            reached.add(url)
            response = demo.response(host, url[len(host):])
            if response.location is not None:
                queue.append(urljoin(url, response.location))
            queue.extend(response.links)
            if response.links:
                assert home in response.links
        html_urls = {host + path for path in demo.html_pages(host)}
        # /landing.html is reached only through another host's cross-host redirect.
        assert html_urls - reached == {host + "/landing.html"}


def test_cross_host_links_point_at_other_demo_hosts(demo: DemoSite) -> None:
    for host in demo.hosts:
        linked = {
            f"{urlsplit(link).scheme}://{urlsplit(link).netloc}"
            for path in demo.html_pages(host)
            for link in demo.response(host, path).links
            if link.startswith("http")
        }
        others = set(demo.hosts) - {host}
        assert others <= linked
        assert linked - others - {host} <= {demo.unreachable_url.rstrip("/")}


# --- unreachable host, determinism, options ----------------------------------------------------


def test_unreachable_url_refuses_connections(demo: DemoSite) -> None:
    parts = urlsplit(demo.unreachable_url)

    assert parts.hostname == "127.0.0.1"
    assert parts.port is not None and parts.port < 32768
    with pytest.raises(ConnectionRefusedError), socket.create_connection(
        (parts.hostname, parts.port), timeout=5
    ):
        pass


def test_unreachable_port_is_configurable() -> None:
    port = find_unused_port()
    with DemoSite().start(n_hosts=1, pages_per_host=MIN_PAGES, unreachable_port=port) as site:
        assert site.unreachable_url == f"http://127.0.0.1:{port}/"
        about = site.page_body(site.hosts[0], "/about.html").decode()
        assert f"127.0.0.1:{port}/" in about


def _normalised_bodies(site: DemoSite) -> dict[tuple[int, str], bytes]:
    bodies = {}
    for i, host in enumerate(site.hosts):
        for path in sorted(site.expected_fetch_paths(host) | site.disallowed_paths(host)):
            body = site.page_body(host, path)
            for j, other in enumerate(site.hosts):
                body = body.replace(_netloc(other).encode(), f"HOST{j}".encode())
            bodies[(i, path)] = body
    return bodies


def test_sites_are_identical_across_runs_up_to_ports() -> None:
    with DemoSite().start() as first, DemoSite().start() as second:
        assert _normalised_bodies(first) == _normalised_bodies(second)
        assert first.expected_fetch_paths(first.hosts[2]) == second.expected_fetch_paths(
            second.hosts[2]
        )
    with DemoSite().start(seed=1) as reseeded:
        assert _normalised_bodies(reseeded) != _normalised_bodies(first)


def test_fixed_port_is_shared_by_every_host() -> None:
    port = find_unused_port("127.0.0.1", avoid=range(20_000, 24_000))
    with DemoSite().start(port=port, latency=(0.0, 0.0)) as site:
        assert [urlsplit(host).port for host in site.hosts] == [port] * 3
        assert _get(site.hosts[1] + "/")[0] == 200


def test_small_custom_specs() -> None:
    specs = [SiteSpec("solo", MIN_PAGES, crawl_delay=2.0, disallow=("/tmp",))]
    with DemoSite().start(specs=specs, latency=(0.0, 0.0)) as site:
        (host,) = site.hosts
        assert len(site.html_pages(host)) == MIN_PAGES
        assert site.disallowed_paths(host) == {"/tmp/members.html"}
        # With one host the "cross-host" redirect lands on the host itself.
        assert site.response(host, "/moved").location == host + "/landing.html"
        _reference_crawl(site.seed_urls())
        requested = {r.path for r in site.requests(host)}
        assert requested == site.expected_fetch_paths(host)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "a b"},
        {"pages": MIN_PAGES - 1},
        {"has_robots": False, "crawl_delay": 1.0},
        {"disallow": ("private",)},
        {"disallow": ("/*.pdf",)},
        {"crawl_delay": -1.0},
    ],
)
def test_invalid_specs_are_rejected(kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {"name": "ok", **kwargs}
    with pytest.raises(ValueError):
        SiteSpec(**arguments)  # type: ignore[arg-type]


def test_invalid_start_arguments() -> None:
    with pytest.raises(ValueError, match="latency"):
        DemoSite().start(latency=(0.5, 0.1))
    with pytest.raises(ValueError, match="n_hosts"):
        DemoSite().start(n_hosts=0)
    with DemoSite().start(n_hosts=1, pages_per_host=MIN_PAGES) as site, pytest.raises(
        RuntimeError
    ):
        site.start()
    with pytest.raises(KeyError, match="not a demo host"):
        site.requests("http://127.0.0.9:1")


def test_stop_is_idempotent_and_closes_the_servers() -> None:
    site = DemoSite().start(n_hosts=1, pages_per_host=MIN_PAGES)
    parts = urlsplit(site.hosts[0])
    site.stop()
    site.stop()

    with pytest.raises(OSError), socket.create_connection((parts.hostname, parts.port), 2):
        pass


def test_stop_cuts_kept_alive_connections() -> None:
    site = DemoSite().start(n_hosts=1, pages_per_host=MIN_PAGES, latency=(0.0, 0.0))
    parts = urlsplit(site.hosts[0])
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    connection.request("GET", "/")
    assert connection.getresponse().read() == site.page_body(site.hosts[0], "/")
    site.stop()

    with pytest.raises((OSError, http.client.HTTPException)):
        connection.request("GET", "/about.html")
        connection.getresponse()
    assert [r.path for r in site.requests(site.hosts[0])] == ["/"]


# --- request log and latency -------------------------------------------------------------------


def test_request_log_records_and_jsonl(site: DemoSite, tmp_path: Path) -> None:
    alpha, beta, _ = site.hosts
    _get(alpha + "/")
    _get(beta + "/missing.html")

    (record,) = site.requests(alpha)
    assert (record.host, record.path, record.method, record.status) == (
        _netloc(alpha), "/", "GET", 200,
    )
    assert record.start <= record.end and record.client_port > 0
    log = tmp_path / "requests.jsonl"
    site.write_log(log)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["path"], line["status"]) for line in lines] == [
        ("/", 200), ("/missing.html", 404),
    ]
    assert set(lines[0]) == {"host", "path", "method", "start", "end", "status", "client_port",
                             "headers", "content_encoding", "sent", "sent_sha1", "aborted"}
    assert lines[0]["headers"]["user-agent"].startswith("Python-urllib/")
    site.reset_log()
    assert site.all_requests() == []


def test_latency_is_deterministic_and_requests_overlap() -> None:
    assert latency_for(0, "alpha", "/", (0.0, 0.02)) == latency_for(0, "alpha", "/", (0.0, 0.02))
    delays = {latency_for(0, "alpha", f"/p{i}", (0.1, 0.3)) for i in range(50)}
    assert len(delays) == 50 and all(0.1 <= d <= 0.3 for d in delays)

    with DemoSite().start(n_hosts=1, pages_per_host=MIN_PAGES, latency=(0.3, 0.3)) as site:
        host = site.hosts[0]
        threads = [threading.Thread(target=_get, args=(host + p,)) for p in ("/", "/about.html")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        first, second = site.requests(host)
        assert first.end - first.start >= 0.3 and second.end - second.start >= 0.3
        assert second.start < first.end  # served concurrently


# --- command line ------------------------------------------------------------------------------


def test_cli_prints_seeds_and_serves_until_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    command = [sys.executable, "-m", "pipeline.demo.site", "--hosts", "2", "--pages", "20",
               "--log", str(log)]
    with subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        seeds = [process.stdout.readline().strip() for _ in range(2)]
        assert all(re.fullmatch(r"http://127\.0\.0\.[12]:\d+/", seed) for seed in seeds)
        assert _get(seeds[1])[0] == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    (line,) = log.read_text().splitlines()
    assert json.loads(line)["path"] == "/"
