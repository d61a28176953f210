"""How a lease decides a client batch's URLs from their webtable rows
(``transforms.frontier.leases.plan_lease`` and ``fresh_in_row``): a recent success is the
batch's ``cached``, an old one is fetched again conditionally, an error never is cached, and a
URL still pending is deferred for a batch (skipped for a plain resubmission)."""

from __future__ import annotations

import pytest

from transforms.core.records import REVISIT_RESUBMIT, CrawlRequest, UrlRecord
from transforms.frontier.leases import LeasePlan, fresh_in_row, plan_lease

URL = "https://site.example/page"
NOW = 1_000_000.0
HOUR = 3600.0


def batch_request(cache_hours: float | None = 24.0) -> CrawlRequest:
    return CrawlRequest(URL, batches=("b1",), client="acme", cache_hours=cache_hours,
                        revisit=REVISIT_RESUBMIT)


def record(status: str = "fetched", age_hours: float | None = 1.0, http_status: int | None = 200,
           next_in_hours: float | None = 48.0, **kw) -> UrlRecord:
    return UrlRecord(URL, status=status,
                     fetched_at=None if age_hours is None else NOW - age_hours * HOUR,
                     next_fetch_at=None if next_in_hours is None else NOW + next_in_hours * HOUR,
                     http_status=http_status, **kw)


def plan_one(request: CrawlRequest, row: UrlRecord | None) -> LeasePlan:
    return plan_lease([request], {URL: row} if row is not None else {}, NOW)


def decision(plan: LeasePlan) -> str:
    """Which of the plan's lists holds the (only) request."""
    found = [name for name, items in (("fetch", plan.fetch), ("skipped", plan.skipped),
                                      ("fresh", plan.fresh), ("deferred", plan.deferred))
             if items]
    assert len(found) == 1, plan
    return found[0]


def test_a_success_younger_than_the_cache_time_is_the_batch_cached_answer():
    row = record(age_hours=1.0, next_in_hours=-1.0)  # stale by its own headers: cache_hours rule
    plan = plan_one(batch_request(24.0), row)
    assert decision(plan) == "fresh"
    assert plan.fresh == ((batch_request(24.0), row),)
    assert fresh_in_row(row, 24.0, NOW)


def test_a_success_older_than_the_cache_time_is_fetched_conditionally():
    row = record(age_hours=30.0, next_in_hours=48.0, etag='"v7"',
                 last_modified="Mon, 24 Nov 2025 10:00:00 GMT")
    plan = plan_one(batch_request(24.0), row)
    assert decision(plan) == "fetch"
    (fetched,) = plan.fetch
    headers = dict(fetched.conditional)
    assert headers["If-None-Match"] == '"v7"'
    assert headers["If-Modified-Since"] == "Mon, 24 Nov 2025 10:00:00 GMT"
    assert fetched.batches == ("b1",) and fetched.client == "acme"  # still the batch's
    assert not fresh_in_row(row, 24.0, NOW)


@pytest.mark.parametrize("status", ["not_modified", "not_stored", "redirect", "fresh"])
def test_other_successes_are_cached_too(status):
    row = record(status=status, http_status=304 if status == "not_modified" else 200)
    assert decision(plan_one(batch_request(24.0), row)) == "fresh"


def test_a_cache_time_of_zero_always_fetches():
    assert decision(plan_one(batch_request(0.0), record(age_hours=0.01))) == "fetch"


def test_without_a_cache_time_the_next_fetch_time_decides():
    young_but_due = record(age_hours=1.0, next_in_hours=-0.5)
    old_but_fresh = record(age_hours=100.0, next_in_hours=2.0)
    no_next = record(age_hours=1.0, next_in_hours=None)
    assert decision(plan_one(batch_request(None), young_but_due)) == "fetch"
    assert decision(plan_one(batch_request(None), old_but_fresh)) == "fresh"
    assert decision(plan_one(batch_request(None), no_next)) == "fetch"
    # with a cache time, the age decides whatever the next fetch time says
    assert decision(plan_one(batch_request(24.0), young_but_due)) == "fresh"
    assert decision(plan_one(batch_request(24.0), old_but_fresh)) == "fetch"


@pytest.mark.parametrize("row", [
    record(status="error", http_status=None),
    record(status="error", http_status=503),
    record(status="robots_blocked", http_status=None),  # blocked after an earlier fetch
    record(status="not_stored", http_status=404),
    record(status="not_stored", http_status=500),
    record(status="filtered", http_status=None),
])
def test_errors_have_no_cache_time_and_are_fetched_again(row):
    assert not fresh_in_row(row, 24.0, NOW)
    assert not fresh_in_row(row, None, NOW)
    assert decision(plan_one(batch_request(24.0), row)) == "fetch"


def test_a_success_without_a_fetch_time_is_not_cached():
    assert not fresh_in_row(record(age_hours=None), 24.0, NOW)


@pytest.mark.parametrize("status", ["queued", "retry_scheduled"])
def test_a_pending_url_is_deferred_for_a_batch_and_skipped_for_a_plain_resubmit(status):
    row = UrlRecord(URL, status=status)
    plan = plan_one(batch_request(24.0), row)
    assert decision(plan) == "deferred" and plan.deferred == (batch_request(24.0),)
    plain = CrawlRequest(URL, revisit=REVISIT_RESUBMIT)
    skipped = plan_one(plain, row)
    assert decision(skipped) == "skipped" and status in skipped.skipped[0][1]


def test_a_batch_url_without_a_row_is_fetched_as_new():
    assert plan_one(batch_request(24.0), None).fetch == (batch_request(24.0),)


def test_a_plain_resubmit_follows_the_next_fetch_time_not_a_cache_time():
    plain = CrawlRequest(URL, revisit=REVISIT_RESUBMIT)
    assert decision(plan_one(plain, record(age_hours=1.0, next_in_hours=-0.5))) == "fetch"
    assert decision(plan_one(plain, record(age_hours=100.0, next_in_hours=2.0))) == "fresh"
    # an error row is fetched again for a plain resubmit too
    assert decision(plan_one(plain, record(status="error", http_status=None,
                                           next_in_hours=None))) == "fetch"


def test_a_first_visit_batch_url_with_a_terminal_row_is_not_fetched_twice():
    first = CrawlRequest(URL, batches=("b1",), client="acme", cache_hours=24.0)
    plan = plan_one(first, record(age_hours=1.0))
    assert decision(plan) == "skipped"


def test_a_lease_keeps_its_order_and_decides_each_url_on_its_own():
    urls = [f"https://site.example/{i}" for i in range(4)]
    requests = [CrawlRequest(u, batches=("b1",), client="acme", cache_hours=24.0,
                             revisit=REVISIT_RESUBMIT) for u in urls]
    rows = {urls[0]: UrlRecord(urls[0], status="fetched", fetched_at=NOW - HOUR,
                               http_status=200),
            urls[1]: UrlRecord(urls[1], status="error", fetched_at=NOW - HOUR),
            urls[2]: UrlRecord(urls[2], status="queued")}
    plan = plan_lease(requests, rows, NOW)
    assert [r.url for r, _ in plan.fresh] == [urls[0]]
    assert [r.url for r in plan.fetch] == [urls[1], urls[3]]
    assert [r.url for r in plan.deferred] == [urls[2]]
    assert plan.skipped == ()
