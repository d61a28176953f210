"""End to end: how the crawler meets failing servers, asserted from the servers' own logs and
the webtable.

The faults site (``tests.integration.sites.FaultsSite``) puts each fault on its own loopback
address, so each is its own politeness key and one host's back-off cannot blur another's timing:
503 twice then 200, 429 with ``Retry-After: 2`` then 200, a response slower than
``--fetch_timeout=1``, a 500 that never recovers, a 404, a redirect loop, a redirect to another
(private) address, a large ``image/png``, and an FTP file linked from a page.

Two crawls run per module: the faults with ``--allow_private_networks`` (every test server is on
loopback), and a small one with the SSRF guard on, which must not connect to any of them.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from tests.integration.sites import (
    FTP_BODY,
    FTP_FILE,
    MEDIA_BYTES,
    Crawl,
    FaultsSite,
    crawl,
    warc_records,
)
from transforms.core.policy import SUPPORTED_SCHEMES
from transforms.core.retry import MAX_ATTEMPTS
from transforms.core.url_keys import politeness_key
from transforms.core.urls import canonicalize_url
from transforms.formats.schema import CONTENT_FAMILY, FETCH_FAMILY
from transforms.formats.warc import read_record

pytestmark = pytest.mark.integration

FETCH_TIMEOUT = 1.0
MAX_REDIRECTS = 5  # the default of --max_redirects
FLAGS = ["--min_delay=0.05", "--retry_delay=0.2", "--idle_timeout=6", "--warc_roll_seconds=2",
         f"--fetch_timeout={FETCH_TIMEOUT:g}"]


class FaultsCrawl(NamedTuple):
    site: FaultsSite
    crawl: Crawl


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    site = FaultsSite().start(tmp_path_factory.mktemp("ftp-root"))
    yield site
    site.stop()


@pytest.fixture(scope="module")
def faults(local_stack, site: FaultsSite) -> FaultsCrawl:
    return FaultsCrawl(site, crawl(local_stack, site.seed_urls(),
                                   [*FLAGS, "--allow_private_networks"]))


class GuardedCrawl(NamedTuple):
    crawl: Crawl
    seeds: list[str]
    new_hits: int
    new_ftp_commands: int


@pytest.fixture(scope="module")
def guarded(local_stack, site: FaultsSite) -> GuardedCrawl:
    """The SSRF guard on (the default): seeds on loopback, including the private target."""
    seeds = [site.misc + "/to-private", site.private + "/secret"]
    hits, commands = len(site.hits()), len(site.ftp_commands())
    result = crawl(local_stack, seeds, ["--idle_timeout=4", *FLAGS[:2], *FLAGS[3:]])
    return GuardedCrawl(result, seeds, len(site.hits()) - hits,
                        len(site.ftp_commands()) - commands)


def _key(url: str) -> str:
    """The webtable URL of ``url`` (ftp included, whatever the canonicalizer's default)."""
    return canonicalize_url(url, allowed_schemes=SUPPORTED_SCHEMES)


def _row(faults: FaultsCrawl, url: str) -> dict[str, dict[str, str]]:
    rows = faults.crawl.rows
    assert _key(url) in rows, (url, sorted(rows))
    return rows[_key(url)]


def _statuses(faults: FaultsCrawl, base: str, path: str) -> list[int]:
    return [h.status for h in faults.site.hits(base, path)]


def test_the_crawl_stops_by_itself_with_nothing_left(faults: FaultsCrawl) -> None:
    summary, out = faults.crawl.summary, faults.crawl.out
    assert summary.failed is None, out
    assert summary.reason.startswith("idle"), out
    outcomes = Counter(c[FETCH_FAMILY]["outcome"] for c in faults.crawl.rows.values())
    assert outcomes["queued"] == 0 and outcomes["retry_scheduled"] == 0, dict(outcomes)


def test_503s_are_retried_until_the_page_is_stored(faults: FaultsCrawl) -> None:
    site = faults.site
    assert _statuses(faults, site.flaky, "/flaky") == [503, 503, 200]
    row = _row(faults, site.flaky + "/flaky")
    assert row[FETCH_FAMILY]["outcome"] == "fetched" and row[FETCH_FAMILY]["status"] == "200"
    assert row[CONTENT_FAMILY]["warc_file"]


def test_429_is_retried_no_sooner_than_retry_after(faults: FaultsCrawl) -> None:
    site = faults.site
    hits = site.hits(site.throttled, "/limited")
    assert [h.status for h in hits] == [429, 200]
    assert hits[1].start - hits[0].end >= site.retry_after, hits
    assert _row(faults, site.throttled + "/limited")[FETCH_FAMILY]["status"] == "200"
    # The host recovers: every other page of it is fetched, once.
    for i in (1, 2, 3):
        assert _statuses(faults, site.throttled, f"/after-{i}") == [200]


def test_429_slows_the_whole_host(faults: FaultsCrawl) -> None:
    """After the 429, no request of any path reaches that host before Retry-After has passed."""
    site = faults.site
    hits = [h for h in site.hits(site.throttled) if h.path != "/robots.txt"]
    first_429 = next(i for i, h in enumerate(hits) if h.status == 429)
    after = hits[first_429 + 1]
    assert after.start - hits[first_429].end >= site.retry_after, (after, hits[first_429])


def test_a_response_slower_than_the_timeout_fails_after_three_attempts(
        faults: FaultsCrawl) -> None:
    site = faults.site
    assert len(site.hits(site.slow, "/slow")) == MAX_ATTEMPTS
    f = _row(faults, site.slow + "/slow")[FETCH_FAMILY]
    assert (f["outcome"], f["error"]) == ("error", "timeout"), f
    assert int(f["elapsed_ms"]) <= (FETCH_TIMEOUT + 0.5) * 1000, f


def test_a_500_that_never_recovers_is_tried_three_times(faults: FaultsCrawl) -> None:
    site = faults.site
    assert _statuses(faults, site.broken, "/broken") == [500] * MAX_ATTEMPTS
    f = _row(faults, site.broken + "/broken")[FETCH_FAMILY]
    assert f["outcome"] in ("error", "not_stored") and f["status"] == "500", f
    host = faults.crawl.hosts[politeness_key(site.broken + "/")]
    assert int(host["errors"]) >= 1 and "500" in host["last_error"], host


def test_a_terminal_row_does_not_keep_a_retry_detail(faults: FaultsCrawl) -> None:
    site = faults.site
    attempts = {site.flaky + "/flaky": site.flaky_failures + 1, site.throttled + "/limited": 2,
                site.slow + "/slow": MAX_ATTEMPTS, site.broken + "/broken": MAX_ATTEMPTS}
    for url, n in attempts.items():
        f = _row(faults, url)[FETCH_FAMILY]
        assert f["detail"] == f"after {n} attempts", (url, f)


def test_a_404_is_recorded_and_not_retried(faults: FaultsCrawl) -> None:
    site = faults.site
    assert _statuses(faults, site.broken, "/missing") == [404]
    f = _row(faults, site.broken + "/missing")[FETCH_FAMILY]
    assert (f["outcome"], f["status"]) == ("not_stored", "404"), f


def test_a_redirect_loop_ends_as_too_many_redirects(faults: FaultsCrawl) -> None:
    site = faults.site
    paths = [h.path for h in site.hits(site.looping) if h.path != "/robots.txt"]
    # Followed up to --max_redirects hops, once: a redirect loop is not retried.
    assert paths == ["/loop", "/loop2"] * ((MAX_REDIRECTS + 1) // 2), paths
    f = _row(faults, site.looping + "/loop")[FETCH_FAMILY]
    assert (f["outcome"], f["error"]) == ("error", "too_many_redirects"), f


def test_a_media_response_is_recorded_but_never_stored(faults: FaultsCrawl) -> None:
    site = faults.site
    assert _statuses(faults, site.misc, "/media") == [200]
    row = _row(faults, site.misc + "/media")
    f = row[FETCH_FAMILY]
    assert (f["outcome"], f["status"], f["content_type"]) == ("not_stored", "200", "image/png")
    assert f["length"] == str(MEDIA_BYTES), f
    assert CONTENT_FAMILY not in row
    media = canonicalize_url(site.misc + "/media")
    targets = warc_records(faults.crawl.warc_prefix)
    assert targets, f"no WARC records under {faults.crawl.warc_prefix}"
    assert media not in targets


def test_a_redirect_to_another_address_goes_through_the_frontier(faults: FaultsCrawl) -> None:
    """With --allow_private_networks the target is crawled, but as its own host's URL: the hop
    is recorded, and the target host's robots.txt comes before the target."""
    site = faults.site
    f = _row(faults, site.misc + "/to-private")[FETCH_FAMILY]
    target = canonicalize_url(site.private + "/secret")
    assert (f["outcome"], f["status"], f["redirect_to"]) == ("redirect", "302", target), f
    assert _row(faults, target)[FETCH_FAMILY]["outcome"] == "fetched"
    assert [h.path for h in site.hits(site.private)] == ["/robots.txt", "/secret"]


def test_with_the_guard_on_no_private_address_is_contacted(guarded: GuardedCrawl) -> None:
    """The SSRF guard is on by default: loopback seeds (one a redirect to another loopback
    address) are recorded as refused, and no server sees a connection."""
    result = guarded.crawl
    assert result.summary.reason.startswith("idle"), result.out
    assert guarded.new_hits == 0 and guarded.new_ftp_commands == 0
    for seed in guarded.seeds:
        f = result.rows[_key(seed)][FETCH_FAMILY]
        assert f["outcome"] == "error", (seed, f)
        assert "ssrf_blocked" in f["error_detail"] and "loopback" in f["error_detail"], f


def test_an_ftp_file_linked_from_a_page_is_fetched_once_and_stored(faults: FaultsCrawl) -> None:
    site = faults.site
    assert _row(faults, site.misc + "/ftp-links.html")[FETCH_FAMILY]["outcome"] == "fetched"
    retrieved = [c.arg for c in site.ftp_commands() if c.command == "RETR"]
    assert len(retrieved) == 1 and retrieved[0].endswith(FTP_FILE), site.ftp_commands()
    row = _row(faults, site.ftp_url)
    f = row[FETCH_FAMILY]
    assert (f["outcome"], f["status"], f["content_type"]) == ("fetched", "200", "text/html"), f
    with FileSystems.open(row[CONTENT_FAMILY]["warc_file"],
                          compression_type=CompressionTypes.UNCOMPRESSED) as warc:
        record = read_record(warc.read(), int(row[CONTENT_FAMILY]["warc_offset"]))
    assert record.payload == FTP_BODY


