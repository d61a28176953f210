"""A key learns DUST rules from evidence, saves them, applies them to URLs not yet fetched, and
reads them back after a rebuild."""

from __future__ import annotations

from tests.unit.frontier.driver import FrontierDriver
from tests.unit.frontier.test_batch_fairness import CONFIG, HOST, Crawl
from transforms.core.records import RULE_SORT, CrawlRequest, UrlRule
from transforms.formats.rowkeys import row_key

FACET = f"https://{HOST}/facet/"
SORT = UrlRule("/facet/", RULE_SORT)


def link(query: str) -> CrawlRequest:
    return CrawlRequest(f"{FACET}?{query}", depth=1, discovered_from=f"https://{HOST}/")


def learn(crawl: Crawl) -> None:
    crawl.d.element([], crawl.now, rules=[(SORT, "t:one")])
    assert crawl.state().url_rules == []  # one content is not enough
    crawl.d.element([], crawl.now, rules=[(SORT, "t:two")])
    assert crawl.state().url_rules == ["sort /facet/"]


def test_after_the_rule_a_permuted_link_is_admitted_in_sorted_form_and_only_once():
    crawl = Crawl([link("a=1&b=2")])
    crawl.run_until(lambda: f"{FACET}?a=1&b=2" in crawl.fetched)
    learn(crawl)
    saved = crawl.d.store.latest(crawl.d.store.hosts, HOST)["h"]["url_rules"]
    assert saved == '["sort /facet/"]'
    crawl.submit([link("d=4&c=3"), link("c=3&d=4"), link("b=2&a=1")])
    crawl.run_until(lambda: f"{FACET}?c=3&d=4" in crawl.fetched)
    for _ in range(5):
        crawl.step()
    assert crawl.fetched.count(f"{FACET}?c=3&d=4") == 1
    assert f"{FACET}?d=4&c=3" not in crawl.fetched
    assert f"{FACET}?b=2&a=1" not in crawl.fetched  # rewritten to a URL fetched already
    assert crawl.d.store.status(f"{FACET}?d=4&c=3") is None  # never had a row of its own


def test_urls_queued_before_the_rule_are_filtered_with_their_rewrite_and_that_is_queued():
    crawl = Crawl([link("a=1")])
    crawl.run_until(lambda: f"{FACET}?a=1" in crawl.fetched)
    crawl.state().next_allowed_at = crawl.now + 1000  # hold leases while links queue up
    crawl.submit([link("y=2&x=1"), link("q=1&p=2")])
    learn(crawl)
    crawl.state().next_allowed_at = 0.0
    crawl.run_until(lambda: f"{FACET}?x=1&y=2" in crawl.fetched
                    and f"{FACET}?p=2&q=1" in crawl.fetched)
    assert crawl.d.store.status(f"{FACET}?y=2&x=1") == "filtered"
    detail = crawl.d.store.latest(crawl.d.store.webtable, row_key(f"{FACET}?y=2&x=1"))["f"]
    assert detail["detail"] == f"dust: {FACET}?x=1&y=2"
    assert f"{FACET}?y=2&x=1" not in crawl.fetched


def test_seeds_and_batch_urls_are_never_rewritten():
    crawl = Crawl([link("a=1")])
    crawl.run_until(lambda: f"{FACET}?a=1" in crawl.fetched)
    learn(crawl)
    crawl.submit([CrawlRequest(f"{FACET}?z=1&y=2"),
                  CrawlRequest(f"{FACET}?w=1&v=2", batches=("b1",), client="c")])
    crawl.run_until(lambda: {f"{FACET}?z=1&y=2", f"{FACET}?w=1&v=2"} <= set(crawl.fetched))


def test_a_rebuilt_key_reads_its_rules_back():
    crawl = Crawl([link("a=1")])
    crawl.run_until(lambda: f"{FACET}?a=1" in crawl.fetched)
    learn(crawl)
    again = FrontierDriver(CONFIG, HOST, store=crawl.d.store)
    again.element([link("n=2&m=1")], 500.0)
    again.settle(500.1)
    assert again.state is not None and again.state.url_rules == ["sort /facet/"]
    assert crawl.d.store.status(f"{FACET}?m=1&n=2") == "queued"
    assert crawl.d.store.status(f"{FACET}?n=2&m=1") is None
