"""End to end: a crawl of the trap site ends on its own, within its page budget, and records why
it dropped what it dropped.

The site (``tests.integration.sites.TrapSite``) is infinite: an endless calendar in two URL
forms, ever-deeper paths, a query that grows a parameter per page, near-identical pages that
fan out threefold, and a fresh session id on every link of every response. A small policy
(budget 150 pages, tight trap limits) must stop it: the calendar, depth, repeated-segment and
query-parameter rules cut their traps, session ids are removed when canonicalizing so each page
is one URL, and the budget ends the near-identical pages. One crawl runs per module.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import NamedTuple

import pytest

from pipeline.demo.log import crawlable_paths, max_concurrency
from tests.integration.sites import SESSION_ID, Crawl, TrapSite, crawl
from transforms.core.policy_file import load_policy
from transforms.core.url_keys import politeness_key
from transforms.core.urls import canonicalize_url
from transforms.formats.schema import CONTENT_FAMILY, FETCH_FAMILY

pytestmark = pytest.mark.integration

BUDGET = 150
POLICY = f"""\
defaults:
  max_pages_per_host: {BUDGET}
  traps: {{max_path_depth: 8, max_repeated_segments: 2, max_query_params: 5,
          calendar_window_years: 1}}
"""
TIME_LIMIT = 90.0  # seconds for the whole run, idle wait included; it takes about 20
TRAP_REASONS = ("trap_calendar", "trap_repeated_segment", "trap_path_depth", "trap_query_params")


class TrapCrawl(NamedTuple):
    site: TrapSite
    crawl: Crawl


@pytest.fixture(scope="module")
def trap(local_stack, tmp_path_factory: pytest.TempPathFactory) -> TrapCrawl:
    policy = tmp_path_factory.mktemp("trap-policy") / "policy.yaml"
    policy.write_text(POLICY)
    with TrapSite() as site:
        # A backstop only: were the traps not cut, the run would stop here instead of idling.
        result = crawl(local_stack, [site.base + "/"], [
            f"--policy={policy}", "--min_delay=0.05", "--retry_delay=0.2", "--idle_timeout=6",
            "--warc_roll_seconds=2", "--allow_private_networks", f"--max_pages={3 * BUDGET}"])
    return TrapCrawl(site, result)


def _filtered(trap: TrapCrawl) -> dict[str, str]:
    """URL -> f:detail of every row the policy filtered."""
    return {url: cells[FETCH_FAMILY]["detail"] for url, cells in trap.crawl.rows.items()
            if cells[FETCH_FAMILY]["outcome"] == "filtered"}


def test_the_site_passes_its_own_sanity_check(tmp_path) -> None:
    """The normal pages are crawlable under the test policy (so a miss is the crawler's)."""
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    policy = load_policy(str(path)).defaults
    site = TrapSite()
    base = "http://127.0.0.1:8000"
    assert crawlable_paths(base, site.normal_paths, policy, time.time()) == set(
        site.normal_paths)
    # And every trap entry passes too: the traps are cut further in, not at the door.
    assert crawlable_paths(base, site.trap_entries(), policy, time.time()) == set(
        site.trap_entries())


def test_the_crawl_stops_by_itself_within_the_time_limit(trap: TrapCrawl) -> None:
    summary, out = trap.crawl.summary, trap.crawl.out
    assert summary.failed is None, out
    assert summary.reason.startswith("idle"), out
    assert trap.crawl.wall < TIME_LIMIT, out
    assert summary.totals["queued"] == 0, out


def test_the_server_sees_no_more_than_the_budget(trap: TrapCrawl) -> None:
    hits = trap.site.requests()
    pages = [h for h in hits if h.path != "/robots.txt"]
    assert len(pages) <= BUDGET, len(pages)
    assert len(hits) <= BUDGET + 3  # robots.txt, and slack for a retried request
    assert max_concurrency(hits) == 1


def test_every_normal_page_is_fetched_exactly_once(trap: TrapCrawl) -> None:
    fetched = Counter(h.path for h in trap.site.requests() if h.method == "GET")
    for path in trap.site.normal_paths:
        assert fetched[path] == 1, (path, fetched[path])
    for path in trap.site.normal_paths:
        row = trap.crawl.rows[canonicalize_url(trap.site.base + path)]
        assert row[FETCH_FAMILY]["outcome"] == "fetched" and CONTENT_FAMILY in row, path


def test_session_ids_are_collapsed(trap: TrapCrawl) -> None:
    """Every link carried a fresh session id; the crawler requested and recorded none of them,
    and no page was fetched twice under different ids."""
    requested = [h.path for h in trap.site.requests()]
    assert not [p for p in requested if SESSION_ID.search(p)]
    assert len(requested) == len(set(requested))
    recorded = [url for url in trap.crawl.rows if SESSION_ID.search(url)]
    assert not recorded, recorded[:5]


def test_each_trap_is_cut_and_the_reason_recorded(trap: TrapCrawl) -> None:
    filtered = _filtered(trap)
    reasons = Counter(detail.split(":", 1)[0] for detail in filtered.values())
    for reason in TRAP_REASONS:
        assert reasons[reason] > 0, (reason, dict(reasons))
    base = trap.site.base
    year, month = trap.site.today
    expected = {
        f"/calendar/{year + 2}/{month:02d}": "trap_calendar",  # next year's next year
        f"/calendar/{year - 2}/{month:02d}": "trap_calendar",
        f"/calendar?year={year + 2}&month={month}": "trap_calendar",
        "/deep/a/a/a/": "trap_repeated_segment",
        "/d/1/2/3/4/5/6/7/8/": "trap_path_depth",  # 9 segments
        "/facets?a=1&b=2&c=3&d=4&e=5&f=6": "trap_query_params",
    }
    for path, reason in expected.items():
        url = canonicalize_url(base + path)
        assert filtered.get(url, "").startswith(reason + ":"), (path, filtered.get(url))
    # None of them reached the server.
    requested = {h.path for h in trap.site.requests()}
    assert not requested & set(expected)


def test_the_budget_ends_the_near_identical_pages(trap: TrapCrawl) -> None:
    rows = trap.crawl.rows
    over = [url for url, cells in rows.items()
            if cells[FETCH_FAMILY]["outcome"] == "budget_exceeded"]
    assert over and all("/similar/" in url or "/calendar" in url for url in over), over[:5]
    assert all(rows[url][FETCH_FAMILY]["detail"] == f"max_pages_per_host {BUDGET}"
               for url in over)
    fetched = [url for url, cells in rows.items() if cells[FETCH_FAMILY]["outcome"] == "fetched"]
    assert len(fetched) <= BUDGET


def test_the_host_counters_show_the_drops(trap: TrapCrawl) -> None:
    host = trap.crawl.hosts[politeness_key(trap.site.base + "/")]
    assert int(host["filtered"]) > 0 and int(host["budget_exceeded"]) > 0, host
    assert int(host["accepted"]) == BUDGET, host
    # Decisions, not URLs: a filtered URL is not remembered, so each rediscovery counts again.
    assert int(host["filtered"]) >= len(_filtered(trap)), host
    assert int(host["queued"]) == 0, host


def test_every_row_ends_with_a_terminal_outcome(trap: TrapCrawl) -> None:
    outcomes = Counter(cells[FETCH_FAMILY]["outcome"] for cells in trap.crawl.rows.values())
    assert outcomes["queued"] == 0 and outcomes["retry_scheduled"] == 0, dict(outcomes)
    assert set(outcomes) <= {"fetched", "filtered", "budget_exceeded"}, dict(outcomes)
