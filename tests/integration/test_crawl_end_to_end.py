"""End to end: the streaming pipeline against the emulators and three demo hosts, asserted from
the servers' own request logs, the webtable and the WARC files. The demo hosts compress text as
nginx does (gzip on alpha and gamma, deflate on beta), robots.txt included.

The same crawl runs three times, each test checking one property of every run: on the
DirectRunner (native ``ReadFromPubSub``), on Beam's Prism (the portable ``PullFromPubSub``, the
pipeline acknowledging once a message's URLs are recorded; Prism built with ``go install`` on
first use) and on Beam's FlinkRunner with an embedded Flink, LOOPBACK workers and checkpoints (the
portable ``PullFromPubSub``, acknowledging after each checkpoint). About half a minute each, and
a minute and a half for Flink.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import time
import uuid
import zlib
from collections import defaultdict
from typing import NamedTuple
from urllib.parse import urlsplit

import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from google.cloud import bigtable

from pipeline.cli.main import main as cli_main
from pipeline.demo.log import crawlable_paths, max_concurrency, min_start_gap
from pipeline.demo.site import DemoSite
from pipeline.local.driver import RunSummary
from pipeline.main import run
from pipeline.ops.resources import ensure_bigtable, ensure_subscription, ensure_topic
from pipeline.ops.seeding import publish_seeds
from transforms.core.content import header
from transforms.core.policy import DEFAULT_POLICY
from transforms.core.url_keys import politeness_key
from transforms.core.urls import canonicalize_url
from transforms.formats.rowkeys import row_key, url_from_row_key
from transforms.formats.schema import CONTENT_FAMILY, FETCH_FAMILY, HOST_FAMILY, SCHEDULE_FAMILY
from transforms.formats.warc import read_record
from transforms.stores.pubsub import lease_stats

pytestmark = pytest.mark.integration

MIN_DELAY = 0.1
CRAWL_DELAY = 0.4
GAP_TOLERANCE = 0.03  # server-side clock and socket noise
DECODE = {"gzip": gzip.decompress, "deflate": zlib.decompress, "": bytes}  # independent of ours


class CrawlRun(NamedTuple):
    site: DemoSite
    summary: RunSummary
    out: str
    rows: dict[str, dict[str, dict[str, str]]]  # url -> family -> column -> latest value
    host_rows: dict[str, dict[str, str]]
    instance: str
    runner: str
    subscription: str


RUNNERS = {"direct": [], "prism": ["--runner=PrismRunner"],
           "flink": ["--runner=FlinkRunner", "--flink_master=[local]",
                     "--checkpointing_interval=1000"]}


@pytest.fixture(scope="module", params=sorted(RUNNERS))
def crawl(request, local_stack) -> CrawlRun:
    """Runs one crawl of the demo site in an isolated topic/subscription/instance."""
    suffix = uuid.uuid4().hex[:8]
    topic, subscription, instance = f"e2e-{suffix}", f"e2e-{suffix}-sub", f"e2e-{suffix}"
    ensure_topic(local_stack.project, topic)
    ensure_subscription(local_stack.project, topic, subscription)
    ensure_bigtable(local_stack.project, instance)
    site = DemoSite().start(n_hosts=3, pages_per_host=40, crawl_delay=CRAWL_DELAY)
    try:
        publish_seeds(site.seed_urls(), local_stack.project, topic)
        argv = local_stack.pipeline_args([
            f"--input_subscription=projects/{local_stack.project}/subscriptions/{subscription}",
            f"--frontier_topic=projects/{local_stack.project}/topics/{topic}",
            f"--bigtable_instance={instance}", f"--warc_prefix=gs://{local_stack.bucket}/{suffix}",
            f"--min_delay={MIN_DELAY}", "--idle_timeout=8", "--warc_roll_seconds=2",
            "--retry_delay=0.5", "--allow_private_networks", *RUNNERS[request.param]])
        out = io.StringIO()
        summary = run(argv, out=out)
    finally:
        site.stop()
    table = bigtable.Client(project=local_stack.project).instance(instance).table("webtable")
    rows = {}
    for row in table.read_rows():
        rows[url_from_row_key(row.row_key.decode())] = {
            fam: {c.decode(): v[0].value.decode() for c, v in cols.items()}
            for fam, cols in row.cells.items()}
    hosts_table = bigtable.Client(project=local_stack.project).instance(instance).table("hosts")
    host_rows = {r.row_key.decode(): {c.decode(): v[0].value.decode()
                                      for c, v in r.cells[HOST_FAMILY].items()}
                 for r in hosts_table.read_rows()}
    return CrawlRun(site, summary, out.getvalue(), rows, host_rows, instance, request.param,
                    f"projects/{local_stack.project}/subscriptions/{subscription}")


def _expected(site, host) -> set[str]:
    """The demo's expected paths less those the default policy keeps out (media extensions)."""
    return crawlable_paths(host, site.expected_fetch_paths(host), DEFAULT_POLICY.defaults,
                           time.time())


def _gets(site, host):
    return [r for r in site.requests(host) if r.method == "GET"]


def test_the_run_stops_on_idle_and_prints_a_summary(crawl):
    site, summary, out = crawl.site, crawl.summary, crawl.out
    assert summary.failed is None, out
    assert summary.reason.startswith("idle"), out
    assert "pages fetched" in out and "robots" in out
    # One result per URL: robots.txt is not a page, and /old -> /new-page.html is one result.
    assert summary.totals["fetched"] == sum(len(_expected(site, h)) - 2 for h in site.hosts)


def test_every_allowed_reachable_path_is_fetched_exactly_once(crawl):
    site, out = crawl.site, crawl.out
    for host in site.hosts:
        paths = [r.path for r in _gets(site, host)]
        duplicates = {p for p in paths if paths.count(p) > 1}
        assert not duplicates, f"{host}: fetched more than once: {duplicates}"
        expected = _expected(site, host)
        assert set(paths) == expected, (
            f"{host}: missing {expected - set(paths)}, unexpected {set(paths) - expected}\n{out}")


def test_media_links_are_filtered_and_recorded_with_the_reason(crawl):
    filtered = {url: cells[FETCH_FAMILY] for url, cells in crawl.rows.items()
                if cells[FETCH_FAMILY]["outcome"] == "filtered"}
    assert filtered and all(f["detail"].startswith("media_extension") for f in filtered.values())
    for host in crawl.site.hosts:
        skipped = crawl.site.expected_fetch_paths(host) - _expected(crawl.site, host)
        assert skipped and {canonicalize_url(host + p) for p in skipped} <= set(filtered)


def test_no_disallowed_path_is_requested(crawl):
    site = crawl.site
    assert any(site.disallowed_paths(h) for h in site.hosts)
    for host in site.hosts:
        requested = {r.path for r in site.requests(host)}
        assert not requested & site.disallowed_paths(host)


def test_robots_txt_comes_first_on_every_host(crawl):
    site = crawl.site
    for host in site.hosts:
        first = min(site.requests(host), key=lambda r: r.start)
        assert first.path == "/robots.txt", host


def test_never_two_concurrent_requests_to_one_host(crawl):
    site = crawl.site
    for host in site.hosts:
        assert max_concurrency(site.requests(host)) == 1, host


def test_request_starts_keep_the_delay_and_crawl_delay_wins(crawl):
    site = crawl.site
    for host in site.hosts:
        delay = max(MIN_DELAY, site.spec(host).crawl_delay or 0.0)
        gap = min_start_gap(site.requests(host))
        assert gap is not None and gap >= delay - GAP_TOLERANCE, (host, gap, delay)


def test_every_stored_page_has_a_row_and_a_warc_record_with_the_exact_bytes(crawl):
    """The WARC payload is what the server put on the wire (its log's SHA-1 of the sent bytes),
    and undoing its Content-Encoding gives the page's content."""
    site, rows = crawl.site, crawl.rows
    stored = {url: cells for url, cells in rows.items() if CONTENT_FAMILY in cells}
    assert stored
    files: dict[str, bytes] = {}
    codings = set()
    for url, cells in stored.items():
        content, fetch = cells[CONTENT_FAMILY], cells[FETCH_FAMILY]
        path = content["warc_file"]
        if path not in files:
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                files[path] = f.read()
        record = read_record(files[path], int(content["warc_offset"]))
        final = urlsplit(fetch["final_url"])
        target = (final.path or "/") + (f"?{final.query}" if final.query else "")
        host = f"http://{final.netloc}"
        sent = {(h.sent_sha1, h.content_encoding) for h in _gets(site, host) if h.path == target}
        coding = header(record.http_headers, "Content-Encoding") or ""
        assert (hashlib.sha1(record.payload).hexdigest(), coding) in sent, (url, sent)
        assert DECODE[coding](record.payload) == site.page_body(host, target), url
        assert fetch["status"] == "200" and fetch["outcome"] == "fetched"
        codings.add(coding)
    assert codings == {"gzip", "deflate"}  # every page is HTML over 20 bytes: all compressed
    for host in site.hosts:
        for path in site.html_pages(host):
            url = canonicalize_url(host + path)
            assert url in stored or any(
                c[FETCH_FAMILY].get("final_url") == url for c in stored.values()), url


def test_the_servers_sent_every_robots_txt_compressed(crawl):
    """The servers' own logs show each robots.txt went out compressed (gzip on alpha, deflate on
    beta), as a stock nginx with ``gzip on`` sends it: the Disallow and Crawl-delay checks above
    are about files the crawler had to decode."""
    site = crawl.site
    robots_hosts = [h for h in site.hosts if site.spec(h).has_robots]
    assert [site.spec(h).coding for h in robots_hosts] == ["gzip", "deflate"]
    for host in robots_hosts:
        hits = [h for h in _gets(site, host) if h.path == "/robots.txt"]
        assert hits and all((h.status, h.content_encoding) == (200, site.spec(host).coding)
                            for h in hits), (host, hits)


def test_unreachable_host_is_recorded_with_an_error(crawl):
    site, rows, host_rows = crawl.site, crawl.rows, crawl.host_rows
    url = canonicalize_url(site.unreachable_url)
    assert url in rows, sorted(rows)[:5]
    fetch = rows[url][FETCH_FAMILY]
    assert fetch["outcome"] == "error" and fetch["error"], fetch
    assert host_rows[politeness_key(url)]["robots_status"] == "disallow_all"


def test_every_row_has_schedule_cells_and_a_terminal_outcome(crawl):
    rows = crawl.rows
    outcomes = defaultdict(int)
    for url, cells in rows.items():
        assert cells[SCHEDULE_FAMILY]["host"] == politeness_key(url)
        outcomes[cells[FETCH_FAMILY]["outcome"]] += 1
        assert row_key(url)
    assert outcomes["queued"] == 0, dict(outcomes)
    assert outcomes["fetched"] > 0 and outcomes["robots_blocked"] > 0, dict(outcomes)


def test_crawler_show_and_ls_read_the_rows_back(crawl, local_stack, capsys, tmp_path):
    # An empty --state-dir: a stack the developer left running must not be picked up.
    state = ["--state-dir", str(tmp_path)]
    site = crawl.site
    project, table_instance = local_stack.project, crawl.instance
    home = canonicalize_url(site.hosts[1] + "/")
    assert cli_main([*state, "show", home, "--project", project,
                     "--instance", table_instance]) == 0
    shown = capsys.readouterr().out
    assert f"url        {home}" in shown and "f:status" in shown and ".warc.gz @ offset" in shown
    host = politeness_key(home)
    assert cli_main([*state, "ls", "--host", host, "--limit", "5", "--project", project,
                     "--instance", table_instance]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1] == "5 rows" and all(host in line for line in listed[1:-1])
    assert cli_main([*state, "show", site.hosts[1] + "/never-linked", "--project", project,
                     "--instance", table_instance]) == 1


def test_on_flink_the_portable_source_acknowledged_every_message_after_checkpoints(crawl):
    if crawl.runner != "flink":
        pytest.skip("the DirectRunner reads with Beam's native ReadFromPubSub")
    stats = lease_stats(crawl.subscription)
    assert stats is not None, "the portable source never read the subscription"
    acked, held = stats
    # Seeds (one message per host) and every batch of discovered links were acknowledged, which
    # only happens in the bundle finalizer, after a completed Flink checkpoint.
    assert held == 0 and acked >= len(crawl.site.hosts) + 1, stats


def test_on_prism_the_pipeline_acknowledged_every_message_it_recorded(crawl):
    if crawl.runner != "prism":
        pytest.skip("only Prism's reader leaves acknowledgement to the pipeline")
    assert "Prism unavailable" not in crawl.out
    stats = lease_stats(crawl.subscription)
    assert stats is not None, "the portable source never read the subscription"
    acked, held = stats
    # No bundle finalizer on Prism: transforms.acks acknowledged each message once its rows were
    # written; none is left held (its lease extended) at the end.
    assert held == 0 and acked >= len(crawl.site.hosts) + 1, stats
