"""End to end: sitemap discovery through the real pipeline on the emulators, asserted from the
server's own log and the webtable (the site is ``tests.integration.sitemap_site``)."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import pytest

from tests.integration.sitemap_site import DISALLOWED, FOREIGN, SITEMAP_ONLY, SitemapSite
from tests.integration.sites import Crawl, crawl
from transforms.core.urls import canonicalize_url
from transforms.formats.schema import CONTENT_FAMILY, FETCH_FAMILY, SCHEDULE_FAMILY

pytestmark = pytest.mark.integration


class SitemapCrawl(NamedTuple):
    site: SitemapSite
    crawl: Crawl


@pytest.fixture(scope="module")
def crawled(local_stack) -> SitemapCrawl:
    with SitemapSite() as site:
        result = crawl(local_stack, [site.base + "/"], [
            "--min_delay=0.05", "--idle_timeout=5", "--warc_roll_seconds=1",
            "--allow_private_networks"])
    return SitemapCrawl(site, result)


def _row(crawled: SitemapCrawl, path: str) -> dict[str, dict[str, str]]:
    return crawled.crawl.rows[canonicalize_url(crawled.site.base + path)]


def test_pages_listed_only_in_sitemaps_are_fetched_once_each(crawled: SitemapCrawl) -> None:
    assert crawled.crawl.summary.failed is None, crawled.crawl.out
    requested = Counter(h.path for h in crawled.site.hits())
    for path in SITEMAP_ONLY:
        assert requested[path] == 1, (path, requested)
        row = _row(crawled, path)
        assert row[FETCH_FAMILY]["outcome"] == "fetched" and CONTENT_FAMILY in row, row
    assert crawled.site.hits()[0].path == "/robots.txt"
    assert all(n == 1 for n in requested.values()), requested


def test_robots_txt_still_rules_sitemap_urls_and_scope_is_enforced(crawled: SitemapCrawl) -> None:
    requested = {h.path for h in crawled.site.hits()}
    assert DISALLOWED not in requested
    assert _row(crawled, DISALLOWED)[FETCH_FAMILY]["outcome"] == "robots_blocked"
    assert canonicalize_url(FOREIGN) not in crawled.crawl.rows
    assert not any(url.startswith("http://127.0.0.99") for url in crawled.crawl.rows)


def test_each_sitemap_row_records_what_it_listed_and_dropped(crawled: SitemapCrawl) -> None:
    details = {path: _row(crawled, path)[FETCH_FAMILY] for path in (
        "/sitemaps/index.xml.gz", "/sitemaps/pages.xml", "/sitemaps/more.txt")}
    assert all(f["outcome"] == "not_stored" and f["status"] == "200" for f in details.values())
    assert details["/sitemaps/index.xml.gz"]["detail"] == (
        "sitemap index: 2 sitemaps; 1 out of scope")
    assert details["/sitemaps/pages.xml"]["detail"] == "sitemap urlset: 3 urls; 1 out of scope"
    assert details["/sitemaps/more.txt"]["detail"] == "sitemap text: 1 urls"
    for path in details:
        assert CONTENT_FAMILY not in _row(crawled, path)  # sitemaps are not stored


def test_robots_txt_and_the_plain_sitemaps_went_out_gzip_compressed(
        crawled: SitemapCrawl) -> None:
    """So the rows above prove the crawler decoded them (the index is a .gz file as is)."""
    sent = {h.path: h.content_encoding for h in crawled.site.hits()}
    assert sent["/robots.txt"] == "gzip", sent
    assert sent["/sitemaps/pages.xml"] == sent["/sitemaps/more.txt"] == "gzip", sent
    assert sent["/sitemaps/index.xml.gz"] == "", sent


def test_sitemap_priorities_reach_the_queue(crawled: SitemapCrawl) -> None:
    first, second = (int(_row(crawled, p)[SCHEDULE_FAMILY]["priority"]) for p in SITEMAP_ONLY[:2])
    assert first > second, (first, second)
    fetched = [h.path for h in crawled.site.hits() if h.path in SITEMAP_ONLY[:2]]
    assert fetched == [SITEMAP_ONLY[0], SITEMAP_ONLY[1]]
