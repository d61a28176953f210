"""End to end: recrawls through the real pipeline on the emulators, asserted from the server's
own log (with the conditional headers of every request) and the webtable.

The policy's recrawl interval is 2 s (bounds 1 s to 60 s), so a run of a few seconds sees every
rule: the host's timer brings each page back when it is due, as a conditional GET when the page
had validators; a 304 is recorded as ``not_modified`` and not stored again, and stretches the
interval; changed content shrinks it; a long ``Cache-Control: max-age`` keeps a page from being
due at all, and a client that submits that page again is told it is ``fresh``.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import pytest

from pipeline.demo.exchange import Hit
from tests.integration.recrawl_site import ETAG, LAST_MODIFIED, RecrawlSite
from tests.integration.sites import Crawl, crawl, warc_records
from transforms.core.urls import canonicalize_url
from transforms.formats.schema import FETCH_FAMILY, SCHEDULE_FAMILY

pytestmark = pytest.mark.integration

POLICY = """\
defaults:
  recrawl: {default_interval: 2, min_interval: 1, max_interval: 60}
"""
MAX_PAGES = 20
RESUBMIT_AFTER = 5.0  # seconds into the run: /cached has been fetched, and is not due for 60 s


STORED_RECORDS = ("response", "resource")  # a page's stored body (not its warcinfo)


class RecrawlCrawl(NamedTuple):
    site: RecrawlSite
    crawl: Crawl


@pytest.fixture(scope="module")
def recrawled(local_stack, tmp_path_factory: pytest.TempPathFactory) -> RecrawlCrawl:
    policy = tmp_path_factory.mktemp("recrawl-policy") / "policy.yaml"
    policy.write_text(POLICY)
    with RecrawlSite() as site:
        result = crawl(local_stack, [site.base + "/"], [
            f"--policy={policy}", "--min_delay=0.05", "--idle_timeout=6",
            "--warc_roll_seconds=1", "--allow_private_networks", f"--max_pages={MAX_PAGES}"],
            later=(RESUBMIT_AFTER, [site.base + "/cached"]))
    return RecrawlCrawl(site, result)


def _gaps(hits: list[Hit]) -> list[float]:
    return [b.start - a.start for a, b in itertools.pairwise(hits)]


def _row(recrawled: RecrawlCrawl, path: str) -> dict[str, dict[str, str]]:
    return recrawled.crawl.rows[canonicalize_url(recrawled.site.base + path)]


def test_the_run_ends_on_its_page_budget(recrawled: RecrawlCrawl) -> None:
    summary = recrawled.crawl.summary
    assert summary.failed is None, recrawled.crawl.out
    assert "max_pages" in summary.reason or "pages" in summary.reason, summary.reason


def test_a_page_with_an_etag_is_recrawled_with_if_none_match_and_not_stored_again(
        recrawled: RecrawlCrawl) -> None:
    hits = recrawled.site.hits("/etag")
    assert len(hits) >= 2, hits
    assert (hits[0].status, hits[0].headers.get("if-none-match")) == (200, None)
    assert all((h.status, h.headers.get("if-none-match")) == (304, ETAG) for h in hits[1:]), hits
    f = _row(recrawled, "/etag")[FETCH_FAMILY]
    assert (f["outcome"], f["status"], f["etag"]) == ("not_modified", "304", ETAG), f
    records = warc_records(recrawled.crawl.warc_prefix, STORED_RECORDS)
    assert records[canonicalize_url(recrawled.site.base + "/etag")] == 1


def test_a_page_with_last_modified_is_recrawled_with_if_modified_since(
        recrawled: RecrawlCrawl) -> None:
    hits = recrawled.site.hits("/lastmod")
    assert len(hits) >= 2, hits
    assert "if-modified-since" not in hits[0].headers
    assert all((h.status, h.headers.get("if-modified-since")) == (304, LAST_MODIFIED)
               for h in hits[1:]), hits


def test_unchanged_pages_come_back_less_often_and_changing_ones_more_often(
        recrawled: RecrawlCrawl) -> None:
    changing = recrawled.site.hits("/changing")
    assert len(changing) >= 3, changing
    assert not any("if-none-match" in h.headers for h in changing), changing
    gaps = _gaps(changing)
    assert gaps[0] >= 2.0 - 0.1, gaps  # the default interval after the first fetch
    assert all(g < gaps[0] - 0.5 for g in gaps[1:]), gaps  # halved on change (1 s floor)
    stable = _gaps(recrawled.site.hits("/etag"))
    if len(stable) >= 2:
        assert stable[1] > stable[0] + 0.5, stable  # x1.5 on each 304


def test_a_long_cache_lifetime_keeps_a_page_fresh_and_a_resubmission_says_so(
        recrawled: RecrawlCrawl) -> None:
    assert len(recrawled.site.hits("/cached")) == 1
    row = _row(recrawled, "/cached")
    assert row[FETCH_FAMILY]["outcome"] == "fresh", row
    assert "next fetch" in row[FETCH_FAMILY]["detail"], row


def test_every_fetched_row_has_its_next_fetch_time(recrawled: RecrawlCrawl) -> None:
    for path in ("/", "/etag", "/lastmod", "/changing", "/cached"):
        s = _row(recrawled, path)[SCHEDULE_FAMILY]
        assert s["next_fetch"].endswith("Z") and int(s["recrawl_interval"]) >= 1, (path, s)
    assert int(_row(recrawled, "/cached")[SCHEDULE_FAMILY]["recrawl_interval"]) >= 59


def test_a_changed_page_is_stored_at_every_fetch(recrawled: RecrawlCrawl) -> None:
    records = warc_records(recrawled.crawl.warc_prefix, STORED_RECORDS)
    changing = canonicalize_url(recrawled.site.base + "/changing")
    fetched = [h for h in recrawled.site.hits("/changing") if h.status == 200]
    # Pages fetched in the last WARC window before the stop may not be written yet.
    assert len(fetched) - 2 <= records[changing] <= len(fetched), (records, len(fetched))


